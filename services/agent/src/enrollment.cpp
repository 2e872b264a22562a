// Registration tokens on the agent's side (enrollment.h, docs/pipeline.md "Registration tokens").
#include "flotilla/agent/enrollment.h"

#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/identity/enrollment.h"
#include "flotilla/identity/jwt.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/kube/client.h"
#include "flotilla/model/labels.h"
#include "flotilla/service/hub.h"

namespace flotilla::agent {

namespace {

using identity::Clock;

//! The stored credentials when they are `cluster`'s agent's and have not expired.
Result<std::string> usableStoredCreds(const std::string& path, const std::string& cluster) {
  auto text = readFile(path);
  FLOTILLA_TRY(text);
  auto owner = identity::credsIdentity(*text);
  FLOTILLA_TRY(owner);
  if (owner->role != "agent" || owner->subject != cluster) {
    return fail(ErrorKind::kInvalid, "--creds-store " + path + " holds the credentials of " + owner->role + " " +
                                         owner->subject + ", not of cluster " + cluster + "'s agent");
  }
  return text;
}

//! The credentials in a Secret's data.creds when they are `cluster`'s agent's and have not expired.
Result<std::string> usableSecretCreds(const Json& secret, const std::string& cluster) {
  const Json* data = secret.at({"data", "creds"});
  if (data == nullptr || !data->isString()) {
    return fail(ErrorKind::kInvalid, "the Secret has no data.creds");
  }
  auto text = base64Decode(data->asString());
  if (!text.ok()) {
    return fail(ErrorKind::kInvalid, "data.creds is not base64");
  }
  auto owner = identity::credsIdentity(*text);
  if (!owner.ok()) {
    return fail(ErrorKind::kInvalid, "data.creds: " + owner.error().message);
  }
  if (owner->role != "agent" || owner->subject != cluster) {
    return fail(ErrorKind::kInvalid, "data.creds are not the credentials of cluster " + cluster + "'s agent");
  }
  return text;
}

}  // namespace

std::map<std::string, std::string> enrollmentFlags() {
  return {
      {"registration-creds",
       "a registration token's credentials (flotilla auth issue --role registration): the agent asks the hub for "
       "credentials of its own with them, unless --creds-store holds usable ones; needs --creds-store and "
       "--cluster-name, not --nats-creds"},
      {"creds-store",
       "file where the agent keeps the credentials the hub gave it (mode 0600), renewed at two thirds of their "
       "lifetime"},
      {"creds-secret",
       "<namespace>/<name>: also keep those credentials in this Secret of the downstream cluster (key creds) and "
       "restore them from it when --creds-store has none, e.g. in a new pod (default: the file only)"},
  };
}

Result<std::optional<EnrollmentOptions>> enrollmentOptionsFrom(const service::Config& config) {
  EnrollmentOptions options{.registration_creds = config.get("registration-creds"),
                            .creds_store = config.get("creds-store"),
                            .cluster = config.get("cluster-name")};
  if (options.registration_creds.empty() && options.creds_store.empty()) {
    if (!config.get("creds-secret").empty()) {
      return fail(ErrorKind::kInvalid, "--creds-secret needs --registration-creds and --creds-store");
    }
    return std::optional<EnrollmentOptions>();
  }
  if (options.registration_creds.empty() || options.creds_store.empty()) {
    return fail(ErrorKind::kInvalid, options.creds_store.empty() ? "--registration-creds needs --creds-store"
                                                                 : "--creds-store needs --registration-creds");
  }
  if (!config.get("nats-creds").empty()) {
    return fail(ErrorKind::kInvalid,
                "--registration-creds and --nats-creds exclude each other (the agent connects with the credentials "
                "it is given, kept in --creds-store)");
  }
  if (options.cluster.empty()) {
    return fail(ErrorKind::kInvalid, "--registration-creds needs --cluster-name (the cluster to enroll as)");
  }
  if (auto role = identity::agentRole(options.cluster); !role.ok()) {
    return fail(ErrorKind::kInvalid, "--cluster-name: " + role.error().message);
  }
  if (std::string secret = config.get("creds-secret"); !secret.empty()) {
    auto slash = secret.find('/');
    options.secret_namespace = secret.substr(0, slash);
    options.secret_name = slash == std::string::npos ? std::string() : secret.substr(slash + 1);
    if (!model::isDns1123Label(options.secret_namespace) || !model::isDns1123Subdomain(options.secret_name)) {
      return fail(ErrorKind::kInvalid, "--creds-secret \"" + secret +
                                           "\": expected <namespace>/<name> (a namespace and a Secret name of "
                                           "the downstream cluster)");
    }
  }
  options.connect = service::connectOptionsFrom(config, "flotilla-agent-" + options.cluster + "-credentials");
  options.connect.max_reconnect = 0;
  return std::optional<EnrollmentOptions>(std::move(options));
}

CredentialsKeeper::CredentialsKeeper(EnrollmentOptions options, Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

CredentialsKeeper::~CredentialsKeeper() {
  stop();
}

std::string CredentialsKeeper::inboxPrefix() const {
  auto role = identity::agentRole(options_.cluster);
  return role.ok() ? role->inbox_prefix : std::string();
}

void CredentialsKeeper::count(std::string_view kind, std::string_view result) {
  metrics_
      .counter("credentials_requests_total", "Credentials the agent asked the hub for, by request and result",
               {{"request", std::string(kind)}, {"result", std::string(result)}})
      .Increment();
}

Result<CredentialsResult> CredentialsKeeper::request(std::string_view kind, const std::string& creds_file,
                                                     const std::string& inbox, const std::string& subject,
                                                     const std::string& body, const std::string& seed) {
  bus::ConnectOptions connect = options_.connect;
  connect.creds_file = creds_file;
  connect.inbox_prefix = inbox;
  auto connection = bus::Connection::connect(connect);
  if (!connection.ok()) {
    count(kind, "unreachable");
    return fail(connection.error().kind, "cannot reach the hub with " + creds_file + ": " + connection.error().message);
  }
  auto answer = (*connection)->request(subject, body, options_.request_timeout);
  if (!answer.ok()) {
    count(kind, "no-answer");
    return fail(ErrorKind::kTransient, "no answer on " + subject + ": " + answer.error().message);
  }
  auto reply = identity::parseCredentialsReply(answer->data());
  if (!reply.ok()) {
    count(kind, "invalid-reply");
    return fail(ErrorKind::kTransient, "unreadable answer on " + subject + ": " + reply.error().message);
  }
  if (!reply->accepted) {
    count(kind, reply->reason.empty() ? "refused" : reply->reason);
    return fail(ErrorKind::kPermanent, "the hub refused (" + reply->reason + "): " + reply->message);
  }
  auto key = identity::KeyPair::fromSeed(seed);
  FLOTILLA_TRY(key);
  if (auto written = identity::writeSecretFile(options_.creds_store, identity::credsFile(reply->jwt, *key));
      !written.ok()) {
    count(kind, "store-failed");
    return fail(ErrorKind::kTransient, "--creds-store: " + written.error().message);
  }
  count(kind, "issued");
  saveToSecret(identity::credsFile(reply->jwt, *key));
  log::info(kind == "enroll" ? "agent credentials received with the registration token" : "agent credentials renewed",
            {{"cluster", options_.cluster}, {"expires", reply->expires}, {"creds_store", options_.creds_store}});
  return CredentialsResult::kIssued;
}

Result<CredentialsResult> CredentialsKeeper::enrollOnce() {
  auto stored = usableStoredCreds(options_.creds_store, options_.cluster);
  if (stored.ok()) {
    log::info("using the stored agent credentials",
              {{"cluster", options_.cluster}, {"creds_store", options_.creds_store}});
    return CredentialsResult::kStored;
  }
  if (restoreFromSecret()) {
    return CredentialsResult::kStored;
  }
  auto token = readFile(options_.registration_creds);
  if (!token.ok()) {
    count("enroll", "token-unreadable");
    return fail(ErrorKind::kInvalid, "--registration-creds: " + token.error().message);
  }
  auto owner = identity::credsIdentity(*token);
  if (!owner.ok() || owner->role != "registration") {
    count("enroll", "token-invalid");
    return fail(ErrorKind::kInvalid, "--registration-creds " + options_.registration_creds + ": " +
                                         (owner.ok() ? "the credentials of role " + owner->role +
                                                           ", not a registration token (flotilla auth issue --role "
                                                           "registration)"
                                                     : owner.error().message));
  }
  auto key = identity::generateClientUserKey();
  FLOTILLA_TRY(key);
  auto role = identity::registrationRole(owner->subject);
  FLOTILLA_TRY(role);
  std::string body =
      identity::encode(identity::EnrollRequest{.cluster = options_.cluster, .public_key = key->publicKey()}).dump();
  auto result = request("enroll", options_.registration_creds, role->inbox_prefix,
                        identity::registrationRequestSubject(owner->subject), body, key->seed());
  if (!result.ok()) {
    return fail(result.error().kind,
                "--registration-creds " + options_.registration_creds + ": " + result.error().message);
  }
  return result;
}

Result<CredentialsResult> CredentialsKeeper::renewOnce() {
  auto stored = readFile(options_.creds_store);
  if (!stored.ok()) {
    count("renew", "store-unreadable");
    return fail(ErrorKind::kInvalid, "--creds-store: " + stored.error().message);
  }
  auto key = identity::generateClientUserKey();
  FLOTILLA_TRY(key);
  auto renewal = identity::renewRequest(*stored, *key);
  if (!renewal.ok()) {
    count("renew", "store-invalid");
    return fail(ErrorKind::kInvalid, "--creds-store " + options_.creds_store + ": " + renewal.error().message);
  }
  auto result = request("renew", options_.creds_store, inboxPrefix(), identity::agentRenewSubject(options_.cluster),
                        identity::encode(*renewal).dump(), key->seed());
  if (!result.ok()) {
    return fail(result.error().kind, "--creds-store " + options_.creds_store + ": " + result.error().message);
  }
  return result;
}

void CredentialsKeeper::countSecret(std::string_view step, std::string_view result) {
  metrics_
      .counter("creds_secret_total", "Reads and writes of the agent credentials' Secret (--creds-secret), by result",
               {{"step", std::string(step)}, {"result", std::string(result)}})
      .Increment();
}

bool CredentialsKeeper::restoreFromSecret() {
  if (!options_.kube || options_.secret_name.empty()) {
    return false;
  }
  const std::string where = options_.secret_namespace + "/" + options_.secret_name;
  auto secret = options_.kube->get("v1", "Secret", options_.secret_namespace, options_.secret_name);
  if (!secret.ok()) {
    if (secret.error().kind != ErrorKind::kNotFound) {
      countSecret("read", "error");
      log::warn("cannot read the credentials Secret; asking with the registration token",
                {{"cluster", options_.cluster}, {"secret", where}, {"error", secret.error().describe()}});
    }
    return false;
  }
  auto usable = usableSecretCreds(*secret, options_.cluster);
  Status written =
      usable.ok() ? identity::writeSecretFile(options_.creds_store, *usable) : Status(fail(usable.error()));
  if (!written.ok()) {
    countSecret("read", "unusable");
    log::warn("the credentials Secret holds no usable credentials; asking with the registration token",
              {{"cluster", options_.cluster}, {"secret", where}, {"error", written.error().message}});
    return false;
  }
  countSecret("read", "restored");
  log::info("agent credentials restored from the Secret", {{"cluster", options_.cluster}, {"secret", where}});
  return true;
}

void CredentialsKeeper::saveToSecret(const std::string& creds) {
  if (!options_.kube || options_.secret_name.empty()) {
    return;
  }
  Json secret =
      Json::obj({{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", Json::obj({{"name", options_.secret_name}, {"namespace", options_.secret_namespace}})},
                 {"type", "Opaque"},
                 {"data", Json::obj({{"creds", base64Encode(creds)}})}});
  auto applied = options_.kube->apply(secret, {.field_manager = "flotilla-agent-credentials", .force = true});
  if (!applied.ok()) {
    countSecret("write", "error");
    log::error("cannot write the credentials Secret; they are kept in --creds-store only",
               {{"cluster", options_.cluster},
                {"secret", options_.secret_namespace + "/" + options_.secret_name},
                {"error", applied.error().describe()}});
    return;
  }
  countSecret("write", "ok");
}

std::optional<std::chrono::system_clock::time_point> CredentialsKeeper::renewalDue() const {
  auto text = readFile(options_.creds_store);
  if (!text.ok()) {
    return std::nullopt;
  }
  auto lifetime = identity::credsLifetime(*text);
  if (!lifetime.ok() || !lifetime->expires) {
    return std::nullopt;
  }
  return lifetime->issued + (*lifetime->expires - lifetime->issued) * 2 / 3;
}

Status CredentialsKeeper::obtain(std::chrono::milliseconds deadline) {
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  std::chrono::milliseconds delay = options_.retry_base;
  while (!renewal_.stopping()) {
    auto result = enrollOnce();
    if (result.ok()) {
      return {};
    }
    if (std::chrono::steady_clock::now() + delay > give_up) {
      return fail(result.error());
    }
    log::error("cannot obtain agent credentials; retrying", {{"cluster", options_.cluster},
                                                             {"error", result.error().message},
                                                             {"retry_in_ms", static_cast<int64_t>(delay.count())}});
    if (!renewal_.sleepFor(delay)) {
      break;
    }
    delay = std::min(delay * 2, options_.retry_max);
  }
  return fail(ErrorKind::kTransient, "stopped before the agent had credentials");
}

void CredentialsKeeper::start() {
  renewal_.start([this] { renewLoop(); });
}

void CredentialsKeeper::stop() {
  renewal_.stop();
}

void CredentialsKeeper::renewLoop() {
  std::chrono::milliseconds delay = options_.retry_base;
  while (!renewal_.stopping()) {
    auto due = renewalDue();
    if (!due) {
      log::warn("stored agent credentials have no expiry or cannot be read; nothing to renew",
                {{"cluster", options_.cluster}, {"creds_store", options_.creds_store}});
      return;
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*due - Clock::now());
    if (wait.count() > 0) {
      renewal_.sleepFor(wait);
      continue;
    }
    auto renewed = renewOnce();
    if (renewed.ok()) {
      delay = options_.retry_base;
      continue;
    }
    log::error("cannot renew the agent credentials; retrying", {{"cluster", options_.cluster},
                                                                {"error", renewed.error().message},
                                                                {"retry_in_ms", static_cast<int64_t>(delay.count())}});
    renewal_.sleepFor(delay);
    delay = std::min(delay * 2, options_.retry_max);
  }
}

}  // namespace flotilla::agent
