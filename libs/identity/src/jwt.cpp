#include "flotilla/identity/jwt.h"

#include <algorithm>

#include "flotilla/core/util.h"

namespace flotilla::identity {

namespace {

constexpr std::string_view kAlgorithm = "ed25519-nkey";

std::string base64UrlRaw(std::string_view bytes) {
  std::string encoded = base64UrlEncode(bytes);
  while (!encoded.empty() && encoded.back() == '=') {
    encoded.pop_back();
  }
  return encoded;
}

int64_t unixSeconds(Clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count();
}

Json stringArray(const std::vector<std::string>& items) {
  Json array = Json::array();
  for (const auto& item : items) {
    array.push(item);
  }
  return array;
}

//! {"allow":[...],"deny":[...]}. nats-server reads an empty allow list as "everything", so a role that may do
//! nothing in one direction is written as deny ">".
Json subjectPermission(const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
  Json permission = Json::object();
  if (allow.empty()) {
    permission["deny"] = stringArray({">"});
    return permission;
  }
  permission["allow"] = stringArray(allow);
  if (!deny.empty()) {
    permission["deny"] = stringArray(deny);
  }
  return permission;
}

//! The permissions and limits of a user JWT's "nats" part (also the template of a scoped signing key).
Json userPermissionLimits(const Permissions& permissions) {
  Json nats = Json::object();
  nats["pub"] = subjectPermission(permissions.publish_allow, permissions.publish_deny);
  nats["sub"] = subjectPermission(permissions.subscribe_allow, permissions.subscribe_deny);
  if (permissions.allow_responses) {
    nats["resp"] = Json::obj({{"max", 1}, {"ttl", 0}});
  }
  nats["subs"] = -1;
  nats["data"] = -1;
  nats["payload"] = -1;
  nats["bearer_token"] = false;
  return nats;
}

//! Fills in jti (base32 SHA-256 of the claims without it, as the NATS jwt library does), signs and assembles.
Result<std::string> signClaims(const KeyPair& signer, Json claims) {
  claims.erase("jti");
  claims["iss"] = signer.publicKey();
  claims["jti"] = base32Encode(sha256Raw(claims.dump()));
  std::string header = base64UrlRaw(Json::obj({{"typ", "JWT"}, {"alg", std::string(kAlgorithm)}}).dump());
  std::string signing_input = header + "." + base64UrlRaw(claims.dump());
  auto signature = signer.sign(signing_input);
  FLOTILLA_TRY(signature);
  return signing_input + "." + base64UrlRaw(*signature);
}

Json baseClaims(const ClaimsBase& base, std::string_view subject, Json nats, std::string_view type) {
  nats["type"] = std::string(type);
  nats["version"] = 2;
  Json claims = Json::object();
  claims["name"] = base.name;
  claims["sub"] = std::string(subject);
  claims["iat"] = unixSeconds(base.issued_at);
  if (base.expires) {
    claims["exp"] = unixSeconds(*base.expires);
  }
  claims["nats"] = std::move(nats);
  return claims;
}

Status expectKey(std::string_view key, KeyType type, std::string_view what) {
  auto decoded = decodePublicKey(key, type);
  if (!decoded.ok()) {
    return fail(ErrorKind::kInvalid, std::string(what) + ": " + decoded.error().message);
  }
  return {};
}

Result<Json> decodePart(std::string_view part, std::string_view what) {
  auto bytes = base64Decode(part);
  if (!bytes.ok()) {
    return fail(ErrorKind::kInvalid, "JWT " + std::string(what) + " is not base64url");
  }
  auto json = Json::parse(*bytes);
  if (!json.ok() || !json->isObject()) {
    return fail(ErrorKind::kInvalid, "JWT " + std::string(what) + " is not a JSON object");
  }
  return json;
}

}  // namespace

Result<std::string> issueOperatorJwt(const KeyPair& operator_key, const OperatorClaims& claims) {
  if (operator_key.type() != KeyType::kOperator) {
    return fail(ErrorKind::kInvalid, "an operator JWT is signed by an operator key");
  }
  Json nats = Json::object();
  if (!claims.system_account.empty()) {
    FLOTILLA_TRY(expectKey(claims.system_account, KeyType::kAccount, "system account"));
    nats["system_account"] = claims.system_account;
  }
  if (!claims.signing_keys.empty()) {
    nats["signing_keys"] = stringArray(claims.signing_keys);
  }
  return signClaims(operator_key, baseClaims(claims.base, operator_key.publicKey(), std::move(nats), "operator"));
}

Result<std::string> issueAccountJwt(const KeyPair& operator_signer, std::string_view account_public_key,
                                    const AccountClaims& claims) {
  if (operator_signer.type() != KeyType::kOperator) {
    return fail(ErrorKind::kInvalid, "an account JWT is signed by an operator key");
  }
  FLOTILLA_TRY(expectKey(account_public_key, KeyType::kAccount, "account"));
  Json limits = Json::obj({{"subs", -1},
                           {"data", -1},
                           {"payload", -1},
                           {"imports", -1},
                           {"exports", -1},
                           {"wildcards", true},
                           {"conn", -1},
                           {"leaf", -1}});
  if (claims.jetstream) {
    for (const char* limit : {"mem_storage", "disk_storage", "streams", "consumer"}) {
      limits[limit] = -1;
    }
  }
  Json nats = Json::object();
  nats["limits"] = std::move(limits);
  if (!claims.signing_keys.empty() || !claims.scoped_signing_keys.empty()) {
    Json keys = Json::array();
    for (const auto& key : claims.signing_keys) {
      FLOTILLA_TRY(expectKey(key, KeyType::kAccount, "account signing key"));
      keys.push(key);
    }
    for (const auto& scoped : claims.scoped_signing_keys) {
      FLOTILLA_TRY(expectKey(scoped.key, KeyType::kAccount, "scoped account signing key"));
      keys.push(Json::obj({{"kind", "user_scope"},
                           {"key", scoped.key},
                           {"role", scoped.role},
                           {"template", userPermissionLimits(scoped.permissions)}}));
    }
    nats["signing_keys"] = std::move(keys);
  }
  if (!claims.revocations.empty()) {
    Json revocations = Json::object();
    for (const auto& [user, time] : claims.revocations) {
      revocations[user] = time;
    }
    nats["revocations"] = std::move(revocations);
  }
  return signClaims(operator_signer, baseClaims(claims.base, account_public_key, std::move(nats), "account"));
}

Result<std::string> reviseAccountRevocations(const KeyPair& operator_signer, std::string_view account_jwt,
                                             const std::map<std::string, int64_t>& revoke, Clock::time_point now) {
  if (revoke.empty()) {
    return fail(ErrorKind::kInvalid, "no user key to revoke");
  }
  auto verified = verifyJwt(account_jwt, Clock::time_point{});  // its signature; an expired JWT may be revised
  FLOTILLA_TRY(verified);
  if (verified->type() != "account") {
    return fail(ErrorKind::kInvalid, "not an account JWT (type \"" + verified->type() + "\")");
  }
  if (verified->issuer() != operator_signer.publicKey()) {
    return fail(ErrorKind::kInvalid, "the account JWT was signed by " + verified->issuer() +
                                         ", not by the operator key " + operator_signer.publicKey());
  }
  Json claims = verified->claims;
  Json& revocations = claims["nats"]["revocations"];
  if (!revocations.isNull() && !revocations.isObject()) {
    return fail(ErrorKind::kInvalid, "the account JWT's nats.revocations is not an object");
  }
  for (const auto& [user, time] : revoke) {
    FLOTILLA_TRY(expectKey(user, KeyType::kUser, "revoked user"));
    const Json* existing = revocations.find(user);
    revocations[user] = existing != nullptr && existing->isInt() ? std::max(existing->asInt(), time) : time;
  }
  claims["iat"] = std::max(unixSeconds(now), claims.getInt("iat") + 1);
  return signClaims(operator_signer, std::move(claims));
}

Result<std::string> issueUserJwt(const KeyPair& account_signer, std::string_view user_public_key,
                                 const UserClaims& claims) {
  if (account_signer.type() != KeyType::kAccount) {
    return fail(ErrorKind::kInvalid, "a user JWT is signed by an account key or an account signing key");
  }
  FLOTILLA_TRY(expectKey(user_public_key, KeyType::kUser, "user"));
  Json nats = claims.scoped ? Json::object() : userPermissionLimits(claims.permissions);
  if (!claims.tags.empty()) {
    nats["tags"] = stringArray(claims.tags);
  }
  if (!claims.issuer_account.empty()) {
    FLOTILLA_TRY(expectKey(claims.issuer_account, KeyType::kAccount, "issuer account"));
    nats["issuer_account"] = claims.issuer_account;
  }
  return signClaims(account_signer, baseClaims(claims.base, user_public_key, std::move(nats), "user"));
}

std::string VerifiedJwt::type() const {
  const Json* type = claims.at({"nats", "type"});
  return type != nullptr && type->isString() ? type->asString() : std::string();
}

Result<VerifiedJwt> verifyJwt(std::string_view jwt, Clock::time_point now) {
  auto parts = split(jwt, '.');
  if (parts.size() != 3) {
    return fail(ErrorKind::kInvalid, "a JWT has 3 parts separated by '.', this has " + std::to_string(parts.size()));
  }
  VerifiedJwt verified;
  auto header = decodePart(parts[0], "header");
  FLOTILLA_TRY(header);
  if (header->getString("alg") != kAlgorithm) {
    return fail(ErrorKind::kInvalid,
                "JWT algorithm \"" + header->getString("alg") + "\" is not " + std::string(kAlgorithm));
  }
  auto claims = decodePart(parts[1], "claims");
  FLOTILLA_TRY(claims);
  auto signature = base64Decode(parts[2]);
  if (!signature.ok()) {
    return fail(ErrorKind::kInvalid, "JWT signature is not base64url");
  }
  std::string issuer = claims->getString("iss");
  Status checked = verifySignature(issuer, parts[0] + "." + parts[1], *signature);
  if (!checked.ok()) {
    return fail(ErrorKind::kInvalid, "JWT signature: " + checked.error().message);
  }
  if (const Json* exp = claims->find("exp"); exp != nullptr && exp->isInt() && exp->asInt() <= unixSeconds(now)) {
    return fail(ErrorKind::kInvalid,
                "JWT \"" + claims->getString("name") + "\" expired at Unix time " + std::to_string(exp->asInt()));
  }
  verified.header = std::move(header).value();
  verified.claims = std::move(claims).value();
  return verified;
}

std::string credsFile(std::string_view user_jwt, const KeyPair& user_key) {
  std::string text;
  text += "-----BEGIN NATS USER JWT-----\n";
  text += user_jwt;
  text += "\n------END NATS USER JWT------\n\n";
  text += "************************* IMPORTANT *************************\n";
  text += "NKEY Seed printed below can be used to sign and prove identity.\n";
  text += "NKEYs are sensitive and should be treated as secrets.\n\n";
  text += "-----BEGIN USER NKEY SEED-----\n";
  text += user_key.seed();
  text += "\n------END USER NKEY SEED------\n\n";
  text += "*************************************************************\n";
  return text;
}

Result<Creds> parseCredsFile(std::string_view text) {
  std::vector<std::string> blocks;
  auto lines = split(text, '\n');
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::string line = trim(lines[i]);
    if (startsWith(line, "---") && line.find("BEGIN") != std::string::npos) {
      blocks.push_back(trim(lines[i + 1]));
    }
  }
  if (blocks.size() < 2 || blocks[0].empty() || blocks[1].empty()) {
    return fail(ErrorKind::kInvalid,
                "a .creds file holds a \"BEGIN NATS USER JWT\" and a \"BEGIN USER NKEY SEED\" "
                "block; found " +
                    std::to_string(blocks.size()));
  }
  return Creds{.jwt = blocks[0], .seed = blocks[1]};
}

