// Publishing: the summaries in KV `status` (written only when their content changed, plus an `updated` time),
// the public CloudEvents on flotilla.events.>, and the gauges.
#include <algorithm>
#include <map>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler {

std::vector<DeploymentView> Scheduler::deploymentsOfCluster(const std::string& cluster) const {
  // Keys are "<cluster>.<ws>.<bundle>" with each part one escaped token (no '.'), so a cluster's deployments are
  // the keys after "<cluster>.": a heartbeat's summary costs its cluster's deployments, not every cluster's.
  const std::string prefix = events::escapeToken(cluster) + ".";
  std::vector<DeploymentView> out;
  for (auto it = deployments_.lower_bound(prefix); it != deployments_.end() && startsWith(it->first, prefix); ++it) {
    out.push_back(DeploymentView{&it->second, statusOf(it->second)});
  }
  return out;
}

Status Scheduler::writeSummaries(const Affected& affected) {
  // What an earlier handler could not write (its redelivered message may not find the same work again: a settled
  // delete finds no record the second time) or put off goes along.
  const bool was_empty = unwritten_.empty();
  unwritten_.merge(affected);
  if (unwritten_.empty()) {
    return {};
  }
  const auto now = std::chrono::steady_clock::now();
  if (was_empty) {
    deferred_since_ = now;
  }
  if (defer_summaries_ && now - deferred_since_ < options_.summary_delay) {
    metrics_.counter("summaries_deferred_total", "Summary updates put off while more status messages were queued")
        .Increment();
    return {};
  }
  if (now - last_flush_ < options_.summary_delay && summaryVisits(unwritten_) > options_.summary_visits_at_once) {
    // Written by a later handler or by flushSummaries, at most summary_delay after the last write.
    metrics_
        .counter("summaries_coalesced_total",
                 "Summary updates of large bundles or GitRepos put off until summary_delay after the last write")
        .Increment();
    return {};
  }
  last_flush_ = now;
  for (const auto& key : deferred_passes_) {
    enqueueRolloutPass(key);
  }
  deferred_passes_.clear();
  // The gauges count every record: once per write of the summaries, not once per placement (a pass over 10,000
  // clusters made that 10,000 counts of 10,000 records).
  updateGauges();
  Affected all = std::move(unwritten_);
  unwritten_ = {};
  Status written = writeAllSummaries(all);
  flushPublicEvents();
  if (!written.ok()) {
    metrics_.counter("summary_write_failures_total", "Summary writes that failed and were kept for the next one")
        .Increment();
    unwritten_ = std::move(all);
    deferred_since_ = now;
  }
  return written;
}

void Scheduler::flushSummaries() {
  std::lock_guard lock(mutex_);
  flushPublicEvents();
  const auto now = std::chrono::steady_clock::now();
  if (unwritten_.empty() ||
      (now - deferred_since_ < options_.summary_delay && now - last_flush_ < options_.summary_delay)) {
    return;
  }
  if (auto written = writeSummaries({}); !written.ok()) {
    log::warn("cannot write summaries yet; trying again with the next message or in a second",
              {{"error", written.error().describe()}});
  }
}

Status Scheduler::writeAllSummaries(const Affected& affected) {
  // Each summary that changed is staged (writeSummary), then all are written with one wait (KeyValue::putAll).
  summary_outbox_.clear();
  Status staged = [&]() -> Status {
    for (const auto& [workspace, bundle] : affected.bundles) {
      FLOTILLA_TRY(writeBundleSummary(workspace, bundle));
    }
    for (const auto& [workspace, gitrepo] : affected.gitrepos) {
      FLOTILLA_TRY(writeGitRepoSummary(workspace, gitrepo));
    }
    for (const auto& cluster : affected.clusters) {
      FLOTILLA_TRY(writeClusterSummary(cluster));
    }
    return {};
  }();
  std::vector<std::pair<std::string, std::string>> entries;
  entries.reserve(summary_outbox_.size());
  for (const auto& summary : summary_outbox_) {
    entries.emplace_back(summary.key, summary.stored);
  }
  auto written = hub_.status->putAll(entries);
  if (!written.ok()) {
    summary_outbox_.clear();
    return fail(written.error());
  }
  for (size_t i = 0; i < summary_outbox_.size() && i < written->size(); ++i) {
    summary_revisions_[summary_outbox_[i].key] = (*written)[i];
  }
  for (auto& summary : summary_outbox_) {
    metrics_.counter("summaries_written_total", "Summary records written", {{"kind", summary.kind}}).Increment();
    auto before = summaries_.find(summary.key);
    state_gauges_->change(summary.key, before == summaries_.end() ? nullptr : &before->second, &summary.record);
    summaries_[summary.key] = std::move(summary.record);
  }
  summary_outbox_.clear();
  return staged;
}

