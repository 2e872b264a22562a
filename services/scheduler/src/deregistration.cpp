// Deregistration (docs/pipeline.md "Deletes that cascade"): `flotilla delete cluster` writes the tombstone
// clusters/deregistered.<cluster>. While it exists:
//   - a registration under that name is refused (registration.cpp asks deregisteredRefusal);
//   - placement leaves the cluster's deployments alone (reconcile.cpp asks deregistering());
//   - if the agent is connected (a sign of life within 3 heartbeat intervals), each deployment that released
//     something gets a delete DeployEvent (keepResources from the tombstone), and its record and bd status are
//     removed when the agent's report answering that delete arrives (status_handler.cpp asks
//     deregistrationReport first); a deployment that released nothing, or every deployment of a disconnected agent
//     (also one that stops answering half-way), is removed at once;
//   - when no deployment is left, the cluster's summary, registration record and heartbeat go.
// Every step is idempotent and re-derived from KV after a restart: the delete's generation comes from the
// tombstone's time, so a delete sent again has the same Nats-Msg-Id (a duplicate inside JetStream's window, an
// already-handled delete for the agent after it). Removing the tombstone half-way (`flotilla apply` of the Cluster)
// withdraws the deregistration: the deployments already told to delete lose their records, so placement deploys
// them again.
#include <algorithm>
#include <vector>

#include "flotilla/core/clock.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/enrollment.h"
#include "flotilla/scheduler/scheduler.h"
#include "invalid_record.h"

namespace flotilla::scheduler {

namespace {

constexpr auto kCheckEvery = std::chrono::seconds(1);

int64_t tombstoneMillis(const events::ClusterDeregistration& tombstone) {
  auto at = parseRfc3339(tombstone.time);
  return at ? epochMillis(*at) : 0;
}

}  // namespace

// ---- the tombstone ----

void Scheduler::handleDeregisteredEntry(const bus::KvEntry& entry) {
  auto read = readClustersEntry<events::ClusterDeregistration>(
      metrics_, entry, "deregistered", 1,
      [](const bus::KvEntry& put) { return events::parseRecord<events::ClusterDeregistration>(put.value); });
  if (!read) {
    return;
  }
  const std::string& name = read->names[0];
  std::optional<events::ClusterDeregistration>& tombstone = read->value;
  if (tombstone) {
    tombstone->cluster = name;  // the key is authoritative for identity
  }
  bool withdrawn = false;
  {
    std::lock_guard lock(mutex_);
    if (!tombstone) {
      withdrawn = deregistrations_.contains(name);
      if (withdrawn && loaded_) {
        withdrawDeregistration(name);
      }
      deregistrations_.erase(name);
      deregistering_.erase(name);
    } else {
      const bool first = !deregistrations_.contains(name);
      deregistrations_[name] = *tombstone;
      deregistering_.insert(name);
      if (first && loaded_) {
        log::info("deregistering a cluster", {{"cluster", name},
                                              {"keepResources", tombstone->keep_resources},
                                              {"agent_connected", agentConnected(name)}});
        metrics_.counter("deregistrations_total", "Cluster deregistrations", {{"result", "started"}}).Increment();
        if (auto advanced = advanceDeregistration(name); !advanced.ok()) {
          log::warn("deregistration step failed; retrying",
                    {{"cluster", name}, {"error", advanced.error().describe()}});
        }
      }
    }
  }
  if (withdrawn) {
    enqueueReconcile(name);  // the cluster is placed again like a registration
  }
}

Result<std::string> Scheduler::deregisteredRefusal(const std::string& cluster) {
  // KV, not memory: a tombstone written just now may not have reached the watcher yet.
  auto tombstone = hub_.clusters->find(events::clusterDeregisteredKey(cluster));
  FLOTILLA_TRY(tombstone);
  if (!*tombstone) {
    return std::string();
  }
  auto record = events::parseRecord<events::ClusterDeregistration>((*tombstone)->value);
  return "cluster \"" + cluster + "\" was deregistered on the hub" + (record.ok() ? " at " + record->time : "") +
         " (flotilla delete cluster); it may register again once a Cluster document for it is applied";
}

bool Scheduler::deregistering(const std::string& cluster) const {
  return deregistrations_.contains(cluster);
}

bool Scheduler::agentConnected(const std::string& cluster) const {
  auto last = lastSignOfLife(cluster);
  return last && systemClock().now() - *last <= offlineAfter();
}

// ---- moving a deregistration on ----

void Scheduler::checkDeregistrations() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (!loaded_ || deregistering_.empty() || now < next_deregistration_check_) {
    return;
  }
  next_deregistration_check_ = now + kCheckEvery;
  const std::vector<std::string> pending(deregistering_.begin(), deregistering_.end());
  for (const auto& cluster : pending) {
    if (auto advanced = advanceDeregistration(cluster); !advanced.ok()) {
      metrics_.counter("deregistration_failures_total", "Deregistration steps that failed and are retried").Increment();
      log::warn("deregistration step failed; retrying", {{"cluster", cluster}, {"error", advanced.error().describe()}});
    }
  }
}

