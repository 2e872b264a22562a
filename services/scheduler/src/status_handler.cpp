// FLOTILLA_STATUS (durable "scheduler-status"): agent StatusEvents -> status/bd.* and the summaries; agent
// Heartbeats -> last heartbeat. A payload naming another cluster (or bundle) than its subject is rejected.
#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"
#include "times.h"

namespace flotilla::scheduler {

namespace {

//! Sets a flag for one handler's scope (defer_summaries_ while a status message with more behind it is handled).
class ScopedFlag {
 public:
  ScopedFlag(bool& flag, bool value) : flag_(flag) { flag_ = value; }
  ~ScopedFlag() { flag_ = false; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  bool& flag_;
};

}  // namespace

Outcome Scheduler::handleStatus(std::string_view subject, std::string_view data, uint64_t delivery_count,
                                uint64_t backlog) {
  auto reject = [&](const std::string& problem, const char* reason) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "status"}})
        .Increment();
    log::warn("dropping an invalid status message",
              {{"subject", std::string(subject)}, {"reason", reason}, {"error", problem}});
    return Outcome::reject("invalid");
  };
  auto tokens = events::subjectTokens(subject, "flotilla.status");
  if (!tokens.ok() || tokens->size() != 2) {
    return reject(tokens.ok() ? "expected flotilla.status.<cluster>.<bundle>" : tokens.error().describe(), "subject");
  }
  auto json = Json::parse(data);
  if (!json.ok()) {
    return reject(json.error().describe(), "json");
  }
  auto kind = events::payloadKind(*json);
  if (!kind.ok()) {
    return reject(kind.error().describe(), "kind");
  }
  if (*kind == events::Heartbeat::kKind) {
    return handleHeartbeat((*tokens)[0], *json, backlog);
  }
  if (*kind != events::StatusEvent::kKind) {
    return reject("unexpected payload kind " + *kind, "kind");
  }
  return handleStatusEvent((*tokens)[0], (*tokens)[1], *json, delivery_count, backlog);
}

Outcome Scheduler::handleHeartbeat(const std::string& cluster, const Json& json, uint64_t backlog) {
  auto heartbeat = events::decodePayload<events::Heartbeat>(json);
  if (!heartbeat.ok() || heartbeat->cluster != cluster) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "status"}})
        .Increment();
    log::warn("dropping an invalid heartbeat",
              {{"cluster", cluster},
               {"error", heartbeat.ok() ? "cluster " + heartbeat->cluster + " on another cluster's subject"
                                        : heartbeat.error().describe()}});
    return Outcome::reject("invalid");
  }
  std::lock_guard lock(mutex_);
  ScopedFlag defer(defer_summaries_, backlog > 0);
  // Every partition keeps the time (its rollouts count offline clusters); the cluster's partition answers for it.
  const bool own_cluster = options_.partition.ownsCluster(cluster);
  if (!clusters_.contains(cluster)) {
    if (own_cluster) {
      metrics_.counter("heartbeats_total", "Agent heartbeats handled", {{"result", "unregistered"}}).Increment();
      log::info("heartbeat from a cluster that is not registered", {{"cluster", cluster}});
      askToRegisterAgain(cluster);
    }
    return Outcome::ack("unregistered");
  }
  std::string at = heartbeat->time.empty() ? log::nowRfc3339() : heartbeat->time;
  std::string& last = last_heartbeat_[cluster];
  if (at > last) {
    last = at;
  }
  markAlive(cluster);  // a cluster coming back has its summary rewritten with the next ones
  Affected affected;
  if (heartbeatSummaryDue(cluster, last)) {
    affected.clusters.insert(cluster);
  }
  auto written = writeSummaries(affected);
  if (!written.ok()) {
    return Outcome::retry(options_.retry_base, "retry");
  }
  if (own_cluster) {
    metrics_.counter("heartbeats_total", "Agent heartbeats handled", {{"result", "recorded"}}).Increment();
  }
  return Outcome::ack("heartbeat");
}