Status Scheduler::writeBundleSummary(const std::string& workspace, const std::string& bundle) {
  auto it = bundles_.find(events::bundleKey(workspace, bundle));
  auto views = deploymentsOfBundle(workspace, bundle);
  std::string key = events::bundleSummaryKey(workspace, bundle);
  if (it == bundles_.end() && views.empty()) {
    return removeSummary(key);
  }
  auto rollout = rollouts_.find(events::bundleKey(workspace, bundle));
  auto summary = bundleSummaryRecord(workspace, bundle, it == bundles_.end() ? nullptr : &it->second, views,
                                     rollout == rollouts_.end() ? nullptr : &rollout->second);
  noteBundleState(summary);
  return writeSummary(key, events::encode(summary), "bundle");
}

Status Scheduler::writeGitRepoSummary(const std::string& workspace, const std::string& gitrepo) {
  std::map<std::string, GitRepoBundle> members;
  for (const auto& [key, bundle] : bundles_) {
    if (bundle.workspace == workspace && bundle.gitrepo == gitrepo) {
      members[bundle.bundle].bundle = &bundle;
    }
  }
  if (auto keys = deployments_by_gitrepo_.find(events::gitRepoKey(workspace, gitrepo));
      keys != deployments_by_gitrepo_.end()) {
    for (const auto& deployment : keys->second) {
      const DeploymentRecord& record = deployments_.at(deployment);
      members[record.bundle].deployments.push_back(DeploymentView{&record, statusOf(record)});
    }
  }
  std::string key = events::gitRepoSummaryKey(workspace, gitrepo);
  if (members.empty()) {
    return removeSummary(key);
  }
  std::vector<GitRepoBundle> list;
  list.reserve(members.size());
  for (auto& [name, member] : members) {
    list.push_back(std::move(member));
  }
  return writeSummary(key, events::encode(gitRepoSummaryRecord(workspace, gitrepo, list)), "gitrepo");
}

Status Scheduler::writeClusterSummary(const std::string& cluster) {
  auto it = clusters_.find(cluster);
  if (!options_.partition.ownsCluster(cluster)) {
    return {};  // the cluster's partition writes it, from every partition's records (partition_view.cpp)
  }
  auto views = allDeploymentsOfCluster(cluster);
  std::string key = events::clusterSummaryKey(cluster);
  if (it == clusters_.end() && views.empty()) {
    return removeSummary(key);
  }
  auto beat = last_heartbeat_.find(cluster);
  auto summary =
      clusterSummaryRecord(cluster, it == clusters_.end() ? nullptr : &it->second, views,
                           beat == last_heartbeat_.end() ? std::string() : beat->second, offline_.contains(cluster));
  return writeSummary(key, events::encode(summary), "cluster");
}

Status Scheduler::writeSummary(const std::string& key, Json record, std::string_view kind) {
  // The cache holds what was written without its `updated` time, so only a change of content is written.
  record.erase("updated");
  auto cached = summaries_.find(key);
  if (cached != summaries_.end() && cached->second == record) {
    return {};
  }
  Json stored = record;
  stored["updated"] = log::nowRfc3339();
  summary_outbox_.push_back(
      StagedSummary{.key = key, .record = std::move(record), .stored = stored.dump(), .kind = std::string(kind)});
  return {};
}

