#include "flotilla/agent/deploy_handler.h"

#include <algorithm>
#include <set>
#include <thread>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"

namespace flotilla::agent {
namespace {

constexpr int kPublishAttempts = 3;

// Appends `extra` to a report's message ("; "-separated).
void appendMessage(BundleReport& report, const std::string& extra) {
  report.message = report.message.empty() ? extra : report.message + "; " + extra;
}

}  // namespace

std::string ownerOf(std::string_view workspace, std::string_view bundle) {
  return std::string(workspace) + "/" + std::string(bundle);
}

bool wantsForce(const model::BundleDeploymentOptions& options) {
  return (options.helm && (options.helm->take_ownership || options.helm->force)) ||
         (options.correct_drift && options.correct_drift->force);
}

// ---- StatusPublisher ------------------------------------------------------------------------------------------

StatusPublisher::StatusPublisher(std::shared_ptr<bus::JetStream> js, std::string cluster, Metrics& metrics,
                                 std::string agent_version)
    : js_(std::move(js)), cluster_(std::move(cluster)), metrics_(metrics), agent_version_(std::move(agent_version)) {}

int64_t StatusPublisher::nextSequence(const std::string& bundle) {
  int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::lock_guard lock(mutex_);
  int64_t& last = sequences_[bundle];
  last = std::max(last + 1, now);
  return last;
}

Status StatusPublisher::publish(events::StatusEvent event) {
  event.cluster = cluster_;
  event.agent_version = agent_version_;
  event.time = log::nowRfc3339();
  if (event.sequence == 0) {
    event.sequence = nextSequence(event.bundle);
  }
  event.id = events::statusMsgId(cluster_, event.bundle, event.deployment_id, event.state, event.sequence);
  std::string subject = events::statusSubject(cluster_, event.bundle);
  const std::string& msg_id = event.id;
  std::string data = events::encode(event).dump();
  Error last;
  for (int attempt = 1; attempt <= kPublishAttempts; ++attempt) {
    auto ack = js_->publish(subject, data, msg_id);
    if (ack.ok()) {
      log::info("status published", {{"cluster", cluster_},
                                     {"workspace", event.workspace},
                                     {"bundle", event.bundle},
                                     {"state", event.state},
                                     {"reason", event.reason},
                                     {"duplicate", ack->duplicate}});
      metrics_.counter("status_published_total", "StatusEvents published, by state", {{"state", event.state}})
          .Increment();
      return {};
    }
    last = ack.error();
    metrics_.counter("status_publish_failures_total", "Failed attempts to publish a StatusEvent").Increment();
    log::warn("status publish failed",
              {{"cluster", cluster_}, {"bundle", event.bundle}, {"attempt", attempt}, {"error", last.describe()}});
    if (attempt < kPublishAttempts) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    }
  }
  return fail(ErrorKind::kTransient, "publishing status: " + last.message, last.where);
}

// ---- ManifestSource -------------------------------------------------------------------------------------------

