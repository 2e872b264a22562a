// The DeployHandler's apply and delete paths. An apply runs as ordered steps over an ApplyPlan:
//   loadManifest -> applyStaged (the inventory is widened to old ∪ new before each stage; objects another bundle
//   owns go through the claim rules) -> releaseLeaving -> saveInventory -> reportApplied (ack, or park on an
//   ownership conflict)
// Each step either passes the plan on or ends the message with an Outcome (retry, reject).
#include <set>

#include "flotilla/agent/deploy_handler.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/core/fault.h"
#include "flotilla/core/log.h"

namespace flotilla::agent {
namespace {

// Appends `extra` to a report's message ("; "-separated).
void appendMessage(BundleReport& report, const std::string& extra) {
  report.message = report.message.empty() ? extra : report.message + "; " + extra;
}

//! "<what> N objects: e1; e2; ..." with at most kMaxMessageItems errors.
std::string describeFailures(const std::string& what, size_t count, const std::vector<std::string>& errors) {
  std::string text = what + " " + std::to_string(count) + " objects";
  for (size_t i = 0; i < errors.size() && i < kMaxMessageItems; ++i) {
    text += (i == 0 ? ": " : "; ") + errors[i];
  }
  return text;
}

//! The bundle of a DeployEvent as it claims objects (the claim rules read these fields).
Claimant claimantOf(const events::DeployEvent& event, const model::BundleDeploymentOptions& options) {
  return Claimant{.workspace = event.workspace,
                  .bundle = event.bundle,
                  .gitrepo = event.gitrepo,
                  .commit_sequence = event.commit_sequence,
                  .retiring = {event.retiring.begin(), event.retiring.end()},
                  .force = wantsForce(options)};
}

}  // namespace

//! One apply on its way through the steps of handleApply.
struct DeployHandler::ApplyPlan {
  const events::DeployEvent& event;
  const model::BundleDeploymentOptions& options;
  const Delivery& delivery;
  std::string owner;
  Claimant claimant;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  Inventory current;            //!< old ∪ new objects: widened before each stage creates anything
  std::set<std::string> known;  //!< identities in `current`
  ApplyRequest request;
  ApplyResult applied;
  std::vector<ObjectRef> leaving;  //!< in the old inventory, not in the new manifest
  ReleaseResult released;
  BundleReport report;
  std::vector<ObjectRef> kept;  //!< what the bundle owns after prune: the new inventory
  bool prune_ok = true;
  std::string manifest_id;              //!< the manifest applied: the event's, or the previous one for an atomic revert
  kube::KubeClient* client = nullptr;   //!< the bundle's (impersonating) client; nullptr = the agent's own
  std::optional<BundleReport> failure;  //!< set while reverting (atomic): why, reported with the revert's result
  bool wait_health = false;             //!< timeoutSeconds: park until healthy or past the deadline
  DriftSettings drift;                  //!< correctDrift, diff.comparePatches, ignore.conditions
  std::vector<WatchedObject> watched;   //!< what the apply wrote, for the drift watch
};

Outcome DeployHandler::handleApply(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                                   const std::optional<Inventory>& inventory, const Delivery& delivery) {
  ApplyPlan plan{.event = event,
                 .options = options,
                 .delivery = delivery,
                 .owner = ownerOf(event.workspace, event.bundle),
                 .claimant = claimantOf(event, options),
                 .current = inventory.value_or(Inventory{.workspace = event.workspace, .bundle = event.bundle}),
                 .manifest_id = event.manifest_id};
  return runApply(plan);
}

Outcome DeployHandler::runApply(ApplyPlan& plan) {
  auto client = bundleClient(plan.options);
  if (!client.ok()) {
    return serviceAccountMissing(plan.event, plan.delivery, client.error());
  }
  plan.client = *client;
  for (auto step : {&DeployHandler::loadManifest, &DeployHandler::applyStaged, &DeployHandler::revertIfAtomic,
                    &DeployHandler::releaseLeaving, &DeployHandler::saveInventory}) {
    if (auto done = (this->*step)(plan)) {
      return *done;
    }
  }
  return reportApplied(plan);
}

//! The manifest from the hub (manifest_source.h), and the request that applies it.
std::optional<Outcome> DeployHandler::loadManifest(ApplyPlan& plan) {
  const events::DeployEvent& event = plan.event;
  auto data = manifests_.get(plan.manifest_id, /*retry=*/true,
                             {.workspace = event.workspace, .bundle = event.bundle, .generation = event.generation});
  if (!data.ok()) {
    if (data.error().kind == ErrorKind::kConflict) {
      // The hub's record of this bundle moved on to a newer generation, published before the record was written:
      // applying this one would only be undone by it.
      metrics_.counter("stale_events_total", "Deploy events older than the last one handled").Increment();
      log::info("skipping a superseded deploy event", {{"cluster", cluster_},
                                                       {"bundle", event.bundle},
                                                       {"generation", event.generation},
                                                       {"reason", data.error().message}});
      return Outcome::ack("stale");
    }
    if (data.error().kind == ErrorKind::kNotFound) {
      return rejectWithReport(event, plan.delivery, kReasonManifestNotFound,
                              "manifest " + plan.manifest_id + " is not in the hub's store: " + data.error().message,
                              "invalid");
    }
    return transientFailure(event, plan.delivery, "manifest", data.error());
  }
  auto manifest = parseManifest(*data);
  if (!manifest.ok()) {
    return rejectWithReport(event, plan.delivery, kReasonInvalidManifest, manifest.error().message, "invalid");
  }
  for (const auto& ref : plan.current.objects) {
    plan.known.insert(ref.identity());
  }
  const auto& options = plan.options;
  plan.request = ApplyRequest{
      .owner = plan.owner,
      .manifest = std::move(manifest).value(),
      .namespaces = {.default_namespace = options.default_namespace, .target_namespace = options.target_namespace},
      .force = plan.claimant.force,
      .namespace_labels = options.namespace_labels.value_or(model::Labels{}),
      .namespace_annotations = options.namespace_annotations.value_or(model::Labels{}),
      .owned_namespaces = {plan.current.created_namespaces.begin(), plan.current.created_namespaces.end()},
      .client = plan.client};
  // The applier calls this before each stage with the refs it is about to create: record intent, so the
  // inventory covers old ∪ new objects before anything new exists in the cluster.
  plan.request.record_intent = [this, &plan](const std::vector<ObjectRef>& planned) -> Status {
    bool grew = false;
    for (const auto& ref : planned) {
      if (plan.known.insert(ref.identity()).second) {
        plan.current.objects.push_back(ref);
        grew = true;
      }
    }
    if (!grew) {
      return {};
    }
    FLOTILLA_TRY(writeInventory(plan.current));
    fault::point("agent.claim.intent");  // the intent is recorded, nothing of it applied yet
    return {};
  };
  plan.drift = driftSettings(options, inventories_.ns());
  plan.request.applied_object = [&plan](const ObjectRef& ref, const Json& sent, const Json& live) {
    plan.watched.push_back(
        WatchedObject{.ref = ref, .live = live, .desired = plan.drift.correct ? sent : Json(), .relist = isCrd(ref)});
  };
  wireClaims(plan);
  return std::nullopt;
}

void DeployHandler::wireClaims(ApplyPlan& plan) {
  plan.request.lock_object = [this](const ObjectRef& ref) { return object_locks_.lock(ref); };
  plan.request.decide_claim = [this, &plan](const ObjectRef& ref, const std::string& owner) {
    return ownership_.decide(plan.claimant, ref, owner);
  };
  plan.request.claimed = [this, &plan](const ObjectRef& ref, const std::string& owner,
                                       const std::string& rule) -> Status {
    FLOTILLA_TRY(completeHandover(plan.claimant, ref, owner, rule));
    noteChanged();
    std::lock_guard lock(tracked_mutex_);
    if (auto it = tracked_.find(owner); it != tracked_.end()) {
      std::erase_if(it->second.objects, [&](const ObjectRef& r) { return r.identity() == ref.identity(); });
    }
    return {};
  };
}

std::optional<Outcome> DeployHandler::applyStaged(ApplyPlan& plan) {
  if (options_.drift != nullptr) {
    options_.drift->beginApply(plan.owner);  // no drift correction of this bundle races its deploy
  }
  auto applied = applier_.apply(plan.request, plan.delivery.progress);
  if (!applied.ok()) {
    return transientFailure(plan.event, plan.delivery, "apply", applied.error());
  }
  plan.applied = std::move(applied).value();
  metrics_
      .histogram("apply_duration_seconds", "Time to apply one bundle (manifest load to last object)",
                 Metrics::durationBuckets())
      .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - plan.started).count());
  plan.report = summarize(plan.applied.outcomes);
  plan.kept = plan.applied.objects;
  if (plan.failure) {  // this was an atomic revert: report why, with what the revert did
    plan.report = revertReport(*plan.failure, plan.manifest_id, plan.report);
  }
  return std::nullopt;
}

