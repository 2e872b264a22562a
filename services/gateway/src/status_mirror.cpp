// KV -> the hub cluster: watches of the poller's and scheduler's records feed the facts of each GitRepo, bundle and
// BundleDeployment; one writer thread turns them into GitRepo statuses and Bundle/BundleDeployment views in Fleet's
// shape and writes the ones that changed, at most options.status_rate requests a second (write_limiter.h).
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/kube/errors.h"
#include "gateway_core.h"

namespace flotilla::gateway {
namespace {

//! The status subresource of "<namespace>/<name>" of `plural`.
std::string statusPath(const std::string& id, const std::string& plural) {
  const auto slash = id.find('/');
  return fleetPath(id.substr(0, slash), plural, id.substr(slash + 1)) + "/status";
}

//! The record of a put, nullopt for a delete (or a record that does not decode, which is logged).
template <typename T>
std::optional<T> recordOf(const bus::KvEntry& entry) {
  if (entry.operation != bus::KvOperation::kPut) {
    return std::nullopt;
  }
  auto record = events::parseRecord<T>(entry.value);
  if (!record.ok()) {
    log::warn("ignoring an unreadable record", {{"key", entry.key}, {"error", record.error().describe()}});
    return std::nullopt;
  }
  return std::move(record).value();
}

}  // namespace

void Gateway::Core::queueWrite(const std::string& key) {
  if (queue.push(key)) {
    metrics.queueDepth(queue.size());
  } else {
    metrics.coalesced();
  }
}

void Gateway::Core::runKvWatch(bus::KeyValue& bucket, const std::string& filter,
                               const std::function<void(const bus::KvEntry&)>& apply,
                               const std::function<void()>& initial_done) {
  bool initial_reported = initial_done == nullptr;
  while (!stopping) {
    auto watcher = bucket.watch(filter);
    if (!watcher.ok()) {
      log::warn("cannot watch records; retrying", {{"filter", filter}, {"error", watcher.error().describe()}});
      metrics.mirrorRestart("records", "error");
      sleepFor(options.retry_max / 10);
      continue;
    }
    while (!stopping) {
      auto entry = watcher->next(options.poll_interval);
      if (!entry.ok()) {
        log::warn("record watch failed; watching again", {{"filter", filter}, {"error", entry.error().describe()}});
        metrics.mirrorRestart("records", "error");
        break;
      }
      if (entry->has_value()) {
        apply(**entry);
      }
      if (!initial_reported && watcher->initialDone()) {
        initial_reported = true;
        initial_done();
      }
    }
  }
}

void Gateway::Core::applyGitRepoRecord(const bus::KvEntry& entry, bool summary) {
  auto names = events::keyNames(entry.key, summary ? "summary.gitrepo" : "gitrepo", 2);
  if (!names.ok()) {
    return;
  }
  updateFacts(names->at(0) + "/" + names->at(1), [&](GitRepoFacts& facts) {
    if (summary) {
      facts.summary = recordOf<events::GitRepoSummary>(entry);
    } else {
      facts.poll = recordOf<events::PollStatus>(entry);
    }
  });
}

void Gateway::Core::applyBundleSummary(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "summary.bundle", 2);
  if (!names.ok()) {
    return;
  }
  const std::string key = names->at(0) + "/" + names->at(1);
  {
    std::lock_guard lock(mutex);
    if (auto record = recordOf<events::BundleSummary>(entry)) {
      bundles[key] = std::move(*record);
    } else {
      bundles.erase(key);
    }
  }
  queueWrite(writeKey(kBundleWrite, key));
}

void Gateway::Core::applyDeploymentFact(const bus::KvEntry& entry, bool report) {
  auto names = events::keyNames(entry.key, report ? "bd" : "", 3);
  if (!names.ok()) {
    return;
  }
  const std::string key = names->at(0) + "/" + names->at(1) + "/" + names->at(2);
  {
    std::lock_guard lock(mutex);
    DeploymentFacts& facts = deployments[key];
    if (report) {
      facts.status = recordOf<events::BdStatus>(entry);
    } else {
      facts.record = recordOf<events::DeploymentRecord>(entry);
    }
    if (!facts.status && !facts.record) {
      deployments.erase(key);
    }
  }
  queueWrite(writeKey(kDeploymentWrite, key));
}

void Gateway::Core::applyClusterSummary(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "summary.cluster", 1);
  if (!names.ok()) {
    return;
  }
  std::set<std::string> workspaces;
  {
    std::lock_guard lock(mutex);
    clusters[names->at(0)].summary = recordOf<events::ClusterSummary>(entry);
    workspaces.insert(registry.workspaceOf(names->at(0)));
  }
  queueWrite(writeKey(kClusterWrite, names->at(0)));
  queueGroupsOf(workspaces);
}

