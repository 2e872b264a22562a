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
  //! Wall-clock limit of the whole operation, connecting included. libgit2 1.5 has no socket timeouts, so the
  //! library gives every connection it opens this deadline itself (src/deadline_stream.h): connect() waits at
  //! most until then, and at the deadline the socket is shut down, so a server that accepts and then stays
  //! silent, or answers too slowly, fails the call with kTransient "timed out talking to <url>". Zero disables
  //! the limit (and the call may then block as long as the server keeps the connection open).
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  //! Allow file:// URLs and local paths (tests and demos only).
  bool allow_local = false;
};

//! Lists the remote's refs (git_remote_connect + git_remote_ls). Errors as in errors.h, e.g. kTransient when
//! the server is unreachable, kPermanent when credentials or its certificate/host key are rejected.
Result<RemoteHeads> lsRemote(const std::string& url, const Credentials& credentials, const RemoteOptions& options = {});

}  // namespace flotilla::git