std::optional<Outcome> DeployHandler::revertIfAtomic(ApplyPlan& plan) {
  if (plan.failure || plan.applied.failed == 0 || !plan.options.helm || !plan.options.helm->atomic) {
    return std::nullopt;
  }
  std::string previous = previousManifestOf(plan.current);
  if (previous.empty()) {
    appendMessage(plan.report, "atomic: no earlier deployment to revert to");
    return std::nullopt;
  }
  metrics_
      .counter("atomic_reverts_total", "Atomic reverts to the previous manifest, by trigger", {{"trigger", "apply"}})
      .Increment();
  log::warn(
      "apply failed; reverting to the previous manifest (atomic)",
      {{"cluster", cluster_}, {"bundle", plan.event.bundle}, {"manifest", previous}, {"error", plan.report.message}});
  plan.failure = plan.report;
  plan.manifest_id = std::move(previous);
  if (auto done = loadManifest(plan)) {
    return done;
  }
  return applyStaged(plan);
}

Outcome DeployHandler::revertAfterTimeout(const events::DeployEvent& event,
                                          const model::BundleDeploymentOptions& options, const Inventory& inventory,
                                          const Delivery& delivery, BundleReport failure) {
  metrics_
      .counter("atomic_reverts_total", "Atomic reverts to the previous manifest, by trigger", {{"trigger", "timeout"}})
      .Increment();
  log::warn("health wait timed out; reverting to the previous manifest (atomic)",
            {{"cluster", cluster_}, {"bundle", event.bundle}, {"manifest", inventory.previous_manifest_id}});
  Inventory failed = inventory;
  failed.applied = false;  // so the manifest recorded as the last good one stays the previous one
  failed.wait_until.clear();
  ApplyPlan plan{.event = event,
                 .options = options,
                 .delivery = delivery,
                 .owner = ownerOf(event.workspace, event.bundle),
                 .claimant = claimantOf(event, options),
                 .current = std::move(failed),
                 .manifest_id = inventory.previous_manifest_id,
                 .failure = std::move(failure)};
  return runApply(plan);
}

