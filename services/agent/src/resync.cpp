// The periodic resync and the watch's reports: bundles applied before a restart are seeded from their inventories
// (and handed to the watch), tracked bundles that are not Ready yet are re-checked and re-reported when their
// state changed (no new DeployEvent needed), and the watch's drift and health changes are reported as they come.
#include "flotilla/agent/deploy_handler.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/core/log.h"
#include "flotilla/model/codec.h"

namespace flotilla::agent {

Status DeployHandler::seedFromCluster() {
  auto inventories = inventories_.list();
  FLOTILLA_TRY(inventories);
  std::vector<const Inventory*> seeded;
  {
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
        seeded.push_back(&inventory);
      }
    }
  }
  for (const Inventory* inventory : seeded) {
    watchSeeded(*inventory);
  }
  return {};
}

void DeployHandler::watchSeeded(const Inventory& inventory) {
  if (options_.drift == nullptr) {
    return;
  }
  const std::string owner = ownerOf(inventory.workspace, inventory.bundle);
  auto handling = bundle_locks_.lock(owner);  // a deploy of the bundle registers what it applied: that one is newer
  if (options_.drift->registered(owner)) {
    return;
  }
  auto restored = restoreWatched(inventory);
  if (restored.ok()) {
    options_.drift->registerBundle(owner, restored->first, std::move(restored->second));
    return;
  }
  metrics_.counter("watch_restore_failures_total", "Bundles whose desired state could not be rebuilt after a restart")
      .Increment();
  log::warn(
      "cannot rebuild the desired state after a restart: until the next deploy only deleted objects count as "
      "drift and nothing is corrected",
      {{"cluster", cluster_}, {"bundle", inventory.bundle}, {"error", restored.error().describe()}});
  options_.drift->adoptBundle(owner, DriftSettings{}, inventory.objects);
}

Result<std::pair<DriftSettings, std::vector<WatchedObject>>> DeployHandler::restoreWatched(const Inventory& inventory) {
  if (inventory.options.isNull()) {
    return fail(ErrorKind::kNotFound, "the inventory has no options (written by an older agent)");
  }
  auto options = model::decodeOptions(inventory.options);
  FLOTILLA_TRY(options);
  // One attempt: a manifest the hub no longer serves to this cluster (the cluster moved on while the agent was down)
  // takes the fallback at once instead of holding up the other bundles' seeding.
  auto data = manifests_.get(inventory.deployment_id.substr(0, inventory.deployment_id.find(':')), /*retry=*/false);
  FLOTILLA_TRY(data);
  auto manifest = parseManifest(*data);
  FLOTILLA_TRY(manifest);
  const std::string owner = ownerOf(inventory.workspace, inventory.bundle);
  const NamespacePolicy policy{.default_namespace = options->default_namespace,
                               .target_namespace = options->target_namespace};
  DriftSettings settings = driftSettings(*options, inventories_.ns());
  kube::KubeClient& client = inventories_.client();
  std::vector<WatchedObject> watched;
  for (const auto& object : *manifest) {
    auto ref = objectRefOf(object);
    if (!ref.ok()) {
      continue;  // the apply reported it; nothing of it to watch
    }
    auto mapping = client.mapping(ref->api_version, ref->kind);
    if (!mapping.ok()) {
      continue;
    }
    Json placed = placeObject(object, mapping->namespaced, policy, owner);
    auto placed_ref = objectRefOf(placed);
    if (!placed_ref.ok() || !inventory.lists(*placed_ref)) {
      continue;  // not the bundle's (another bundle's object, or never applied)
    }
    // What the agent's apply would leave to manager flotilla: the baseline the live object is compared with.
    auto answer = client.apply(
        placed, kube::ApplyOptions{.field_manager = std::string(kFieldManager), .force = true, .dry_run = true});
    if (!answer.ok()) {
      if (answer.error().kind == ErrorKind::kTransient) {
        return fail(answer.error());
      }
      continue;
    }
    watched.push_back(WatchedObject{.ref = std::move(placed_ref).value(),
                                    .live = std::move(answer).value(),
                                    .desired = settings.correct ? std::move(placed) : Json(),
                                    .relist = true});
  }
  return std::make_pair(std::move(settings), std::move(watched));
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

bool DeployHandler::reportFromWatch(const std::string& owner) {
  if (options_.drift == nullptr) {
    return true;
  }
  // A deploy of the bundle in progress (a long CRD wait) reports its own result: the watch comes back after it
  // instead of waiting, so the other bundles' reports go on meanwhile.
  auto handling = bundle_locks_.tryLock(owner);
  if (!handling.owns_lock()) {
    return false;
  }
  auto watched = options_.drift->bundleReport(owner);
  if (!watched) {
    return true;
  }
  TrackedBundle bundle;
  {
    std::lock_guard lock(tracked_mutex_);
    auto it = tracked_.find(owner);
    if (it == tracked_.end()) {
      return true;  // deleted meanwhile, or not reported yet
    }
    bundle = it->second;
  }
  if (bundle.state &&
      (*bundle.state == model::BundleState::kErrApplied || *bundle.state == model::BundleState::kWaitApplied ||
       alreadyReported(owner, bundle.deployment_id, *watched, true))) {
    return true;  // only a deploy changes ErrApplied/WaitApplied; nothing new otherwise
  }
  events::DeployEvent origin{
      .cluster = cluster_, .workspace = bundle.workspace, .bundle = bundle.bundle, .generation = bundle.generation};
  if (!report(origin, *watched, bundle.deployment_id, bundle.objects).ok()) {
    return true;  // counted by the publisher; the next change or resync reports it
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
  return true;
}

}  // namespace flotilla::agent
