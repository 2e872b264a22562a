// Placement on clusters: the reconcile queue and passes, and carrying out placement decisions (placement.h):
// publish the DeployEvent first, then write the record.
#include <algorithm>
#include <tuple>

#include "flotilla/core/fault.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"
#include "times.h"

namespace flotilla::scheduler {

using Action = PlacementDecision::Action;

namespace {

//! Calls `fn(bundle, published)` for each bundle with targeting, stopping at the first error.
template <typename Bundles, typename Fn>
Status forEachTargeted(const Bundles& bundles, Fn fn) {
  for (const auto& [key, bundle] : bundles) {
    if (!bundle.targeting) {
      continue;
    }
    bool published = false;
    FLOTILLA_TRY(fn(bundle, published));
  }
  return {};
}

}  // namespace

// ---- the reconcile queue ----

void Scheduler::enqueueReconcile(const std::string& cluster) {
  {
    std::lock_guard lock(wake_mutex_);
    if (std::find(reconcile_queue_.begin(), reconcile_queue_.end(), cluster) == reconcile_queue_.end()) {
      reconcile_queue_.push_back(cluster);
    }
  }
  wake_.notify_all();
}

void Scheduler::reconcileLoop() {
  std::chrono::milliseconds delay = options_.retry_base;
  while (!stopping_) {
    std::deque<std::string> work;
    std::set<std::string> rollouts;
    {
      std::unique_lock lock(wake_mutex_);
      // Targeting runs on the newest bundles only once the backlog is handled, so a restart does not briefly
      // deploy an older rendering that a queued BundleEvent is about to replace.
      wake_.wait(lock, [this] {
        return stopping_.load() || (caught_up_.load() && (!reconcile_queue_.empty() || !rollout_queue_.empty()));
      });
      if (stopping_) {
        break;
      }
      work.swap(reconcile_queue_);
      rollouts.swap(rollout_queue_);
    }
    Status done = reconcileQueued(work, rollouts);
    if (done.ok()) {
      delay = options_.retry_base;
      continue;
    }
    metrics_.counter("reconcile_failures_total", "Re-targeting passes that failed and were retried").Increment();
    log::warn("re-targeting failed, retrying",
              {{"error", done.error().describe()}, {"retry_in_ms", static_cast<int64_t>(delay.count())}});
    for (const auto& cluster : work) {
      enqueueReconcile(cluster);
    }
    for (const auto& key : rollouts) {
      enqueueRolloutPass(key);
    }
    if (!sleepFor(delay)) {
      break;
    }
    delay = std::min(delay * 2, options_.retry_max);
  }
}

Status Scheduler::reconcileQueued(const std::deque<std::string>& work, const std::set<std::string>& rollouts) {
  if (std::find(work.begin(), work.end(), "") != work.end()) {
    return reconcileAll();  // every bundle's rollout pass included
  }
  if (work.size() > kClustersPerPass) {
    FLOTILLA_TRY(reconcileClusters(work));
  } else {
    for (const auto& cluster : work) {
      FLOTILLA_TRY(reconcileCluster(cluster));
    }
  }
  for (const auto& key : rollouts) {
    FLOTILLA_TRY(reconcileRollout(key));
  }
  return {};
}

Status Scheduler::reconcileClusters(const std::deque<std::string>& work) {
  // Many clusters at once (a burst of registrations): one rollout pass per bundle decides them all, instead of a
  // pass per cluster and bundle.
  std::lock_guard lock(mutex_);
  gitrepo_gone_.clear();
  Affected affected;
  int64_t clock_ms = detail::nowMs();
  const std::set<std::string> only(work.begin(), work.end());
  FLOTILLA_TRY(forEachTargeted(bundles_, [&](const BundleInfo& bundle, bool& published) {
    return reconcileBundle(bundle, clock_ms, affected, published, &only);
  }));
  affected.clusters.insert(only.begin(), only.end());
  metrics_.counter("reconciles_total", "Re-targeting passes", {{"scope", "clusters"}}).Increment();
  return writeSummaries(affected);
}

Status Scheduler::reconcileAll() {
  std::lock_guard lock(mutex_);
  gitrepo_gone_.clear();
  Affected affected;
  int64_t clock_ms = detail::nowMs();
  Status passed = forEachTargeted(bundles_, [&](const BundleInfo& bundle, bool& published) -> Status {
    FLOTILLA_TRY(reconcileBundle(bundle, clock_ms, affected, published));
    affected.bundles.emplace(bundle.workspace, bundle.bundle);
    if (!bundle.gitrepo.empty()) {
      affected.gitrepos.emplace(bundle.workspace, bundle.gitrepo);
    }
    return {};
  });
  FLOTILLA_TRY(passed);
  FLOTILLA_TRY(retryFailedDeletes(clock_ms, affected));
  for (const auto& [name, cluster] : clusters_) {
    affected.clusters.insert(name);
  }
  metrics_.counter("reconciles_total", "Re-targeting passes", {{"scope", "all"}}).Increment();
  return writeSummaries(affected);
}

Status Scheduler::retryFailedDeletes(int64_t clock_ms, Affected& affected) {
  // Deployments of deleted bundles are visited by no bundle's pass: a delete the agent could not finish is sent
  // again here (placement decides; a delete still in flight is left alone).
  std::vector<std::tuple<std::string, std::string, std::string>> pending;
  for (const auto& [key, record] : deployments_) {
    if (record.deleting && !bundles_.contains(events::bundleKey(record.workspace, record.bundle))) {
      pending.emplace_back(record.workspace, record.bundle, record.cluster);
    }
  }
  for (const auto& [workspace, bundle, cluster] : pending) {
    bool published = false;
    FLOTILLA_TRY(reconcilePair(nullptr, workspace, bundle, cluster, clock_ms, affected, published));
  }
  return {};
}

Status Scheduler::reconcileCluster(const std::string& cluster) {
  std::lock_guard lock(mutex_);
  gitrepo_gone_.clear();
  Affected affected;
  int64_t clock_ms = detail::nowMs();
  FLOTILLA_TRY(forEachTargeted(bundles_, [&](const BundleInfo& bundle, bool& published) -> Status {
    if (deregistering(cluster)) {
      return {};  // its deployments are the deregistration's (deregistration.cpp)
    }
    PlacementInput input = placementInput(&bundle, bundle.workspace, bundle.bundle, cluster, clock_ms);
    PlacementDecision decision = decidePlacement(input);
    if (decision.action == Action::kDeploy && input.want) {
      // A release: the bundle's rollout decides, seeing every cluster.
      const std::set<std::string> only{cluster};
      return reconcileBundle(bundle, clock_ms, affected, published, &only);
    }
    return applyPlacement(input, decision, affected, published);
  }));
  affected.clusters.insert(cluster);
  metrics_.counter("reconciles_total", "Re-targeting passes", {{"scope", "cluster"}}).Increment();
  return writeSummaries(affected);
}

Status Scheduler::deleteBundle(const std::string& workspace, const std::string& bundle_name, const std::string& gitrepo,
                               int64_t clock_ms, Affected& affected) {
  const std::vector<std::string> clusters = clustersOfBundle(workspace, bundle_name);
  bool published = false;
  for (const auto& cluster : clusters) {
    FLOTILLA_TRY(reconcilePair(nullptr, workspace, bundle_name, cluster, clock_ms, affected, published));
  }
  affected.bundles.emplace(workspace, bundle_name);
  if (!gitrepo.empty()) {
    affected.gitrepos.emplace(workspace, gitrepo);
  }
  return {};
}

// ---- one (bundle, cluster) pair: decide, then carry it out ----

std::vector<GroupInfo> Scheduler::groupList() const {
  std::vector<GroupInfo> out;
  out.reserve(groups_.size());
  for (const auto& [key, group] : groups_) {
    out.push_back(group);
  }
  return out;
}

Status Scheduler::loadVariants(BundleInfo& bundle) {
  if (!bundle.targeting || bundle.targeting->variants_object.empty()) {
    return {};
  }
  auto data = hub_.manifests->get(bundle.targeting->variants_object);
  FLOTILLA_TRY(data);
  auto json = Json::parse(*data);
  FLOTILLA_TRY(json);
  auto table = events::decodeBundleVariants(*json);
  FLOTILLA_TRY(table);
  bundle.targeting->variants = std::move(table).value();
  return {};
}

PlacementInput Scheduler::placementInput(const BundleInfo* bundle, const std::string& workspace,
                                         const std::string& bundle_name, const std::string& cluster_name,
                                         int64_t clock_ms, const std::vector<GroupInfo>* groups) const {
  PlacementInput input{.workspace = workspace, .bundle = bundle_name, .cluster = cluster_name, .clock_ms = clock_ms};
  auto cluster = clusters_.find(cluster_name);
  input.cluster_paused = cluster != clusters_.end() && cluster->second.spec.paused;
  if (bundle != nullptr && bundle->targeting) {
    input.targeting = &*bundle->targeting;
    if (cluster != clusters_.end()) {
      input.want = place(*bundle->targeting, clusterInfoOf(cluster->second), groups ? *groups : groupList());
    }
  }
  auto existing = deployments_.find(events::deploymentKey(cluster_name, workspace, bundle_name));
  input.record = existing == deployments_.end() ? nullptr : &existing->second;
  input.status = input.record != nullptr ? statusOf(*input.record) : nullptr;
  input.gitrepo = bundle != nullptr ? bundle->gitrepo : (input.record != nullptr ? input.record->gitrepo : "");
  input.now = log::nowRfc3339();
  return input;
}

Status Scheduler::reconcilePair(const BundleInfo* bundle, const std::string& workspace, const std::string& bundle_name,
                                const std::string& cluster, int64_t clock_ms, Affected& affected, bool& published) {
  if (deregistering(cluster)) {
    return {};  // its deployments are the deregistration's (deregistration.cpp)
  }
  PlacementInput input = placementInput(bundle, workspace, bundle_name, cluster, clock_ms);
  PlacementDecision decision = decidePlacement(input);
  reuseUnackedGeneration(input, decision);
  return applyPlacement(input, decision, affected, published);
}

Status Scheduler::applyPlacement(const PlacementInput& input, const PlacementDecision& decision, Affected& affected,
                                 bool& published) {
  switch (decision.action) {
    case Action::kNothing:
      return {};
    case Action::kHold:
      // A per-cluster bundle the bundler has not rendered for this cluster yet (it re-renders when it learns about
      // the cluster): keep what runs there now.
      metrics_.counter("variants_held_total", "Placements held: a per-cluster bundle not yet rendered for the cluster")
          .Increment();
      log::info("holding a per-cluster bundle until the bundler renders it for the cluster",
                {{"bundle", input.bundle}, {"cluster", input.cluster}, {"workspace", input.workspace}});
      return {};
    case Action::kFollowCommit: {
      const std::string key = events::deploymentKey(input.cluster, input.workspace, input.bundle);
      FLOTILLA_TRY(hub_.deployments->put(key, events::encode(decision.record).dump()));
      storeDeploymentRecord(key, decision.record);
      affected.bundles.emplace(input.workspace, input.bundle);
      affected.gitrepos.emplace(input.workspace, input.gitrepo);
      return {};
    }
    case Action::kStage:
    case Action::kDeploy:
      FLOTILLA_TRY(writeDeployment(input, decision, published));
      break;
    case Action::kRemove:
      FLOTILLA_TRY(removeDeployment(input, decision, published));
      break;
  }
  if (published && affected.bundle_event && !affected.deployed) {
    // Crash tests: the first cluster of a bundle event has its DeployEvent and record, the others not yet.
    affected.deployed = true;
    fault::point(kFaultBundleDeployed);
  }
  affected.add(input.workspace, input.bundle, input.gitrepo, input.cluster);
  return {};
}

Status Scheduler::writeDeployment(const PlacementInput& input, const PlacementDecision& decision, bool& published) {
  const events::DeploymentRecord& next = decision.record;
  if (decision.event) {
    // Publish first, then the record (see the file comment of scheduler.h).
    FLOTILLA_TRY(publishDeploy(*decision.event));
    published = true;
  }
  const std::string key = events::deploymentKey(input.cluster, input.workspace, input.bundle);
  FLOTILLA_TRY(hub_.deployments->put(key, events::encode(next).dump()));
  noteDeploymentWritten(input, next, decision.event.has_value());
  return {};
}

void Scheduler::noteDeploymentWritten(const PlacementInput& input, const DeploymentRecord& next, bool released) {
  storeDeploymentRecord(events::deploymentKey(input.cluster, input.workspace, input.bundle), next);
  if (released) {
    log::info("deployment scheduled", {{"cluster", input.cluster},
                                       {"bundle", input.bundle},
                                       {"gitrepo", input.gitrepo},
                                       {"commit", next.commit},
                                       {"deploymentID", next.deployment_id},
                                       {"generation", next.generation}});
  } else if (!next.staged_deployment_id.empty()) {
    const bool by_rollout = next.staged_reason == events::kStagedByRollout;
    metrics_
        .counter("deploys_held_total",
                 "Deployments staged but not released (reason: Paused = bundle or cluster paused, Rollout = the "
                 "rollout has not reached the cluster)",
                 {{"reason", next.staged_reason}})
        .Increment();
    // One line per held deployment is noise at thousands of clusters: the rollout's halts and resumes are the
    // story (rollout_pass.cpp); a pause is rare and deliberate.
    const log::Fields fields{{"cluster", input.cluster},
                             {"bundle", input.bundle},
                             {"gitrepo", input.gitrepo},
                             {"deploymentID", next.staged_deployment_id}};
    if (by_rollout) {
      log::debug("deployment held by the rollout", fields);
    } else {
      log::info("deployment held: bundle or cluster paused", fields);
    }
  }
}

void Scheduler::reuseUnackedGeneration(const PlacementInput& input, PlacementDecision& decision) {
  if (!decision.event || decision.event->remove) {
    return;
  }
  auto unacked = unacked_deploys_.find(events::deploymentKey(input.cluster, input.workspace, input.bundle));
  if (unacked == unacked_deploys_.end()) {
    return;
  }
  const int64_t previous = input.record != nullptr ? input.record->generation : 0;
  if (unacked->second.deployment_id != decision.event->deployment_id || unacked->second.generation <= previous) {
    unacked_deploys_.erase(unacked);  // something else was released since
    return;
  }
  decision.event->generation = unacked->second.generation;
  decision.event->id =
      deployMsgId(input.cluster, input.bundle, decision.event->deployment_id, decision.event->generation);
  decision.record.generation = unacked->second.generation;
  metrics_
      .counter("deploys_redone_total",
               "DeployEvents sent again under the generation of an earlier copy whose ack did not come")
      .Increment();
  log::info("sending a DeployEvent again under its unacknowledged generation",
            {{"cluster", input.cluster}, {"bundle", input.bundle}, {"generation", decision.event->generation}});
}

Status Scheduler::applyPlacements(std::vector<BatchedPlacement>& batch, Affected& affected, bool& published) {
  if (batch.empty()) {
    return {};
  }
  std::vector<bus::JetStream::Outgoing> deploys;
  std::vector<events::DeployEvent> sent_events;  // as published (with `retiring`), in the order of `deploys`
  for (const auto& [input, decision] : batch) {
    if (!decision.event) {
      continue;
    }
    events::DeployEvent event = *decision.event;
    addRetiring(event);
    deploys.push_back(
        {.subject = events::deploySubject(event.cluster), .data = events::encode(event).dump(), .msg_id = event.id});
    sent_events.push_back(std::move(event));
  }
  FLOTILLA_TRY(checkMayPublish(deploys.size()));
  // Publish first, then the records: the records of the DeployEvents stored are written (a message that failed
  // is redone by the pass's retry alone, not the whole batch again under new generations).
  const std::vector<Result<bus::PublishAck>> acks = hub_.js->publishEach(deploys);
  std::optional<Error> failed;
  std::vector<bool> keep(batch.size(), true);
  for (size_t item = 0, next_event = 0; item < batch.size(); ++item) {
    if (!batch[item].decision.event) {
      continue;
    }
    const events::DeployEvent& event = sent_events[next_event];
    const Result<bus::PublishAck>& ack = acks[next_event++];
    if (!ack.ok()) {
      keep[item] = false;
      if (!failed) {
        failed = ack.error();
      }
      noteDeployUnacked(event);
      continue;
    }
    published = true;
    noteDeployStored(event, *ack);
  }
  std::vector<std::pair<std::string, std::string>> records;
  records.reserve(batch.size());
  for (size_t item = 0; item < batch.size(); ++item) {
    const auto& [input, decision] = batch[item];
    if (keep[item]) {
      records.emplace_back(events::deploymentKey(input->cluster, input->workspace, input->bundle),
                           events::encode(decision.record).dump());
    }
  }
  FLOTILLA_TRY(hub_.deployments->putAll(records));
  metrics_.counter("placement_batches_total", "Rollout passes whose releases and stagings were written as one batch")
      .Increment();
  for (size_t item = 0; item < batch.size(); ++item) {
    const auto& [input, decision] = batch[item];
    if (keep[item]) {
      noteDeploymentWritten(*input, decision.record, decision.event.has_value());
      affected.add(input->workspace, input->bundle, input->gitrepo, input->cluster);
    }
  }
  if (failed) {
    log::warn("some DeployEvents of a rollout pass were not stored; the pass is done again for them",
              {{"published", static_cast<int64_t>(sent_events.size())}, {"error", failed->describe()}});
    return fail(std::move(*failed));
  }
  return {};
}

Status Scheduler::removeDeployment(const PlacementInput& input, const PlacementDecision& decision, bool& published) {
  const char* reason = input.targeting == nullptr ? "bundle deleted" : "cluster no longer targeted";
  if (!decision.event || !clusters_.contains(input.cluster)) {
    // Nothing was ever released there, or no registered agent will answer (the delete still goes out, for an
    // agent that comes back under that name): no report to wait for.
    if (decision.event) {
      FLOTILLA_TRY(publishDeploy(*decision.event));
      published = true;
    }
    FLOTILLA_TRY(forgetDeployment(input.cluster, input.workspace, input.bundle));
    log::info("deployment removed",
              {{"cluster", input.cluster}, {"bundle", input.bundle}, {"gitrepo", input.gitrepo}, {"reason", reason}});
    return {};
  }
  // Publish first, then the record, now `deleting`: it and its status stay until the agent reports the delete
  // (status_handler.cpp settleDelete), so the GitRepo's summary can say what is left.
  FLOTILLA_TRY(publishDeploy(*decision.event));
  published = true;
  const std::string key = events::deploymentKey(input.cluster, input.workspace, input.bundle);
  FLOTILLA_TRY(hub_.deployments->put(key, events::encode(decision.record).dump()));
  storeDeploymentRecord(key, decision.record);
  metrics_.counter("deletes_sent_total", "Delete DeployEvents sent (the record waits for the agent's report)")
      .Increment();
  log::info("deployment delete sent", {{"cluster", input.cluster},
                                       {"bundle", input.bundle},
                                       {"gitrepo", input.gitrepo},
                                       {"generation", decision.record.generation},
                                       {"reason", reason}});
  return {};
}

Status Scheduler::forgetDeployment(const std::string& cluster, const std::string& workspace,
                                   const std::string& bundle) {
  const std::string key = events::deploymentKey(cluster, workspace, bundle);
  Status removed = hub_.deployments->remove(key);
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  if (statuses_.contains(key)) {
    FLOTILLA_TRY(removeStatusRecord(cluster, workspace, bundle));
  }
  eraseDeploymentRecord(key);
  return {};
}

Status Scheduler::removeStatusRecord(const std::string& cluster, const std::string& workspace,
                                     const std::string& bundle) {
  Status removed = hub_.status->remove(events::bundleDeploymentStatusKey(cluster, workspace, bundle));
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  statuses_.erase(events::deploymentKey(cluster, workspace, bundle));
  return {};
}

Status Scheduler::checkMayPublish(size_t deploys) const {
  if (deploys == 0 || !options_.may_publish || options_.may_publish()) {
    return {};
  }
  // The lease went to another replica (or could not be renewed) while this one was handling: the work is handed
  // back (nak) and the holder does it from the records.
  metrics_.counter("deploys_fenced_total", "DeployEvents not published because this replica no longer holds the lease")
      .Increment(static_cast<double>(deploys));
  log::warn("deploy not published: this replica does not hold the scheduler lease",
            {{"deploys", static_cast<int64_t>(deploys)}});
  return fail(ErrorKind::kTransient, "this replica does not hold the scheduler lease");
}

Status Scheduler::publishDeploy(const events::DeployEvent& sent) {
  FLOTILLA_TRY(checkMayPublish(1));
  events::DeployEvent event = sent;
  addRetiring(event);
  auto ack = hub_.js->publish(events::deploySubject(event.cluster), events::encode(event).dump(), event.id);
  if (!ack.ok()) {
    noteDeployUnacked(event);
    return fail(ack.error());
  }
  noteDeployStored(event, *ack);
  return {};
}

void Scheduler::noteDeployUnacked(const events::DeployEvent& event) {
  if (event.remove) {
    return;  // a delete's redo takes a new generation (reuseUnackedGeneration redoes releases only)
  }
  // Maybe stored (no ack in time): the redo sends it under the same generation and message id.
  unacked_deploys_[events::deploymentKey(event.cluster, event.workspace, event.bundle)] =
      UnackedDeploy{.deployment_id = event.deployment_id, .generation = event.generation};
}

void Scheduler::noteDeployStored(const events::DeployEvent& event, const bus::PublishAck& ack) {
  unacked_deploys_.erase(events::deploymentKey(event.cluster, event.workspace, event.bundle));
  metrics_.counter("deploys_published_total", "DeployEvents published", {{"action", event.remove ? "delete" : "apply"}})
      .Increment();
  if (ack.duplicate) {
    // The redo of a deploy published before a crash (or whose ack was lost): JetStream kept the first copy.
    metrics_.counter("deploys_deduplicated_total", "DeployEvents JetStream had already stored (redo after a crash)")
        .Increment();
  } else if (!event.remove && !handling_bundle_time_.empty()) {
    stages_.observe(service::Stage::kBundleToDeploy, handling_bundle_time_);
  }
  publishPublic(events::toCloudEvent(event, kEventSource), "bundledeployment", {event.cluster, event.bundle});
}

}  // namespace flotilla::scheduler
