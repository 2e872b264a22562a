// The clusters bucket: groups (from `flotilla apply`), cluster records (another replica, or by hand) and agent
// heartbeats; a change that moves targeting queues a re-target.
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/scheduler/scheduler.h"
#include "times.h"

namespace flotilla::scheduler {

namespace {

void countInvalidClustersRecord(Metrics& metrics, const bus::KvEntry& entry, const Error& error) {
  metrics.counter("invalid_records_total", "KV records that could not be read (skipped)", {{"bucket", "clusters"}})
      .Increment();
  log::warn("ignoring an unreadable clusters record", {{"key", entry.key}, {"error", error.describe()}});
}

template <typename T, typename Decode>
Result<T> decodeResource(const bus::KvEntry& entry, Decode decode) {
  auto parsed = Json::parse(entry.value);
  if (!parsed.ok()) {
    return fail(parsed.error());
  }
  return decode(*parsed, entry.key);
}

}  // namespace

void Scheduler::watchLoop() {
  std::chrono::milliseconds delay = options_.retry_base;
  while (!stopping_) {
    auto entry = clusters_watcher_.next(options_.fetch_timeout);
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
  }
}

void Scheduler::handleClustersEntry(const bus::KvEntry& entry) {
  if (startsWith(entry.key, "group.")) {
    handleGroupEntry(entry);
  } else if (startsWith(entry.key, "cluster.")) {
    handleClusterEntry(entry);
  } else if (startsWith(entry.key, "heartbeat.")) {
    handleHeartbeatEntry(entry);
  }
}

void Scheduler::handleGroupEntry(const bus::KvEntry& entry) {
  bool deleted = entry.operation != bus::KvOperation::kPut;
  auto names = events::keyNames(entry.key, "group", 2);
  if (!names.ok()) {
    countInvalidClustersRecord(metrics_, entry, names.error());
    return;
  }
  std::optional<GroupInfo> group;
  if (!deleted) {
    auto decoded = decodeResource<model::ClusterGroup>(
        entry, [](const Json& json, const std::string& key) { return model::decodeClusterGroup(json, key); });
    if (!decoded.ok()) {
      countInvalidClustersRecord(metrics_, entry, decoded.error());
      return;
    }
    group = groupInfoOf(*decoded);
    // The key is authoritative for identity.
    group->workspace = (*names)[0];
    group->name = (*names)[1];
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
              {{"workspace", (*names)[0]}, {"group", (*names)[1]}});
    enqueueReconcile("");
  }
}

void Scheduler::handleClusterEntry(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "cluster", 1);
  if (!names.ok()) {
    countInvalidClustersRecord(metrics_, entry, names.error());
    return;
  }
  const std::string& name = (*names)[0];
  std::optional<model::Cluster> cluster;
  if (entry.operation == bus::KvOperation::kPut) {
    auto decoded = decodeResource<model::Cluster>(
        entry, [](const Json& json, const std::string& key) { return model::decodeCluster(json, key); });
    if (!decoded.ok()) {
      countInvalidClustersRecord(metrics_, entry, decoded.error());
      return;
    }
    cluster = std::move(decoded).value();
    cluster->metadata.name = name;
  }
  bool changed = false;
  bool live = false;
  {
    std::lock_guard lock(mutex_);
    live = loaded_;
    auto it = clusters_.find(name);
    if (cluster) {
      changed = it == clusters_.end() || !(clusterInfoOf(it->second) == clusterInfoOf(*cluster));
      clusters_[name] = *cluster;
    } else if (it != clusters_.end()) {
      clusters_.erase(it);
      changed = true;
    }
    updateGauges();
  }
  if (changed && live) {
    // Written by another scheduler replica or by hand: re-target like a registration would.
    enqueueReconcile(name);
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
  Affected affected;
  affected.clusters.insert(cluster);
  if (auto written = writeSummaries(affected); !written.ok()) {
    log::warn("cannot write a cluster summary", {{"cluster", cluster}, {"error", written.error().describe()}});
  }
}

}  // namespace flotilla::scheduler
