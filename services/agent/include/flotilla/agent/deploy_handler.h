// flotilla/agent/deploy_handler.h
//
// What the agent does with one DeployEvent (docs/pipeline.md stage 5), as short ordered steps:
//   decode -> check (own cluster, options decode, inventory, stale generation)
//   delete:   release what the inventory owns (or just drop the inventory with keepResources) -> report
//   apply:    same deploymentID already applied -> re-report its current health, nothing else
//             dependsOn (by name or selector, same workspace, this cluster) not met -> WaitApplied once, parked
//             else load the manifest -> record intent in the inventory -> staged apply (claim rules for objects
//             another bundle owns) -> release what left the bundle -> write the inventory -> report
// Each handled event ends in an Outcome the consumer runtime turns into ack / nak-with-delay / park / term. Every
// step is idempotent, so a redelivery (after a crash, a nak or a lost ack) converges on the same cluster state:
// before applying, the inventory is widened to old ∪ new objects, so objects created by an apply that never
// finished are still known (and pruned exactly) on the retry.
//
// Ownership handover and release (docs/pipeline.md "Ownership handover"): an object another bundle owns is taken
// over when a claim rule allows it (ownership.h), else the deploy reports ErrApplied/OwnershipConflict, records the
// claim in its inventory and is parked. An object a bundle stops wanting is handed over to the bundle whose
// inventory claims it, else held in flotilla-released (released.h) for --release-hold before the reaper deletes
// it (0: deleted at once, as a plain prune). Parked deploys (conflicts, dependsOn) are woken by the `wake`
// callback, called after every deploy that changed what other bundles see (a report, a release, a handover) and
// by resync when a bundle's state changed; a long fallback delay only guards against a lost wake.
//
// The handler also remembers the state it last reported per bundle, so the periodic resync can report a
// change (NotReady -> Ready) without a new DeployEvent, and the bundles parked for dependsOn, to find cycles.
//
// Concurrency (--parallel-bundles): handle() runs for different bundles at once (the consumer runtime keys deploys
// by bundle); one bundle's deploys, and the resync of that bundle, run one at a time. Locks, always taken in this
// order (a thread holding one never waits for an earlier one; try-locks are exempt, they never wait):
//   1. bundle_locks_[bundle]     the whole handling of one deploy of that bundle; resync and a cycle report for
//                                another bundle only try-lock it (a busy bundle is reporting for itself)
//   2. object_locks_ stripes     who owns an object, decided and acted on as one step: the applier holds the
//                                stripe of one object from reading its owner annotation to the end of the handover
//                                (ApplyRequest::lock_object); a release holds the stripes of all its objects
//                                (ascending) from deciding hand-over/hold/delete to doing it; the reaper holds one
//                                stripe per expired entry
//   3. inventory_locks_[bundle]  one write of that bundle's inventory: the bundle's own writes (which drop what other
//                                bundles took from it meanwhile, `taken_`) and another bundle's handover edit of it
//   4. ReleasedStore's mutex     one read-modify-write of the hold list flotilla-released
//   5. state_mutex_, tracked_mutex_   leaves: in-memory maps only, no I/O under them
// Why the handover stays correct when two bundles claim and release one object at once: the decision and the act
// happen under the object's stripe, so the object's owner annotation never flips back behind a decision; the
// previous owner's inventory is edited under its inventory lock, and the object is noted in taken_ first, so the
// previous owner's own later save (it may still be applying, with the object in its in-memory inventory) leaves it
// out. Everything else converges through the wake: a release and a claim that miss each other leave the object
// held (the claimant's re-run takes it, rule released) or deleted (its re-run creates it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/agent/applier.h"
#include "flotilla/agent/inventory.h"
#include "flotilla/agent/locks.h"
#include "flotilla/agent/manifest_source.h"
#include "flotilla/agent/ownership.h"
#include "flotilla/agent/released.h"
#include "flotilla/agent/report.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/core/clock.h"
#include "flotilla/core/metrics.h"
#include "flotilla/events/payloads.h"
#include "flotilla/kube/client.h"
#include "flotilla/model/options.h"
#include "flotilla/model/state.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/stage_latency.h"

