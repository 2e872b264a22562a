// The DeployHandler's front half: decode and check an event, load its inventory, and the ways it ends (report,
// retry, reject). dependsOn is in dependencies.cpp, the apply and delete paths in deploy_apply.cpp, releases and
// the reaper in release.cpp, resync in resync.cpp.
#include "flotilla/agent/deploy_handler.h"

#include <algorithm>
#include <utility>

#include "flotilla/agent/watcher.h"
#include "flotilla/core/log.h"
#include "flotilla/model/codec.h"

namespace flotilla::agent {
namespace {

//! The flag of the handling running on this thread (handleEvent), set by noteChanged(); nullptr outside one.
thread_local bool* t_changed = nullptr;

//! Points t_changed at one handling's flag for its duration.
class ChangeScope {
 public:
  explicit ChangeScope(bool& changed) : previous_(std::exchange(t_changed, &changed)) {}
  ~ChangeScope() { t_changed = previous_; }
  ChangeScope(const ChangeScope&) = delete;
  ChangeScope& operator=(const ChangeScope&) = delete;

 private:
  bool* previous_;
};

}  // namespace

std::string ownerOf(std::string_view workspace, std::string_view bundle) {
  return std::string(workspace) + "/" + std::string(bundle);
}

bool wantsForce(const model::BundleDeploymentOptions& options) {
  return (options.helm && (options.helm->take_ownership || options.helm->force)) ||
         (options.correct_drift && options.correct_drift->force);
}

// ---- DeployHandler --------------------------------------------------------------------------------------------

DeployHandler::DeployHandler(std::string cluster, Applier& applier, InventoryStore& inventories,
                             ManifestSource& manifests, StatusPublisher& publisher, Metrics& metrics,
                             DeployHandlerOptions options)
    : cluster_(std::move(cluster)),
      applier_(applier),
      inventories_(inventories),
      manifests_(manifests),
      publisher_(publisher),
      metrics_(metrics),
      options_(std::move(options)),
      stages_(metrics),
      released_(inventories.client(), inventories.ns(), metrics),
      ownership_(inventories, released_, metrics) {}

std::chrono::milliseconds retryDelay(uint64_t delivery_count, const DeployHandlerOptions& options) {
  return service::Backoff(options.retry_base, options.retry_max).delay(delivery_count);
}

Outcome DeployHandler::handle(std::string_view data, const Delivery& delivery) {
  auto event = events::parsePayload<events::DeployEvent>(data);
  if (!event.ok()) {
    // Without a decodable event there is no bundle to report on: log, count and drop it.
    metrics_.counter("invalid_messages_total", "Deploy messages that do not decode").Increment();
    log::error("dropping a deploy message that does not decode",
               {{"cluster", cluster_}, {"error", event.error().describe()}});
    return Outcome::reject("invalid");
  }
  return handleEvent(*event, delivery);
}

Outcome DeployHandler::transientFailure(const events::DeployEvent& event, const Delivery& delivery,
                                        std::string_view step, const Error& error) {
  // An unreachable or failing API server is waited out (no delivery used); other steps retry by delivery count.
  const bool cluster_step = step != "report" && step != "manifest";
  const bool waiting = cluster_step && error.kind == ErrorKind::kTransient;
  auto delay = backoff(waiting ? delivery.attempt : delivery.delivery_count);
  metrics_
      .counter("deploy_retries_total", "Deploy events naked for a transient failure, by step",
               {{"step", std::string(step)}})
      .Increment();
  log::warn("transient failure, will retry", {{"cluster", cluster_},
                                              {"workspace", event.workspace},
                                              {"bundle", event.bundle},
                                              {"commit", event.commit},
                                              {"step", std::string(step)},
                                              {"delivery", static_cast<int64_t>(delivery.delivery_count)},
                                              {"retry_in_ms", static_cast<int64_t>(delay.count())},
                                              {"error", error.describe()}});
  return waiting ? Outcome::wait(delay, "retry") : Outcome::retry(delay);
}

Status DeployHandler::report(const events::DeployEvent& event, const BundleReport& bundle_report,
                             std::string_view deployment_id, const std::vector<ObjectRef>& objects, bool forget) {
  events::StatusEvent status{.workspace = event.workspace,
                             .bundle = event.bundle,
                             .deployment_id = std::string(deployment_id),
                             .generation = event.generation,
                             .state = std::string(model::stateName(bundle_report.state)),
                             .reason = bundle_report.reason,
                             .message = bundle_report.message,
                             .resources = bundle_report.resources};
  FLOTILLA_TRY(publisher_.publish(std::move(status)));
  std::lock_guard lock(tracked_mutex_);
  std::string key = ownerOf(event.workspace, event.bundle);
  if (auto it = tracked_.find(key);
      !event.remove && (it == tracked_.end() || it->second.generation != event.generation ||
                        it->second.deployment_id != deployment_id)) {
    stages_.observe(service::Stage::kDeployToApplied, event.time);  // the first report on this deploy
  }
  if (forget) {
    tracked_.erase(key);
    if (options_.drift != nullptr) {
      options_.drift->unregisterBundle(key);  // deleted, or failed as a whole: nothing of it to watch
    }
  } else {
    tracked_[key] = TrackedBundle{.workspace = event.workspace,
                                  .bundle = event.bundle,
                                  .deployment_id = std::string(deployment_id),
                                  .generation = event.generation,
                                  .objects = objects,
                                  .state = bundle_report.state,
                                  .reason = bundle_report.reason,
                                  .message = bundle_report.message};
  }
  noteChanged();  // a new state other bundles may wait for
  return {};
}

void DeployHandler::noteChanged() {
  if (t_changed != nullptr) {
    *t_changed = true;
  }
}

Status DeployHandler::writeInventory(Inventory& inventory) {
  const std::string owner = ownerOf(inventory.workspace, inventory.bundle);
  auto locked = inventory_locks_.lock(owner);
  {
    std::lock_guard state(state_mutex_);
    if (auto it = taken_.find(owner); it != taken_.end()) {
      std::erase_if(inventory.objects, [&](const ObjectRef& ref) { return it->second.contains(ref.identity()); });
    }
  }
  return inventories_.save(inventory);
}

Status DeployHandler::removeInventory(const std::string& workspace, const std::string& bundle) {
  auto locked = inventory_locks_.lock(ownerOf(workspace, bundle));
  return inventories_.remove(workspace, bundle);
}

Status DeployHandler::completeHandover(const Claimant& claimant, const ObjectRef& ref,
                                       const std::string& previous_owner, const std::string& rule) {
  auto locked = inventory_locks_.lock(previous_owner);
  {
    std::lock_guard state(state_mutex_);
    taken_[previous_owner].insert(ref.identity());  // before the edit: the owner's own later writes leave it out
    if (auto it = taken_.find(claimant.owner()); it != taken_.end()) {
      it->second.erase(ref.identity());  // the claimant had lost it earlier in its handling and took it back
    }
  }
  return ownership_.completeHandover(claimant, ref, previous_owner, rule);
}

bool DeployHandler::alreadyReported(const std::string& key, std::string_view deployment_id,
                                    const BundleReport& bundle_report, bool compare_message) const {
  std::lock_guard lock(tracked_mutex_);
  auto it = tracked_.find(key);
  return it != tracked_.end() && it->second.deployment_id == deployment_id && it->second.state &&
         *it->second.state == bundle_report.state && it->second.reason == bundle_report.reason &&
         (!compare_message || it->second.message == bundle_report.message);
}

Outcome DeployHandler::rejectWithReport(const events::DeployEvent& event, const Delivery& delivery,
                                        std::string_view reason, std::string message, std::string result) {
  log::error("cannot deploy the bundle", {{"cluster", cluster_},
                                          {"workspace", event.workspace},
                                          {"bundle", event.bundle},
                                          {"commit", event.commit},
                                          {"reason", std::string(reason)},
                                          {"error", message}});
  auto published = report(event, bundleFailure(model::BundleState::kErrApplied, reason, std::move(message)),
                          event.deployment_id, {}, /*forget=*/true);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  return Outcome::reject(std::move(result));
}

Outcome DeployHandler::reportThenAck(const events::DeployEvent& event, const Delivery& delivery,
                                     const BundleReport& bundle_report, std::string_view deployment_id,
                                     const std::vector<ObjectRef>& objects, bool forget, std::string result) {
  auto published = report(event, bundle_report, deployment_id, objects, forget);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  return Outcome::ack(std::move(result));
}

Outcome DeployHandler::handleEvent(const events::DeployEvent& event, const Delivery& delivery) {
  bool changed = false;
  Outcome outcome;
  {
    auto bundle = bundle_locks_.lock(ownerOf(event.workspace, event.bundle));
    ChangeScope scope(changed);
    outcome = dispatch(event, delivery);
  }
  if (changed && options_.wake) {
    options_.wake();  // a release, a handover or a new state may be what a parked deploy waits for
  }
  return outcome;
}

bool DeployHandler::supersededInMemory(const events::DeployEvent& event) {
  std::lock_guard state(state_mutex_);
  int64_t& seen = seen_generations_[ownerOf(event.workspace, event.bundle)];
  if (event.generation < seen) {
    return true;
  }
  seen = event.generation;
  return false;
}

Outcome DeployHandler::dispatch(const events::DeployEvent& event, const Delivery& delivery) {
  if (event.cluster != cluster_) {
    metrics_.counter("invalid_messages_total", "Deploy messages that do not decode").Increment();
    log::error("dropping a deploy event for another cluster",
               {{"cluster", cluster_}, {"event_cluster", event.cluster}, {"bundle", event.bundle}});
    return Outcome::reject("invalid");
  }
  log::info("deploy event", {{"cluster", cluster_},
                             {"workspace", event.workspace},
                             {"bundle", event.bundle},
                             {"commit", event.commit},
                             {"delete", event.remove},
                             {"deploymentID", event.deployment_id},
                             {"generation", event.generation},
                             {"delivery", static_cast<int64_t>(delivery.delivery_count)}});
  auto options = model::decodeOptions(event.options);
  if (!options.ok()) {
    return rejectWithReport(event, delivery, kReasonInvalidOptions, options.error().describe(), "invalid");
  }
  if (auto checked = checkDriftOptions(*options); !checked.ok()) {
    return rejectWithReport(event, delivery, kReasonInvalidOptions, checked.error().describe(), "invalid");
  }
  std::optional<Inventory> inventory;
  if (auto failed = loadInventory(event, delivery, inventory)) {
    return *failed;
  }
  if ((inventory && inventory->generation > event.generation) || supersededInMemory(event)) {
    metrics_.counter("stale_events_total", "Deploy events older than the last one handled").Increment();
    log::info("skipping a stale deploy event", {{"cluster", cluster_},
                                                {"bundle", event.bundle},
                                                {"generation", event.generation},
                                                {"handled_generation", inventory ? inventory->generation : 0}});
    return Outcome::ack("stale");
  }
  {
    std::lock_guard state(state_mutex_);
    if (auto it = waiting_.find(ownerOf(event.workspace, event.bundle));
        it != waiting_.end() && it->second.generation <= event.generation) {
      waiting_.erase(it);  // this deploy decides anew whether the bundle waits
    }
  }
  if (event.remove) {
    return handleDelete(event, *options, inventory, delivery);
  }
  if (auto refused = refuseUnsupported(event, *options, delivery)) {
    return *refused;
  }
  if (inventory && inventory->deployment_id == event.deployment_id && inventory->applied) {
    return handleUnchanged(event, *options, *inventory, delivery);
  }
  return applyWhenDependenciesMet(event, *options, inventory, delivery);
}

std::optional<Outcome> DeployHandler::loadInventory(const events::DeployEvent& event, const Delivery& delivery,
                                                    std::optional<Inventory>& inventory) {
  const std::string owner = ownerOf(event.workspace, event.bundle);
  auto locked = inventory_locks_.lock(owner);  // no handover edits it between forgetting taken_ and the read
  {
    std::lock_guard state(state_mutex_);
    taken_.erase(owner);  // what other bundles took before is no longer listed in the inventory read now
  }
  auto loaded = inventories_.load(event.workspace, event.bundle);
  locked.unlock();
  if (loaded.ok()) {
    inventory = std::move(loaded).value();
    return std::nullopt;
  }
  if (loaded.error().retryable()) {
    return transientFailure(event, delivery, "inventory", loaded.error());
  }
  // A damaged inventory cannot say what to prune: start over from the new manifest (nothing is deleted).
  metrics_.counter("inventory_invalid_total", "Inventories that could not be read and were replaced").Increment();
  log::error("ignoring an unreadable inventory",
             {{"cluster", cluster_}, {"bundle", event.bundle}, {"error", loaded.error().describe()}});
  return std::nullopt;
}

Outcome DeployHandler::handleUnchanged(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                                       const Inventory& inventory, const Delivery& delivery) {
  // The same content at a newer commit (or with new labels): the claim rules and selectors read these fields.
  Inventory current = inventory;
  current.generation = event.generation;
  current.gitrepo = event.gitrepo;
  current.commit_sequence = event.commit_sequence;
  current.labels = event.labels;
  current.options = watchOptionsOf(event.options);
  if (current != inventory) {
    if (auto saved = writeInventory(current); !saved.ok()) {
      return transientFailure(event, delivery, "inventory", saved.error());
    }
  }
  if (!current.wait_until.empty()) {
    return continueHealthWait(event, options, current, delivery);  // helm.timeoutSeconds
  }
  auto state = currentReport(ownerOf(event.workspace, event.bundle), inventory.objects);
  if (!state.ok()) {
    return transientFailure(event, delivery, "health", state.error());
  }
  auto published = report(event, *state, inventory.deployment_id, inventory.objects);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  log::info("deployment already applied; status re-reported",
            {{"cluster", cluster_}, {"bundle", event.bundle}, {"deploymentID", event.deployment_id}});
  return Outcome::ack("skipped");
}

}  // namespace flotilla::agent
