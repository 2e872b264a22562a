// The periodic resync and the watch's reports: bundles applied before a restart are seeded from their inventories
// (and handed to the watch), tracked bundles that are not Ready yet are re-checked and re-reported when their
// state changed (no new DeployEvent needed), and the watch's drift and health changes are reported as they come.
#include "flotilla/agent/deploy_handler.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/core/log.h"

namespace flotilla::agent {

Status DeployHandler::seedFromCluster() {
  auto inventories = inventories_.list();
  FLOTILLA_TRY(inventories);
  std::lock_guard lock(tracked_mutex_);
  for (const auto& inventory : *inventories) {
    if (!inventory.applied) {
      continue;  // its last apply failed: only a new deploy event can change that
    }
    std::string key = ownerOf(inventory.workspace, inventory.bundle);
    if (options_.drift != nullptr) {
      options_.drift->adoptBundle(key, DriftSettings{}, inventory.objects);
    }
    if (!tracked_.contains(key)) {
      tracked_[key] = TrackedBundle{.workspace = inventory.workspace,
                                    .bundle = inventory.bundle,
                                    .deployment_id = inventory.deployment_id,
                                    .generation = inventory.generation,
                                    .objects = inventory.objects};
    }
  }
  return {};
}

std::vector<TrackedBundle> DeployHandler::tracked() const {
  std::lock_guard lock(tracked_mutex_);
  std::vector<TrackedBundle> out;
  for (const auto& [key, bundle] : tracked_) {
    out.push_back(bundle);
  }
  return out;
}

size_t DeployHandler::resync() {
  std::vector<std::string> candidates;
  {
    std::lock_guard lock(tracked_mutex_);
    for (const auto& [key, bundle] : tracked_) {
      if (!bundle.state || *bundle.state == model::BundleState::kNotReady) {
        candidates.push_back(key);
      }
    }
  }
  size_t published = 0;
  for (const auto& key : candidates) {
    std::lock_guard work(work_mutex_);
    TrackedBundle bundle;
    {
      std::lock_guard lock(tracked_mutex_);
      auto it = tracked_.find(key);
      if (it == tracked_.end()) {
        continue;  // deleted meanwhile
      }
      bundle = it->second;
    }
    auto current = currentReport(key, bundle.objects);
    if (!current.ok()) {
      metrics_.counter("resync_errors_total", "Health re-checks that could not read the cluster").Increment();
      log::warn("resync could not read the cluster",
                {{"cluster", cluster_}, {"bundle", bundle.bundle}, {"error", current.error().describe()}});
      continue;
    }
    BundleReport bundle_report = std::move(current).value();
    if (bundle.state && *bundle.state == bundle_report.state) {
      continue;
    }
    events::DeployEvent origin{
        .cluster = cluster_, .workspace = bundle.workspace, .bundle = bundle.bundle, .generation = bundle.generation};
    auto sent = report(origin, bundle_report, bundle.deployment_id, bundle.objects);
    if (!sent.ok()) {
      continue;  // counted by the publisher; the next resync tries again
    }
    metrics_.counter("resync_state_changes_total", "State changes found by the periodic health re-check").Increment();
    log::info("bundle state changed", {{"cluster", cluster_},
                                       {"bundle", bundle.bundle},
                                       {"state", std::string(model::stateName(bundle_report.state))}});
    ++published;
  }
  if (published > 0 && options_.wake) {
    options_.wake();  // a parked deploy may wait for exactly this state (dependsOn)
  }
  return published;
}

Result<BundleReport> DeployHandler::currentReport(const std::string& owner, const std::vector<ObjectRef>& objects) {
  if (options_.drift != nullptr) {
    if (auto watched = options_.drift->bundleReport(owner)) {
      return std::move(*watched);
    }
  }
  auto health = applier_.checkHealth(objects);
  FLOTILLA_TRY(health);
  return summarize(*health);
}

void DeployHandler::reportFromWatch(const std::string& owner) {
  if (options_.drift == nullptr) {
    return;
  }
  std::lock_guard work(work_mutex_);
  auto watched = options_.drift->bundleReport(owner);
  if (!watched) {
    return;
  }
  TrackedBundle bundle;
  {
    std::lock_guard lock(tracked_mutex_);
    auto it = tracked_.find(owner);
    if (it == tracked_.end()) {
      return;  // deleted meanwhile, or not reported yet
    }
    bundle = it->second;
  }
  if (bundle.state && (*bundle.state == model::BundleState::kErrApplied ||
                       *bundle.state == model::BundleState::kWaitApplied || alreadyReported(owner, bundle.deployment_id,
                                                                                            *watched, true))) {
    return;  // only a deploy changes ErrApplied/WaitApplied; nothing new otherwise
  }
  events::DeployEvent origin{
      .cluster = cluster_, .workspace = bundle.workspace, .bundle = bundle.bundle, .generation = bundle.generation};
  if (!report(origin, *watched, bundle.deployment_id, bundle.objects).ok()) {
    return;  // counted by the publisher; the next change or resync reports it
  }
  metrics_
      .counter("watch_state_changes_total", "Bundle states the watch reported without a deploy, by state",
               {{"state", std::string(model::stateName(watched->state))}})
      .Increment();
  log::info("bundle state changed (watch)", {{"cluster", cluster_},
                                             {"bundle", bundle.bundle},
                                             {"state", std::string(model::stateName(watched->state))},
                                             {"reason", watched->reason},
                                             {"message", watched->message}});
  if (options_.wake) {
    options_.wake();  // a parked deploy may wait for exactly this state (dependsOn)
  }
  changed_ = false;
}

}  // namespace flotilla::agent
