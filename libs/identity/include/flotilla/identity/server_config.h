// flotilla/identity/server_config.h
//
// The nats-server configuration that turns authentication on: operator mode with the account JWTs preloaded
// (`resolver_preload`), the system account, JetStream, `max_control_line` (below), and optionally TLS (mutual TLS when
// `verify` is set). The text is meant to be included from the server's main config (`include nats-auth.conf`).
//
// The resolver: with `resolver_dir` the full resolver (`resolver { type: full, dir, allow_delete: false }`), which
// stores account JWTs in that directory and takes updates pushed through the system account
// (`$SYS.REQ.CLAIMS.UPDATE`, what `flotilla auth revoke` sends); a preloaded JWT replaces a stored one only when it
// is newer (its `iat`), so a pushed revocation survives a restart with the old config. Without it `resolver: MEMORY`
// (accounts only from the config; a change needs a config reload).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::identity {

//! The server's `max_control_line`: a CONNECT line carries the user JWT, and the hub services' JWTs (about 5 KB)
//! exceed nats-server's default of 4 KB. Every role's JWT must stay below this (RolePermissionsTest checks).
inline constexpr int kMaxControlLine = 16384;

struct ServerTls {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;  //!< verifies client certificates (mutual TLS)
  bool verify = false;  //!< require and verify a client certificate
};

struct AccountJwt {
  std::string public_key;
  std::string jwt;
};

struct ServerConfig {
  std::string operator_jwt;
  std::string system_account;        //!< public key; its JWT must be among `accounts`
  std::vector<AccountJwt> accounts;  //!< preloaded into the resolver
  //! The full resolver's directory (the server creates it; it must be writable and kept across restarts);
  //! "" = resolver: MEMORY.
  std::string resolver_dir;
  //! false: no resolver setting at all, for a config that is included by one that sets it (the hub chart's).
  bool write_resolver = true;
  std::string server_name;  //!< "" = none written
  bool jetstream = true;    //!< writes `jetstream: enabled`
  std::optional<ServerTls> tls;
};

//! The config text; kInvalid when the operator JWT, the system account or an account's JWT is missing, or a TLS
//! file path is empty.
Result<std::string> renderServerConfig(const ServerConfig& config);

}  // namespace flotilla::identity