Status Scheduler::removeSummary(const std::string& key) {
  if (!summaries_.contains(key)) {
    return {};
  }
  auto removed = hub_.status->remove(key);
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  state_gauges_->change(key, &summaries_.at(key), nullptr);
  summaries_.erase(key);
  summary_revisions_.erase(key);
  return {};
}

void Scheduler::noteBundleState(const events::BundleSummary& summary) {
  const std::string key = events::bundleSummaryKey(summary.workspace, summary.bundle);
  auto cached = summaries_.find(key);
  std::string before = cached != summaries_.end() ? cached->second.getString("state") : std::string();
  if (before == summary.state || summary.state.empty()) {
    return;
  }
  Json data = Json::obj({{"workspace", summary.workspace},
                         {"bundle", summary.bundle},
                         {"gitrepo", summary.gitrepo},
                         {"commit", summary.commit},
                         {"summary", summary.summary}});
  // Announced again with the same id while the summary that records the change is not written (a failed write is
  // redone): the id names the record it replaces, so JetStream drops the repeat.
  auto revision = summary_revisions_.find(key);
  std::string id = events::bundleStateEventId(summary.workspace, summary.bundle, summary.state,
                                              revision == summary_revisions_.end() ? 0 : revision->second, data);
  publishPublic(events::toCloudEvent(events::cloudEventType("bundle", summary.state), std::string(kEventSource),
                                     summary.workspace + "/" + summary.bundle, std::move(data), std::move(id)),
                "bundle", {summary.workspace, summary.bundle});
}

void Scheduler::publishPublic(const events::CloudEvent& event, std::string_view kind,
                              std::initializer_list<std::string_view> parts) {
  if (!options_.public_events) {
    return;
  }
  // Informational: sent with the next summaries or by the watch loop (flushPublicEvents), a batch at a time.
  // Callers hold mutex_ or not (registrations announce without it): the queue has its own lock.
  std::lock_guard lock(public_outbox_mutex_);
  public_outbox_.push_back({.subject = events::eventsSubject(kind, parts),
                            .data = events::encode(event).dump(),
                            .msg_id = "event/" + event.type + "/" + event.id});
  public_outbox_types_.push_back(event.type);
}

void Scheduler::flushPublicEvents() {
  std::vector<bus::JetStream::Outgoing> events;
  std::vector<std::string> types;
  {
    std::lock_guard lock(public_outbox_mutex_);
    events.swap(public_outbox_);
    types.swap(public_outbox_types_);
  }
  if (events.empty()) {
    return;
  }
  // A failure is logged and counted but never holds up the pipeline; the events of a failed batch are dropped.
  if (auto stored = hub_.js->publishAll(events); stored.ok()) {
    for (const auto& type : types) {
      metrics_.counter("public_events_total", "CloudEvents published on flotilla.events.>", {{"type", type}})
          .Increment();
    }
  } else {
    metrics_.counter("public_event_failures_total", "CloudEvents that could not be published")
        .Increment(static_cast<double>(events.size()));
    log::warn("cannot publish public events; they are dropped",
              {{"events", static_cast<int64_t>(events.size())}, {"error", stored.error().describe()}});
  }
}

void Scheduler::updateOfflineGauge() {
  metrics_.gauge("clusters_offline", "Registered clusters whose agent is silent for --cluster-offline-after")
      .Set(static_cast<double>(offline_.size()));
}

void Scheduler::updateGauges() {
  metrics_.gauge("clusters", "Registered clusters").Set(static_cast<double>(clusters_.size()));
  updateOfflineGauge();
  // Per partition when partitioned (clusters are the same in every partition).
  metrics_.gauge("bundles", "Bundles known", gaugeLabels()).Set(static_cast<double>(bundles_.size()));
  metrics_.gauge("deployments", "BundleDeployment records", gaugeLabels())
      .Set(static_cast<double>(deployments_.size()));
  metrics_.gauge("deployments_deleting", "BundleDeployments whose delete waits for the agent's report", gaugeLabels())
      .Set(static_cast<double>(deleting_records_));
}

}  // namespace flotilla::scheduler