//! Releases what left the bundle (handed over, held or deleted), never down to nothing without an explicit delete.
std::optional<Outcome> DeployHandler::releaseLeaving(ApplyPlan& plan) {
  std::set<std::string> wanted;
  for (const auto& ref : plan.applied.objects) {
    wanted.insert(ref.identity());
  }
  for (const auto& ref : plan.applied.unmanaged) {
    wanted.insert(ref.identity());  // refused, never ours: dropped from the inventory without a release
  }
  for (const auto& ref : plan.current.objects) {
    if (!wanted.contains(ref.identity())) {
      plan.leaving.push_back(ref);
    }
  }
  if (plan.leaving.empty()) {
    return std::nullopt;
  }
  if (plan.applied.objects.empty() && plan.applied.claims.empty() && plan.applied.unmanaged.empty()) {
    refusePruneToEmpty(plan);
    return std::nullopt;
  }
  auto released =
      release(plan.owner, plan.leaving, plan.options.delete_crd_resources, plan.delivery.progress, plan.client);
  if (!released.ok()) {
    return transientFailure(plan.event, plan.delivery, "prune", released.error());
  }
  plan.released = std::move(released).value();
  plan.kept.insert(plan.kept.end(), plan.released.remaining.begin(), plan.released.remaining.end());
  if (!plan.released.errors.empty()) {
    plan.prune_ok = false;
    if (plan.report.state != model::BundleState::kErrApplied) {
      plan.report.state = model::BundleState::kErrApplied;
      plan.report.reason = std::string(kReasonPruneFailed);
    }
    appendMessage(plan.report, describeFailures("failed to prune", plan.released.errors.size(), plan.released.errors));
  }
  return std::nullopt;
}