std::optional<std::pair<Gateway::Core::StatusWrite, Json>> Gateway::Core::composeStatus(const std::string& key) {
  const std::string id = key.substr(key.find('|') + 1);
  const std::string now = log::nowRfc3339();
  std::lock_guard lock(mutex);
  if (key.starts_with(kGitRepoWrite)) {
    auto found = gitrepos.find(id);
    if (found == gitrepos.end()) {
      return std::nullopt;  // the CR went since it was queued
    }
    return std::pair{StatusWrite{.path = statusPath(id, "gitrepos"), .status = gitRepoStatus(found->second, now)},
                     found->second.current};
  }
  if (key.starts_with(kClusterWrite)) {
    auto found = clusters.find(id);
    if (found == clusters.end() || found->second.ns.empty()) {
      return std::nullopt;  // a registered cluster with no CR: nothing to write to
    }
    return std::pair{StatusWrite{.path = statusPath(found->second.ns + "/" + id, "clusters"),
                                 .status = clusterStatus(found->second, now)},
                     found->second.current};
  }
  auto found = groups.find(id);
  if (found == groups.end()) {
    return std::nullopt;
  }
  ClusterGroupFacts facts = found->second;
  const auto slash = id.find('/');
  if (auto names = registry.members(id.substr(0, slash), id.substr(slash + 1))) {
    facts.members.emplace();
    for (const auto& name : *names) {
      auto cluster = clusters.find(name);
      facts.members->push_back(
          {.name = name, .summary = cluster != clusters.end() ? cluster->second.summary : std::nullopt});
    }
  }
  return std::pair{StatusWrite{.path = statusPath(id, "clustergroups"), .status = clusterGroupStatus(facts, now)},
                   found->second.current};
}

std::optional<Gateway::Core::StatusWrite> Gateway::Core::pendingStatus(const std::string& key,
                                                                       const std::map<std::string, Json>& written) {
  auto composed = composeStatus(key);
  if (!composed) {
    return std::nullopt;
  }
  auto& [write, current] = *composed;
  // What this process wrote last, else what the CR has (a restarted gateway does not write every status again).
  auto previous = written.find(key);
  const Json& before = previous != written.end() ? previous->second : current;
  if (before.isObject()) {
    keepTransitionTimes(write.status, before);
    if (sameStatus(write.status, before) || onlyLivenessTimesMoved(write.status, before)) {
      metrics.statusWrite("unchanged");
      return std::nullopt;
    }
  }
  return std::move(write);
}

void Gateway::Core::forget(const std::string& key) {
  const std::string id = key.substr(key.find('|') + 1);
  std::lock_guard lock(mutex);
  if (key.starts_with(kGitRepoWrite)) {
    gitrepos.erase(id);
  } else if (key.starts_with(kClusterWrite)) {
    if (auto found = clusters.find(id); found != clusters.end()) {
      found->second.ns.clear();
    }
    // Its CR was deleted and the spec mirror is about to see it: the delete deregisters the cluster, so no CR is
    // made for it meanwhile.
    deleted_cluster_crs.insert(id);
  } else {
    groups.erase(id);
  }
}

void Gateway::Core::writeStatus(const std::string& key, StatusWrite write, WriterState& writer) {
  const Json patch = Json::obj({{"status", write.status}});
  auto sent = kube->request("PATCH", write.path, patch.dump(), "application/merge-patch+json");
  if (sent.ok()) {
    metrics.statusWrite("written");
    writer.retries.succeeded(key);
    writer.statuses[key] = std::move(write.status);
    return;
  }
  if (sent.error().kind == ErrorKind::kNotFound) {
    // No such CR (records only, or deleted): forget it; a CR made later brings its facts back.
    metrics.statusWrite("gone");
    writer.statuses.erase(key);
    forget(key);
    return;
  }
  metrics.statusWrite("failed");
  retryLater(key, writer, sent.error());
}

void Gateway::Core::retryLater(const std::string& key, WriterState& writer, const Error& error) {
  if (stopping) {
    return;
  }
  const auto wait = writer.retries.failed(key, RetrySchedule::Clock::now());
  metrics.retriesWaiting(writer.retries.size());
  log::warn("cannot write to the API server; trying again after a backoff",
            {{"object", key},
             {"error", error.describe()},
             {"backoff_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count())}});
}

bool Gateway::Core::spendToken(TokenBucket& bucket) {
  using Clock = TokenBucket::Clock;
  for (auto wait = bucket.waitFrom(Clock::now()); wait > Clock::duration::zero();
       wait = bucket.waitFrom(Clock::now())) {
    if (stopping) {
      return false;
    }
    sleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
  }
  bucket.take();
  return !stopping;
}

void Gateway::Core::runStatusWriter() {
  WriterState writer{.bucket = TokenBucket(options.status_rate, options.status_burst, TokenBucket::Clock::now()),
                     .retries = RetrySchedule(options.retry_base, options.retry_max),
                     .statuses = {},
                     .views = {}};
  while (!stopping) {
    const auto now = RetrySchedule::Clock::now();
    for (const auto& due : writer.retries.due(now)) {
      queueWrite(due);
    }
    metrics.retriesWaiting(writer.retries.size());
    auto wait = options.poll_interval;
    if (auto next = writer.retries.untilNext(now)) {
      wait =
          std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(*next) + std::chrono::milliseconds(1));
    }
    auto key = queue.pop(wait);
    metrics.queueDepth(queue.size());
    if (!key) {
      continue;
    }
    if (*key == kViewSweep) {
      sweepViews(writer);
    } else if (key->starts_with(kBundleWrite) || key->starts_with(kDeploymentWrite)) {
      writeView(*key, writer);
    } else if (auto cr = key->starts_with(kClusterWrite) ? missingClusterCr(key->substr(kClusterWrite.size()))
                                                         : std::nullopt) {
      createClusterCr(key->substr(kClusterWrite.size()), *cr, writer);
    } else if (auto status = pendingStatus(*key, writer.statuses); status && spendToken(writer.bucket)) {
      // Only real writes spend the budget. A change during the wait queues the key again, so it is not lost.
      writeStatus(*key, std::move(*status), writer);
    }
  }
}

}  // namespace flotilla::gateway
