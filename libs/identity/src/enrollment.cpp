#include "flotilla/identity/enrollment.h"

#include <algorithm>
#include <vector>

#include "flotilla/core/codec.h"
#include "flotilla/core/util.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/permissions.h"

namespace flotilla::identity {

namespace {

constexpr auto kEnrollFields = [](auto& v, auto& s) {
  v.str("cluster", s.cluster, true);
  v.str("publicKey", s.public_key, true);
};

constexpr auto kRenewFields = [](auto& v, auto& s) {
  v.str("jwt", s.jwt, true);
  v.str("publicKey", s.public_key, true);
  v.str("signature", s.signature, true);
};

constexpr auto kReplyFields = [](auto& v, auto& s) {
  v.boolean("accepted", s.accepted);
  v.str("reason", s.reason);
  v.str("message", s.message);
  v.str("jwt", s.jwt);
  v.str("expires", s.expires);
};

//! `data` parsed as JSON and decoded strictly with `fields`; problems are reported as "<what>: ...".
template <typename T, typename Fields>
Result<T> decodeWith(std::string_view data, std::string_view what, const Fields& fields) {
  auto json = Json::parse(data);
  if (!json.ok()) {
    return fail(ErrorKind::kInvalid, std::string(what) + " is not JSON: " + json.error().message);
  }
  return codec::decode<T>(*json, "", fields, what);
}

Status checkUserKey(const std::string& key, std::string_view field) {
  auto decoded = decodePublicKey(key, KeyType::kUser);
  if (!decoded.ok()) {
    return fail(ErrorKind::kInvalid, std::string(field) + ": " + decoded.error().message);
  }
  return {};
}

//! The string tags of a verified JWT.
std::vector<std::string> tagsOf(const VerifiedJwt& jwt) {
  std::vector<std::string> tags;
  const Json* list = jwt.claims.at({"nats", "tags"});
  if (list != nullptr && list->isArray()) {
    for (const auto& tag : list->asArray()) {
      if (tag.isString()) {
        tags.push_back(tag.asString());
      }
    }
  }
  return tags;
}

}  // namespace

std::string agentRenewSubject(std::string_view cluster) {
  return agentRegisterSubject(cluster) + ".renew";
}

Json encode(const EnrollRequest& value) {
  return codec::encode(value, kEnrollFields);
}
Json encode(const RenewRequest& value) {
  return codec::encode(value, kRenewFields);
}
Json encode(const CredentialsReply& value) {
  return codec::encode(value, kReplyFields);
}

Result<EnrollRequest> parseEnrollRequest(std::string_view data) {
  auto request = decodeWith<EnrollRequest>(data, "enrollment request", kEnrollFields);
  FLOTILLA_TRY(request);
  FLOTILLA_TRY(checkUserKey(request->public_key, "enrollment request: publicKey"));
  return request;
}

Result<RenewRequest> parseRenewRequest(std::string_view data) {
  auto request = decodeWith<RenewRequest>(data, "renewal request", kRenewFields);
  FLOTILLA_TRY(request);
  FLOTILLA_TRY(checkUserKey(request->public_key, "renewal request: publicKey"));
  return request;
}

Result<CredentialsReply> parseCredentialsReply(std::string_view data) {
  return decodeWith<CredentialsReply>(data, "credentials reply", kReplyFields);
}

Result<RenewRequest> renewRequest(std::string_view current_creds, const KeyPair& next_key) {
  auto creds = parseCredsFile(current_creds);
  FLOTILLA_TRY(creds);
  auto current = KeyPair::fromSeed(creds->seed);
  FLOTILLA_TRY(current);
  auto signature = current->sign(next_key.publicKey());
  FLOTILLA_TRY(signature);
  return RenewRequest{.jwt = creds->jwt, .public_key = next_key.publicKey(), .signature = base64UrlEncode(*signature)};
}

Result<std::string> issueAgentJwt(const AgentSigner& signer, std::string_view cluster, std::string_view user_public_key,
                                  std::chrono::seconds ttl, Clock::time_point now) {
  auto role = agentRole(cluster);
  FLOTILLA_TRY(role);
  UserClaims claims{.base = {.name = identityName(*role), .issued_at = now, .expires = now + ttl},
                    .permissions = role->permissions,
                    .tags = identityTags(role->name, role->subject)};
  if (signer.key.publicKey() != signer.account) {
    claims.issuer_account = signer.account;
  }
  claims.scoped = signer.scoped;
  return issueUserJwt(signer.key, user_public_key, claims);
}

Result<AgentSigner> agentSignerFor(const KeyPair& key, std::string_view account_jwt) {
  auto account = verifyJwt(trim(account_jwt));
  if (!account.ok()) {
    return fail(ErrorKind::kInvalid, "account JWT: " + account.error().message);
  }
  if (account->type() != "account") {
    return fail(ErrorKind::kInvalid, "the JWT is a " + account->type() + " JWT, not an account's");
  }
  AgentSigner signer{.key = key, .account = account->subject()};
  if (key.publicKey() == signer.account) {
    return signer;
  }
  const Json* keys = account->claims.at({"nats", "signing_keys"});
  for (const Json& entry : keys != nullptr && keys->isArray() ? keys->asArray() : Json::Array{}) {
    if (entry.isString() && entry.asString() == key.publicKey()) {
      return signer;
    }
    if (entry.isObject() && entry.getString("key") == key.publicKey()) {
      if (entry.getString("kind") != "user_scope" || entry.getString("role") != "agent") {
        return fail(ErrorKind::kInvalid, "the account's signing key " + key.publicKey() +
                                             " is scoped to another role than agent (\"" + entry.getString("role") +
                                             "\")");
      }
      signer.scoped = true;
      return signer;
    }
  }
  return fail(ErrorKind::kInvalid, "the account " + signer.account + " does not list the signing key " +
                                       key.publicKey() + " (its JWT's signing_keys)");
}

Result<RenewalCheck> checkRenewal(const RenewRequest& request, std::string_view cluster,
                                  std::string_view signer_public_key, Clock::time_point now) {
  auto verified = verifyJwt(request.jwt, now);
  if (!verified.ok()) {
    return fail(ErrorKind::kInvalid, "renewal request: jwt: " + verified.error().message);
  }
  if (verified->issuer() != signer_public_key) {
    return fail(ErrorKind::kPermanent,
                "renewal request: jwt: not issued by this hub's registrar (issuer " + verified->issuer() + ")");
  }
  auto tags = tagsOf(*verified);
  auto expected = identityTags("agent", cluster);
  for (const auto& tag : expected) {
    if (std::find(tags.begin(), tags.end(), tag) == tags.end()) {
      return fail(ErrorKind::kInvalid, "renewal request: jwt: not the credentials of cluster " + std::string(cluster) +
                                           "'s agent (missing tag " + tag + ")");
    }
  }
  auto signature = base64Decode(request.signature);
  if (!signature.ok()) {
    return fail(ErrorKind::kInvalid, "renewal request: signature is not base64url");
  }
  if (auto checked = verifySignature(verified->subject(), request.public_key, *signature); !checked.ok()) {
    return fail(ErrorKind::kInvalid,
                "renewal request: signature: not made by the key of the credentials (" + checked.error().message + ")");
  }
  const Json* exp = verified->claims.find("exp");
  if (exp == nullptr || !exp->isInt()) {
    return fail(ErrorKind::kInvalid, "renewal request: jwt: has no expiry (only expiring credentials are renewed)");
  }
  return RenewalCheck{.current_key = verified->subject(),
                      .expires = Clock::time_point(std::chrono::seconds(exp->asInt()))};
}

Result<CredsLifetime> credsLifetime(std::string_view creds_text) {
  auto creds = parseCredsFile(creds_text);
  FLOTILLA_TRY(creds);
  // The lifetime is what is asked, so the JWT is checked as of the epoch: its signature, not its expiry.
  auto verified = verifyJwt(creds->jwt, Clock::time_point{});
  FLOTILLA_TRY(verified);
  CredsLifetime lifetime;
  if (const Json* iat = verified->claims.find("iat"); iat != nullptr && iat->isInt()) {
    lifetime.issued = Clock::time_point(std::chrono::seconds(iat->asInt()));
  }
  if (const Json* exp = verified->claims.find("exp"); exp != nullptr && exp->isInt()) {
    lifetime.expires = Clock::time_point(std::chrono::seconds(exp->asInt()));
  }
  return lifetime;
}

}  // namespace flotilla::identity