void DeployHandler::refusePruneToEmpty(ApplyPlan& plan) {
  metrics_.counter("prune_to_empty_refused_total", "Applies that would have pruned every object").Increment();
  log::warn(
      "refusing to prune a bundle to nothing without a delete event",
      {{"cluster", cluster_}, {"bundle", plan.event.bundle}, {"objects", static_cast<int64_t>(plan.leaving.size())}});
  plan.kept.insert(plan.kept.end(), plan.leaving.begin(), plan.leaving.end());
  if (model::stateRank(plan.report.state) < model::stateRank(model::BundleState::kOutOfSync)) {
    plan.report.state = model::BundleState::kOutOfSync;
    plan.report.reason = std::string(kReasonPruneToEmpty);
  }
  appendMessage(plan.report, "the new manifest has no objects; kept " + std::to_string(plan.leaving.size()) +
                                 " objects (removing everything needs a delete)");
  plan.prune_ok = false;
}

//! The inventory now says exactly what the bundle owns.
std::optional<Outcome> DeployHandler::saveInventory(ApplyPlan& plan) {
  const bool applied = plan.applied.failed == 0 && plan.prune_ok && !plan.failure;
  plan.wait_health = applied && waitsForHealth(plan.options) && !healthSettled(plan.applied.outcomes, plan.options);
  plan.current = Inventory{.workspace = plan.event.workspace,
                           .bundle = plan.event.bundle,
                           .deployment_id = plan.event.deployment_id,
                           .generation = plan.event.generation,
                           .applied = applied,
                           .gitrepo = plan.event.gitrepo,
                           .commit_sequence = plan.event.commit_sequence,
                           .labels = plan.event.labels,
                           .objects = plan.kept,
                           .claims = plan.applied.claims,
                           .adopted = adoptedAfter(plan.current, plan.applied, plan.kept),
                           .created_namespaces = createdNamespacesAfter(plan.current, plan.applied),
                           .previous_manifest_id = previousManifestOf(plan.current),
                           .wait_until = plan.wait_health ? healthDeadline(plan.options, clock()) : std::string(),
                           .options = watchOptionsOf(plan.event.options)};
  auto saved = writeInventory(plan.current);
  if (!saved.ok()) {
    return transientFailure(plan.event, plan.delivery, "inventory", saved.error());
  }
  if (plan.released.handed_over > 0) {
    // The claimants wake after this (handleEvent): a crash here leaves them parked until the fallback delay or the
    // next wake, when they find the objects no longer listed here (rule stale).
    fault::point("agent.release.dropped");
  }
  const ReleaseResult& released = plan.released;
  if (released.handed_over + released.held + released.deleted > 0) {
    // Only a release that did something wakes the parked deploys: a parked claimant re-running releases the object
    // it claims from its own intent (it stays the owner's), and must not wake the other claimants in a loop.
    noteChanged();
  }
  return std::nullopt;
}

