// flotilla/git/remote.h
//
// Talking to a remote without a local repository: `lsRemote` lists branches and tags and finds the default
// branch, without downloading objects. This is what the poller calls every interval; a fetch only follows when
// a watched ref moved.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/git/credentials.h"

namespace flotilla::git {

//! One ref advertised by a remote (or held by a mirror).
struct RemoteRef {
  std::string name;    //!< full name: "refs/heads/main", "refs/tags/v1"
  std::string oid;     //!< what the ref points at (an annotated tag's own object for tags)
  std::string peeled;  //!< for annotated tags: the commit it points at; empty otherwise

  //! The commit this ref designates: `peeled` when set, else `oid`.
  [[nodiscard]] const std::string& commit() const { return peeled.empty() ? oid : peeled; }
};

//! The result of an ls-remote.
struct RemoteHeads {
  std::string default_branch;   //!< short name from the HEAD symref ("main"); empty if the server did not say
  std::string head_oid;         //!< the commit HEAD points at; empty for an empty repository
  std::vector<RemoteRef> refs;  //!< sorted by name; HEAD and "^{}" peel lines are folded away

  //! The ref with this full name, or nullptr.
  [[nodiscard]] const RemoteRef* find(std::string_view name) const;
  //! The commit at the tip of branch `branch` (short name), if the remote has it.
  [[nodiscard]] std::optional<std::string> branch(std::string_view branch) const;
};

//! Options shared by every network operation.
struct RemoteOptions {
  //! Wall-clock limit. libgit2 1.5 has no socket timeouts, so this is checked in its callbacks (credentials,
  //! certificate, progress): it stops slow transfers, but a server that accepts the connection and then sends
  //! nothing at all blocks until the OS gives up. Zero disables the limit.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  //! Allow file:// URLs and local paths (tests and demos only).
  bool allow_local = false;
};

//! Lists the remote's refs (git_remote_connect + git_remote_ls). Errors as in errors.h, e.g. kTransient when
//! the server is unreachable, kPermanent when credentials or its certificate/host key are rejected.
Result<RemoteHeads> lsRemote(const std::string& url, const Credentials& credentials, const RemoteOptions& options = {});

}  // namespace flotilla::git