bool Scheduler::heartbeatSummaryDue(const std::string& cluster, std::string_view heartbeat) const {
  auto cached = summaries_.find(events::clusterSummaryKey(cluster));
  if (cached == summaries_.end()) {
    return true;
  }
  auto written = parseRfc3339(cached->second.getString("lastHeartbeat"));
  const SystemTime at = parseRfc3339(heartbeat).value_or(systemClock().now());
  return !written || at - *written >= kHeartbeatRefresh;
}

const BdStatus* Scheduler::statusOf(const DeploymentRecord& record) const {
  auto it = statuses_.find(events::deploymentKey(record.cluster, record.workspace, record.bundle));
  return it == statuses_.end() ? nullptr : &it->second;
}

std::optional<Outcome> Scheduler::reportOvertaken(StatusContext& context, const DeploymentRecord& judged) {
  auto now = deployments_.find(context.key);
  if (now != deployments_.end() && now->second.deployment_id == judged.deployment_id &&
      now->second.generation == judged.generation && now->second.deleting == judged.deleting) {
    return std::nullopt;
  }
  metrics_
      .counter("status_reports_overtaken_total",
               "Status reports whose deployment changed while their record was written (handled again)")
      .Increment();
  if (now == deployments_.end()) {
    // Removed meanwhile (a delete settled, the bundle or cluster went): the record just written must not outlive it.
    if (!removeStatusRecord(context.cluster, context.workspace, context.bundle).ok()) {
      return Outcome::retry(backoff(context.delivery_count), "retry");
    }
    log::info("a status report's deployment was removed while its record was written; record removed",
              {{"cluster", context.cluster}, {"bundle", context.bundle}});
    return Outcome::ack("no-deployment");
  }
  // Another deployment was released meanwhile: the report is judged again against it.
  log::info("a status report's deployment changed while its record was written; handling it again",
            {{"cluster", context.cluster}, {"bundle", context.bundle}});
  return Outcome::retry(options_.retry_base, "overtaken");
}

void Scheduler::countStatus(const char* result) {
  metrics_.counter("status_events_total", "Status events handled, by result", {{"result", result}}).Increment();
}

Outcome Scheduler::handleStatusEvent(const std::string& cluster, const std::string& bundle_name, const Json& json,
                                     uint64_t delivery_count, uint64_t backlog) {
  auto decoded = events::decodePayload<events::StatusEvent>(json);
  if (!decoded.ok()) {
    return rejectStatusEvent(cluster, bundle_name, decoded.error().describe());
  }
  if (decoded->cluster != cluster || decoded->bundle != bundle_name) {
    // Agents may publish only under their own cluster's subjects; a payload naming another is not trusted.
    return rejectStatusEvent(cluster, bundle_name, "payload names " + decoded->cluster + "/" + decoded->bundle);
  }
  std::unique_lock lock(mutex_);
  ScopedFlag defer(defer_summaries_, backlog > 0);
  StatusContext context{.event = *decoded,
                        .cluster = cluster,
                        .bundle = bundle_name,
                        .workspace = workspaceOfReport(*decoded, cluster, bundle_name),
                        .delivery_count = delivery_count,
                        .lock = &lock,
                        .defer_summaries = backlog > 0};
  context.key = events::deploymentKey(cluster, context.workspace, bundle_name);
  if (!ownsReport(context.key, context.workspace, bundle_name)) {
    return Outcome::ack("other-partition");  // every partition reads every report; one judges it
  }
  if (auto handled = deregistrationReport(context)) {
    return *handled;
  }
  if (!clusters_.contains(cluster) && options_.partition.ownsCluster(cluster)) {
    // A report from an agent whose cluster record is gone (not deregistered): like its heartbeat, it asks the
    // agent to register again; the report itself is judged as usual.
    askToRegisterAgain(cluster);
  }
  auto record = deployments_.find(context.key);
  if (record == deployments_.end()) {
    return statusWithoutDeployment(context);
  }
  if (record->second.deleting && decoded->generation <= record->second.generation) {
    return settleDelete(context, record->second);
  }
  if (auto early = judgeReport(context, record->second)) {
    return *early;
  }
  return storeReport(context, record->second);
}

