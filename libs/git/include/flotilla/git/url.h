// flotilla/git/url.h
//
// Parsing and checking of git remote URLs before they reach libgit2: which transports we allow, where the host
// and port are (SSH host-key checks need them), and a form that is safe to log.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::git {

//! A remote URL taken apart. `scp_like` is the `user@host:path` form, which is SSH on port 22.
struct GitUrl {
  std::string scheme;  //!< "https", "http", "ssh", "git" or "file"
  std::string user;    //!< may be empty
  std::string host;    //!< without IPv6 brackets; empty for file URLs
  int port = 0;        //!< 0 when the URL gives none
  std::string path;
  bool scp_like = false;

  //! The port in use: the explicit one or the scheme's default (443, 80, 22, 9418).
  [[nodiscard]] int effectivePort() const;
  //! How OpenSSH's known_hosts names this host: "host" on port 22, "[host]:port" otherwise.
  [[nodiscard]] std::string knownHostsName() const;
};

//! Parses `url`. kInvalid for empty or malformed URLs, control characters or spaces, unsupported schemes,
//! passwords embedded in the URL (use Credentials instead, so the secret never lands in logs), and file URLs or
//! local paths unless `allow_local` is set (a poller must not read its own disk on a user's request).
Result<GitUrl> parseGitUrl(std::string_view url, bool allow_local = false);

//! `url` with any user-info password replaced by "***" and query/fragment dropped: safe for logs and errors.
std::string redactUrl(std::string_view url);

}  // namespace flotilla::git