Result<std::string> ManifestSource::get(std::string_view manifest_id) {
  std::shared_ptr<bus::ObjectStore> store;
  {
    std::lock_guard lock(mutex_);
    if (!store_) {
      auto opened = bus::ObjectStore::open(js_, events::kManifestsBucket, /*create_if_missing=*/false);
      if (!opened.ok()) {
        if (opened.error().kind == ErrorKind::kNotFound) {
          return fail(ErrorKind::kTransient, "the manifests bucket does not exist on the hub yet", "manifests");
        }
        return fail(opened.error());
      }
      store_ = std::move(opened).value();
    }
    store = store_;
  }
  return store->get(events::manifestObjectName(manifest_id));
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
      options_(options) {}

std::chrono::milliseconds retryDelay(uint64_t delivery_count, const DeployHandlerOptions& options) {
  auto delay = options.retry_base;
  for (uint64_t i = 1; i < delivery_count && delay < options.retry_max; ++i) {
    delay *= 2;
  }
  return std::min(delay, options.retry_max);
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
  if (forget) {
    tracked_.erase(key);
  } else {
    tracked_[key] = TrackedBundle{.workspace = event.workspace,
                                  .bundle = event.bundle,
                                  .deployment_id = std::string(deployment_id),
                                  .generation = event.generation,
                                  .objects = objects,
                                  .state = bundle_report.state};
  }
  return {};
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

Outcome DeployHandler::handleEvent(const events::DeployEvent& event, const Delivery& delivery) {
  std::lock_guard work(work_mutex_);
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
  auto loaded = inventories_.load(event.workspace, event.bundle);
  std::optional<Inventory> inventory;
  if (loaded.ok()) {
    inventory = std::move(loaded).value();
  } else if (loaded.error().retryable()) {
    return transientFailure(event, delivery, "inventory", loaded.error());
  } else {
    // A damaged inventory cannot say what to prune: start over from the new manifest (nothing is deleted).
    metrics_.counter("inventory_invalid_total", "Inventories that could not be read and were replaced").Increment();
    log::error("ignoring an unreadable inventory",
               {{"cluster", cluster_}, {"bundle", event.bundle}, {"error", loaded.error().describe()}});
  }
  if (inventory && inventory->generation > event.generation) {
    metrics_.counter("stale_events_total", "Deploy events older than the last one handled").Increment();
    log::info("skipping a stale deploy event", {{"cluster", cluster_},
                                                {"bundle", event.bundle},
                                                {"generation", event.generation},
                                                {"handled_generation", inventory->generation}});
    return Outcome::ack("stale");
  }
  if (event.remove) {
    return handleDelete(event, *options, inventory, delivery);
  }
  if (inventory && inventory->deployment_id == event.deployment_id && inventory->applied) {
    return handleUnchanged(event, *inventory, delivery);
  }
  auto unmet = unmetDependencies(event);
  if (!unmet.ok()) {
    if (unmet.error().retryable()) {
      return transientFailure(event, delivery, "dependencies", unmet.error());
    }
    return rejectWithReport(event, delivery, kReasonInvalidOptions, unmet.error().describe(), "invalid");
  }
  if (!unmet->empty()) {
    return waitForDependencies(event, *unmet, delivery);
  }
  return handleApply(event, *options, inventory, delivery);
}

Result<std::optional<model::BundleState>> DeployHandler::bundleState(std::string_view workspace,
                                                                     std::string_view bundle) {
  auto inventory = inventories_.load(workspace, bundle);
  if (!inventory.ok()) {
    if (inventory.error().retryable()) {
      return fail(inventory.error());
    }
    return std::optional<model::BundleState>(model::BundleState::kErrApplied);  // unreadable: not acceptable
  }
  if (!*inventory || (*inventory)->deployment_id.empty()) {
    return std::optional<model::BundleState>();
  }
  if (!(*inventory)->applied) {
    return std::optional<model::BundleState>(model::BundleState::kErrApplied);
  }
  auto health = applier_.checkHealth((*inventory)->objects);
  FLOTILLA_TRY(health);
  return std::optional<model::BundleState>(summarize(*health).state);
}

Result<std::vector<std::string>> DeployHandler::unmetDependencies(const events::DeployEvent& event) {
  std::vector<std::string> unmet;
  if (!event.depends_on.isArray()) {
    return unmet;
  }
  const auto& entries = event.depends_on.asArray();
  for (size_t i = 0; i < entries.size(); ++i) {
    auto ref = model::decodeBundleRef(entries[i], "dependsOn[" + std::to_string(i) + "]");
    FLOTILLA_TRY(ref);
    if (ref->name.empty()) {
      // Bundle labels live on the hub; the agent cannot evaluate a selector, so the scheduler must have.
      log::debug("dependsOn selector not evaluated by the agent", {{"bundle", event.bundle}, {"index", i}});
      continue;
    }
    std::vector<std::string> accepted = ref->accepted_states;
    if (accepted.empty()) {
      accepted.emplace_back("Ready");
    }
    auto state = bundleState(event.workspace, ref->name);
    FLOTILLA_TRY(state);
    std::string name = *state ? std::string(model::stateName(**state)) : std::string("not deployed");
    if (*state && std::find(accepted.begin(), accepted.end(), name) != accepted.end()) {
      continue;
    }
    std::string list;
    for (const auto& a : accepted) {
      list += (list.empty() ? "" : ", ") + a;
    }
    unmet.push_back("bundle " + ref->name + " is " + name + " (accepted: " + list + ")");
  }
  return unmet;
}

Outcome DeployHandler::waitForDependencies(const events::DeployEvent& event, const std::vector<std::string>& unmet,
                                           const Delivery& delivery) {
  auto delay = backoff(delivery.attempt);
  metrics_.counter("dependency_waits_total", "Deploys postponed because dependsOn is not satisfied").Increment();
  std::string message = "waiting for dependencies: ";
  for (size_t i = 0; i < unmet.size(); ++i) {
    message += (i == 0 ? "" : "; ") + unmet[i];
  }
  log::info("deploy waits for its dependencies", {{"cluster", cluster_},
                                                  {"bundle", event.bundle},
                                                  {"commit", event.commit},
                                                  {"retry_in_ms", static_cast<int64_t>(delay.count())},
                                                  {"waiting_for", message}});
  // Report once per deployment, not on every redelivery.
  bool reported = false;
  {
    std::lock_guard lock(tracked_mutex_);
    auto it = tracked_.find(ownerOf(event.workspace, event.bundle));
    reported = it != tracked_.end() && it->second.waiting_for == event.deployment_id;
  }
  if (!reported) {
    BundleReport waiting = bundleFailure(model::BundleState::kWaitApplied, kReasonDependencies, message);
    auto published = report(event, waiting, event.deployment_id, {});
    if (!published.ok()) {
      return transientFailure(event, delivery, "report", published.error());
    }
    std::lock_guard lock(tracked_mutex_);
    tracked_[ownerOf(event.workspace, event.bundle)].waiting_for = event.deployment_id;
  }
  return Outcome::wait(delay, "waiting");
}

Outcome DeployHandler::handleUnchanged(const events::DeployEvent& event, const Inventory& inventory,
                                       const Delivery& delivery) {
  auto health = applier_.checkHealth(inventory.objects);
  if (!health.ok()) {
    return transientFailure(event, delivery, "health", health.error());
  }
  auto published = report(event, summarize(*health), inventory.deployment_id, inventory.objects);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  log::info("deployment already applied; status re-reported",
            {{"cluster", cluster_}, {"bundle", event.bundle}, {"deploymentID", event.deployment_id}});
  return Outcome::ack("skipped");
}

Outcome DeployHandler::handleDelete(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                                    const std::optional<Inventory>& inventory, const Delivery& delivery) {
  std::string owner = ownerOf(event.workspace, event.bundle);
  size_t owned = inventory ? inventory->objects.size() : 0;
  if (options.keep_resources || !inventory) {
    auto removed = inventories_.remove(event.workspace, event.bundle);
    if (!removed.ok()) {
      return transientFailure(event, delivery, "inventory", removed.error());
    }
    BundleReport done{.state = model::BundleState::kReady,
                      .reason = std::string(inventory ? kReasonOrphaned : kReasonDeleted),
                      .message = inventory ? std::to_string(owned) + " objects left in place (keepResources)"
                                           : std::string("nothing to remove")};
    auto published = report(event, done, "", {}, /*forget=*/true);
    if (!published.ok()) {
      return transientFailure(event, delivery, "report", published.error());
    }
    return Outcome::ack(inventory ? "orphaned" : "deleted");
  }
  auto pruned = applier_.prune(inventory->objects, owner, options.delete_crd_resources, delivery.progress);
  if (!pruned.ok()) {
    return transientFailure(event, delivery, "prune", pruned.error());
  }
  if (!pruned->remaining.empty()) {
    // Keep what could not be deleted in the inventory, so a later delete (or apply) can still prune it.
    Inventory left = *inventory;
    left.objects = pruned->remaining;
    left.generation = event.generation;
    left.applied = false;
    auto saved = inventories_.save(left);
    if (!saved.ok()) {
      return transientFailure(event, delivery, "inventory", saved.error());
    }
    BundleReport failed = bundleFailure(model::BundleState::kErrApplied, kReasonPruneFailed, "");
    failed.message = "failed to delete " + std::to_string(pruned->remaining.size()) + " objects";
    for (size_t i = 0; i < pruned->errors.size() && i < kMaxMessageItems; ++i) {
      failed.message += (i == 0 ? ": " : "; ") + pruned->errors[i];
    }
    auto published = report(event, failed, "", {}, /*forget=*/true);
    if (!published.ok()) {
      return transientFailure(event, delivery, "report", published.error());
    }
    return Outcome::ack("error");
  }
  auto removed = inventories_.remove(event.workspace, event.bundle);
  if (!removed.ok()) {
    return transientFailure(event, delivery, "inventory", removed.error());
  }
  BundleReport done{
      .state = model::BundleState::kReady,
      .reason = std::string(kReasonDeleted),
      .message = "removed " + std::to_string(pruned->deleted + pruned->gone) + " objects" +
                 (pruned->orphaned.empty() ? std::string()
                                           : ", kept " + std::to_string(pruned->orphaned.size()) +
                                                 " (CRDs without deleteCRDResources, or adopted by another bundle)")};
  auto published = report(event, done, "", {}, /*forget=*/true);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  log::info("bundle removed", {{"cluster", cluster_},
                               {"bundle", event.bundle},
                               {"deleted", static_cast<int64_t>(pruned->deleted)},
                               {"kept", static_cast<int64_t>(pruned->orphaned.size())}});
  return Outcome::ack("deleted");
}

Outcome DeployHandler::handleApply(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                                   const std::optional<Inventory>& inventory, const Delivery& delivery) {
  auto started = std::chrono::steady_clock::now();
  std::string owner = ownerOf(event.workspace, event.bundle);

  // 1. The manifest.
  auto data = manifests_.get(event.manifest_id);
  if (!data.ok()) {
    if (data.error().kind == ErrorKind::kNotFound) {
      return rejectWithReport(event, delivery, kReasonManifestNotFound,
                              "manifest " + event.manifest_id + " is not in the manifests object store", "invalid");
    }
    return transientFailure(event, delivery, "manifest", data.error());
  }
  auto manifest = parseManifest(*data);
  if (!manifest.ok()) {
    return rejectWithReport(event, delivery, kReasonInvalidManifest, manifest.error().message, "invalid");
  }

  // 2. Record intent: the inventory covers old ∪ new objects before anything new exists in the cluster.
  Inventory current = inventory.value_or(Inventory{.workspace = event.workspace, .bundle = event.bundle});
  std::set<std::string> known;
  for (const auto& ref : current.objects) {
    known.insert(ref.identity());
  }
  ApplyRequest request{
      .owner = owner,
      .manifest = std::move(manifest).value(),
      .namespaces = {.default_namespace = options.default_namespace, .target_namespace = options.target_namespace},
      .force = wantsForce(options),
      .owned = known,
      .namespace_labels = options.namespace_labels.value_or(model::Labels{}),
      .namespace_annotations = options.namespace_annotations.value_or(model::Labels{})};
  // The applier calls this before each stage with the refs it is about to create.
  request.record_intent = [&](const std::vector<ObjectRef>& planned) -> Status {
    bool grew = false;
    for (const auto& ref : planned) {
      if (known.insert(ref.identity()).second) {
        current.objects.push_back(ref);
        grew = true;
      }
    }
    return grew ? inventories_.save(current) : Status();
  };

  // 3. Staged apply.
  auto applied = applier_.apply(request, delivery.progress);
  if (!applied.ok()) {
    return transientFailure(event, delivery, "apply", applied.error());
  }
  metrics_
      .histogram("apply_duration_seconds", "Time to apply one bundle (manifest load to last object)",
                 Metrics::durationBuckets())
      .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());

  // 4. Prune what left the bundle, never down to nothing without an explicit delete.
  std::set<std::string> wanted;
  for (const auto& ref : applied->objects) {
    wanted.insert(ref.identity());
  }
  std::vector<ObjectRef> leaving;
  for (const auto& ref : current.objects) {
    if (!wanted.contains(ref.identity())) {
      leaving.push_back(ref);
    }
  }
  BundleReport bundle_report = summarize(applied->outcomes);
  std::vector<ObjectRef> kept = applied->objects;
  bool prune_ok = true;
  if (!leaving.empty() && applied->objects.empty()) {
    metrics_.counter("prune_to_empty_refused_total", "Applies that would have pruned every object").Increment();
    log::warn("refusing to prune a bundle to nothing without a delete event",
              {{"cluster", cluster_}, {"bundle", event.bundle}, {"objects", static_cast<int64_t>(leaving.size())}});
    kept.insert(kept.end(), leaving.begin(), leaving.end());
    if (model::stateRank(bundle_report.state) < model::stateRank(model::BundleState::kOutOfSync)) {
      bundle_report.state = model::BundleState::kOutOfSync;
      bundle_report.reason = std::string(kReasonPruneToEmpty);
    }
    appendMessage(bundle_report, "the new manifest has no objects; kept " + std::to_string(leaving.size()) +
                                     " objects (removing everything needs a delete)");
    prune_ok = false;
  } else if (!leaving.empty()) {
    auto pruned = applier_.prune(leaving, owner, options.delete_crd_resources, delivery.progress);
    if (!pruned.ok()) {
      return transientFailure(event, delivery, "prune", pruned.error());
    }
    kept.insert(kept.end(), pruned->remaining.begin(), pruned->remaining.end());
    if (!pruned->errors.empty()) {
      prune_ok = false;
      if (bundle_report.state != model::BundleState::kErrApplied) {
        bundle_report.state = model::BundleState::kErrApplied;
        bundle_report.reason = std::string(kReasonPruneFailed);
      }
      std::string text = "failed to prune " + std::to_string(pruned->errors.size()) + " objects";
      for (size_t i = 0; i < pruned->errors.size() && i < kMaxMessageItems; ++i) {
        text += (i == 0 ? ": " : "; ") + pruned->errors[i];
      }
      appendMessage(bundle_report, text);
    }
  }

  // 5. The inventory now says exactly what the bundle owns.
  Inventory next{.workspace = event.workspace,
                 .bundle = event.bundle,
                 .deployment_id = event.deployment_id,
                 .generation = event.generation,
                 .applied = applied->failed == 0 && prune_ok,
                 .objects = kept};
  auto saved = inventories_.save(next);
  if (!saved.ok()) {
    return transientFailure(event, delivery, "inventory", saved.error());
  }

  // 6. Report.
  if (request.force) {
    appendMessage(bundle_report, "applied with force (takeOwnership)" +
                                     (applied->adopted > 0
                                          ? ": took " + std::to_string(applied->adopted) + " objects from other bundles"
                                          : std::string()));
  }
  auto published = report(event, bundle_report, event.deployment_id, next.objects);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  metrics_
      .counter("deploy_states_total", "Bundles applied, by resulting state",
               {{"state", std::string(model::stateName(bundle_report.state))}})
      .Increment();
  log::info("bundle applied", {{"cluster", cluster_},
                               {"workspace", event.workspace},
                               {"bundle", event.bundle},
                               {"commit", event.commit},
                               {"state", std::string(model::stateName(bundle_report.state))},
                               {"applied", static_cast<int64_t>(applied->applied)},
                               {"failed", static_cast<int64_t>(applied->failed)},
                               {"pruned", static_cast<int64_t>(leaving.size())}});
  return Outcome::ack("applied");
}

// ---- resync ---------------------------------------------------------------------------------------------------

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
  return published;
}

}  // namespace flotilla::agent