Status Scheduler::advanceDeregistration(const std::string& cluster) {
  const events::ClusterDeregistration& tombstone = deregistrations_.at(cluster);
  std::vector<std::string> keys;
  for (const auto& view : deploymentsOfCluster(cluster)) {
    keys.push_back(events::deploymentKey(view.record->cluster, view.record->workspace, view.record->bundle));
  }
  const bool connected = agentConnected(cluster);
  Affected affected;
  Status step;
  for (const auto& key : keys) {
    const DeploymentRecord& record = deployments_.at(key);
    if (connected && !record.deployment_id.empty()) {
      if (!deregistration_deletes_.contains(key)) {
        step = sendDeregistrationDelete(record, tombstone);
      }
    } else {
      // Nothing released there (paused from the start), or nobody left to answer: the records go now.
      metrics_
          .counter("deregistration_records_removed_total", "Deployments of deregistered clusters whose records went",
                   {{"reason", connected ? "nothing-released" : "agent-disconnected"}})
          .Increment();
      step = dropDeployment(key, affected);
    }
    if (!step.ok()) {
      break;
    }
  }
  if (!connected && !keys.empty()) {
    log::info(
        "removing a deregistered cluster's records without its agent (no sign of life within 3 heartbeat "
        "intervals); its objects stay where they are",
        {{"cluster", cluster}, {"deployments", static_cast<int64_t>(keys.size())}});
  }
  FLOTILLA_TRY(writeSummaries(affected));
  FLOTILLA_TRY(step);
  if (!clusterHasRecords(cluster)) {
    return finishDeregistration(cluster);
  }
  return {};
}

Status Scheduler::sendDeregistrationDelete(const DeploymentRecord& record,
                                           const events::ClusterDeregistration& tombstone) {
  // The tombstone's time, not now: a delete sent again after a restart gets the same generation and Msg-Id.
  const int64_t generation = nextGeneration(record.generation, tombstoneMillis(tombstone));
  Json options = record.options.isObject() ? record.options : Json::object();
  if (tombstone.keep_resources) {
    options["keepResources"] = true;  // otherwise the bundle's own keepResources decides
  }
  events::DeployEvent event{.id = deployMsgId(record.cluster, record.bundle, "", generation),
                            .time = log::nowRfc3339(),
                            .cluster = record.cluster,
                            .workspace = record.workspace,
                            .bundle = record.bundle,
                            .remove = true,
                            .options = std::move(options),
                            .commit = record.commit,
                            .generation = generation,
                            .gitrepo = record.gitrepo};
  FLOTILLA_TRY(publishDeploy(event));
  deregistration_deletes_[events::deploymentKey(record.cluster, record.workspace, record.bundle)] = generation;
  metrics_.counter("deregistration_deletes_total", "Delete DeployEvents sent to deregistered clusters").Increment();
  log::info("deployment deleted: cluster deregistered", {{"cluster", record.cluster},
                                                         {"bundle", record.bundle},
                                                         {"gitrepo", record.gitrepo},
                                                         {"generation", generation},
                                                         {"keepResources", tombstone.keep_resources}});
  return {};
}

Status Scheduler::dropDeployment(const std::string& key, Affected& affected) {
  const DeploymentRecord record = deployments_.at(key);
  FLOTILLA_TRY(forgetDeployment(record.cluster, record.workspace, record.bundle));
  deregistration_deletes_.erase(key);
  affected.add(record.workspace, record.bundle, record.gitrepo, record.cluster);
  updateGauges();
  return {};
}