Outcome DeployHandler::reportApplied(ApplyPlan& plan) {
  const events::DeployEvent& event = plan.event;
  BundleReport& bundle_report = plan.report;
  watchApplied(plan);
  if (plan.request.force) {
    appendMessage(bundle_report, "applied with force (takeOwnership)" +
                                     (plan.applied.adopted > 0 ? ": took " + std::to_string(plan.applied.adopted) +
                                                                     " objects from other bundles"
                                                               : std::string()));
  }
  if (!plan.applied.claims.empty()) {
    return reportConflicts(plan);
  }
  if (plan.wait_health) {
    appendMessage(bundle_report, "waiting for health until " + plan.current.wait_until + " (helm.timeoutSeconds)");
  }
  // Counted and logged before the report: the objects are applied now, also when the report fails (a hub node
  // lost, say) and the redelivered deploy only re-reports ("deployment already applied"), so every apply has
  // exactly one line.
  metrics_
      .counter("deploy_states_total", "Bundles applied, by resulting state",
               {{"state", std::string(model::stateName(bundle_report.state))}})
      .Increment();
  log::info("bundle applied", {{"cluster", cluster_},
                               {"workspace", event.workspace},
                               {"bundle", event.bundle},
                               {"commit", event.commit},
                               {"state", std::string(model::stateName(bundle_report.state))},
                               {"applied", static_cast<int64_t>(plan.applied.applied)},
                               {"failed", static_cast<int64_t>(plan.applied.failed)},
                               {"pruned", static_cast<int64_t>(plan.leaving.size())}});
  auto published = report(event, bundle_report, event.deployment_id, plan.current.objects);
  if (!published.ok()) {
    return transientFailure(event, plan.delivery, "report", published.error());
  }
  if (plan.wait_health) {
    return Outcome::wait(healthPoll(plan.current.wait_until, clock()), "health");
  }
  return Outcome::ack("applied");
}

void DeployHandler::watchApplied(ApplyPlan& plan) {
  if (options_.drift == nullptr) {
    return;
  }
  const bool ignores_conditions = !plan.drift.ignore_conditions.empty();
  options_.drift->registerBundle(plan.owner, plan.drift, std::move(plan.watched));
  const auto state = plan.report.state;
  if (!ignores_conditions || state != model::BundleState::kNotReady) {
    return;  // an apply or prune problem is what the report is about; the apply's health is the newest (CRDs)
  }
  if (auto watched = options_.drift->bundleReport(plan.owner)) {
    plan.report = std::move(*watched);  // the same answers of the apply, with ignore.conditions honoured
  }
}

//! An ownership conflict: reported once per identical result, then parked until a release wakes it.
Outcome DeployHandler::reportConflicts(ApplyPlan& plan) {
  const events::DeployEvent& event = plan.event;
  if (!alreadyReported(plan.owner, event.deployment_id, plan.report, /*compare_message=*/true)) {
    auto published = report(event, plan.report, event.deployment_id, plan.current.objects);
    if (!published.ok()) {
      return transientFailure(event, plan.delivery, "report", published.error());
    }
    metrics_.counter("ownership_conflicts_total", "Objects claimed by a bundle while another bundle owns them")
        .Increment(static_cast<double>(plan.applied.claims.size()));
    for (const auto& outcome : plan.applied.outcomes) {
      if (outcome.conflict) {
        log::warn("ownership conflict", {{"cluster", cluster_},
                                         {"bundle", event.bundle},
                                         {"object", outcome.ref.describe()},
                                         {"message", outcome.error}});
      }
    }
  }
  return Outcome::wait(options_.park_fallback, "conflict");
}

// ---- delete ---------------------------------------------------------------------------------------------------

