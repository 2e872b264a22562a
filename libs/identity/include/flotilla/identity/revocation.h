// flotilla/identity/revocation.h
//
// Revoking users at the server (docs/pipeline.md "Revocation"): the user keys go into the Flotilla account JWT's
// revocations (user key -> Unix time; nats-server refuses a user JWT issued at or before it, and closes the
// connections of such users when it takes the new account JWT), the JWT is signed again with the operator key of an
// auth dir (auth_dir.h), and the new JWT is pushed to a running server through its system account on
// kClaimsUpdateSubject (the full resolver answers there, server_config.h). `flotilla auth revoke` is the command
// line; the operator key never leaves the auth dir.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/jwt.h"

namespace flotilla::identity {

//! Where a server with the full resolver takes an account JWT (the account is the JWT's subject).
inline constexpr std::string_view kClaimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE";

//! The user key (the JWT's subject, "U...") of a .creds file, after its signature is checked (expired or not).
Result<std::string> credsUserKey(std::string_view creds_text);

//! What revokeInAuthDir wrote.
struct RevokedAccount {
  std::string account;  //!< the account's public key
  std::string jwt;      //!< its new JWT
};

//! Adds `user_keys` (at `now`) to the revocations of dir/account.jwt, signs it again with dir/operator.nk, and writes
//! it to dir/account.jwt and in place of the old JWT in dir/nats-auth.conf (when there). kNotFound / kInvalid name
//! the file or the key.
Result<RevokedAccount> revokeInAuthDir(const std::string& dir, const std::vector<std::string>& user_keys,
                                       Clock::time_point now = Clock::now());

//! A user of the system account, signed by dir/system-account.nk and expiring after `ttl`, that may only publish
//! account JWT updates (kClaimsUpdateSubject) and receive the answers under _INBOX: held in memory by the command
//! that pushes an update, never written.
Result<IssuedUser> issueClaimsUpdater(const std::string& dir, std::chrono::seconds ttl,
                                      Clock::time_point now = Clock::now());

//! The server's answer to an update: {"data":{...,"code":200}} is ok; {"error":{"description":...}} or anything else
//! is kPermanent with the server's words.
Status checkClaimsUpdateReply(std::string_view reply);

}  // namespace flotilla::identity
