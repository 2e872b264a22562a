// The periodic resync: bundles applied before a restart are seeded from their inventories, and tracked bundles
// that are not Ready yet are re-checked and re-reported when their state changed (no new DeployEvent needed).
#include "flotilla/agent/deploy_handler.h"
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
    auto handling = bundle_locks_.tryLock(key);
    if (!handling.owns_lock()) {
      continue;  // a deploy of it is running and reports its state itself; a slow one never stalls the others
    }
    TrackedBundle bundle;
    {
      std::lock_guard lock(tracked_mutex_);
      auto it = tracked_.find(key);
      if (it == tracked_.end()) {
        continue;  // deleted meanwhile
      }
      bundle = it->second;
    }
    auto health = applier_.checkHealth(bundle.objects);
    if (!health.ok()) {
      metrics_.counter("resync_errors_total", "Health re-checks that could not read the cluster").Increment();
      log::warn("resync could not read the cluster",
                {{"cluster", cluster_}, {"bundle", bundle.bundle}, {"error", health.error().describe()}});
      continue;
    }
    BundleReport bundle_report = summarize(*health);
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

}  // namespace flotilla::agent