namespace {
constexpr std::string_view kRoleTag = "flotilla-role:";
constexpr std::string_view kSubjectTag = "flotilla-subject:";
}  // namespace

std::vector<std::string> identityTags(std::string_view role, std::string_view subject) {
  std::vector<std::string> tags = {std::string(kRoleTag) + std::string(role)};
  if (!subject.empty()) {
    tags.push_back(std::string(kSubjectTag) + std::string(subject));
  }
  return tags;
}

Result<CredsIdentity> credsIdentity(std::string_view creds_text, Clock::time_point now) {
  auto creds = parseCredsFile(creds_text);
  FLOTILLA_TRY(creds);
  auto verified = verifyJwt(creds->jwt, now);
  FLOTILLA_TRY(verified);
  CredsIdentity identity;
  const Json* tags = verified->claims.at({"nats", "tags"});
  if (tags != nullptr && tags->isArray()) {
    for (const auto& tag : tags->asArray()) {
      std::string text = tag.isString() ? tag.asString() : std::string();
      if (startsWith(text, kRoleTag)) {
        identity.role = text.substr(kRoleTag.size());
      } else if (startsWith(text, kSubjectTag)) {
        identity.subject = text.substr(kSubjectTag.size());
      }
    }
  }
  if (identity.role.empty()) {
    return fail(ErrorKind::kInvalid, "the credentials' user \"" + verified->claims.getString("name") +
                                         "\" carries no Flotilla role (issue them with flotilla auth issue)");
  }
  return identity;
}

}  // namespace flotilla::identity