namespace {

//! "removed 2 objects, held 1 ..., handed over 1 ..., kept 1 ...".
std::string describeRelease(const ReleaseResult& released, std::chrono::milliseconds hold) {
  std::string text = "removed " + std::to_string(released.deleted + released.gone) + " objects";
  if (released.held > 0) {
    text += ", held " + std::to_string(released.held) + " for " + std::to_string(hold.count() / 1000) +
            " s (deleted then, unless another bundle claims them)";
  }
  if (released.handed_over > 0) {
    text += ", handed over " + std::to_string(released.handed_over) + " to the bundles that claim them";
  }
  if (released.kept > 0) {
    text +=
        ", kept " + std::to_string(released.kept) + " (CRDs without deleteCRDResources, or owned by another bundle)";
  }
  return text;
}

}  // namespace

Outcome DeployHandler::handleDelete(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                                    const std::optional<Inventory>& inventory, const Delivery& delivery) {
  if (options.keep_resources || !inventory) {
    return forgetBundle(event, inventory, delivery);
  }
  auto client = bundleClient(options);
  if (!client.ok()) {
    return serviceAccountMissing(event, delivery, client.error());
  }
  auto released = release(ownerOf(event.workspace, event.bundle), inventory->objects, options.delete_crd_resources,
                          delivery.progress, *client);
  if (!released.ok()) {
    return transientFailure(event, delivery, "prune", released.error());
  }
  noteChanged();
  if (!released->remaining.empty()) {
    // Keep what could not be deleted in the inventory, so a later delete (or apply) can still prune it.
    Inventory left = *inventory;
    left.objects = released->remaining;
    left.claims.clear();
    left.generation = event.generation;
    left.applied = false;
    auto saved = writeInventory(left);
    if (!saved.ok()) {
      return transientFailure(event, delivery, "inventory", saved.error());
    }
    BundleReport failed = bundleFailure(model::BundleState::kErrApplied, kReasonPruneFailed, "");
    failed.message = describeFailures("failed to delete", released->remaining.size(), released->errors);
    return reportThenAck(event, delivery, failed, "", {}, /*forget=*/true, "error");
  }
  auto namespaces = deleteCreatedNamespaces(*inventory, options);
  if (!namespaces.ok()) {
    return transientFailure(event, delivery, "prune", namespaces.error());
  }
  auto removed = removeInventory(event.workspace, event.bundle);
  if (!removed.ok()) {
    return transientFailure(event, delivery, "inventory", removed.error());
  }
  if (released->handed_over > 0) {
    fault::point("agent.release.dropped");  // the claimants wake after this (handleEvent)
  }
  BundleReport done{.state = model::BundleState::kReady,
                    .reason = std::string(kReasonDeleted),
                    .message = describeRelease(*released, options_.release_hold) + *namespaces};
  auto published = report(event, done, "", {}, /*forget=*/true);
  if (!published.ok()) {
    return transientFailure(event, delivery, "report", published.error());
  }
  log::info("bundle removed", {{"cluster", cluster_},
                               {"bundle", event.bundle},
                               {"deleted", static_cast<int64_t>(released->deleted)},
                               {"held", static_cast<int64_t>(released->held)},
                               {"handed_over", static_cast<int64_t>(released->handed_over)},
                               {"kept", static_cast<int64_t>(released->kept)}});
  return Outcome::ack("deleted");
}

//! Drops the inventory without touching the objects: keepResources (orphaned), or nothing was deployed.
Outcome DeployHandler::forgetBundle(const events::DeployEvent& event, const std::optional<Inventory>& inventory,
                                    const Delivery& delivery) {
  auto removed = removeInventory(event.workspace, event.bundle);
  if (!removed.ok()) {
    return transientFailure(event, delivery, "inventory", removed.error());
  }
  noteChanged();  // a claimant of an orphaned object may take it now (rule stale)
  BundleReport done{
      .state = model::BundleState::kReady,
      .reason = std::string(inventory ? kReasonOrphaned : kReasonDeleted),
      .message = inventory ? std::to_string(inventory->objects.size()) + " objects left in place (keepResources)"
                           : std::string("nothing to remove")};
  return reportThenAck(event, delivery, done, "", {}, /*forget=*/true, inventory ? "orphaned" : "deleted");
}

}  // namespace flotilla::agent