Status Scheduler::finishDeregistration(const std::string& cluster) {
  if (!options_.partition.ownsCluster(cluster)) {
    // This partition's records of the cluster are gone; the cluster's partition finishes once every partition's
    // are (it reads them through its watches) and removes the registration, which the clusters watch brings here.
    deregistering_.erase(cluster);
    return {};
  }
  // The agent's durable goes with the cluster (its deletes were answered or the agent is gone); also when the
  // records were removed before (a crash between the two), so none is left behind.
  FLOTILLA_TRY(deleteAgentConsumer(cluster));
  // Credentials a registration token gave it are revoked: nothing renews them any more, and their keys stay with
  // the tombstone for `flotilla auth revoke` (enrollment.h). Before the registration record goes: the CLI takes
  // "no registration and no enrollment record" as the end of the deregistration.
  FLOTILLA_TRY(retireEnrollment(*hub_.clusters, cluster, metrics_));
  const bool known = registrations_.contains(cluster) || clusters_.contains(cluster) ||
                     summaries_.contains(events::clusterSummaryKey(cluster));
  if (!known) {
    // Finished before (a tombstone read again at start) or never registered: nothing to remove or announce.
    deregistering_.erase(cluster);
    return {};
  }
  if (registrations_.contains(cluster)) {
    FLOTILLA_TRY(hub_.clusters->remove(events::clusterKey(cluster)));
  }
  if (last_heartbeat_.contains(cluster)) {
    FLOTILLA_TRY(hub_.clusters->remove(events::heartbeatKey(cluster)));
  }
  const std::string workspace = clusters_.contains(cluster) ? clusters_.at(cluster).metadata.ns : std::string();
  registrations_.erase(cluster);
  clusters_.erase(cluster);
  last_heartbeat_.erase(cluster);
  offline_.erase(cluster);
  deregistering_.erase(cluster);
  updateGauges();
  Affected affected;
  affected.clusters.insert(cluster);  // no record and no deployment left: the summary is removed
  FLOTILLA_TRY(writeSummaries(affected));
  metrics_.counter("deregistrations_total", "Cluster deregistrations", {{"result", "completed"}}).Increment();
  log::info("cluster deregistered: its records are gone", {{"cluster", cluster}});
  const events::ClusterDeregistration& tombstone = deregistrations_.at(cluster);
  Json data = events::encode(tombstone);
  std::string id = events::clusterEventId(workspace, cluster, "deregistered", data);
  publishPublic(events::toCloudEvent(events::cloudEventType("cluster", "deregistered"), std::string(kEventSource),
                                     workspace + "/" + cluster, std::move(data), std::move(id)),
                "cluster", {workspace, cluster});
  return {};
}

void Scheduler::withdrawDeregistration(const std::string& cluster) {
  // Deployments already told to delete are (being) removed from the cluster: forget their records so placement
  // deploys them again; the others are placed as if nothing happened.
  Affected affected;
  std::vector<std::string> told;
  for (const auto& [key, generation] : deregistration_deletes_) {
    if (deployments_.contains(key) && deployments_.at(key).cluster == cluster) {
      told.push_back(key);
    }
  }
  for (const auto& key : told) {
    if (auto dropped = dropDeployment(key, affected); !dropped.ok()) {
      metrics_.counter("deregistration_failures_total", "Deregistration steps that failed and are retried").Increment();
      log::warn("cannot forget a deployment told to delete; it is re-sent when its bundle changes",
                {{"cluster", cluster}, {"key", key}, {"error", dropped.error().describe()}});
    }
  }
  if (auto written = writeSummaries(affected); !written.ok()) {
    log::warn("cannot write summaries", {{"cluster", cluster}, {"error", written.error().describe()}});
  }
  metrics_.counter("deregistrations_total", "Cluster deregistrations", {{"result", "withdrawn"}}).Increment();
  log::info("deregistration withdrawn: a Cluster document was applied",
            {{"cluster", cluster}, {"redeployed", static_cast<int64_t>(told.size())}});
}

// ---- the agent's answers ----

std::optional<Outcome> Scheduler::deregistrationReport(const StatusContext& context) {
  if (!deregistrations_.contains(context.cluster)) {
    return std::nullopt;
  }
  auto sent = deregistration_deletes_.find(context.key);
  if (sent == deregistration_deletes_.end() || context.event.generation < sent->second) {
    // About a deployment whose records are gone or that no delete was sent for yet: the cluster is leaving, so
    // the report changes nothing.
    countStatus("deregistering");
    return Outcome::ack("deregistering");
  }
  if (context.event.state == "ErrApplied") {
    log::warn("a deregistered cluster's agent could not delete everything; its records go anyway",
              {{"cluster", context.cluster}, {"bundle", context.bundle}, {"error", context.event.message}});
  }
  Affected affected;
  if (auto dropped = dropDeployment(context.key, affected); !dropped.ok()) {
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  countStatus("deregistered");
  if (auto written = writeSummaries(affected); !written.ok()) {
    log::warn("cannot write summaries yet", {{"cluster", context.cluster}, {"error", written.error().describe()}});
  }
  if (!clusterHasRecords(context.cluster)) {
    if (auto finished = finishDeregistration(context.cluster); !finished.ok()) {
      // The records of the deployment are gone; the periodic check finishes the cluster.
      log::warn("cannot finish a deregistration yet",
                {{"cluster", context.cluster}, {"error", finished.error().describe()}});
    }
  }
  return Outcome::ack("deregistered");
}

}  // namespace flotilla::scheduler