namespace flotilla::agent {

//! The agent's version, reported at registration, in heartbeats and in status events.
inline constexpr std::string_view kAgentVersion = "0.1.0";
//! Reason of the WaitApplied state while dependsOn is not satisfied.
inline constexpr std::string_view kReasonDependencies = "DependenciesNotReady";

// The consumer runtime's types (libs/service/consumer.h), under the names the handler has always used.
using Outcome = service::Outcome;
using Delivery = service::Delivery;

//! Publishes StatusEvents on flotilla.status.<cluster>.<bundle>; id and Nats-Msg-Id are events::statusMsgId.
//! The `sequence` (the report counter of a bundle) is max(previous + 1, Unix time in ms): it grows with every
//! report and does not repeat after a restart, so a new report is never mistaken for a duplicate, while the
//! retries of one publish reuse their id and are dropped by JetStream.
class StatusPublisher {
 public:
  StatusPublisher(std::shared_ptr<bus::JetStream> js, std::string cluster, Metrics& metrics,
                  std::string agent_version = std::string(kAgentVersion));
  //! Fills id, time, cluster, sequence and agentVersion, publishes and waits for the stream's ack (a few quick
  //! retries; each failure is logged and counted). kTransient when it could not be stored.
  Status publish(events::StatusEvent event);
  //! The next report counter of `bundle` (see the class comment).
  int64_t nextSequence(const std::string& bundle);

 private:
  std::shared_ptr<bus::JetStream> js_;
  std::string cluster_;
  Metrics& metrics_;
  std::string agent_version_;
  std::mutex mutex_;
  std::map<std::string, int64_t> sequences_;
};

//! Default of --release-hold.
inline constexpr std::chrono::milliseconds kDefaultReleaseHold{60000};

struct DeployHandlerOptions {
  std::chrono::milliseconds retry_base{1000};  //!< first nak delay; doubles per delivery
  std::chrono::milliseconds retry_max{60000};  //!< cap of the nak delay
  //! How long a released object nobody claims is held before it is deleted (--release-hold); 0 deletes at once.
  std::chrono::milliseconds release_hold = kDefaultReleaseHold;
  //! When a deploy parked for a conflict or dependsOn runs again without a wake (a lost wake's safety net).
  std::chrono::milliseconds park_fallback{std::chrono::minutes(5)};
  //! Runs the parked deploys again (the agent wires it to Consumer::wakeParked); may be empty.
  std::function<void()> wake;
  //! The hold's clock; nullptr = systemClock().
  Clock* clock = nullptr;
  //! The shared watch (watcher.h): applied objects are registered with it, and it reports drift and health
  //! changes through reportFromWatch. nullptr: no watch (health is read by resync only).
  DriftWatcher* drift = nullptr;
};

//! The nak delay for the n-th delivery: retry_base * 2^(n-1), capped at retry_max.
std::chrono::milliseconds retryDelay(uint64_t delivery_count, const DeployHandlerOptions& options);

//! The last state the agent reported for a bundle (for resync).
struct TrackedBundle {
  std::string workspace;
  std::string bundle;
  std::string deployment_id;
  int64_t generation = 0;
  std::vector<ObjectRef> objects;
  std::optional<model::BundleState> state;  //!< nullopt: not reported by this process yet (found after a restart)
  std::string reason;                       //!< of the last report
  std::string message;                      //!< of the last report
};

//! A bundle parked for dependsOn, kept in memory to find cycles among the waiting bundles.
struct WaitingBundle {
  std::string workspace;
  std::string bundle;
  std::string deployment_id;
  int64_t generation = 0;
  std::vector<model::BundleRef> depends_on;
  model::Labels labels;
};

//! What releasing a bundle's objects did (docs/pipeline.md "Ownership handover", Release).
struct ReleaseResult {
  std::vector<ObjectRef> remaining;  //!< still the bundle's: could not be deleted (listed in errors)
  std::vector<std::string> errors;
  size_t deleted = 0;      //!< deleted at once (--release-hold 0)
  size_t gone = 0;         //!< already absent
  size_t held = 0;         //!< listed in flotilla-released, deleted after the hold unless claimed
  size_t handed_over = 0;  //!< left in place for the bundle whose inventory claims them
  size_t kept = 0;         //!< CRDs without deleteCRDResources, objects another bundle owns now
};

class DeployHandler {
 public:
  DeployHandler(std::string cluster, Applier& applier, InventoryStore& inventories, ManifestSource& manifests,
                StatusPublisher& publisher, Metrics& metrics, DeployHandlerOptions options = {});

