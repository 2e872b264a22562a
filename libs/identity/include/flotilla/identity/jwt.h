// flotilla/identity/jwt.h
//
// NATS v2 JWTs (the claims nats-server checks in operator mode) and .creds files. A JWT is
// base64url(header) "." base64url(claims) "." base64url(Ed25519 signature of the first two parts), without padding;
// the header is {"typ":"JWT","alg":"ed25519-nkey"}. The claims carry jti (base32 of the SHA-256 of the claims
// without jti), iat, optional exp (Unix seconds), iss (the signer's public key), sub (the subject's public key),
// name, and "nats" with the type-specific fields plus "type" and "version": 2.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/identity/nkeys.h"
#include "flotilla/identity/permissions.h"

namespace flotilla::identity {

using Clock = std::chrono::system_clock;

//! What every JWT carries besides its type-specific part.
struct ClaimsBase {
  std::string name;
  Clock::time_point issued_at = Clock::now();
  std::optional<Clock::time_point> expires;  //!< none = never
};

struct OperatorClaims {
  ClaimsBase base;
  std::string system_account;             //!< public key of the system account
  std::vector<std::string> signing_keys;  //!< operator keys that may also sign account JWTs
};

//! An account signing key held to one role (a NATS "user_scope" signing key): the users it signs carry no
//! permissions of their own, the server gives them `permissions` with each {{tag(<name>)}} replaced by the value of
//! the user's tag "<name>:<value>". A stolen scoped key can make users of that role only.
struct ScopedSigningKey {
  std::string key;  //!< public key ("A...")
  std::string role;
  Permissions permissions;  //!< the template
};

struct AccountClaims {
  ClaimsBase base;
  std::vector<std::string> signing_keys;  //!< account keys that sign the account's user JWTs
  std::vector<ScopedSigningKey> scoped_signing_keys;
  bool jetstream = true;  //!< unlimited JetStream storage (false for the system account)
  //! user public key -> Unix seconds: user JWTs issued at or before that time are refused.
  std::map<std::string, int64_t> revocations;
};

struct UserClaims {
  ClaimsBase base;
  Permissions permissions;
  //! The account's public key when the JWT is signed by one of its signing keys ("" when the account key signs).
  std::string issuer_account;
  //! nats.tags: free-form strings the server keeps with the user. Flotilla's identities carry their role and
  //! subject here ("flotilla-role:agent", "flotilla-subject:<cluster>"; credsIdentity reads them back).
  std::vector<std::string> tags;
  //! Signed by a scoped signing key: no permissions or limits are written (the server refuses a user of a scoped
  //! key that has any, and applies the key's template instead); `permissions` is ignored.
  bool scoped = false;
};

//! Signs the claims of an operator (self-signed: `operator_key` is issuer and subject).
Result<std::string> issueOperatorJwt(const KeyPair& operator_key, const OperatorClaims& claims);
//! Signs an account JWT for `account_public_key` with the operator key (or one of its signing keys).
Result<std::string> issueAccountJwt(const KeyPair& operator_signer, std::string_view account_public_key,
                                    const AccountClaims& claims);
//! `account_jwt` (an account JWT that verifies, expired or not) with every key of `revoke` added to its revocations
//! (an existing entry keeps the later time), re-signed by `operator_signer`, which must be its issuer. Every other
//! claim stays as it was; `iat` becomes `now`, or one second after the old `iat` if that is not earlier, so a
//! nats-server that compares issue times takes the result as newer. kInvalid names what is wrong.
Result<std::string> reviseAccountRevocations(const KeyPair& operator_signer, std::string_view account_jwt,
                                             const std::map<std::string, int64_t>& revoke,
                                             Clock::time_point now = Clock::now());
//! Signs a user JWT for `user_public_key` with the account key or an account signing key (then set
//! claims.issuer_account).
Result<std::string> issueUserJwt(const KeyPair& account_signer, std::string_view user_public_key,
                                 const UserClaims& claims);

//! A decoded JWT whose signature checked out against its own `iss`.
struct VerifiedJwt {
  Json header;
  Json claims;
  [[nodiscard]] std::string issuer() const { return claims.getString("iss"); }
  [[nodiscard]] std::string subject() const { return claims.getString("sub"); }
  [[nodiscard]] std::string type() const;
};

//! Decodes `jwt`, checks the header and the issuer's signature, and that it has not expired at `now`.
//! kInvalid names what is wrong (part count, encoding, algorithm, signature, expiry).
Result<VerifiedJwt> verifyJwt(std::string_view jwt, Clock::time_point now = Clock::now());

//! The text of a .creds file (the decorated user JWT and seed libnats' natsOptions_SetUserCredentialsFromFiles
//! and nsc read).
std::string credsFile(std::string_view user_jwt, const KeyPair& user_key);

//! The JWT and the seed of a .creds file's text; kInvalid when either block is missing.
struct Creds {
  std::string jwt;
  std::string seed;
};
Result<Creds> parseCredsFile(std::string_view text);

//! Who a .creds file speaks for: the role and subject (the agent's cluster) its user JWT was issued with
//! (issueUser writes them as tags), read after the JWT's signature and expiry are checked. kInvalid when the text
//! is not a .creds file, the JWT does not verify, or it carries no Flotilla role (issued by another tool).
struct CredsIdentity {
  std::string role;     //!< "agent", "readonly", ...
  std::string subject;  //!< the cluster of an agent, the token of a registration; "" otherwise
};
Result<CredsIdentity> credsIdentity(std::string_view creds_text, Clock::time_point now = Clock::now());
//! The tags that name `role`/`subject` in a user JWT.
std::vector<std::string> identityTags(std::string_view role, std::string_view subject);

}  // namespace flotilla::identity
