#include "flotilla/identity/revocation.h"

#include <map>

#include "flotilla/core/json.h"
#include "flotilla/core/util.h"

namespace flotilla::identity {

namespace {

Result<KeyPair> readSeed(const std::string& dir, const char* file, KeyType type) {
  const std::string path = dir + "/" + file;
  auto seed = readFile(path);
  if (!seed.ok()) {
    return fail(ErrorKind::kNotFound, path + " is missing: the directory auth init created holds it");
  }
  auto key = KeyPair::fromSeed(trim(*seed));
  if (!key.ok()) {
    return fail(ErrorKind::kInvalid, path + ": " + key.error().message);
  }
  if (key->type() != type) {
    return fail(ErrorKind::kInvalid, path + ": not a " + std::string(keyTypeName(type)) + " seed");
  }
  return key;
}

int64_t unixSeconds(Clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::seconds>(time.time_since_epoch()).count();
}

}  // namespace

Result<std::string> credsUserKey(std::string_view creds_text) {
  auto creds = parseCredsFile(creds_text);
  FLOTILLA_TRY(creds);
  auto verified = verifyJwt(creds->jwt, Clock::time_point{});  // the signature, not the expiry
  FLOTILLA_TRY(verified);
  if (verified->type() != "user") {
    return fail(ErrorKind::kInvalid, "the credentials' JWT is not a user's (type \"" + verified->type() + "\")");
  }
  return verified->subject();
}

Result<RevokedAccount> revokeInAuthDir(const std::string& dir, const std::vector<std::string>& user_keys,
                                       Clock::time_point now) {
  auto operator_key = readSeed(dir, "operator.nk", KeyType::kOperator);
  FLOTILLA_TRY(operator_key);
  const std::string jwt_path = dir + "/account.jwt";
  auto old_jwt = readFile(jwt_path);
  if (!old_jwt.ok()) {
    return fail(ErrorKind::kNotFound, jwt_path + " is missing: run auth init --dir " + dir);
  }
  std::map<std::string, int64_t> revoke;
  for (const auto& key : user_keys) {
    revoke[key] = unixSeconds(now);
  }
  auto revised = reviseAccountRevocations(*operator_key, trim(*old_jwt), revoke, now);
  if (!revised.ok()) {
    return fail(ErrorKind::kInvalid, jwt_path + ": " + revised.error().message);
  }
  const std::string conf_path = dir + "/nats-auth.conf";
  if (auto conf = readFile(conf_path); conf.ok()) {
    std::string text = *conf;
    const std::string old = trim(*old_jwt);
    for (size_t at = text.find(old); at != std::string::npos; at = text.find(old, at + revised->size())) {
      text.replace(at, old.size(), *revised);
    }
    FLOTILLA_TRY(writeFile(conf_path, text, 0644));
  }
  FLOTILLA_TRY(writeFile(jwt_path, *revised + "\n", 0644));
  auto verified = verifyJwt(*revised, now);
  FLOTILLA_TRY(verified);
  return RevokedAccount{.account = verified->subject(), .jwt = *revised};
}

Result<IssuedUser> issueClaimsUpdater(const std::string& dir, std::chrono::seconds ttl, Clock::time_point now) {
  auto system_key = readSeed(dir, "system-account.nk", KeyType::kAccount);
  FLOTILLA_TRY(system_key);
  auto user = generateClientUserKey();
  FLOTILLA_TRY(user);
  UserClaims claims{
      .base = {.name = "claims-updater", .issued_at = now, .expires = now + ttl},
      .permissions = {.publish_allow = {std::string(kClaimsUpdateSubject)}, .subscribe_allow = {"_INBOX.>"}}};
  auto jwt = issueUserJwt(*system_key, user->publicKey(), claims);
  FLOTILLA_TRY(jwt);
  return IssuedUser{.jwt = *jwt, .public_key = user->publicKey(), .creds = credsFile(*jwt, *user)};
}

Status checkClaimsUpdateReply(std::string_view reply) {
  auto json = Json::parse(reply);
  if (!json.ok()) {
    return fail(ErrorKind::kPermanent, "the server's answer is not JSON: " + std::string(reply));
  }
  if (const Json* data = json->find("data"); data != nullptr && data->getInt("code") == 200) {
    return {};
  }
  const Json* error = json->find("error");
  std::string description = error != nullptr ? error->getString("description") : std::string();
  return fail(ErrorKind::kPermanent,
              "the server refused the account JWT: " + (description.empty() ? std::string(reply) : description));
}

}  // namespace flotilla::identity