  //! Decodes and handles one message payload.
  Outcome handle(std::string_view data, const Delivery& delivery);
  //! Handles a decoded event.
  Outcome handleEvent(const events::DeployEvent& event, const Delivery& delivery);

  //! Loads every inventory of the cluster into the tracked set (bundles applied before a restart), so resync
  //! re-reports them. Bundles already tracked are left alone.
  Status seedFromCluster();
  //! Re-evaluates the health of tracked bundles that are not Ready (or not reported since start) and publishes a
  //! StatusEvent for each whose state changed. Returns how many were published.
  size_t resync();
  //! The watch saw the drift or health of the bundle's objects change: publishes the bundle's state when it differs
  //! from the last report (never over ErrApplied or WaitApplied: only a deploy changes those), then wakes the
  //! parked deploys. False, without waiting, when a deploy of the bundle holds its lock: call again later.
  bool reportFromWatch(const std::string& owner);
  //! A snapshot of the tracked bundles.
  [[nodiscard]] std::vector<TrackedBundle> tracked() const;
  //! Deletes held objects whose hold expired, unless their owner annotation no longer names the releaser or an
  //! inventory lists them (then only the entry goes); updates the released_objects gauge. Returns how many it
  //! deleted; kTransient when the cluster cannot be read.
  Result<size_t> reapReleased();

  //! retryDelay() with this handler's options.
  [[nodiscard]] std::chrono::milliseconds backoff(uint64_t delivery_count) const {
    return retryDelay(delivery_count, options_);
  }

