// Offline clusters: an agent that has given no sign of life (registration or heartbeat) for --cluster-offline-after
// (default three heartbeat intervals) makes its cluster Offline — in its summary record (state, `offline`, a
// message saying since when), a log line, the gauge clusters_offline and cluster_offline_transitions_total. The
// next heartbeat or registration brings it back at once; nothing is sent to the agent meanwhile, and its deploy
// durable keeps what arrives, so a returning agent converges from the stream. A heartbeat from a cluster without a
// registration record (the hub's records were lost or removed) asks its agent to register again.
#include <algorithm>

#include "flotilla/core/clock.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/events/payloads.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler {

std::chrono::milliseconds Scheduler::offlineAfter() const {
  return options_.offline_after.count() > 0 ? options_.offline_after : 3 * options_.heartbeat_interval;
}

std::optional<SystemTime> Scheduler::lastSignOfLife(const std::string& cluster) const {
  std::optional<SystemTime> last;
  if (auto beat = last_heartbeat_.find(cluster); beat != last_heartbeat_.end()) {
    last = parseRfc3339(beat->second);
  }
  if (auto registration = registrations_.find(cluster); registration != registrations_.end()) {
    auto registered = parseRfc3339(registration->second.status.agent.last_seen);
    if (registered && (!last || *registered > *last)) {
      last = registered;
    }
  }
  return last;
}

void Scheduler::markAlive(const std::string& cluster) {
  if (offline_.erase(cluster) == 0) {
    return;
  }
  if (options_.partition.ownsCluster(cluster)) {  // every partition tracks it; one tells
    metrics_.counter("cluster_offline_transitions_total", "Clusters that went offline or came back", {{"to", "online"}})
        .Increment();
    log::info("cluster back online", {{"cluster", cluster}});
  }
  enqueueRolloutPassesOf(cluster);  // its deployments count as available again once they report Ready
  updateOfflineGauge();
  unwritten_.clusters.insert(cluster);  // its summary is rewritten with the next ones (at the latest by checkOffline)
}

void Scheduler::checkOffline(SystemTime now) {
  const auto tick = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (!loaded_ || tick < next_offline_check_) {
    return;
  }
  // A quarter of the threshold, at most a second: an agent is marked within that much of its deadline.
  next_offline_check_ = tick + std::min<std::chrono::milliseconds>(offlineAfter() / 4, std::chrono::seconds(1));
  const int64_t read_until = status_read_until_ms_.load();
  if (read_until == kStatusUnread) {
    return;  // the stream may hold newer heartbeats than the ones loaded from KV
  }
  // While the status consumer is behind, a cluster is silent only if nothing it has read came from it in time.
  const SystemTime read = read_until > 0 ? SystemTime(std::chrono::milliseconds(read_until)) : now;
  noteStatusLag(read < now ? now - read : SystemTime::duration::zero());
  now = std::min(now, read);
  Affected changed;
  for (const auto& [name, cluster] : clusters_) {
    auto last = lastSignOfLife(name);
    // A cluster whose agent never registered (a Cluster document alone) is WaitCheckIn, not offline.
    const bool silent = last && now - *last > offlineAfter();
    if (silent && offline_.insert(name).second) {
      if (options_.partition.ownsCluster(name)) {  // every partition tracks it; one tells
        metrics_
            .counter("cluster_offline_transitions_total", "Clusters that went offline or came back",
                     {{"to", "offline"}})
            .Increment();
        log::warn("cluster offline: no heartbeat or registration within --cluster-offline-after",
                  {{"cluster", name},
                   {"last_seen", formatRfc3339(*last)},
                   {"offline_after_ms", static_cast<int64_t>(offlineAfter().count())}});
      }
      changed.clusters.insert(name);
      enqueueRolloutPassesOf(name);  // its deployments now count as unavailable for their rollouts
    } else if (!silent && offline_.contains(name)) {
      markAlive(name);
    }
  }
  if (changed.clusters.empty() && unwritten_.clusters.empty()) {
    return;
  }
  updateOfflineGauge();
  if (auto written = writeSummaries(changed); !written.ok()) {
    // writeSummaries keeps what it could not write; the next check (or handler) writes it.
    log::warn("cannot write the summary of a cluster that went offline or came back",
              {{"error", written.error().describe()}});
  }
}

void Scheduler::noteStatusRead(uint64_t pending, int64_t stored_ms) {
  status_read_until_ms_ = pending > 0 && stored_ms > 0 ? stored_ms : 0;
}

void Scheduler::noteStatusLag(SystemTime::duration lag) {
  metrics_.gauge("status_read_lag_seconds", "How far behind the clock the status consumer reads (0: caught up)")
      .Set(std::chrono::duration<double>(lag).count());
  if (lag.count() == 0 && status_lag_noted_) {
    status_lag_noted_ = false;
    log::info("status consumer caught up; offline detection judges silence against the clock again", {});
    return;
  }
  if (lag <= offlineAfter() || status_lag_noted_) {
    return;
  }
  status_lag_noted_ = true;
  metrics_
      .counter("status_lag_episodes_total",
               "Times the status consumer fell further behind than --cluster-offline-after (silence is then judged "
               "up to where it has read, not against the clock)")
      .Increment();
  log::warn(
      "status consumer is behind by more than --cluster-offline-after; offline detection judges silence up to "
      "where it has read",
      {{"behind_ms", static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(lag).count())},
       {"offline_after_ms", static_cast<int64_t>(offlineAfter().count())}});
}

void Scheduler::askToRegisterAgain(const std::string& cluster) {
  // Heartbeats come every interval; one ask per cluster in this window is plenty (the agent answers with a
  // registration, whose reply it waits for).
  constexpr std::chrono::seconds kReregisterAskEvery{10};
  auto counted = [&](const char* result) {
    metrics_
        .counter("reregister_requests_total", "Agents of unregistered clusters asked to register again",
                 {{"result", result}})
        .Increment();
  };
  if (deregistrations_.contains(cluster)) {
    counted("deregistered");  // its registration would be refused: `flotilla apply` a Cluster document first
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  auto asked = reregister_asked_.find(cluster);
  if (asked != reregister_asked_.end() && now - asked->second < kReregisterAskEvery) {
    return;
  }
  reregister_asked_[cluster] = now;
  events::Heartbeat ask{.id = events::newEventId(), .time = log::nowRfc3339(), .cluster = cluster};
  Status sent = hub_.connection->publish(identity::agentReregisterSubject(cluster), events::encode(ask).dump());
  counted(sent.ok() ? "sent" : "failed");
  if (sent.ok()) {
    log::info("asked the agent of an unregistered cluster to register again", {{"cluster", cluster}});
  } else {
    log::warn("cannot ask the agent of an unregistered cluster to register again; its next heartbeat asks again",
              {{"cluster", cluster}, {"error", sent.error().describe()}});
    reregister_asked_.erase(cluster);
  }
}

bool Scheduler::offline(const std::string& cluster) const {
  std::lock_guard lock(mutex_);
  return offline_.contains(cluster);
}

}  // namespace flotilla::scheduler
