#include "flotilla/git/mirror.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "flotilla/core/log.h"
#include "mirror_impl.h"
#include "session.h"

namespace flotilla::git {
namespace fs = std::filesystem;
using detail::GitPtr;
using detail::localError;
using detail::oidHex;

namespace {

constexpr const char* kOrigin = "origin";
constexpr const char* kHeadsSpec = "+refs/heads/*:refs/heads/*";
constexpr const char* kTagsSpec = "+refs/tags/*:refs/tags/*";

bool isHex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// The refs a name may mean: itself for HEAD and full ref names, else a branch, then a tag.
std::vector<std::string> refCandidates(const std::string& name) {
  if (name == "HEAD" || name.rfind("refs/", 0) == 0) {
    return {name};
  }
  return {"refs/heads/" + name, "refs/tags/" + name};
}

}  // namespace

Mirror::Mirror(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Mirror::Mirror(Mirror&& other) noexcept = default;
Mirror& Mirror::operator=(Mirror&& other) noexcept = default;
Mirror::~Mirror() = default;

const std::string& Mirror::path() const {
  return impl_->path;
}
const std::string& Mirror::url() const {
  return impl_->url;
}

Result<Mirror> Mirror::open(const std::string& path, const std::string& url, bool allow_local) {
  detail::ensureInit();
  auto parsed = parseGitUrl(url, allow_local);
  if (!parsed.ok()) {
    return fail(parsed.error());
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->url = url;
  impl->allow_local = allow_local;
  std::error_code ec;
  const bool exists = fs::exists(path, ec) && !fs::is_empty(path, ec);
  git_repository* repo = nullptr;
  if (!exists) {
    git_repository_init_options init = GIT_REPOSITORY_INIT_OPTIONS_INIT;
    init.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
    if (int rc = git_repository_init_ext(&repo, path.c_str(), &init); rc < 0) {
      return fail(localError(rc, "git_repository_init_ext", "cannot create mirror at " + path));
    }
  } else if (int rc = git_repository_open_bare(&repo, path.c_str()); rc < 0) {
    Error error = localError(rc, "git_repository_open_bare", path + " exists but is not a git mirror");
    error.kind = ErrorKind::kInternal;
    return fail(std::move(error));
  }
  impl->repo.reset(repo);

  git_remote* raw = nullptr;
  int rc = git_remote_lookup(&raw, repo, kOrigin);
  if (rc == GIT_ENOTFOUND) {
    if ((rc = git_remote_create_with_fetchspec(&raw, repo, kOrigin, url.c_str(), kHeadsSpec)) < 0 ||
        (rc = git_remote_add_fetch(repo, kOrigin, kTagsSpec)) < 0) {
      git_remote_free(raw);
      return fail(localError(rc, "git_remote_create_with_fetchspec", "cannot configure mirror " + path));
    }
  } else if (rc < 0) {
    return fail(localError(rc, "git_remote_lookup", "cannot read mirror " + path));
  }
  GitPtr<git_remote> remote(raw);
  if (const char* current = git_remote_url(remote.get()); current == nullptr || url != current) {
    if ((rc = git_remote_set_url(repo, kOrigin, url.c_str())) < 0) {
      return fail(localError(rc, "git_remote_set_url", "cannot update mirror " + path));
    }
    log::info("git mirror now follows a new URL",
              {{"path", path}, {"old_url", redactUrl(current != nullptr ? current : "")}, {"url", redactUrl(url)}});
  }
  return Mirror(std::move(impl));
}

namespace {

// Records how the fetch failed, closes the connection and logs it.
Failure fetchFailed(const detail::RemoteSession& session, git_remote* remote, int rc, const char* function) {
  Error error = session.failure(rc, function);
  git_remote_disconnect(remote);
  log::debug(
      "git fetch failed",
      {{"url", session.displayUrl()}, {"kind", std::string(errorKindName(error.kind))}, {"error", error.message}});
  return fail(std::move(error));
}

// Downloads what `refspecs` name (the mirror's own when empty) on the connected remote, moves the local refs and
// prunes the ones the remote dropped.
Status download(const detail::RemoteSession& session, git_remote* remote, const git_remote_callbacks& callbacks,
                const git_proxy_options& proxy, const FetchOptions& options) {
  std::vector<char*> specs;
  for (const auto& spec : options.refspecs) {
    specs.push_back(const_cast<char*>(spec.c_str()));
  }
  git_strarray refspecs{specs.data(), specs.size()};
  git_fetch_options fetch = GIT_FETCH_OPTIONS_INIT;
  fetch.callbacks = callbacks;
  fetch.proxy_opts = proxy;
  fetch.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;  // the refspecs name the tags we want
  fetch.update_fetchhead = 0;
  if (int rc = git_remote_download(remote, specs.empty() ? nullptr : &refspecs, &fetch); rc < 0) {
    return fetchFailed(session, remote, rc, "git_remote_download");
  }
  if (int rc = git_remote_update_tips(remote, &callbacks, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, "flotilla fetch"); rc < 0) {
    return fetchFailed(session, remote, rc, "git_remote_update_tips");
  }
  if (options.prune) {
    if (int rc = git_remote_prune(remote, &callbacks); rc < 0) {
      return fetchFailed(session, remote, rc, "git_remote_prune");
    }
  }
  return okStatus();
}

FetchStats transferStats(git_remote* remote) {
  const git_indexer_progress* stats = git_remote_stats(remote);
  return FetchStats{.received_objects = stats->received_objects,
                    .received_bytes = stats->received_bytes,
                    .indexed_objects = stats->indexed_objects,
                    .local_objects = stats->local_objects,
                    .total_objects = stats->total_objects};
}

// HEAD follows the remote's default branch so resolve("HEAD") means what it means on the server.
void followDefaultBranch(git_repository* repo, const std::string& path, const std::string& branch) {
  if (branch.empty()) {
    return;
  }
  const std::string head = "refs/heads/" + branch;
  git_reference* ref = nullptr;
  if (git_reference_lookup(&ref, repo, head.c_str()) == 0) {
    git_reference_free(ref);
    if (int rc = git_repository_set_head(repo, head.c_str()); rc < 0) {
      log::warn("cannot point mirror HEAD at the default branch", {{"path", path}, {"branch", branch}});
    }
  }
  git_error_clear();
}

}  // namespace

Result<FetchResult> Mirror::fetch(const Credentials& credentials, const FetchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto session = detail::RemoteSession::create(impl_->url, credentials, options.timeout,
                                               options.allow_local || impl_->allow_local);
  FLOTILLA_TRY(session);
  auto& s = **session;
  git_remote* raw = nullptr;
  if (int rc = git_remote_lookup(&raw, impl_->repo.get(), kOrigin); rc < 0) {
    return fail(localError(rc, "git_remote_lookup", "mirror " + impl_->path + " lost its origin"));
  }
  GitPtr<git_remote> remote(raw);
  git_remote_callbacks callbacks = s.callbacks();
  git_proxy_options proxy = GIT_PROXY_OPTIONS_INIT;
  // Connect once, read the advertisement, then download on the same connection: one round of negotiation.
  if (int rc = git_remote_connect(remote.get(), GIT_DIRECTION_FETCH, &callbacks, &proxy, nullptr); rc < 0) {
    return fetchFailed(s, remote.get(), rc, "git_remote_connect");
  }
  FetchResult result;
  auto heads = s.heads(remote.get());
  if (!heads.ok()) {
    git_remote_disconnect(remote.get());
    return fail(heads.error());
  }
  result.heads = std::move(*heads);
  FLOTILLA_TRY(download(s, remote.get(), callbacks, proxy, options));
  result.stats = transferStats(remote.get());
  git_remote_disconnect(remote.get());
  followDefaultBranch(impl_->repo.get(), impl_->path, result.heads.default_branch);
  result.stats.duration =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  log::debug("git fetch done", {{"url", s.displayUrl()},
                                {"received_objects", static_cast<int64_t>(result.stats.received_objects)},
                                {"received_bytes", static_cast<int64_t>(result.stats.received_bytes)},
                                {"ms", static_cast<int64_t>(result.stats.duration.count())}});
  return result;
}

Result<git_oid> Mirror::Impl::peelToCommit(git_object* object, std::string_view shown) const {
  git_object* peeled = nullptr;
  if (int rc = git_object_peel(&peeled, object, GIT_OBJECT_COMMIT); rc < 0) {
    git_error_clear();
    return fail(ErrorKind::kInvalid, "'" + std::string(shown) + "' does not point at a commit", "git_object_peel");
  }
  git_oid oid = *git_object_id(peeled);
  git_object_free(peeled);
  return oid;
}

Result<git_oid> Mirror::Impl::resolveOid(std::string_view ref) const {
  const std::string name(ref);
  if (name.empty()) {
    return fail(ErrorKind::kInvalid, "empty ref", "Mirror::resolve");
  }
  const bool hex = isHex(name);
  if (hex && name.size() == GIT_OID_HEXSZ) {
    git_oid oid;
    git_object* object = nullptr;
    if (git_oid_fromstr(&oid, name.c_str()) == 0 && git_object_lookup(&object, repo.get(), &oid, GIT_OBJECT_ANY) == 0) {
      GitPtr<git_object> owned(object);
      return peelToCommit(object, name);
    }
    git_error_clear();
    return fail(ErrorKind::kNotFound, "commit " + name + " is not in the mirror of " + redactUrl(url),
                "Mirror::resolve");
  }
  bool any_valid = false;
  for (const auto& candidate : refCandidates(name)) {
    int valid = 0;
    if (candidate != "HEAD" && (git_reference_name_is_valid(&valid, candidate.c_str()) < 0 || valid == 0)) {
      continue;
    }
    any_valid = true;
    auto found = peelReference(candidate, name);
    FLOTILLA_TRY(found);
    if (*found) {
      return **found;
    }
  }
  git_error_clear();
  if (hex && name.size() >= GIT_OID_MINPREFIXLEN) {
    auto found = lookupShortOid(name);
    FLOTILLA_TRY(found);
    if (*found) {
      return **found;
    }
  } else if (!any_valid) {
    return fail(ErrorKind::kInvalid, "'" + name + "' is not a valid branch, tag or commit name", "Mirror::resolve");
  }
  return fail(ErrorKind::kNotFound, "'" + name + "' is not a branch, tag or commit in the mirror of " + redactUrl(url),
              "Mirror::resolve");
}

Result<std::optional<git_oid>> Mirror::Impl::peelReference(const std::string& candidate, std::string_view shown) const {
  git_reference* raw = nullptr;
  int rc = git_reference_lookup(&raw, repo.get(), candidate.c_str());
  if (rc == GIT_ENOTFOUND) {
    return std::optional<git_oid>();
  }
  if (rc < 0) {
    return fail(localError(rc, "git_reference_lookup", "cannot read ref " + candidate));
  }
  GitPtr<git_reference> reference(raw);
  git_object* object = nullptr;
  if ((rc = git_reference_peel(&object, reference.get(), GIT_OBJECT_ANY)) < 0) {
    if (rc == GIT_ENOTFOUND || rc == GIT_EUNBORNBRANCH) {
      git_error_clear();
      return std::optional<git_oid>();  // HEAD of a mirror that was never fetched
    }
    return fail(localError(rc, "git_reference_peel", "cannot read ref " + candidate));
  }
  GitPtr<git_object> owned(object);
  auto oid = peelToCommit(object, shown);
  FLOTILLA_TRY(oid);
  return std::optional<git_oid>(*oid);
}

Result<std::optional<git_oid>> Mirror::Impl::lookupShortOid(const std::string& name) const {
  git_oid oid;
  git_object* object = nullptr;
  if (git_oid_fromstrn(&oid, name.c_str(), name.size()) != 0) {
    return std::optional<git_oid>();
  }
  int rc = git_object_lookup_prefix(&object, repo.get(), &oid, name.size(), GIT_OBJECT_ANY);
  if (rc == 0) {
    GitPtr<git_object> owned(object);
    auto commit = peelToCommit(object, name);
    FLOTILLA_TRY(commit);
    return std::optional<git_oid>(*commit);
  }
  git_error_clear();
  if (rc == GIT_EAMBIGUOUS) {
    return fail(ErrorKind::kInvalid, "short sha " + name + " is ambiguous; use more digits", "Mirror::resolve");
  }
  return std::optional<git_oid>();
}

Result<std::string> Mirror::resolve(std::string_view ref) const {
  auto oid = impl_->resolveOid(ref);
  if (!oid.ok()) {
    return fail(oid.error());
  }
  return oidHex(*oid);
}

Result<GitPtr<git_commit>> Mirror::Impl::commitOf(std::string_view ref) const {
  auto oid = resolveOid(ref);
  if (!oid.ok()) {
    return fail(oid.error());
  }
  git_commit* commit = nullptr;
  if (int rc = git_commit_lookup(&commit, repo.get(), &*oid); rc < 0) {
    return fail(localError(rc, "git_commit_lookup", "cannot read commit " + oidHex(*oid)));
  }
  return GitPtr<git_commit>(commit);
}

Result<GitPtr<git_tree>> Mirror::Impl::rootTree(std::string_view ref) const {
  auto commit = commitOf(ref);
  if (!commit.ok()) {
    return fail(commit.error());
  }
  git_tree* tree = nullptr;
  if (int rc = git_commit_tree(&tree, commit->get()); rc < 0) {
    return fail(localError(rc, "git_commit_tree", "cannot read the tree of " + std::string(ref)));
  }
  return GitPtr<git_tree>(tree);
}

Result<CommitInfo> Mirror::commitInfo(std::string_view commit) const {
  auto found = impl_->commitOf(commit);
  if (!found.ok()) {
    return fail(found.error());
  }
  git_commit* c = found->get();
  CommitInfo info;
  info.oid = oidHex(*git_commit_id(c));
  info.message = git_commit_message(c) != nullptr ? git_commit_message(c) : "";
  info.summary = git_commit_summary(c) != nullptr ? git_commit_summary(c) : "";
  if (const git_signature* author = git_commit_author(c); author != nullptr) {
    info.author_name = author->name;
    info.author_email = author->email;
    info.author_time = author->when.time;
  }
  if (const git_signature* committer = git_commit_committer(c); committer != nullptr) {
    info.committer_name = committer->name;
    info.committer_email = committer->email;
  }
  info.commit_time = git_commit_time(c);
  for (unsigned int i = 0; i < git_commit_parentcount(c); ++i) {
    info.parents.push_back(oidHex(*git_commit_parent_id(c, i)));
  }
  return info;
}

Result<std::vector<RemoteRef>> Mirror::refs() const {
  git_reference_iterator* raw = nullptr;
  if (int rc = git_reference_iterator_new(&raw, impl_->repo.get()); rc < 0) {
    return fail(localError(rc, "git_reference_iterator_new"));
  }
  GitPtr<git_reference_iterator> iterator(raw);
  std::vector<RemoteRef> out;
  git_reference* ref = nullptr;
  int rc = 0;
  while ((rc = git_reference_next(&ref, iterator.get())) == 0) {
    GitPtr<git_reference> owned(ref);
    if (git_reference_type(ref) != GIT_REFERENCE_DIRECT) {
      continue;
    }
    RemoteRef item{.name = git_reference_name(ref), .oid = oidHex(*git_reference_target(ref))};
    git_object* object = nullptr;
    if (git_reference_peel(&object, ref, GIT_OBJECT_COMMIT) == 0) {
      std::string commit = oidHex(*git_object_id(object));
      if (commit != item.oid) {
        item.peeled = std::move(commit);
      }
      git_object_free(object);
    }
    git_error_clear();
    out.push_back(std::move(item));
  }
  if (rc != GIT_ITEROVER) {
    return fail(localError(rc, "git_reference_next"));
  }
  std::sort(out.begin(), out.end(), [](const RemoteRef& a, const RemoteRef& b) { return a.name < b.name; });
  return out;
}

}  // namespace flotilla::git
