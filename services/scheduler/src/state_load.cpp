// Start-up: the scheduler's state rebuilt from KV (clusters, bundles, deployments, bd statuses, summaries).
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"
#include "invalid_record.h"

namespace flotilla::scheduler {

namespace {

Result<std::vector<bus::KvEntry>> readAll(bus::KeyValue& kv, std::string_view pattern,
                                          std::chrono::milliseconds timeout) {
  auto watcher = kv.watch(pattern);
  FLOTILLA_TRY(watcher);
  auto values = watcher->initialValues(timeout);
  watcher->stop();
  return values;
}

template <typename T>
Status decodes(std::string_view value) {
  auto record = events::parseRecord<T>(value);
  if (!record.ok()) {
    return fail(record.error());
  }
  return {};
}

//! Whether a stored summary decodes with the codec of its kind (by key prefix).
Status summaryValid(const std::string& key, std::string_view value) {
  if (startsWith(key, "summary.bundle.")) {
    return decodes<events::BundleSummary>(value);
  }
  if (startsWith(key, "summary.gitrepo.")) {
    return decodes<events::GitRepoSummary>(value);
  }
  if (startsWith(key, "summary.cluster.")) {
    return decodes<events::ClusterSummary>(value);
  }
  return fail(ErrorKind::kInvalid, "not a summary key");
}

//! Parses each entry as a `Record`: `keep(key, record)` for the good ones, `invalid(key, error)` for the others.
template <typename Record, typename Keep, typename Invalid>
void forEachRecord(const std::vector<bus::KvEntry>& entries, Keep keep, Invalid invalid) {
  for (const auto& entry : entries) {
    auto record = events::parseRecord<Record>(entry.value);
    if (!record.ok()) {
      invalid(entry.key, record.error());
      continue;
    }
    keep(entry.key, std::move(record).value());
  }
}

Json withoutUpdated(Json record) {
  record.erase("updated");
  return record;
}

}  // namespace

void Scheduler::countInvalidRecord(std::string_view bucket, const std::string& key, const Error& error) {
  scheduler::countInvalidRecord(metrics_, bucket, key, error);
}

Status Scheduler::loadState() {
  // The clusters watcher stays open: after its initial values it delivers live changes to watchLoop().
  auto watcher = hub_.clusters->watch(">");
  FLOTILLA_TRY(watcher);
  clusters_watcher_ = std::move(watcher).value();
  auto cluster_entries = clusters_watcher_.initialValues(options_.load_timeout);
  FLOTILLA_TRY(cluster_entries);
  auto bundle_entries = readAll(*hub_.bundles, ">", options_.load_timeout);
  FLOTILLA_TRY(bundle_entries);
  const bool whole = options_.partition.whole();
  if (!whole) {
    // The watches stay open: after their initial values they bring the other partitions' changes.
    FLOTILLA_TRY(watchOtherPartitions());
  }
  auto deployment_entries = whole ? readAll(*hub_.deployments, ">", options_.load_timeout)
                                  : other_records_watcher_.initialValues(options_.load_timeout);
  auto status_entries = whole ? readAll(*hub_.status, "bd.>", options_.load_timeout)
                              : other_statuses_watcher_.initialValues(options_.load_timeout);
  FLOTILLA_TRY(deployment_entries);
  FLOTILLA_TRY(status_entries);
  auto summary_entries = readAll(*hub_.status, "summary.>", options_.load_timeout);
  FLOTILLA_TRY(summary_entries);

  for (const auto& entry : *cluster_entries) {
    handleClustersEntry(entry);
  }
  std::lock_guard lock(mutex_);
  loadBundles(*bundle_entries);
  loadDeployments(*deployment_entries);
  loadStatuses(*status_entries);
  loadSummaries(*summary_entries);
  warnOrphanDeployments();
  loaded_ = true;
  updateGauges();
  return {};
}

void Scheduler::loadBundles(const std::vector<bus::KvEntry>& entries) {
  for (const auto& entry : entries) {
    auto record = events::parseRecord<events::BundleRecord>(entry.value);
    auto info = record.ok() ? bundleFromRecord(*record) : Result<BundleInfo>(fail(record.error()));
    if (!info.ok()) {
      countInvalidRecord(hub_.bundles->bucket(), entry.key, info.error());
      continue;
    }
    noteBundleGitRepo(info->workspace, info->bundle, info->gitrepo);
    if (!ownsBundle(info->workspace, info->gitrepo)) {
      continue;  // another partition's
    }
    if (auto loaded = loadVariants(*info); !loaded.ok()) {
      // Its clusters are held (deployments left as they are) until the next BundleEvent of the bundle.
      countInvalidRecord(hub_.manifests->bucket(), info->targeting ? info->targeting->variants_object : entry.key,
                         loaded.error());
    }
    const std::string key = events::bundleKey(info->workspace, info->bundle);
    bundles_[key] = std::move(info).value();
  }
}

void Scheduler::loadDeployments(const std::vector<bus::KvEntry>& entries) {
  // Partitioned, another partition's records are kept apart (partition_view.cpp); the whole owns every one.
  forEachRecord<DeploymentRecord>(
      entries,
      [&](const std::string& key, DeploymentRecord record) {
        noteBundleGitRepo(record.workspace, record.bundle, record.gitrepo);
        if (ownsBundle(record.workspace, record.gitrepo)) {
          storeDeploymentRecord(key, std::move(record));
        } else {
          other_deployments_[key] = std::move(record);
        }
      },
      [&](const std::string& key, const Error& error) { countInvalidRecord(hub_.deployments->bucket(), key, error); });
}

void Scheduler::loadStatuses(const std::vector<bus::KvEntry>& entries) {
  // After loadDeployments: a report is this partition's when its record is (ownsReport).
  forEachRecord<BdStatus>(
      entries,
      [&](const std::string& /*key*/, BdStatus status) {
        std::string key = events::deploymentKey(status.cluster, status.workspace, status.bundle);
        auto& statuses = ownsReport(key, status.workspace, status.bundle) ? statuses_ : other_statuses_;
        statuses[key] = std::move(status);
      },
      [&](const std::string& key, const Error& error) { countInvalidRecord(hub_.status->bucket(), key, error); });
}

void Scheduler::loadSummaries(const std::vector<bus::KvEntry>& entries) {
  for (const auto& entry : entries) {
    Status valid = summaryValid(entry.key, entry.value);
    auto parsed = Json::parse(entry.value);
    if (!valid.ok() || !parsed.ok()) {
      countInvalidRecord(hub_.status->bucket(), entry.key, valid.ok() ? parsed.error() : valid.error());
      continue;
    }
    if (startsWith(entry.key, "summary.cluster.")) {
      // The last heartbeat survives a restart through the cluster summary.
      auto summary = events::decodeRecord<events::ClusterSummary>(*parsed).value();
      if (!summary.last_heartbeat.empty() && !last_heartbeat_.contains(summary.cluster)) {
        last_heartbeat_[summary.cluster] = summary.last_heartbeat;
      }
    }
    // The cache of what was written (without `updated`): a summary whose content differs is written again.
    Json record = withoutUpdated(std::move(parsed).value());
    auto before = summaries_.find(entry.key);
    state_gauges_->change(entry.key, before == summaries_.end() ? nullptr : &before->second, &record);
    summaries_[entry.key] = std::move(record);
    summary_revisions_[entry.key] = entry.revision;
  }
}

void Scheduler::warnOrphanDeployments() const {
  size_t orphans = 0;
  for (const auto& [key, record] : deployments_) {
    // A deployment being deleted outlives its bundle on purpose (until the agent reports).
    if (!record.deleting && !bundles_.contains(events::bundleKey(record.workspace, record.bundle))) {
      ++orphans;
    }
  }
  if (orphans > 0) {
    // Left alone: only a deleted BundleEvent or a targeting change removes a deployment, never a record the
    // scheduler could not read.
    log::warn("deployments of bundles without a readable bundles record", {{"count", static_cast<int64_t>(orphans)}});
  }
}

}  // namespace flotilla::scheduler