 private:
  //! handleEvent's steps after the checks, under the bundle's lock.
  Outcome dispatch(const events::DeployEvent& event, const Delivery& delivery);
  //! This handling changed what other bundles see (a report, a release, a handover): wake the parked deploys after
  //! it. Per handling (thread-local), so a concurrent handling of another bundle neither sets nor clears it.
  static void noteChanged();
  //! Writes `inventory` (its own bundle's) under that bundle's inventory lock, first dropping from it the objects
  //! other bundles took from the bundle during this handling (taken_).
  Status writeInventory(Inventory& inventory);
  //! Deletes the bundle's inventory under its inventory lock (so no handover edit writes it back).
  Status removeInventory(const std::string& workspace, const std::string& bundle);
  //! Removes `ref` from `previous_owner`'s inventory after the claimant applied it: under the previous owner's
  //! inventory lock, noted in taken_ first (Ownership::completeHandover).
  Status completeHandover(const Claimant& claimant, const ObjectRef& ref, const std::string& previous_owner,
                          const std::string& rule);
  //! Reaps one expired hold under the object's stripe.
  enum class Reaped { kKeep, kDrop, kDeleted };
  Result<Reaped> reapOne(const ReleasedObject& entry, const std::set<std::string>& listed);
  //! A generation older than one this process has handled for the bundle (a parked deploy superseded).
  bool supersededInMemory(const events::DeployEvent& event);
  Outcome handleDelete(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                       const std::optional<Inventory>& inventory, const Delivery& delivery);
  Outcome handleUnchanged(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                          const Inventory& inventory, const Delivery& delivery);
  //! Drops the inventory and reports, leaving the objects alone (keepResources, or nothing deployed).
  Outcome forgetBundle(const events::DeployEvent& event, const std::optional<Inventory>& inventory,
                       const Delivery& delivery);
  //! Loads the bundle's inventory into `inventory` (left empty when unreadable: start over); an Outcome when the
  //! message must end here.
  std::optional<Outcome> loadInventory(const events::DeployEvent& event, const Delivery& delivery,
                                       std::optional<Inventory>& inventory);
  //! dependsOn gate: parks (WaitApplied, or ErrApplied for a cycle) while a dependency is not in an accepted
  //! state, else handleApply.
  Outcome applyWhenDependenciesMet(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                                   const std::optional<Inventory>& inventory, const Delivery& delivery);
  Outcome handleApply(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                      const std::optional<Inventory>& inventory, const Delivery& delivery);
  //! The steps of handleApply (deploy_apply.cpp): each passes the plan on (nullopt) or ends the message.
  struct ApplyPlan;
  Outcome runApply(ApplyPlan& plan);
  std::optional<Outcome> loadManifest(ApplyPlan& plan);
  std::optional<Outcome> applyStaged(ApplyPlan& plan);
  //! helm.atomic: an apply with failed objects is followed by an apply of the last good manifest (reported
  //! together); its objects that the previous manifest lacks are then released.
  std::optional<Outcome> revertIfAtomic(ApplyPlan& plan);
  //! helm.atomic after a helm.timeoutSeconds health wait ran out: the last good manifest applied again.
  Outcome revertAfterTimeout(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                             const Inventory& inventory, const Delivery& delivery, BundleReport failure);
  std::optional<Outcome> releaseLeaving(ApplyPlan& plan);
  void refusePruneToEmpty(ApplyPlan& plan);
  std::optional<Outcome> saveInventory(ApplyPlan& plan);
  Outcome reportApplied(ApplyPlan& plan);
  //! After a restart: registers a seeded bundle with the watch, its desired objects rebuilt from the manifest and
  //! the inventory's options (a dry-run apply gives their field set), so drift made while the agent was down is
  //! found; else (older inventory, manifest gone) adopts the live objects as they are.
  void watchSeeded(const Inventory& inventory);
  Result<std::pair<DriftSettings, std::vector<WatchedObject>>> restoreWatched(const Inventory& inventory);
  //! Registers what the apply wrote with the watch and takes the state it sees (ignore.conditions, drift).
  void watchApplied(ApplyPlan& plan);
  //! The bundle's state: from the watch when it covers the bundle, else read live (checkHealth).
  Result<BundleReport> currentReport(const std::string& owner, const std::vector<ObjectRef>& objects);
  //! The claim rules and the handover's bookkeeping, wired into the plan's ApplyRequest.
  void wireClaims(ApplyPlan& plan);
  //! Publishes the report (once per identical result while parked for a conflict) and acks, or parks.
  Outcome reportConflicts(ApplyPlan& plan);
  //! The dependsOn entries that are not satisfied, described ("bundle infra is NotReady (accepted: Ready)",
  //! "no bundle matches selector tier=db"); kTransient when the cluster cannot be read.
  Result<std::vector<std::string>> unmetDependencies(const events::DeployEvent& event,
                                                     const std::vector<model::BundleRef>& refs);
  //! The unmet bundles a selector matches among the inventories of the workspace (`listed`: read once).
  Status unmetBySelector(const events::DeployEvent& event, const model::BundleRef& ref,
                         const std::vector<std::string>& accepted, std::optional<std::vector<Inventory>>& listed,
                         std::vector<std::string>& unmet);
  //! Parks the deploy: reports WaitApplied once per deployment, or DependencyCycle for every bundle of a cycle.
  Outcome waitForDependencies(const events::DeployEvent& event, const std::vector<model::BundleRef>& refs,
                              const std::vector<std::string>& unmet);
  //! The cycle through `owner` among the waiting bundles: [owner, ..., owner]; empty when there is none. Call with
  //! state_mutex_ held.
  [[nodiscard]] std::vector<std::string> findCycle(const std::string& owner) const;
  //! The waiting bundles `waiting` depends on (state_mutex_ held).
  [[nodiscard]] std::vector<std::string> waitingDependencies(const WaitingBundle& waiting) const;
  //! Reports ErrApplied/DependencyCycle for each bundle of `cycle` (`members`: their WaitingBundle, in order; once
  //! per identical message).
  void reportCycle(const std::vector<std::string>& cycle, const std::vector<WaitingBundle>& members);
  //! Whether `member` is still parked for dependsOn with the same deployment.
  [[nodiscard]] bool stillWaiting(const WaitingBundle& member) const;
  //! The state of another bundle of this cluster, from its inventory and live health; nullopt when not deployed.
  Result<std::optional<model::BundleState>> bundleState(std::string_view workspace, std::string_view bundle);
  Result<std::optional<model::BundleState>> inventoryState(const Inventory& inventory);
  //! Releases `refs` that `owner` no longer wants (release.cpp): objects another bundle owns now are only dropped,
  //! a claimed object is handed over, the rest is held (or deleted at once with release_hold 0).
  Result<ReleaseResult> release(const std::string& owner, const std::vector<ObjectRef>& refs, bool delete_crds,
                                const std::function<void()>& progress, kube::KubeClient* client = nullptr);
  //! Lists `held` in flotilla-released (then fault point agent.hold.listed).
  Status holdObjects(const std::string& owner, const std::vector<ObjectRef>& held);
  // ---- options (deploy_options.cpp) ----
  //! The options the agent refuses before anything is applied (model::checkSupportedOptions): reported
  //! ErrApplied/InvalidOptions and terminated; nullopt when the deploy may go on.
  std::optional<Outcome> refuseUnsupported(const events::DeployEvent& event,
                                           const model::BundleDeploymentOptions& options, const Delivery& delivery);
  //! The client that applies, reads and prunes the bundle's objects: one impersonating serviceAccount (looked up
  //! in the agent namespace, as Fleet does; cached), or nullptr for the agent's own. kNotFound naming the service
  //! account when it does not exist; kTransient when the cluster cannot be asked.
  Result<kube::KubeClient*> bundleClient(const model::BundleDeploymentOptions& options);
  //! A missing service account: ErrApplied/ServiceAccountNotFound once, parked until a wake or the fallback.
  Outcome serviceAccountMissing(const events::DeployEvent& event, const Delivery& delivery, const Error& error);
  //! The health wait of helm.timeoutSeconds in progress (inventory waitUntil): settled -> the state is reported
  //! and the message acked; past the deadline -> ErrApplied/HealthTimeout (reverted first with helm.atomic);
  //! else parked again (Outcome::wait), reporting only a changed state.
  Outcome continueHealthWait(const events::DeployEvent& event, const model::BundleDeploymentOptions& options,
                             const Inventory& inventory, const Delivery& delivery);
  //! deleteNamespace on a bundle delete: the namespaces the agent created for the bundle, except those another
  //! inventory still lists objects in. Returns the message part ("deleted namespaces a, b"); kTransient aborts.
  Result<std::string> deleteCreatedNamespaces(const Inventory& inventory,
                                              const model::BundleDeploymentOptions& options);

