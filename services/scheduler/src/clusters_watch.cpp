// The clusters bucket: groups and Cluster documents (from `flotilla apply`), cluster records (registrations, from
// another replica or by hand), tombstones (deregistration.cpp) and agent heartbeats. The cluster placement sees is
// the registration overlaid by its document (model::effectiveCluster); a change that moves targeting or pausing
// queues a re-target.
#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"
#include "flotilla/scheduler/scheduler.h"
#include "invalid_record.h"
#include "times.h"

namespace flotilla::scheduler {

namespace {

//! For readClustersEntry: the value read as the JSON resource `decode` (model::decodeCluster and the like) reads.
template <typename T>
auto jsonResource(Result<T> (*decode)(const Json&, std::string_view)) {
  return [decode](const bus::KvEntry& entry) -> Result<T> {
    auto parsed = Json::parse(entry.value);
    if (!parsed.ok()) {
      return fail(parsed.error());
    }
    return decode(*parsed, entry.key);
  };
}

//! Whether placement sees a difference: workspace, labels (targeting) or paused (rollout).
bool placementDiffers(const model::Cluster& a, const model::Cluster& b) {
  return !(clusterInfoOf(a) == clusterInfoOf(b)) || a.spec.paused != b.spec.paused;
}

constexpr std::chrono::milliseconds kMinWatchWait{50};  //!< the watch loop's shortest wait

}  // namespace

void Scheduler::watchLoop() {
  std::chrono::milliseconds delay = options_.retry_base;
  while (!stopping_) {
    // Woken at least every summary_delay, so summaries put off (writeSummaries) are written about on time.
    auto entry = clusters_watcher_.next(
        std::max<std::chrono::milliseconds>(std::min(options_.fetch_timeout, options_.summary_delay), kMinWatchWait));
    if (!entry.ok()) {
      metrics_.counter("watch_errors_total", "Failures of the clusters bucket watcher").Increment();
      log::warn("clusters watcher failed, re-opening",
                {{"error", entry.error().describe()}, {"retry_in_ms", static_cast<int64_t>(delay.count())}});
      if (!sleepFor(delay)) {
        break;
      }
      delay = std::min(delay * 2, options_.retry_max);
      // Re-open: the initial values bring every change missed meanwhile; handleClustersEntry ignores repeats.
      auto reopened = hub_.clusters->watch(">");
      if (reopened.ok()) {
        clusters_watcher_ = std::move(reopened).value();
      }
      continue;
    }
    delay = options_.retry_base;
    if (*entry) {
      handleClustersEntry(**entry);
    }
    checkDeregistrations();
    retryDueDeletes();
    checkOffline(systemClock().now());
    flushSummaries();
  }
}

void Scheduler::handleClustersEntry(const bus::KvEntry& entry) {
  if (startsWith(entry.key, "group.")) {
    handleGroupEntry(entry);
  } else if (startsWith(entry.key, "cluster.")) {
    handleClusterEntry(entry);
  } else if (startsWith(entry.key, "spec.")) {
    handleClusterDocumentEntry(entry);
  } else if (startsWith(entry.key, "deregistered.")) {
    handleDeregisteredEntry(entry);
  } else if (startsWith(entry.key, "heartbeat.")) {
    handleHeartbeatEntry(entry);
  }
}

bool Scheduler::refreshCluster(const std::string& name) {
  auto registration = registrations_.find(name);
  auto current = clusters_.find(name);
  if (registration == registrations_.end()) {
    // A document alone makes no cluster: nothing is deployed before an agent registers under that name.
    if (current == clusters_.end()) {
      return false;
    }
    clusters_.erase(current);
    updateGauges();
    return true;
  }
  auto document = cluster_documents_.find(name);
  model::Cluster next =
      model::effectiveCluster(registration->second, document == cluster_documents_.end() ? nullptr : &document->second);
  bool changed = current == clusters_.end() || placementDiffers(current->second, next);
  clusters_[name] = std::move(next);
  updateGauges();
  return changed;
}

bool Scheduler::replaceClusterLayer(std::map<std::string, model::Cluster>& layer, const std::string& name,
                                    const std::optional<model::Cluster>& value) {
  std::lock_guard lock(mutex_);
  if (value) {
    layer[name] = *value;
  } else {
    layer.erase(name);
  }
  return refreshCluster(name) && loaded_;
}

void Scheduler::handleClusterDocumentEntry(const bus::KvEntry& entry) {
  // An unreadable document is a hand edit (`flotilla apply` checks documents): the one the scheduler had stays.
  auto read =
      readClustersEntry<model::Cluster>(metrics_, entry, "spec", 1, jsonResource(&model::decodeClusterDocument));
  if (!read) {
    return;
  }
  const std::string& name = read->names[0];
  std::optional<model::Cluster>& document = read->value;
  if (document) {
    document->metadata.name = name;  // the key is authoritative for identity
  }
  if (replaceClusterLayer(cluster_documents_, name, document)) {
    log::info(document ? "cluster document applied" : "cluster document removed",
              {{"cluster", name}, {"paused", document && document->spec.paused}});
    metrics_
        .counter("cluster_documents_total", "Cluster documents (hub labels, paused) that changed placement",
                 {{"change", document ? "applied" : "removed"}})
        .Increment();
    enqueueReconcile(name);
  }
}

void Scheduler::handleGroupEntry(const bus::KvEntry& entry) {
  auto read =
      readClustersEntry<model::ClusterGroup>(metrics_, entry, "group", 2, jsonResource(&model::decodeClusterGroup));
  if (!read) {
    return;
  }
  const std::vector<std::string>& names = read->names;
  const bool deleted = !read->value;
  std::optional<GroupInfo> group;
  if (!deleted) {
    group = groupInfoOf(*read->value);
    // The key is authoritative for identity.
    group->workspace = names[0];
    group->name = names[1];
  }
  bool changed = false;
  bool live = false;
  {
    std::lock_guard lock(mutex_);
    live = loaded_;
    auto it = groups_.find(entry.key);
    if (group) {
      changed = it == groups_.end() || !(it->second == *group);
      groups_[entry.key] = *group;
    } else if (it != groups_.end()) {
      groups_.erase(it);
      changed = true;
    }
  }
  if (changed && live) {
    log::info(deleted ? "cluster group removed" : "cluster group changed",
              {{"workspace", names[0]}, {"group", names[1]}});
    enqueueReconcile("");
  }
}

void Scheduler::handleClusterEntry(const bus::KvEntry& entry) {
  auto read = readClustersEntry<model::Cluster>(metrics_, entry, "cluster", 1, jsonResource(&model::decodeCluster));
  if (!read) {
    return;
  }
  const std::string& name = read->names[0];
  std::optional<model::Cluster>& cluster = read->value;
  if (cluster) {
    cluster->metadata.name = name;
    enforceAgentLabels(*cluster, entry.revision);
  }
  if (replaceClusterLayer(registrations_, name, cluster)) {
    // Written by another scheduler replica or by hand: re-target like a registration would.
    enqueueReconcile(name);
  }
}

void Scheduler::enforceAgentLabels(model::Cluster& cluster, uint64_t revision) {
  // Records written before status.agent.labels existed hold every reported label in metadata.labels.
  model::Labels reported = cluster.status.agent.labels.empty() ? cluster.metadata.labels : cluster.status.agent.labels;
  std::vector<std::string> left_out;
  model::Labels allowed = options_.agent_labels.filter(reported, left_out);
  if (allowed == cluster.metadata.labels && reported == cluster.status.agent.labels) {
    return;
  }
  cluster.metadata.labels = std::move(allowed);
  cluster.status.agent.labels = std::move(reported);
  // Optimistic: another replica or a new registration may have written it since; theirs is then the one to
  // check, and its watch entry comes next.
  auto updated =
      hub_.clusters->update(events::clusterKey(cluster.metadata.name), model::encode(cluster).dump(), revision);
  metrics_
      .counter("agent_labels_enforced_total",
               "Registration records rewritten because --agent-labels allows other keys than they held",
               {{"result", updated.ok() ? "rewritten" : "error"}})
      .Increment();
  if (updated.ok()) {
    log::info("registration record re-filtered by --agent-labels", {{"cluster", cluster.metadata.name},
                                                                    {"agent_labels", options_.agent_labels.describe()},
                                                                    {"left_out", join(left_out, ",")}});
  } else {
    log::warn("cannot rewrite a registration record for --agent-labels; targeting uses the filtered labels",
              {{"cluster", cluster.metadata.name}, {"error", updated.error().describe()}});
  }
}

void Scheduler::handleHeartbeatEntry(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "heartbeat", 1);
  if (!names.ok() || entry.operation != bus::KvOperation::kPut) {
    return;
  }
  const std::string& cluster = (*names)[0];
  // The value is the agent's Heartbeat payload; its time is what the agent says, the entry time what the
  // hub saw. Either is fine for "last seen"; prefer the payload's.
  std::string at = formatRfc3339(entry.created);
  auto heartbeat = events::parsePayload<events::Heartbeat>(entry.value);
  if (heartbeat.ok() && !heartbeat->time.empty()) {
    at = heartbeat->time;
  }
  std::lock_guard lock(mutex_);
  std::string& last = last_heartbeat_[cluster];
  if (at <= last) {
    return;
  }
  last = at;
  if (!loaded_ || !clusters_.contains(cluster)) {
    return;
  }
  metrics_.counter("heartbeats_total", "Agent heartbeats handled", {{"result", "recorded"}}).Increment();
  markAlive(cluster);
  Affected affected;
  if (heartbeatSummaryDue(cluster, at)) {
    affected.clusters.insert(cluster);
  }
  if (auto written = writeSummaries(affected); !written.ok()) {
    log::warn("cannot write a cluster summary", {{"cluster", cluster}, {"error", written.error().describe()}});
  }
}

}  // namespace flotilla::scheduler
