// Rollout passes (rollout.h): a bundle's placement decided over all its clusters at once, what triggers a pass
// (status reports, offline changes, maxNew batches) and the rollout's status, log lines and metrics.
#include <algorithm>
#include <map>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/targeting.h"
#include "flotilla/scheduler/scheduler.h"
#include "times.h"

namespace flotilla::scheduler {

namespace {

bool failingState(std::string_view state) {
  return state == "ErrApplied" || state == "NotReady" || state == "Modified";
}

}  // namespace

void Scheduler::enqueueRolloutPass(const std::string& key) {
  {
    std::lock_guard lock(wake_mutex_);
    rollout_queue_.insert(key);
  }
  wake_.notify_all();
}

void Scheduler::enqueueRolloutPassesOf(const std::string& cluster) {
  std::set<std::string> keys;
  for (const auto& view : deploymentsOfCluster(cluster)) {
    keys.insert(events::bundleKey(view.record->workspace, view.record->bundle));
  }
  for (const auto& key : keys) {
    enqueueRolloutPass(key);
  }
}

std::optional<events::RolloutStatus> Scheduler::rollout(const std::string& workspace, const std::string& bundle) const {
  std::lock_guard lock(mutex_);
  auto it = rollouts_.find(events::bundleKey(workspace, bundle));
  if (it == rollouts_.end()) {
    return std::nullopt;
  }
  return it->second;
}

Status Scheduler::reconcileRollout(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto bundle = bundles_.find(key);
  if (bundle == bundles_.end() || !bundle->second.targeting) {
    return {};  // deleted or never rendered since the pass was asked for
  }
  gitrepo_gone_.clear();
  Affected affected;
  bool published = false;
  FLOTILLA_TRY(reconcileBundle(bundle->second, detail::nowMs(), affected, published));
  metrics_.counter("reconciles_total", "Re-targeting passes", {{"scope", "rollout"}}).Increment();
  return writeSummaries(affected);
}

std::optional<RolloutTarget> Scheduler::rolloutTarget(const PlacementInput& in,
                                                      const std::vector<GroupInfo>& groups) const {
  if (!in.want || in.want->hold || in.targeting == nullptr) {
    return std::nullopt;
  }
  auto cluster = clusters_.find(in.cluster);
  if (cluster == clusters_.end()) {
    return std::nullopt;
  }
  RolloutTarget t{.cluster = in.cluster,
                  .facts = clusterInfoOf(cluster->second),
                  .wanted = in.want->deployment_id,
                  .paused = in.targeting->paused || in.cluster_paused};
  model::resolveGroups(t.facts, groups);
  const DeploymentRecord* record = in.record;
  if (record == nullptr || record->deployment_id.empty()) {
    return t;  // nothing released there yet
  }
  // A deployment being deleted that targeting wants again counts as released but unavailable (WaitApplied).
  t.released = record->deployment_id;
  const events::DeploymentState released = events::releasedState(*record, in.status);
  t.state = released.state;
  t.message = released.message;
  if (offline_.contains(in.cluster)) {
    t.state = std::string(events::kOfflineState);
    auto seen = lastSignOfLife(in.cluster);
    t.message = "the agent has given no sign of life since " + (seen ? formatRfc3339(*seen) : std::string("?"));
  }
  t.available = t.state == "Ready";
  t.failing = t.state == events::kOfflineState || failingState(t.state);
  return t;
}

Status Scheduler::reconcileBundle(const BundleInfo& bundle, int64_t clock_ms, Affected& affected, bool& published,
                                  const std::set<std::string>* only) {
  std::set<std::string> clusters;
  for (const auto& [name, cluster] : clusters_) {
    clusters.insert(name);
  }
  for (auto& cluster : clustersOfBundle(bundle.workspace, bundle.bundle)) {
    clusters.insert(std::move(cluster));
  }
  std::vector<PlacementInput> inputs;
  std::vector<RolloutTarget> targets;
  const std::vector<GroupInfo> groups = groupList();
  for (const auto& cluster : clusters) {
    if (deregistering(cluster)) {
      continue;  // its deployments are the deregistration's (deregistration.cpp)
    }
    inputs.push_back(placementInput(&bundle, bundle.workspace, bundle.bundle, cluster, clock_ms, &groups));
    if (auto target = rolloutTarget(inputs.back(), groups)) {
      targets.push_back(std::move(*target));
    }
  }
  const bool has_targets = !targets.empty();
  const RolloutPlan plan = planRollout(bundle.targeting ? bundle.targeting->rollout : std::nullopt, std::move(targets),
                                       kRolloutRoundsPerPass);
  // A maxNew batch per round, sent one after another; the first batch also carries the stagings.
  std::map<std::string, size_t> round_of;
  for (size_t round = 0; round < plan.rounds.size(); ++round) {
    for (const auto& cluster : plan.rounds[round]) {
      round_of.emplace(cluster, round);
    }
  }
  std::vector<std::vector<BatchedPlacement>> batches(std::max<size_t>(1, plan.rounds.size()));
  for (auto& input : inputs) {
    if (only != nullptr && !only->contains(input.cluster)) {
      continue;
    }
    input.rollout_held = input.want && !input.want->hold && !plan.release.contains(input.cluster);
    PlacementDecision decision = decidePlacement(input);
    reuseUnackedGeneration(input, decision);
    const bool batchable =
        decision.action == PlacementDecision::Action::kDeploy || decision.action == PlacementDecision::Action::kStage;
    // The first release of a bundle event goes alone: the crash tests' fault point sits right after it.
    const bool first_of_event = affected.bundle_event && !affected.deployed && decision.event;
    if (batchable && !first_of_event) {
      auto round = round_of.find(input.cluster);
      const size_t at = decision.event && round != round_of.end() ? round->second : 0;
      batches[at].push_back(BatchedPlacement{.input = &input, .decision = std::move(decision)});
      continue;
    }
    FLOTILLA_TRY(applyPlacement(input, decision, affected, published));
  }
  for (size_t round = 0; round < batches.size(); ++round) {
    if (round > 0 && !batches[round].empty()) {
      countRolloutBatch();
    }
    FLOTILLA_TRY(applyPlacements(batches[round], affected, published));
  }
  if (has_targets) {
    noteRollout(bundle, plan);
  } else {
    rollouts_.erase(events::bundleKey(bundle.workspace, bundle.bundle));
  }
  affected.bundles.emplace(bundle.workspace, bundle.bundle);
  if (plan.another_pass) {
    // Fleet's next reconcile: the next maxNew batch, after the budgets are checked again.
    countRolloutBatch();
    enqueueRolloutPass(events::bundleKey(bundle.workspace, bundle.bundle));
  }
  return {};
}

void Scheduler::countRolloutBatch() {
  metrics_.counter("rollout_batches_total", "Rollout passes that released a maxNew batch and asked for the next")
      .Increment();
}

void Scheduler::noteRollout(const BundleInfo& bundle, const RolloutPlan& plan) {
  const std::string key = events::bundleKey(bundle.workspace, bundle.bundle);
  const events::RolloutStatus& now = plan.status;
  auto previous = rollouts_.find(key);
  const std::string before = previous == rollouts_.end() ? std::string() : previous->second.state;
  if (now.state == "Halted" && (before != "Halted" || previous->second.partition != now.partition)) {
    metrics_
        .counter("rollouts_halted_total", "Rollouts that stopped at a partition over its budget with failing clusters")
        .Increment();
    log::warn("rollout halted: a partition is over its budget with failing clusters",
              {{"bundle", bundle.bundle},
               {"workspace", bundle.workspace},
               {"gitrepo", bundle.gitrepo},
               {"partition", now.partition},
               {"held", now.held},
               {"clusters", clusterStates(now.halted_by)}});
  } else if (before == "Halted" && now.state != "Halted") {
    metrics_
        .counter("rollouts_resumed_total",
                 "Halted rollouts that went on (the clusters recovered or a commit superseded)")
        .Increment();
    log::info("rollout resumed", {{"bundle", bundle.bundle},
                                  {"workspace", bundle.workspace},
                                  {"gitrepo", bundle.gitrepo},
                                  {"state", now.state},
                                  {"partition", now.partition}});
  }
  rollouts_[key] = now;
}

}  // namespace flotilla::scheduler