Outcome Scheduler::rejectStatusEvent(const std::string& cluster, const std::string& bundle,
                                     const std::string& problem) {
  metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "status"}})
      .Increment();
  log::warn("dropping an invalid status event", {{"cluster", cluster}, {"bundle", bundle}, {"error", problem}});
  return Outcome::reject("invalid");
}

std::string Scheduler::workspaceOfReport(const events::StatusEvent& event, const std::string& cluster,
                                         const std::string& bundle) const {
  if (!event.workspace.empty()) {
    return event.workspace;
  }
  for (const auto* records : {&deployments_, &other_deployments_}) {
    for (const auto& [key, record] : *records) {
      if (record.cluster == cluster && record.bundle == bundle) {
        return record.workspace;
      }
    }
  }
  return {};
}

Outcome Scheduler::statusWithoutDeployment(StatusContext& context) {
  // The deployment was removed (the agent confirms a delete, or reports on a bundle it still tracks).
  if (statuses_.contains(context.key)) {
    if (!removeStatusRecord(context.cluster, context.workspace, context.bundle).ok()) {
      return Outcome::retry(backoff(context.delivery_count), "retry");
    }
    Affected affected;
    affected.clusters.insert(context.cluster);
    affected.bundles.emplace(context.workspace, context.bundle);
    if (!writeSummaries(affected).ok()) {
      return Outcome::retry(backoff(context.delivery_count), "retry");
    }
  }
  countStatus("no-deployment");
  log::debug("status for a deployment that does not exist (removed)",
             {{"cluster", context.cluster}, {"bundle", context.bundle}, {"reason", context.event.reason}});
  return Outcome::ack("no-deployment");
}

std::optional<Outcome> Scheduler::judgeReport(StatusContext& context, const DeploymentRecord& record) {
  const events::StatusEvent& event = context.event;
  const BdStatus* stored = statusOf(record);
  context.stale = event.deployment_id != record.deployment_id;
  if (!context.stale) {
    if (stored != nullptr && !stored->stale && stored->deployment_id == event.deployment_id &&
        detail::olderThan(event.time, stored->reported)) {
      countStatus("older-dropped");
      return Outcome::ack("older");
    }
    return std::nullopt;
  }
  if (event.generation > record.generation && context.delivery_count < options_.ahead_retries) {
    // The agent answers a DeployEvent whose record is not written yet (in flight elsewhere, or lost in a
    // crash and about to be redone): wait for the record rather than call the report stale.
    countStatus("ahead");
    return Outcome::retry(std::max(options_.retry_base, std::chrono::milliseconds(200)), "ahead");
  }
  if (stored != nullptr && !stored->stale && stored->deployment_id == record.deployment_id) {
    countStatus("stale-dropped");
    log::info("dropping a status report about an older deployment", {{"cluster", context.cluster},
                                                                     {"bundle", context.bundle},
                                                                     {"reported", event.deployment_id},
                                                                     {"current", record.deployment_id}});
    return Outcome::ack("stale");
  }
  return std::nullopt;
}

