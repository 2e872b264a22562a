// A partitioned scheduler (partition.h) and the other partitions: which messages are its own, and what it reads of
// the others' records — from watches of the deployments bucket and status/bd.* — for what spans GitRepos: the
// cluster summaries of its clusters, the retiring bundles a DeployEvent lists and the end of a deregistration.
// The whole (one partition) opens no watch and owns everything.
#include "flotilla/bus/kv_follow.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"
#include "invalid_record.h"

namespace flotilla::scheduler {

namespace {

constexpr std::chrono::milliseconds kWatchWait{500};
constexpr std::string_view kRecordsFilter = ">";
constexpr std::string_view kStatusFilter = "bd.>";

}  // namespace

bool Scheduler::ownsBundle(const std::string& workspace, const std::string& gitrepo) const {
  return options_.partition.ownsGitRepo(workspace, gitrepo);
}

std::string Scheduler::gitRepoOfBundle(const std::string& workspace, const std::string& bundle) const {
  auto it = bundle_gitrepos_.find(events::bundleKey(workspace, bundle));
  return it == bundle_gitrepos_.end() ? std::string() : it->second;
}

void Scheduler::noteBundleGitRepo(const std::string& workspace, const std::string& bundle, const std::string& gitrepo) {
  if (!options_.partition.whole() && !gitrepo.empty()) {
    bundle_gitrepos_[events::bundleKey(workspace, bundle)] = gitrepo;
  }
}

bool Scheduler::ownsReport(const std::string& key, const std::string& workspace, const std::string& bundle) const {
  if (options_.partition.whole() || deployments_.contains(key) || statuses_.contains(key)) {
    return true;
  }
  if (other_deployments_.contains(key)) {
    return false;
  }
  // No partition holds a record (yet): the bundle's partition judges it (a report racing its first record waits
  // there as "ahead"; one on a removed deployment is counted there).
  return ownsBundle(workspace, gitRepoOfBundle(workspace, bundle));
}

Status Scheduler::watchOtherPartitions() {
  auto records = hub_.deployments->watch(kRecordsFilter);
  FLOTILLA_TRY(records);
  other_records_watcher_ = std::move(records).value();
  auto statuses = hub_.status->watch(kStatusFilter);
  FLOTILLA_TRY(statuses);
  other_statuses_watcher_ = std::move(statuses).value();
  return {};
}

void Scheduler::followOtherPartitions(bool records) {
  bus::KvWatcher& watcher = records ? other_records_watcher_ : other_statuses_watcher_;
  const std::shared_ptr<bus::KeyValue>& bucket = records ? hub_.deployments : hub_.status;
  bus::followWatch(
      watcher, *bucket, records ? kRecordsFilter : kStatusFilter, kWatchWait, [this] { return stopping_.load(); },
      [&](const std::optional<bus::KvEntry>& entry) {
        if (!entry) {
          return;
        }
        if (records) {
          applyOtherRecord(*entry);
        } else {
          applyOtherStatus(*entry);
        }
      },
      [&](const Error& error) {
        metrics_.counter("watch_errors_total", "KV watch errors (re-opened)").Increment();
        log::warn("a watch of the other partitions' records failed; re-opening it",
                  {{"bucket", bucket->bucket()}, {"error", error.describe()}});
        return sleepFor(std::chrono::seconds(1));
      });
}

void Scheduler::applyOtherRecord(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "", 3);
  if (!names.ok()) {
    return;
  }
  const std::string& cluster = (*names)[0];
  std::lock_guard lock(mutex_);
  Affected affected;
  if (entry.operation != bus::KvOperation::kPut) {
    if (other_deployments_.erase(entry.key) == 0) {
      return;  // this partition's own removal, or one it never saw
    }
    other_statuses_.erase(entry.key);
  } else {
    auto record = events::parseRecord<DeploymentRecord>(entry.value);
    if (!record.ok()) {
      return;  // counted where it is loaded; the writer's partition owns it
    }
    noteBundleGitRepo(record->workspace, record->bundle, record->gitrepo);
    if (ownsBundle(record->workspace, record->gitrepo)) {
      return;  // this partition's own write coming back
    }
    if (deployments_.contains(entry.key)) {
      // The bundle moved to another partition's GitRepo (a name freed by one GitRepo and claimed by another), whose
      // holder now writes the record: this partition lets go of it.
      log::info("a deployment record passed to another partition",
                {{"key", entry.key}, {"gitrepo", record->gitrepo}, {"partition", options_.partition.name()}});
      affected.add(record->workspace, record->bundle, deployments_.at(entry.key).gitrepo, cluster);
      eraseDeploymentRecord(entry.key);
      if (auto status = statuses_.extract(entry.key)) {
        other_statuses_[entry.key] = std::move(status.mapped());
      }
      delete_retries_.erase(entry.key);
      unacked_deploys_.erase(entry.key);
    }
    other_deployments_[entry.key] = std::move(record).value();
  }
  noteOtherPartitionChange(cluster, entry.delta, affected);
}

void Scheduler::applyOtherStatus(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "bd", 3);
  if (!names.ok()) {
    return;
  }
  const std::string& cluster = (*names)[0];
  const std::string key = events::deploymentKey(cluster, (*names)[1], (*names)[2]);
  std::lock_guard lock(mutex_);
  if (entry.operation != bus::KvOperation::kPut) {
    if (other_statuses_.erase(key) == 0) {
      return;
    }
  } else {
    if (ownsReport(key, (*names)[1], (*names)[2])) {
      return;  // this partition's own report coming back
    }
    auto status = events::parseRecord<BdStatus>(entry.value);
    if (!status.ok()) {
      return;
    }
    other_statuses_[key] = std::move(status).value();
  }
  Affected affected;
  noteOtherPartitionChange(cluster, entry.delta, affected);
}

void Scheduler::noteOtherPartitionChange(const std::string& cluster, uint64_t behind, Affected& affected) {
  if (options_.partition.ownsCluster(cluster)) {
    affected.clusters.insert(cluster);  // its summary counts every partition's deployments
  }
  defer_summaries_ = behind > 0;  // a burst of changes: the summaries once it is read (at most summary_delay later)
  auto written = writeSummaries(affected);
  defer_summaries_ = false;
  if (!written.ok()) {
    log::warn("cannot write a summary after another partition's change; written with the next ones",
              {{"cluster", cluster}, {"error", written.error().describe()}});
  }
}

std::vector<DeploymentView> Scheduler::allDeploymentsOfCluster(const std::string& cluster) const {
  std::vector<DeploymentView> out = deploymentsOfCluster(cluster);
  const std::string prefix = events::escapeToken(cluster) + ".";
  for (auto it = other_deployments_.lower_bound(prefix);
       it != other_deployments_.end() && it->first.starts_with(prefix); ++it) {
    auto status = other_statuses_.find(it->first);
    out.push_back(DeploymentView{&it->second, status == other_statuses_.end() ? nullptr : &status->second});
  }
  return out;
}

bool Scheduler::clusterHasRecords(const std::string& cluster) const {
  const std::string prefix = events::escapeToken(cluster) + ".";
  for (const auto* records : {&deployments_, &other_deployments_}) {
    auto it = records->lower_bound(prefix);
    if (it != records->end() && it->first.starts_with(prefix)) {
      return true;
    }
  }
  return false;
}

prometheus::Labels Scheduler::gaugeLabels() const {
  if (options_.partition.whole()) {
    return {};
  }
  return {{"partition", options_.partition.name()}};
}

}  // namespace flotilla::scheduler
