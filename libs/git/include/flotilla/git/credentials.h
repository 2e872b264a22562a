// flotilla/git/credentials.h
//
// What a git operation may use to authenticate and to trust the server. Credentials are passed to each call
// (one GitRepo's secret), never installed globally, so two repositories with different secrets or CAs can be
// polled at the same time. None of these fields is ever logged or put into an error message.
#pragma once

#include <string>
#include <vector>

namespace flotilla::git {

struct Credentials {
  //! HTTP basic-auth user, or the SSH user when the URL names none. Defaults: "oauth2" with a token (accepted by
  //! GitHub and GitLab), "git" for SSH.
  std::string username;
  //! HTTP basic-auth password.
  std::string password;
  //! An access token, sent as the basic-auth password (how GitHub/GitLab/Gitea tokens work over HTTPS).
  std::string token;
  //! SSH private key text (OpenSSH or PEM format). The URL's user (ssh://user@host) wins over `username`.
  std::string ssh_private_key;
  //! Optional public key text; libssh2 derives it from the private key when empty.
  std::string ssh_public_key;
  std::string ssh_passphrase;
  //! known_hosts lines (plain, wildcard or hashed `|1|` patterns; `[host]:port` for other ports than 22).
  //! Required for SSH URLs unless insecure_ignore_host_key is set.
  std::string known_hosts;
  //! PEM CA certificates trusted for HTTPS in addition to the system CAs. Include any intermediate CA: the
  //! server's chain is not available to the check, only its leaf certificate.
  std::string ca_bundle;
  bool insecure_skip_tls_verify = false;  //!< accept any HTTPS certificate (logged as a warning on each use)
  bool insecure_ignore_host_key = false;  //!< accept any SSH host key (logged as a warning on each use)

  //! The non-empty secret values, so text that might echo them can be scrubbed.
  [[nodiscard]] std::vector<std::string> secrets() const;
};

//! Replaces every occurrence of each secret in `text` with "[REDACTED]".
std::string scrubSecrets(std::string text, const std::vector<std::string>& secrets);

}  // namespace flotilla::git
