// The registrar (enrollment.h, docs/pipeline.md "Registration tokens").
#include "flotilla/scheduler/enrollment.h"

#include <algorithm>

#include "flotilla/core/codec.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"
#include "invalid_record.h"

namespace flotilla::scheduler {

namespace {

using identity::Clock;
using identity::CredentialsReply;

constexpr std::string_view kRegistrationPrefix = "flotilla.registration";
constexpr std::string_view kQueue = "scheduler";

constexpr auto kRecordFields = [](auto& v, auto& s) {
  v.str("cluster", s.cluster, true);
  v.str("token", s.token, true);
  v.str("key", s.key, true);
  v.str("previousKey", s.previous_key);
  v.str("issued", s.issued);
  v.str("expires", s.expires, true);
};

bool expiredAt(const EnrollmentRecord& record, Clock::time_point now) {
  auto expires = parseRfc3339(record.expires);
  return !expires || *expires <= now;
}

Result<identity::KeyPair> readSigningKey(const std::string& path) {
  auto seed = readFile(path);
  if (!seed.ok()) {
    return fail(ErrorKind::kInvalid, "--registration-signing-key: " + seed.error().message);
  }
  auto key = identity::KeyPair::fromSeed(trim(*seed));
  if (!key.ok() || key->type() != identity::KeyType::kAccount) {
    return fail(ErrorKind::kInvalid, "--registration-signing-key " + path +
                                         ": not an account signing key seed (SA...)" +
                                         (key.ok() ? "" : ": " + key.error().message));
  }
  return key;
}

}  // namespace

std::string enrollmentKey(std::string_view cluster) {
  return events::clusterEnrollmentKey(cluster);
}

Json encode(const EnrollmentRecord& record) {
  codec::Writer out;
  kRecordFields(out, record);
  return out.take();
}

Result<EnrollmentRecord> parseEnrollmentRecord(std::string_view data) {
  auto json = Json::parse(data);
  FLOTILLA_TRY(json);
  return codec::decode<EnrollmentRecord>(*json, "", kRecordFields, "enrollment record");
}

namespace {

//! Adds `record`'s keys to the tombstone of its cluster, if there is one (compare-and-set on the revision read).
Status keepKeysInTombstone(bus::KeyValue& clusters, const EnrollmentRecord& record, Metrics& metrics) {
  const std::string key = events::clusterDeregisteredKey(record.cluster);
  auto entry = clusters.find(key);
  FLOTILLA_TRY(entry);
  if (!*entry) {
    return {};  // withdrawn: nothing to revoke later
  }
  auto tombstone = events::parseRecord<events::ClusterDeregistration>((*entry)->value);
  if (!tombstone.ok()) {
    countInvalidRecord(metrics, events::kClustersBucket, key, tombstone.error());
    return {};
  }
  const size_t before = tombstone->credential_keys.size();
  for (const std::string& user : {record.key, record.previous_key}) {
    if (!user.empty() && std::find(tombstone->credential_keys.begin(), tombstone->credential_keys.end(), user) ==
                             tombstone->credential_keys.end()) {
      tombstone->credential_keys.push_back(user);
    }
  }
  if (tombstone->credential_keys.size() == before) {
    return {};
  }
  FLOTILLA_TRY(clusters.update(key, events::encode(*tombstone).dump(), (*entry)->revision));
  log::info("kept the keys of the credentials the registrar gave a deregistered cluster with its tombstone",
            {{"cluster", record.cluster}, {"keys", static_cast<int64_t>(tombstone->credential_keys.size())}});
  return {};
}

}  // namespace

Status retireEnrollment(bus::KeyValue& clusters, const std::string& cluster, Metrics& metrics) {
  const std::string key = enrollmentKey(cluster);
  auto entry = clusters.find(key);
  FLOTILLA_TRY(entry);
  if (!*entry) {
    return {};
  }
  auto record = parseEnrollmentRecord((*entry)->value);
  if (record.ok()) {
    record->cluster = cluster;  // the key is authoritative
    FLOTILLA_TRY(keepKeysInTombstone(clusters, *record, metrics));
  } else {
    countInvalidRecord(metrics, events::kClustersBucket, key, record.error());
  }
  return clusters.remove(key);
}

std::map<std::string, std::string> registrarFlags() {
  return {
      {"registration-signing-key",
       "account signing key seed (auth init's registrar-signing.nk) with which the scheduler gives agents holding a "
       "registration token credentials of their own (default: no registrar)"},
      {"registration-account",
       "the JWT file of the account those credentials belong to (auth init's account.jwt), which must list the key "
       "among its signing keys; required with --registration-signing-key"},
      {"agent-creds-ttl",
       "lifetime of the agent credentials the registrar signs (default 720h; agents renew them "
       "after two thirds of it)"},
  };
}

Result<std::optional<RegistrarOptions>> registrarOptionsFrom(const service::Config& config) {
  const std::string key_path = config.get("registration-signing-key");
  const std::string account = config.get("registration-account");
  const std::string ttl = config.get("agent-creds-ttl");
  if (key_path.empty()) {
    if (!account.empty() || !ttl.empty()) {
      return fail(ErrorKind::kInvalid, std::string(account.empty() ? "--agent-creds-ttl" : "--registration-account") +
                                           " needs --registration-signing-key");
    }
    return std::optional<RegistrarOptions>();
  }
  if (account.empty()) {
    return fail(ErrorKind::kInvalid, "--registration-signing-key needs --registration-account");
  }
  auto key = readSigningKey(key_path);
  FLOTILLA_TRY(key);
  auto account_jwt = readFile(account);
  if (!account_jwt.ok()) {
    return fail(ErrorKind::kInvalid, "--registration-account: " + account_jwt.error().message);
  }
  auto signer = identity::agentSignerFor(*key, *account_jwt);
  if (!signer.ok()) {
    return fail(ErrorKind::kInvalid, "--registration-account " + account + ": " + signer.error().message);
  }
  RegistrarOptions options{.signer = *signer};
  if (!ttl.empty()) {
    auto parsed = model::parseDuration(ttl);
    if (!parsed.ok() || *parsed < std::chrono::seconds(3)) {
      return fail(ErrorKind::kInvalid,
                  "--agent-creds-ttl \"" + ttl + "\": expected a duration of at least 3s such as 720h or 90m");
    }
    options.creds_ttl = std::chrono::duration_cast<std::chrono::seconds>(*parsed);
  }
  return std::optional<RegistrarOptions>(std::move(options));
}

Registrar::Registrar(std::shared_ptr<bus::Connection> connection, std::shared_ptr<bus::KeyValue> clusters,
                     Metrics& metrics, RegistrarOptions options)
    : connection_(std::move(connection)),
      clusters_(std::move(clusters)),
      metrics_(metrics),
      options_(std::move(options)) {}

Registrar::~Registrar() {
  stop();
}

Status Registrar::start() {
  auto answer = [this](const bus::Message& message, bool enroll) {
    CredentialsReply reply =
        enroll ? answerEnroll(message.subject(), message.data()) : answerRenew(message.subject(), message.data());
    if (message.reply().empty()) {
      return;
    }
    if (auto sent = connection_->publish(message.reply(), identity::encode(reply).dump()); !sent.ok()) {
      log::warn("cannot answer a credentials request", {{"error", sent.error().describe()}});
    }
  };
  auto enroll = connection_->subscribe(identity::kRegistrationFilter, kQueue,
                                       [answer](bus::Message message) { answer(message, true); });
  FLOTILLA_TRY(enroll);
  auto renew = connection_->subscribe(identity::kRenewFilter, kQueue,
                                      [answer](bus::Message message) { answer(message, false); });
  FLOTILLA_TRY(renew);
  enroll_subscription_ = std::move(enroll).value();
  renew_subscription_ = std::move(renew).value();
  FLOTILLA_TRY(connection_->flush());
  subscribed_ = true;
  log::info("registrar answering registration tokens",
            {{"account", options_.signer.account},
             {"signing_key", options_.signer.key.publicKey()},
             {"scoped", options_.signer.scoped},
             {"creds_ttl_seconds", static_cast<int64_t>(options_.creds_ttl.count())}});
  return {};
}

void Registrar::stop() {
  subscribed_ = false;
  enroll_subscription_.unsubscribe();
  renew_subscription_.unsubscribe();
}

bool Registrar::ready(std::string& why) const {
  return service::readyWhen(why, {{subscribed_, "registrar not subscribed"}});
}

CredentialsReply Registrar::refuse(std::string_view request, std::string_view reason, const std::string& message,
                                   const std::string& cluster) {
  metrics_
      .counter("enrollments_total", "Credentials requests of registration tokens and agents by result",
               {{"request", std::string(request)}, {"result", std::string(reason)}})
      .Increment();
  log::warn(std::string("credentials request refused (") + std::string(request) + ")",
            {{"cluster", cluster}, {"reason", std::string(reason)}, {"error", message}});
  return CredentialsReply{.accepted = false, .reason = std::string(reason), .message = message};
}

Result<std::optional<std::pair<EnrollmentRecord, uint64_t>>> Registrar::readRecord(const std::string& cluster) {
  using Found = std::optional<std::pair<EnrollmentRecord, uint64_t>>;
  auto entry = clusters_->find(enrollmentKey(cluster));
  FLOTILLA_TRY(entry);
  if (!*entry) {
    return Found();
  }
  auto record = parseEnrollmentRecord((*entry)->value);
  if (!record.ok()) {
    // Written by someone else than the registrar: nobody can renew with it; an enrollment replaces it.
    log::warn("unreadable enrollment record; treated as absent",
              {{"cluster", cluster}, {"error", record.error().describe()}});
    return Found(std::pair{EnrollmentRecord{.cluster = cluster}, (*entry)->revision});
  }
  return Found(std::pair{*record, (*entry)->revision});
}

Result<std::pair<std::string_view, std::string>> Registrar::enrollRefusal(const std::string& cluster,
                                                                          const std::string& token,
                                                                          const std::optional<EnrollmentRecord>& record,
                                                                          Clock::time_point now) {
  using Refusal = std::pair<std::string_view, std::string>;
  // Refused for `reason` with `message` when `key` is in the clusters bucket; else no refusal (an empty one).
  auto refusedIfPresent = [&](const std::string& key, std::string_view reason,
                              const std::string& message) -> Result<Refusal> {
    auto entry = clusters_->find(key);
    FLOTILLA_TRY(entry);
    return *entry ? Refusal{reason, message} : Refusal{};
  };
  auto deregistered = refusedIfPresent(
      events::clusterDeregisteredKey(cluster), identity::kRefusedDeregistered,
      "cluster \"" + cluster +
          "\" was deregistered on the hub (flotilla delete cluster); a token may enroll it again once a Cluster "
          "document for it is applied");
  if (!deregistered.ok() || !deregistered->first.empty()) {
    return deregistered;
  }
  if (record && !record->token.empty()) {
    if (record->token != token && !expiredAt(*record, now)) {
      return Refusal{identity::kRefusedTaken, "cluster \"" + cluster +
                                                  "\" is enrolled by another registration token; its credentials "
                                                  "expire at " +
                                                  record->expires + " (or delete the cluster first)"};
    }
    return Refusal{};
  }
  return refusedIfPresent(events::clusterKey(cluster), identity::kRefusedTaken,
                          "cluster \"" + cluster +
                              "\" is registered with credentials not given by a registration token; a token cannot "
                              "take its name over (delete the cluster first)");
}

CredentialsReply Registrar::answerEnroll(std::string_view subject, std::string_view data, Clock::time_point now) {
  constexpr std::string_view kRequest = "enroll";
  auto tokens = events::subjectTokens(subject, kRegistrationPrefix);
  if (!tokens.ok() || tokens->size() != 1) {
    return refuse(kRequest, identity::kRefusedInvalid, "expected flotilla.registration.<token>", "");
  }
  const std::string& token = tokens->front();
  auto request = identity::parseEnrollRequest(data);
  if (!request.ok()) {
    return refuse(kRequest, identity::kRefusedInvalid, request.error().describe(), "");
  }
  const std::string& cluster = request->cluster;
  if (!model::isDns1123Label(cluster)) {
    return refuse(kRequest, identity::kRefusedInvalid,
                  "enrollment request: cluster \"" + cluster +
                      "\" is not a DNS-1123 label (lower-case a-z, 0-9 and '-', at most 63 characters, alphanumeric "
                      "at both ends)",
                  cluster);
  }
  auto existing = readRecord(cluster);
  if (!existing.ok()) {
    return refuse(kRequest, identity::kRefusedUnavailable,
                  "the hub cannot read " + enrollmentKey(cluster) + ": " + existing.error().describe(), cluster);
  }
  std::optional<EnrollmentRecord> record;
  if (*existing) {
    record = (*existing)->first;
  }
  auto refusal = enrollRefusal(cluster, token, record, now);
  if (!refusal.ok()) {
    return refuse(kRequest, identity::kRefusedUnavailable,
                  "the hub cannot check the cluster's registration right now: " + refusal.error().describe(), cluster);
  }
  if (!refusal->first.empty()) {
    return refuse(kRequest, refusal->first, refusal->second, cluster);
  }
  EnrollmentRecord next{.cluster = cluster, .token = token, .key = request->public_key};
  auto issued = issue(std::move(next), *existing ? (*existing)->second : 0, now);
  if (!issued.ok()) {
    return refuse(kRequest, identity::kRefusedUnavailable, "cannot issue credentials: " + issued.error().describe(),
                  cluster);
  }
  log::info("agent enrolled with a registration token",
            {{"cluster", cluster}, {"token", token}, {"expires", issued->expires}});
  return *issued;
}

Result<CredentialsReply> Registrar::issue(EnrollmentRecord record, uint64_t revision, Clock::time_point now) {
  auto jwt = identity::issueAgentJwt(options_.signer, record.cluster, record.key, options_.creds_ttl, now);
  FLOTILLA_TRY(jwt);
  record.issued = formatRfc3339(now);
  record.expires = formatRfc3339(now + options_.creds_ttl);
  const std::string value = encode(record).dump();
  auto stored = revision == 0 ? clusters_->create(enrollmentKey(record.cluster), value)
                              : clusters_->update(enrollmentKey(record.cluster), value, revision);
  FLOTILLA_TRY(stored);
  metrics_
      .counter("enrollments_total", "Credentials requests of registration tokens and agents by result",
               {{"request", record.previous_key.empty() ? "enroll" : "renew"}, {"result", "issued"}})
      .Increment();
  return CredentialsReply{.accepted = true, .message = "credentials issued", .jwt = *jwt, .expires = record.expires};
}

CredentialsReply Registrar::answerRenew(std::string_view subject, std::string_view data, Clock::time_point now) {
  constexpr std::string_view kRequest = "renew";
  auto tokens = events::subjectTokens(subject, events::kRegisterSubject);
  if (!tokens.ok() || tokens->size() != 2 || (*tokens)[1] != "renew") {
    return refuse(kRequest, identity::kRefusedInvalid, "expected flotilla.register.<cluster>.renew", "");
  }
  const std::string& cluster = tokens->front();
  auto request = identity::parseRenewRequest(data);
  if (!request.ok()) {
    return refuse(kRequest, identity::kRefusedInvalid, request.error().describe(), cluster);
  }
  return renew(cluster, *request, now);
}

CredentialsReply Registrar::renew(const std::string& cluster, const identity::RenewRequest& request,
                                  Clock::time_point now) {
  constexpr std::string_view kRequest = "renew";
  auto checked = identity::checkRenewal(request, cluster, options_.signer.key.publicKey(), now);
  if (!checked.ok()) {
    return refuse(kRequest,
                  checked.error().kind == ErrorKind::kPermanent ? identity::kRefusedUnknown : identity::kRefusedInvalid,
                  checked.error().message, cluster);
  }
  auto tombstone = clusters_->get(events::clusterDeregisteredKey(cluster));
  auto registered = clusters_->get(events::clusterKey(cluster));
  auto existing = readRecord(cluster);
  auto unreadable = [](const auto& result) { return !result.ok() && result.error().kind != ErrorKind::kNotFound; };
  if (unreadable(tombstone) || unreadable(registered) || !existing.ok()) {
    return refuse(kRequest, identity::kRefusedUnavailable, "the hub cannot read the cluster's records right now",
                  cluster);
  }
  if (tombstone.ok() && !registered.ok()) {
    // Its deregistration finished (or timed out): the credentials are revoked; they work until they expire.
    if (*existing) {
      if (auto retired = retireEnrollment(*clusters_, cluster, metrics_); !retired.ok()) {
        log::warn("cannot retire a deregistered cluster's enrollment record",
                  {{"cluster", cluster}, {"error", retired.error().describe()}});
      }
    }
    return refuse(kRequest, identity::kRefusedDeregistered,
                  "cluster \"" + cluster + "\" was deregistered on the hub; its credentials are not renewed", cluster);
  }
  if (!*existing ||
      ((*existing)->first.key != checked->current_key && (*existing)->first.previous_key != checked->current_key)) {
    return refuse(kRequest, identity::kRefusedRevoked,
                  *existing ? "these credentials were replaced by newer ones; only the latest are renewed"
                            : "cluster \"" + cluster + "\" has no enrollment (revoked); enroll again with a token",
                  cluster);
  }
  EnrollmentRecord next = (*existing)->first;
  next.previous_key = checked->current_key;
  next.key = request.public_key;
  auto issued = issue(std::move(next), (*existing)->second, now);
  if (!issued.ok()) {
    return refuse(kRequest, identity::kRefusedUnavailable, "cannot issue credentials: " + issued.error().describe(),
                  cluster);
  }
  log::info("agent credentials renewed", {{"cluster", cluster}, {"expires", issued->expires}});
  return *issued;
}

}  // namespace flotilla::scheduler
