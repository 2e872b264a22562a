#include "flotilla/git/remote.h"

#include "flotilla/core/log.h"
#include "session.h"

namespace flotilla::git {

const RemoteRef* RemoteHeads::find(std::string_view name) const {
  for (const auto& ref : refs) {
    if (ref.name == name) {
      return &ref;
    }
  }
  return nullptr;
}

std::optional<std::string> RemoteHeads::branch(std::string_view branch) const {
  const RemoteRef* ref = find("refs/heads/" + std::string(branch));
  if (ref == nullptr) {
    return std::nullopt;
  }
  return ref->oid;
}

Result<RemoteHeads> lsRemote(const std::string& url, const Credentials& credentials, const RemoteOptions& options) {
  auto session = detail::RemoteSession::create(url, credentials, options.timeout, options.allow_local);
  if (!session.ok()) {
    return fail(session.error());
  }
  auto& s = **session;
  git_remote* raw = nullptr;
  if (int rc = git_remote_create_detached(&raw, url.c_str()); rc < 0) {
    return fail(s.failure(rc, "git_remote_create_detached"));
  }
  detail::GitPtr<git_remote> remote(raw);
  git_remote_callbacks callbacks = s.callbacks();
  git_proxy_options proxy = GIT_PROXY_OPTIONS_INIT;
  if (int rc = git_remote_connect(remote.get(), GIT_DIRECTION_FETCH, &callbacks, &proxy, nullptr); rc < 0) {
    Error error = s.failure(rc, "git_remote_connect");
    log::debug("git ls-remote failed",
               {{"url", s.displayUrl()}, {"kind", std::string(errorKindName(error.kind))}, {"error", error.message}});
    return fail(std::move(error));
  }
  auto heads = s.heads(remote.get());
  git_remote_disconnect(remote.get());
  return heads;
}

}  // namespace flotilla::git