  //! Whether a report equal to `bundle_report` for `deployment_id` was the last one published for the bundle.
  bool alreadyReported(const std::string& key, std::string_view deployment_id, const BundleReport& bundle_report,
                       bool compare_message) const;
  //! The hold's clock.
  [[nodiscard]] Clock& clock() const { return options_.clock != nullptr ? *options_.clock : systemClock(); }
  //! Publishes `report` for the event's bundle; on success remembers it (unless `forget`).
  Status report(const events::DeployEvent& event, const BundleReport& bundle_report, std::string_view deployment_id,
                const std::vector<ObjectRef>& objects, bool forget = false);
  //! Publishes `bundle_report`, then acks with `result` (or retries when the report could not be published).
  Outcome reportThenAck(const events::DeployEvent& event, const Delivery& delivery, const BundleReport& bundle_report,
                        std::string_view deployment_id, const std::vector<ObjectRef>& objects, bool forget,
                        std::string result);
  //! Reports a failure of the whole bundle, then rejects (or retries when the report could not be published).
  Outcome rejectWithReport(const events::DeployEvent& event, const Delivery& delivery, std::string_view reason,
                           std::string message, std::string result);
  Outcome transientFailure(const events::DeployEvent& event, const Delivery& delivery, std::string_view step,
                           const Error& error);

