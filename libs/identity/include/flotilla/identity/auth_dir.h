// flotilla/identity/auth_dir.h
//
// The directory `flotilla auth init` creates and `flotilla auth issue` reads: the hub's NATS identities.
//
//   operator.nk, operator.jwt                 the operator (trust root the server is configured with)
//   system-account.nk, system-account.jwt     the system account (server events; no JetStream)
//   account.nk, account.jwt                   the Flotilla account (every stream, bucket and user lives here)
//   account-signing.nk                        the account signing key that signs user JWTs
//   registrar-signing.nk                      a second account signing key, scoped to the agent role (the
//                                             account JWT holds its template): the scheduler's, for the agent
//                                             credentials it gives registration tokens (enrollment.h)
//   nats-auth.conf                            the server config include (server_config.h; the full resolver in
//                                             resolver/ unless init was given another directory)
//   creds/<role>.creds                        poller, bundler, scheduler, admin, readonly; agent-<cluster>, ...
//   tls/ca.pem, tls/ca-key.pem, tls/server.pem, tls/server-key.pem      with TLS
//   tls/<role>.pem, tls/<role>-key.pem                                  with mutual TLS, per issued identity
//
// Seeds, keys and .creds files are written with mode 0600. Nothing existing is overwritten by init.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/identity/jwt.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/identity/tls.h"

namespace flotilla::identity {

struct AuthInitOptions {
  std::string dir;
  std::string server_name;                      //!< server_name in the config, and a DNS name of the server certificate
  bool tls = false;                             //!< make a CA and a server certificate, and a tls block
  bool mutual_tls = false;                      //!< also require client certificates (implies tls)
  std::vector<std::string> alt_names;           //!< server certificate names; default localhost and 127.0.0.1
  std::optional<std::chrono::seconds> hub_ttl;  //!< expiry of the hub services' and CLI users (none = never)
  //! The server's full resolver directory, written into nats-auth.conf (server_config.h); "" = <dir>/resolver.
  std::string resolver_dir;
};

//! What init wrote: paths relative to the directory.
struct AuthInitResult {
  std::vector<std::string> files;
};

//! Creates the directory's keys, JWTs, config, the hub services' / admin / readonly creds and, when asked, TLS
//! material. kConflict when the directory already holds keys (nothing is overwritten).
Result<AuthInitResult> initAuthDir(const AuthInitOptions& options);

//! A user for `role`, signed by the account signing key: its JWT, key and .creds text.
struct IssuedUser {
  std::string jwt;
  std::string public_key;
  std::string creds;
};
Result<IssuedUser> issueUser(const KeyPair& account_signer, std::string_view account_public_key, const Role& role,
                             std::optional<std::chrono::seconds> ttl, Clock::time_point now = Clock::now());

//! Issues a user for `role` from the directory's account signing key (auth issue). `ttl` none = never expires.
Result<IssuedUser> issueFromAuthDir(const std::string& dir, const Role& role, std::optional<std::chrono::seconds> ttl,
                                    Clock::time_point now = Clock::now());

//! The client certificate of `name` from the directory's CA (mutual TLS), written to tls/<name>.pem and
//! tls/<name>-key.pem; kNotFound when the directory has no CA.
Status issueClientCertificate(const std::string& dir, const std::string& name);

//! The server config of the directory's operator and accounts (operator.jwt, system-account.jwt, account.jwt, each
//! verified): operator mode with the accounts preloaded and max_control_line, without server_name, resolver,
//! JetStream or TLS, for a server whose main config sets those itself (the hub chart's). kNotFound / kInvalid naming
//! the file.
Result<std::string> renderAuthDirAccounts(const std::string& dir, Clock::time_point now = Clock::now());

//! A server certificate for `names` (DNS names or IPs; the first is the common name) from the directory's CA, e.g.
//! for the Kubernetes Service names of a release; kNotFound when the directory has no CA.
Result<PemPair> issueServerCertificate(const std::string& dir, const std::vector<std::string>& names);

//! "creds/<role>.creds", "creds/agent-<cluster>.creds", "creds/registration-<token>.creds".
std::string credsFileName(const Role& role);
//! "<role>" or "<role>-<subject>": the JWT name and the file stem.
std::string identityName(const Role& role);

}  // namespace flotilla::identity