Outcome Scheduler::settleDelete(StatusContext& context, const DeploymentRecord& record) {
  const events::StatusEvent& event = context.event;
  if (event.generation < record.generation) {
    countStatus("deleting-older");
    return Outcome::ack("older");  // about what ran before the delete
  }
  if (event.state == "ErrApplied") {
    // The agent could not remove everything (it keeps what is left in its inventory): the record stays, the error
    // shows in the summaries, and the delete is sent again after a backoff (delete_retry.cpp).
    countStatus("delete-failed");
    context.stale = false;
    // storeReport copies the record and releases mutex_: `record` is not used after it, the map is read again.
    Outcome stored = storeReport(context, record);
    if (auto still = deployments_.find(context.key); still != deployments_.end() && still->second.deleting) {
      scheduleDeleteRetry(context.key, still->second, event.reason + ": " + event.message);
    }
    return stored;
  }
  Affected affected;
  affected.clusters.insert(context.cluster);
  affected.bundles.emplace(context.workspace, context.bundle);
  if (!record.gitrepo.empty()) {
    affected.gitrepos.emplace(context.workspace, record.gitrepo);
  }
  const std::string gitrepo = record.gitrepo;  // the record goes now
  if (auto forgotten = forgetDeployment(context.cluster, context.workspace, context.bundle); !forgotten.ok()) {
    log::warn("cannot remove a deleted deployment's records yet, retrying",
              {{"cluster", context.cluster}, {"bundle", context.bundle}, {"error", forgotten.error().describe()}});
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  updateGauges();
  if (auto written = writeSummaries(affected); !written.ok()) {
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  countStatus("deleted");
  log::info("deployment deleted on the cluster; its records are removed", {{"cluster", context.cluster},
                                                                           {"bundle", context.bundle},
                                                                           {"gitrepo", gitrepo},
                                                                           {"reason", event.reason},
                                                                           {"message", event.message}});
  return Outcome::ack("deleted");
}

Outcome Scheduler::storeReport(StatusContext& context, DeploymentRecord record) {
  const events::StatusEvent& event = context.event;
  BdStatus next = events::bdStatusFrom(event);
  next.workspace = context.workspace;
  next.stale = context.stale;
  next.updated = log::nowRfc3339();
  auto key = events::bundleDeploymentStatusKey(context.cluster, context.workspace, context.bundle);
  const std::string encoded = events::encode(next).dump();
  // The write is a round trip to the server: mutex_ is let go for it, so the other status workers (reports of
  // other deployments; one deployment's reports are handled one at a time, in stream order) and the bundle
  // events go on. The flag goes back to its resting value while others hold the mutex.
  if (context.lock != nullptr) {
    defer_summaries_ = false;
    context.lock->unlock();
  }
  auto put = hub_.status->put(key, encoded);
  if (options_.after_status_write) {
    options_.after_status_write(context.cluster, context.bundle);
  }
  if (context.lock != nullptr) {
    context.lock->lock();
    defer_summaries_ = context.defer_summaries;
  }
  if (!put.ok()) {
    log::warn("cannot store a status report yet, retrying",
              {{"cluster", context.cluster}, {"bundle", context.bundle}, {"error", put.error().describe()}});
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  if (auto moved = reportOvertaken(context, record)) {
    return *moved;
  }
  stages_.observe(service::Stage::kStatusToRecorded, event.time);
  const BdStatus* stored = statusOf(record);
  bool changed = stored == nullptr || stored->state != next.state || stored->deployment_id != next.deployment_id ||
                 stored->stale != next.stale;
  statuses_[context.key] = next;
  if (changed) {
    // The report may make a partition healthy (or over its budget): the bundle's rollout looks again, with the
    // summaries (writeSummaries), so a burst of reports costs one pass, not one each.
    deferred_passes_.insert(events::bundleKey(context.workspace, context.bundle));
  }
  Affected affected;
  affected.clusters.insert(context.cluster);
  affected.bundles.emplace(context.workspace, context.bundle);
  if (!record.gitrepo.empty()) {
    affected.gitrepos.emplace(context.workspace, record.gitrepo);
  }
  if (auto written = writeSummaries(affected); !written.ok()) {
    log::warn("cannot write summaries yet, retrying",
              {{"cluster", context.cluster}, {"bundle", context.bundle}, {"error", written.error().describe()}});
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  countStatus(context.stale ? "stale-stored" : "stored");
  if (changed && !context.stale) {
    events::StatusEvent published = event;
    published.workspace = context.workspace;
    publishPublic(events::toCloudEvent(published, kEventSource), "bundledeployment", {context.cluster, context.bundle});
  }
  log::debug("status stored", {{"cluster", context.cluster},
                               {"bundle", context.bundle},
                               {"gitrepo", record.gitrepo},
                               {"state", event.state},
                               {"stale", context.stale}});
  return Outcome::ack(context.stale ? "stale-stored" : "stored");
}

}  // namespace flotilla::scheduler