  std::string cluster_;
  Applier& applier_;
  InventoryStore& inventories_;
  ManifestSource& manifests_;
  StatusPublisher& publisher_;
  Metrics& metrics_;
  DeployHandlerOptions options_;
  //! stage_latency_seconds{stage="deploy_to_applied"}: a DeployEvent's time -> the first report on it.
  service::StageLatency stages_;

  ReleasedStore released_;
  Ownership ownership_;

  // Locks (the order is in the file comment).
  KeyedLocks bundle_locks_;                          //!< 1: one handling per bundle
  ObjectLocks object_locks_;                         //!< 2: one ownership decision per object
  KeyedLocks inventory_locks_;                       //!< 3: one write per inventory
  mutable std::mutex state_mutex_;                   //!< 5: guards waiting_, seen_generations_, taken_
  std::map<std::string, WaitingBundle> waiting_;     //!< parked for dependsOn, by "<workspace>/<bundle>"
  std::map<std::string, int64_t> seen_generations_;  //!< the newest generation handled per bundle
  std::mutex clients_mutex_;
  //! Impersonating clients by service account name (serviceAccount), made once.
  std::map<std::string, std::unique_ptr<kube::KubeClient>> impersonating_;
  //! Objects taken from a bundle by other bundles' claims since its handling began, by "<workspace>/<bundle>".
  std::map<std::string, std::set<std::string>> taken_;
  mutable std::mutex tracked_mutex_;              //!< 5: guards tracked_
  std::map<std::string, TrackedBundle> tracked_;  //!< by "<workspace>/<bundle>"
};

//! "<workspace>/<bundle>": the owner annotation value and the tracked-bundle key.
std::string ownerOf(std::string_view workspace, std::string_view bundle);
//! Whether the options ask the agent to take over fields and objects others own (helm.takeOwnership, helm.force
//! or correctDrift.force in Fleet's schema): apply with force=true.
bool wantsForce(const model::BundleDeploymentOptions& options);

// ---- what the options ask for (deploy_options.cpp) ----

//! helm.timeoutSeconds > 0: after an apply without errors the agent waits for health up to the timeout.
bool waitsForHealth(const model::BundleDeploymentOptions& options);
//! Whether every object is Ready; a Job that is not Complete counts only with helm.waitForJobs (Helm's rule).
bool healthSettled(const std::vector<ObjectOutcome>& outcomes, const model::BundleDeploymentOptions& options);
//! now + helm.timeoutSeconds, RFC 3339 (the inventory's waitUntil).
std::string healthDeadline(const model::BundleDeploymentOptions& options, Clock& clock);
//! How long a health wait parks before looking again: 1 s, less when the deadline is closer (at least 100 ms).
std::chrono::milliseconds healthPoll(const std::string& wait_until, Clock& clock);
//! The last good manifest before `inventory`'s deployment is replaced: its own when it applied without error,
//! else the one it recorded ("" when there is none).
std::string previousManifestOf(const Inventory& inventory);
//! The adopted objects after an apply: those adopted before or now that the bundle still owns.
std::vector<ObjectRef> adoptedAfter(const Inventory& before, const ApplyResult& applied,
                                    const std::vector<ObjectRef>& kept);
//! The namespaces created for the bundle, before and now.
std::vector<std::string> createdNamespacesAfter(const Inventory& before, const ApplyResult& applied);
//! An atomic revert's report: the failure (state, reason, objects) with what the revert to `manifest_id` did.
BundleReport revertReport(const BundleReport& failure, const std::string& manifest_id, const BundleReport& revert);

}  // namespace flotilla::agent
