// flotilla/identity/enrollment.h
//
// Registration tokens (docs/pipeline.md "Registration tokens"): an agent holding a token's credentials (role
// `registration`, which may only publish flotilla.registration.<token>) asks the hub's registrar for credentials of
// its own; it generates the user key itself and sends only the public half, so no seed ever crosses the wire.
// Before they expire it renews them on flotilla.register.<cluster>.renew (its agent credentials may publish there),
// with a new public key and a signature by the current key that proves it holds the credentials it renews.
//
//   enroll   EnrollRequest {cluster, publicKey}           -> CredentialsReply {accepted, jwt, expires | reason}
//   renew    RenewRequest {jwt, publicKey, signature}     -> CredentialsReply
//
// The messages are plain JSON objects decoded strictly (an unknown field, a missing or malformed key is kInvalid
// naming the field). The hub side is in services/scheduler (enrollment.h), the agent side in services/agent.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/identity/jwt.h"
#include "flotilla/identity/nkeys.h"

namespace flotilla::identity {

//! flotilla.register.<cluster>.renew: where an agent renews its credentials (its role may publish there).
std::string agentRenewSubject(std::string_view cluster);
//! What the registrar subscribes to: every token's request and every cluster's renewal.
inline constexpr std::string_view kRegistrationFilter = "flotilla.registration.*";
inline constexpr std::string_view kRenewFilter = "flotilla.register.*.renew";

struct EnrollRequest {
  std::string cluster;     //!< the cluster the agent asks to become (a DNS-1123 label)
  std::string public_key;  //!< "U...": the user key the agent generated
};

struct RenewRequest {
  std::string jwt;         //!< the agent's current user JWT
  std::string public_key;  //!< "U...": the new key
  std::string signature;   //!< base64url Ed25519 signature of `public_key` by the current key
};

//! Why a request was refused (the reply's `reason`, and the registrar's metric label).
inline constexpr std::string_view kRefusedInvalid = "invalid";            //!< unreadable request
inline constexpr std::string_view kRefusedDeregistered = "deregistered";  //!< the cluster was deregistered
inline constexpr std::string_view kRefusedTaken = "taken";                //!< another identity holds the name
inline constexpr std::string_view kRefusedUnknown = "unknown";  //!< renewal of credentials the hub did not issue
inline constexpr std::string_view kRefusedRevoked = "revoked";  //!< renewal of superseded or revoked credentials
inline constexpr std::string_view kRefusedUnavailable = "unavailable";  //!< the hub cannot answer now: retry

struct CredentialsReply {
  bool accepted = false;
  std::string reason;   //!< one of kRefused* when refused
  std::string message;  //!< what happened, for the log
  std::string jwt;      //!< the new user JWT when accepted
  std::string expires;  //!< its expiry (RFC 3339) when accepted
};

Json encode(const EnrollRequest& value);
Json encode(const RenewRequest& value);
Json encode(const CredentialsReply& value);
Result<EnrollRequest> parseEnrollRequest(std::string_view data);
Result<RenewRequest> parseRenewRequest(std::string_view data);
Result<CredentialsReply> parseCredentialsReply(std::string_view data);

//! The renewal request for the credentials `current` (a .creds text), moving to `next_key`.
Result<RenewRequest> renewRequest(std::string_view current_creds, const KeyPair& next_key);

//! An account key that signs agents' user JWTs (the registrar's): the seed and the account it signs for.
struct AgentSigner {
  KeyPair key;
  std::string account;  //!< public key of the account ("A..."); equal to the key's own when the account key signs
  //! The key is a scoped signing key of the agent role (auth init's registrar key): the JWT carries no permissions,
  //! the server applies the key's template.
  bool scoped = false;
};

//! The signer for `key` from the account's JWT: kInvalid when the JWT does not verify, is not an account's, or does
//! not list the key among its signing keys; `scoped` when it lists it as a scoped key of role agent.
Result<AgentSigner> agentSignerFor(const KeyPair& key, std::string_view account_jwt);

//! A user JWT of role agent for `cluster`, for the key `user_public_key`, expiring `ttl` after `now`.
Result<std::string> issueAgentJwt(const AgentSigner& signer, std::string_view cluster, std::string_view user_public_key,
                                  std::chrono::seconds ttl, Clock::time_point now = Clock::now());

//! What a checked renewal names: the credentials' user key and their expiry.
struct RenewalCheck {
  std::string current_key;
  Clock::time_point expires;
};
//! Checks a renewal on `cluster`'s subject: the JWT verifies and has not expired, `signer_public_key` signed it, it
//! is an agent's of `cluster`, and the signature by its user key covers the new public key. kInvalid names what is
//! wrong; kPermanent when the JWT was not issued by the signer.
Result<RenewalCheck> checkRenewal(const RenewRequest& request, std::string_view cluster,
                                  std::string_view signer_public_key, Clock::time_point now = Clock::now());

//! When a .creds file's user JWT was issued and when it expires (nullopt: never), after its signature is checked
//! (an expired JWT is no error here).
struct CredsLifetime {
  Clock::time_point issued;
  std::optional<Clock::time_point> expires;
};
Result<CredsLifetime> credsLifetime(std::string_view creds_text);

}  // namespace flotilla::identity
