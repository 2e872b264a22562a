// flotilla/scheduler/scheduler.h
//
// The scheduler (docs/pipeline.md stage 4): the cluster registry, targeting, deploy events and the status
// roll-up. Inputs and what each does:
//
//   flotilla.register.<cluster> (core request/reply, queue "scheduler")
//       the cluster is the subject's (a body naming another is refused) -> validate -> create the agent's durable
//       agent-<cluster> -> write clusters/cluster.<name> -> reply -> re-target every bundle for that cluster
//   KV clusters (watch): group.<ws>.<group> and spec.<cluster> from `flotilla apply`, cluster.* from other
//       writers, deregistered.<cluster> from `flotilla delete cluster`, heartbeat.*
//       a group, label or paused change -> re-target; a tombstone -> deregistration (deregistration.cpp)
//   FLOTILLA_BUNDLES, durable "scheduler": BundleEvents
//       deleted -> delete DeployEvent per cluster that has it, drop the records
//       error   -> remember the render error for the summaries; the last good deployments stay
//       else    -> place on every cluster; for each whose deployments record differs: publish DeployEvent on
//                  flotilla.deploy.<cluster>, then write deployments/<cluster>.<ws>.<bundle>; clusters that no
//                  longer match get a delete DeployEvent
//   flotilla.manifest.<cluster> (core request/reply, queue "scheduler"): ManifestServer (manifest_server.h)
//       answers with a chunk of a manifest the cluster's deployment records reference, else a refusal
//   FLOTILLA_STATUS, durable "scheduler-status": StatusEvents and agent Heartbeats
//       write status/bd.<cluster>.<ws>.<bundle>, recompute status/summary.{bundle,gitrepo,cluster}.*
//
// Ordering (publish first, then the record): a crash between the two leaves the old record, so the redelivered
// BundleEvent (or the start-up reconcile) finds a difference and publishes again — with the same generation and
// hence the same Nats-Msg-Id, which JetStream drops as a duplicate inside its window (and which the agent
// recognises as already applied after it). Writing the record first would lose the deploy in that crash.
//
// All state lives in memory, rebuilt from KV at start; one mutex serializes every handler and its effects, so
// a status report is never judged against a half-written deployment. Handlers return an Outcome; the consumer
// runtime (libs/service/consumer.h) turns it into ack / nak-with-delay / term and reports poison messages.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/core/json.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/core/time.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"
#include "flotilla/model/resources.h"
#include "flotilla/scheduler/agent_labels.h"
#include "flotilla/scheduler/manifest_server.h"
#include "flotilla/scheduler/partition.h"
#include "flotilla/scheduler/placement.h"
#include "flotilla/scheduler/records.h"
#include "flotilla/scheduler/rollout.h"
#include "flotilla/scheduler/rollup.h"
#include "flotilla/scheduler/scheduler_options.h"
#include "flotilla/scheduler/state_gauges.h"
#include "flotilla/scheduler/targeting.h"
#include "flotilla/service/component.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/stage_latency.h"

namespace flotilla::scheduler {

//! The durable consumers and the registration queue group (docs/pipeline.md).
inline constexpr std::string_view kBundleConsumer = "scheduler";
inline constexpr std::string_view kStatusConsumer = "scheduler-status";
inline constexpr std::string_view kRegisterQueue = "scheduler";
//! CloudEvents `source` of everything the scheduler publishes on flotilla.events.>.
inline constexpr std::string_view kEventSource = "/flotilla/scheduler";
//! Fault point after the first cluster's DeployEvent (and record) of a bundle event, before the rest.
inline constexpr std::string_view kFaultBundleDeployed = "scheduler.bundle.deployed";

// The consumer runtime's outcome (libs/service/consumer.h), under the name the handlers have always used.
using Outcome = service::Outcome;

class Scheduler final : public service::Component {
 public:
  //! Needs hub.connection, js, clusters, bundles, deployments and status. Nothing is contacted until start().
  static Result<std::unique_ptr<Scheduler>> create(service::Hub hub, Metrics& metrics, SchedulerOptions options = {});
  ~Scheduler() override;

  //! Loads the state from KV, creates and binds the durables, subscribes to registrations and starts the
  //! threads (bundle consumer, status consumer, clusters watcher, reconciler). The first full reconcile runs once
  //! the bundle consumer has caught up with its backlog.
  Status start() override;
  //! Stops the threads (a message being handled is finished; fetched but unhandled ones are nak'd). Idempotent.
  void stop() override;
  //! Connected, state loaded, consumers bound, subscribed to registrations.
  bool ready(std::string& why) const override;
  //! Starts serving manifest requests only: what a standby replica does while another holds the lease (start()
  //! later does the rest). Idempotent.
  Status serveManifests();
  //! A standby's readiness: connected and serving manifests.
  bool readyAsStandby(std::string& why) const;

  // ---- the handlers, one message each (the loops call these; tests may too) ----

  //! A registration request as received on `subject` (flotilla.register.<cluster>): a body naming another cluster
  //! than the subject is refused (registrations_total{result="impersonation"}), else handleRegister.
  events::RegisterReply handleRegisterOn(std::string_view subject, std::string_view data);
  //! Validates a registration, creates the cluster's deploy durable, writes the cluster record and queues a
  //! re-target of that cluster.
  events::RegisterReply handleRegister(const events::RegisterRequest& request);
  //! One BundleEvent payload. `clock_ms` (the message's stream timestamp) makes generations deterministic on
  //! redelivery; 0 means now. `delivery_count` drives the retry backoff.
  Outcome handleBundle(std::string_view data, int64_t clock_ms = 0, uint64_t delivery_count = 1);
  //! One message of FLOTILLA_STATUS (a StatusEvent or a Heartbeat) on `subject`. `backlog`: the messages behind it
  //! on the stream (service::Delivery::pending); while there are any, the summaries it changed are written with a
  //! later message's, at most SchedulerOptions::summary_delay later (a burst of 10,000 reports writes each summary a
  //! few times, not 10,000 times). Its own record (status/bd.*) is always written at once.
  Outcome handleStatus(std::string_view subject, std::string_view data, uint64_t delivery_count = 1,
                       uint64_t backlog = 0);
  //! How often a heartbeat alone rewrites its cluster's summary (lastHeartbeat): at 10,000 clusters and a 30 s
  //! interval every heartbeat would be 333 summary writes a second. Offline detection uses the time of each
  //! heartbeat, kept in memory; a cluster coming back, or any other change, rewrites the summary at once.
  static constexpr std::chrono::minutes kHeartbeatRefresh{5};
  //! One change of the clusters bucket (groups, registrations, Cluster documents, tombstones, heartbeats).
  void handleClustersEntry(const bus::KvEntry& entry);
  //! Moves every deregistration on (deregistration.cpp): deletes to connected agents, records of disconnected
  //! ones removed at once. The watch loop runs it about once a second; tests may call it.
  void checkDeregistrations();
  //! Re-targets every bundle on every cluster (start-up, group changes).
  Status reconcileAll();
  //! Re-targets every bundle on one cluster (registration, label change).
  Status reconcileCluster(const std::string& cluster);
  //! One rollout pass of a bundle over all its clusters (rollout.h; `key` is its bundles-bucket key): what a status
  //! report, an offline change or a maxNew batch asks for through the reconcile queue.
  Status reconcileRollout(const std::string& key);
  //! Where the bundle's rollout stands after its last pass (nullopt: no pass yet, or it targets nothing).
  [[nodiscard]] std::optional<events::RolloutStatus> rollout(const std::string& workspace,
                                                             const std::string& bundle) const;

  // ---- introspection (tests, debugging) ----
  [[nodiscard]] bool caughtUp() const { return caught_up_; }
  [[nodiscard]] std::optional<model::Cluster> cluster(const std::string& name) const;
  [[nodiscard]] std::optional<DeploymentRecord> deployment(const std::string& cluster, const std::string& workspace,
                                                           const std::string& bundle) const;
  [[nodiscard]] std::string lastHeartbeat(const std::string& cluster) const;
  //! The cluster is Offline: no sign of life for offlineAfter() (offline.cpp).
  [[nodiscard]] bool offline(const std::string& cluster) const;
  //! Marks clusters Offline whose agent has been silent for offlineAfter(), and back when it is not; writes their
  //! summaries. The watch loop runs it about once a second (at most every quarter of the threshold); tests may too.
  void checkOffline(SystemTime now);
  //! The status consumer handled a message the stream stored at `stored_ms` with `pending` more behind it (0 with
  //! nothing behind, or an empty fetch: caught up). Silence is judged only up to where the consumer has read: a
  //! backlog of heartbeats (10,000 agents reconnecting at once) never makes their clusters Offline. Thread-safe.
  void noteStatusRead(uint64_t pending, int64_t stored_ms);

 private:
  //! What a handler touched: the summaries to recompute.
  struct Affected {
    std::set<std::pair<std::string, std::string>> bundles;   //!< (ws, bundle)
    std::set<std::pair<std::string, std::string>> gitrepos;  //!< (ws, gitrepo)
    std::set<std::string> clusters;
    bool bundle_event = false;  //!< a BundleEvent is being handled (fault point kFaultBundleDeployed)
    bool deployed = false;      //!< it published its first DeployEvent

    [[nodiscard]] bool empty() const { return bundles.empty() && gitrepos.empty() && clusters.empty(); }
    void merge(const Affected& other) {
      bundles.insert(other.bundles.begin(), other.bundles.end());
      gitrepos.insert(other.gitrepos.begin(), other.gitrepos.end());
      clusters.insert(other.clusters.begin(), other.clusters.end());
    }

    //! A deployment of `bundle` on `cluster` changed; `gitrepo` = the bundle's GitRepo ("" = none).
    void add(const std::string& workspace, const std::string& bundle, const std::string& gitrepo,
             const std::string& cluster) {
      bundles.emplace(workspace, bundle);
      if (!gitrepo.empty()) {
        gitrepos.emplace(workspace, gitrepo);
      }
      clusters.insert(cluster);
    }
  };

  //! One BundleEvent being handled (bundle_handler.cpp).
  struct BundleContext {
    const events::BundleEvent& event;
    int64_t clock_ms = 0;
    uint64_t delivery_count = 1;
    std::string id;                        //!< its bundles-bucket key
    const BundleInfo* existing = nullptr;  //!< what was known about the bundle before
    bool invalid_targets = false;          //!< the event's targeting (or variants table) is unusable
    Affected affected;
  };

  //! One StatusEvent being handled (status_handler.cpp).
  struct StatusContext {
    const events::StatusEvent& event;
    std::string cluster;
    std::string bundle;
    std::string workspace;  //!< the event's, or the one of the cluster's deployment of the bundle
    std::string key;        //!< deployments-bucket key of the pair
    uint64_t delivery_count = 1;
    bool stale = false;  //!< the report is about another deployment than the record's
    //! mutex_, held by the handler; storeReport lets it go while the report's record is written.
    std::unique_lock<std::mutex>* lock = nullptr;
    bool defer_summaries = false;  //!< more status messages are behind this one (defer_summaries_ while held)
  };

  //! A registration stored (registration.cpp).
  struct Registration {
    model::Cluster cluster;
    bool created = false;
    bool targeting_changed = false;
    bool api_versions_changed = false;         //!< the cluster serves other API versions than at its last registration
    std::vector<std::string> labels_left_out;  //!< reported label keys --agent-labels does not allow
  };

  Scheduler(service::Hub hub, Metrics& metrics, SchedulerOptions options);

  // start-up (scheduler.cpp, state_load.cpp, registration.cpp)
  Status loadState();
  void loadBundles(const std::vector<bus::KvEntry>& entries);
  void loadDeployments(const std::vector<bus::KvEntry>& entries);
  void loadStatuses(const std::vector<bus::KvEntry>& entries);
  void loadSummaries(const std::vector<bus::KvEntry>& entries);
  void warnOrphanDeployments() const;
  void countInvalidRecord(std::string_view bucket, const std::string& key, const Error& error);
  Status setUpConsumers();
  Status subscribeRegistrations();
  void answerRegistration(bus::Connection& connection, const bus::Message& message);
  Result<Registration> storeRegistration(const events::RegisterRequest& request, const std::string& workspace);
  void announceRegistration(const events::RegisterRequest& request, const std::string& workspace,
                            const Registration& registration);
  //! Creates (or updates) agent-<cluster> on FLOTILLA_DEPLOY; deleteAgentConsumer removes it (absent is fine).
  Status ensureAgentConsumer(const std::string& cluster);
  Status deleteAgentConsumer(const std::string& cluster);

  // the other partitions (partition_view.cpp; all no-ops for the whole; mutex_ held unless said)
  //! The bundle belongs to another partition's GitRepo: its BundleEvent is acked here, its GitRepo remembered.
  [[nodiscard]] bool ownsBundle(const std::string& workspace, const std::string& gitrepo) const;
  //! The report on deployments key `key` is judged here: this partition holds the record or its bd.* status, or
  //! nobody else does and the bundle's GitRepo (as far as known) is this partition's.
  [[nodiscard]] bool ownsReport(const std::string& key, const std::string& workspace, const std::string& bundle) const;
  //! The bundle's GitRepo, from any partition's BundleEvents and records ("" when unknown).
  [[nodiscard]] std::string gitRepoOfBundle(const std::string& workspace, const std::string& bundle) const;
  void noteBundleGitRepo(const std::string& workspace, const std::string& bundle, const std::string& gitrepo);
  //! Opens the watches of deployments and status/bd.* whose initial values loadState reads and whose changes
  //! followOtherPartitions applies (the whole needs none: nobody else writes its records).
  Status watchOtherPartitions();
  //! Follows the records' (true) or the reports' watch until stop().
  void followOtherPartitions(bool records);
  //! One change of another partition's deployment record / bd.* status. Locks.
  void applyOtherRecord(const bus::KvEntry& entry);
  void applyOtherStatus(const bus::KvEntry& entry);
  //! After another partition's change on `cluster` (`behind`: watch entries still pending): the summaries
  //! `affected` names, and the cluster's when this partition writes it.
  void noteOtherPartitionChange(const std::string& cluster, uint64_t behind, Affected& affected);
  //! The cluster's deployments of every partition (its summary); deploymentsOfCluster has this partition's.
  [[nodiscard]] std::vector<DeploymentView> allDeploymentsOfCluster(const std::string& cluster) const;
  //! Some partition still has a deployment record on the cluster.
  [[nodiscard]] bool clusterHasRecords(const std::string& cluster) const;
  //! The labels of this scheduler's gauges: {partition="p<i>"} when partitioned (the partitions of one process
  //! share its registry), none for the whole.
  [[nodiscard]] prometheus::Labels gaugeLabels() const;

  // loops (scheduler.cpp, clusters_watch.cpp, reconcile.cpp)
  //! The runtime's settings for one of the two durables.
  service::ConsumerOptions consumerOptions(const char* stream, std::string_view durable, std::string_view filter,
                                           std::string label) const;
  void watchLoop();
  void reconcileLoop();
  Status reconcileQueued(const std::deque<std::string>& work, const std::set<std::string>& rollouts);
  //! More queued clusters than kClustersPerPass are decided by one rollout pass per bundle (reconcileClusters).
  static constexpr size_t kClustersPerPass = 8;
  //! maxNew batches one rollout pass sends one after another (rollout.h) before it asks for another pass.
  static constexpr size_t kRolloutRoundsPerPass = 1000;
  Status reconcileClusters(const std::deque<std::string>& work);
  void enqueueReconcile(const std::string& cluster);
  //! Queues a rollout pass of the bundle with bundles-bucket `key` (coalesced with any already queued).
  void enqueueRolloutPass(const std::string& key);
  //! Queues a rollout pass of every bundle with a deployment on `cluster` (it went offline or came back).
  void enqueueRolloutPassesOf(const std::string& cluster);
  bool sleepFor(std::chrono::milliseconds duration);

  // the clusters bucket (clusters_watch.cpp)
  void handleGroupEntry(const bus::KvEntry& entry);
  void handleClusterEntry(const bus::KvEntry& entry);
  //! A registration record whose targeting labels are not what --agent-labels allows of what its agent reported
  //! (the flag changed, or the record predates it) is rewritten; `cluster` is corrected in place either way.
  void enforceAgentLabels(model::Cluster& cluster, uint64_t revision);
  void handleHeartbeatEntry(const bus::KvEntry& entry);
  void handleClusterDocumentEntry(const bus::KvEntry& entry);
  //! Recomputes clusters_[name] from its registration and the admin's document; true when what targeting or
  //! rollout sees changed (mutex_ held).
  bool refreshCluster(const std::string& name);
  //! Sets `name` in `layer` (registrations_ or cluster_documents_) to `value`, or removes it for nullopt, and
  //! refreshes the cluster; true when that changed placement once the state is loaded (time to re-target). Locks.
  bool replaceClusterLayer(std::map<std::string, model::Cluster>& layer, const std::string& name,
                           const std::optional<model::Cluster>& value);

  // deregistration (deregistration.cpp; mutex_ held unless said otherwise)
  void handleDeregisteredEntry(const bus::KvEntry& entry);  //!< takes mutex_
  //! Why a registration under `cluster` is refused ("" when it is not): its tombstone exists. Reads KV.
  Result<std::string> deregisteredRefusal(const std::string& cluster);
  //! True while `cluster` is tombstoned: placement leaves its deployments to the deregistration.
  bool deregistering(const std::string& cluster) const;
  bool agentConnected(const std::string& cluster) const;
  Status advanceDeregistration(const std::string& cluster);
  Status sendDeregistrationDelete(const DeploymentRecord& record, const events::ClusterDeregistration& tombstone);
  Status dropDeployment(const std::string& key, Affected& affected);
  Status finishDeregistration(const std::string& cluster);
  void withdrawDeregistration(const std::string& cluster);
  //! A status report from a tombstoned cluster (status_handler.cpp calls it first): the answer to a delete removes
  //! the deployment's records; anything else is acked without being stored. nullopt: not such a cluster.
  std::optional<Outcome> deregistrationReport(const StatusContext& context);

  // placement (reconcile.cpp; mutex_ held)
  //! Reads the BundleVariants table a per-cluster bundle names (object store `manifests`) into its targeting.
  Status loadVariants(BundleInfo& bundle);
  //! `groups`: the pass's groupList() (one copy per pass); null = made here.
  PlacementInput placementInput(const BundleInfo* bundle, const std::string& workspace, const std::string& bundle_name,
                                const std::string& cluster, int64_t clock_ms,
                                const std::vector<GroupInfo>* groups = nullptr) const;
  Status reconcilePair(const BundleInfo* bundle, const std::string& workspace, const std::string& bundle_name,
                       const std::string& cluster, int64_t clock_ms, Affected& affected, bool& published);
  Status applyPlacement(const PlacementInput& input, const PlacementDecision& decision, Affected& affected,
                        bool& published);
  Status writeDeployment(const PlacementInput& input, const PlacementDecision& decision, bool& published);
  //! A release or a staging decided by a rollout pass, carried out with the pass's others (applyPlacements).
  struct BatchedPlacement {
    const PlacementInput* input = nullptr;
    PlacementDecision decision;
  };
  //! Carries out a pass's releases and stagings together: every DeployEvent published (one wait for all the
  //! acks), then every record written (one wait), then the public events. Publish-then-record holds for the batch
  //! as a whole, so a crash between the two leaves the old records and the redo finds the difference
  //! (scheduler.h's file comment); 10,000 clusters cost a few round trips, not 30,000.
  Status applyPlacements(std::vector<BatchedPlacement>& batch, Affected& affected, bool& published);
  //! A release whose earlier DeployEvent of the same deploymentID went unacknowledged (unacked_deploys_) takes
  //! that event's generation and message id instead of a new one.
  void reuseUnackedGeneration(const PlacementInput& input, PlacementDecision& decision);
  //! The record of a release or staging was written: memory, log line and metrics (writeDeployment and
  //! applyPlacements).
  void noteDeploymentWritten(const PlacementInput& input, const DeploymentRecord& next, bool released);
  Status removeDeployment(const PlacementInput& input, const PlacementDecision& decision, bool& published);
  //! Drops a deployment record and its bd status (KV and memory).
  //! Removes the pair's bd.* record (one already gone counts as removed) and its copy in statuses_.
  Status removeStatusRecord(const std::string& cluster, const std::string& workspace, const std::string& bundle);
  Status forgetDeployment(const std::string& cluster, const std::string& workspace, const std::string& bundle);
  //! Sends again the deletes of deleted bundles that an agent reported as failed (reconcileAll).
  Status retryFailedDeletes(int64_t clock_ms, Affected& affected);
  //! An agent reported a failed delete of deployments-bucket `key`: send it again after a backoff (delete_retry.cpp).
  void scheduleDeleteRetry(const std::string& key, const DeploymentRecord& record, std::string_view error);
  //! Sends the failed deletes whose backoff ran out again (the watch loop, about once a second; takes mutex_).
  void retryDueDeletes();
  //! One rollout pass of `bundle`: every pair is decided with the pass's plan; with `only`, only those clusters'
  //! decisions are carried out (the plan still sees every cluster).
  Status reconcileBundle(const BundleInfo& bundle, int64_t clock_ms, Affected& affected, bool& published,
                         const std::set<std::string>* only = nullptr);
  //! The rollout's view of one placement (rollout.h RolloutTarget); nullopt when the pair is not a rollout target.
  std::optional<RolloutTarget> rolloutTarget(const PlacementInput& input, const std::vector<GroupInfo>& groups) const;
  //! Remembers the pass's status for the summary; logs and counts a rollout that halts or resumes.
  void noteRollout(const BundleInfo& bundle, const RolloutPlan& plan);
  Status deleteBundle(const std::string& workspace, const std::string& bundle_name, const std::string& gitrepo,
                      int64_t clock_ms, Affected& affected);
  //! kTransient (counted, logged) when options_.may_publish says this replica lost the lease.
  Status checkMayPublish(size_t deploys) const;
  Status publishDeploy(const events::DeployEvent& event);
  //! A DeployEvent the stream stored (publishDeploy, applyPlacements): counted, announced on flotilla.events.>, and
  //! no longer unacknowledged.
  void noteDeployStored(const events::DeployEvent& event, const bus::PublishAck& ack);
  //! A release's DeployEvent without an ack (publishDeploy, applyPlacements): remembered in unacked_deploys_.
  void noteDeployUnacked(const events::DeployEvent& event);
  //! A maxNew batch went out and the rollout asked for the next one (rollout_batches_total).
  void countRolloutBatch();
  //! Fills `event.retiring` (an apply only): the workspace's bundles on the event's cluster being deleted
  //! (retiring.cpp).
  void addRetiring(events::DeployEvent& event);
  //! True when the GitRepo's spec is gone from the gitrepos bucket (read once per handler: gitrepo_gone_).
  bool gitRepoGone(const std::string& workspace, const std::string& gitrepo);
  std::vector<GroupInfo> groupList() const;

  // bundle events (bundle_handler.cpp; mutex_ held below handleBundle)
  //! Another partition's bundle (partition.h): its GitRepo remembered, the event acked; nullopt when it is ours.
  std::optional<Outcome> otherPartitionsBundle(const BundleContext& context);
  Outcome rejectBundle(const std::string& problem);
  bool superseded(const BundleContext& context) const;
  Outcome removeBundle(BundleContext& context);
  std::optional<Outcome> resolveBundle(BundleContext& context, BundleInfo& out);
  void noteBundleAffected(BundleContext& context) const;
  Outcome scheduleBundle(BundleContext& context);
  Outcome finishBundle(BundleContext& context, const std::string& result);

  // status events (status_handler.cpp)
  Outcome handleHeartbeat(const std::string& cluster, const Json& json, uint64_t backlog);
  Outcome handleStatusEvent(const std::string& cluster, const std::string& bundle, const Json& json,
                            uint64_t delivery_count, uint64_t backlog);
  Outcome rejectStatusEvent(const std::string& cluster, const std::string& bundle, const std::string& problem);
  std::string workspaceOfReport(const events::StatusEvent& event, const std::string& cluster,
                                const std::string& bundle) const;
  Outcome statusWithoutDeployment(StatusContext& context);
  std::optional<Outcome> judgeReport(StatusContext& context, const DeploymentRecord& record);
  //! Writes the report's bd.* record with mutex_ released (other clusters' reports, on the other status workers,
  //! and bundle events go on meanwhile), then, holding it again, applies it to memory, the summaries and the
  //! rollout. `record` is a copy: the map entry may change while the mutex is released.
  Outcome storeReport(StatusContext& context, DeploymentRecord record);
  //! After storeReport's write: nullopt when the deployment the report was judged against is still the record's;
  //! else the outcome (a removed deployment's bd.* record removed again and acked; a changed one handled again).
  std::optional<Outcome> reportOvertaken(StatusContext& context, const DeploymentRecord& judged);
  //! A report on a deployment being deleted: its answer to the delete removes the record and status.
  Outcome settleDelete(StatusContext& context, const DeploymentRecord& record);
  void countStatus(const char* result);

  // the deployment records and their indexes (deployment_index.cpp; mutex_ held)
  //! Sets deployments_[key] and keeps deployments_by_bundle_ and deployments_by_gitrepo_ in step.
  void storeDeploymentRecord(const std::string& key, DeploymentRecord record);
  void eraseDeploymentRecord(const std::string& key);
  //! About how many deployment records writing the summaries `affected` names visits (writeSummaries).
  [[nodiscard]] size_t summaryVisits(const Affected& affected) const;

  // summaries and public events (summaries.cpp; mutex_ held)
  //! Writes the summaries `affected` (and any an earlier handler could not write or put off) names, and queues the
  //! rollout passes reports asked for; while defer_summaries_ is set (a status message with more behind it), only
  //! notes them, for at most summary_delay.
  Status writeSummaries(const Affected& affected);
  //! Writes the summaries put off or not written once summary_delay has passed (the watch loop). Locks.
  void flushSummaries();
  Status writeAllSummaries(const Affected& affected);
  Status writeBundleSummary(const std::string& workspace, const std::string& bundle);
  Status writeGitRepoSummary(const std::string& workspace, const std::string& gitrepo);
  Status writeClusterSummary(const std::string& cluster);
  Status writeSummary(const std::string& key, Json record, std::string_view kind);
  Status removeSummary(const std::string& key);
  //! Queues a CloudEvent for flotilla.events.>; flushPublicEvents sends the queue as one batch (with the next
  //! summaries, or from the watch loop within summary_delay).
  void publishPublic(const events::CloudEvent& event, std::string_view kind,
                     std::initializer_list<std::string_view> parts);
  void flushPublicEvents();
  void noteBundleState(const events::BundleSummary& summary);
  std::vector<DeploymentView> deploymentsOfBundle(const std::string& workspace, const std::string& bundle) const;
  //! The clusters with a deployment record of the bundle (deployments_by_bundle_).
  [[nodiscard]] std::vector<std::string> clustersOfBundle(const std::string& workspace,
                                                          const std::string& bundle) const;
  std::vector<DeploymentView> deploymentsOfCluster(const std::string& cluster) const;
  const BdStatus* statusOf(const DeploymentRecord& record) const;
  std::chrono::milliseconds backoff(uint64_t delivery_count) const;
  void updateGauges();
  //! Only the offline gauge: what a cluster going offline or coming back changes (updateGauges counts every record).
  void updateOfflineGauge();
  //! The cluster summary's lastHeartbeat is older than kHeartbeatRefresh before `heartbeat` (RFC 3339; now when it
  //! does not parse), or there is none: the heartbeat rewrites it. mutex_ held.
  [[nodiscard]] bool heartbeatSummaryDue(const std::string& cluster, std::string_view heartbeat) const;
  //! --cluster-offline-after, or three heartbeat intervals.
  [[nodiscard]] std::chrono::milliseconds offlineAfter() const;
  //! The newer of the cluster's last heartbeat and its last registration (nullopt: neither is known).
  [[nodiscard]] std::optional<SystemTime> lastSignOfLife(const std::string& cluster) const;
  //! A heartbeat or registration of an Offline cluster: it is back (counted, logged). mutex_ held.
  void markAlive(const std::string& cluster);
  //! A heartbeat from a cluster without a registration record: asks its agent to register again with the
  //! credentials it holds (identity::agentReregisterSubject), at most every kReregisterAskEvery per cluster; not a
  //! deregistered one. mutex_ held.
  void askToRegisterAgain(const std::string& cluster);
  //! The status consumer reads `lag` behind the clock: gauged; logged and counted once it exceeds offlineAfter().
  void noteStatusLag(SystemTime::duration lag);

  service::Hub hub_;
  Metrics& metrics_;
  SchedulerOptions options_;
  //! stage_latency_seconds{stage="bundle_to_deploy"|"status_to_recorded"} (libs/service stage_latency.h).
  service::StageLatency stages_;

  mutable std::mutex mutex_;                        //!< guards everything below and serializes the handlers' effects
  std::map<std::string, model::Cluster> clusters_;  //!< by cluster name: registration overlaid by the document
  std::map<std::string, model::Cluster> registrations_;                   //!< by cluster name: clusters/cluster.*
  std::map<std::string, model::Cluster> cluster_documents_;               //!< by cluster name: clusters/spec.*
  std::map<std::string, events::ClusterDeregistration> deregistrations_;  //!< by cluster name: tombstones
  std::set<std::string> deregistering_;  //!< tombstoned clusters whose records are not all removed yet
  std::map<std::string, int64_t> deregistration_deletes_;  //!< deployments key -> generation of the delete sent
  std::chrono::steady_clock::time_point next_deregistration_check_;
  std::map<std::string, GroupInfo> groups_;            //!< by clusters-bucket key
  std::map<std::string, std::string> last_heartbeat_;  //!< cluster -> RFC 3339
  std::set<std::string> offline_;                      //!< clusters silent for offlineAfter()
  std::map<std::string, std::chrono::steady_clock::time_point> reregister_asked_;  //!< cluster -> last ask
  std::chrono::steady_clock::time_point next_offline_check_;
  //! Where the status consumer has read (noteStatusRead): kStatusUnread from start() until its first message or
  //! empty fetch, 0 caught up, else the stored time (ms) of the last message it handled with more behind it.
  static constexpr int64_t kStatusUnread = -1;
  std::atomic<int64_t> status_read_until_ms_{0};
  bool status_lag_noted_ = false;              //!< the lag beyond offlineAfter() was logged (once per episode)
  std::map<std::string, BundleInfo> bundles_;  //!< by bundles-bucket key "<ws>.<bundle>"
  //! By deployments-bucket key; written only through storeDeploymentRecord / eraseDeploymentRecord.
  std::map<std::string, DeploymentRecord> deployments_;
  //! Deployments-bucket keys by bundles-bucket key "<ws>.<bundle>", and by gitrepo key "<ws>.<gitrepo>": a bundle's
  //! rollout pass or summary visits its own deployments, not all of them (100 bundles on 100 clusters: every pass
  //! used to scan 10,000 records).
  std::map<std::string, std::set<std::string>> deployments_by_bundle_;
  std::map<std::string, std::set<std::string>> deployments_by_gitrepo_;
  int64_t deleting_records_ = 0;              //!< records with `deleting` set (the deployments_deleting gauge)
  std::map<std::string, BdStatus> statuses_;  //!< by deployments-bucket key (same triple)
  //! The *_by_state, per-GitRepo and per-cluster gauges, kept with summaries_ (state_gauges.h).
  std::unique_ptr<StateGauges> state_gauges_;
  std::map<std::string, Json> summaries_;                  //!< last written (without `updated`), by status-bucket key
  std::map<std::string, uint64_t> summary_revisions_;      //!< their KV revisions (a roll-up event's id names one)
  std::map<std::string, events::RolloutStatus> rollouts_;  //!< by bundles-bucket key: the last pass's status
  //! A delete an agent reported as failed, sent again at `due` (max: sent, waiting for the agent's report).
  struct DeleteRetry {
    uint64_t failures = 0;
    std::chrono::steady_clock::time_point due = std::chrono::steady_clock::time_point::max();
  };
  std::map<std::string, DeleteRetry> delete_retries_;  //!< by deployments-bucket key
  //! A release's DeployEvent whose ack did not come (it may be stored), in a batch or alone: its redo reuses the
  //! generation, so the same Nats-Msg-Id lets JetStream drop the copy (noteDeployUnacked, reuseUnackedGeneration).
  struct UnackedDeploy {
    std::string deployment_id;
    int64_t generation = 0;
  };
  std::map<std::string, UnackedDeploy> unacked_deploys_;  //!< by deployments-bucket key
  //! The time of the BundleEvent being handled ("" outside handleBundle): its DeployEvents' stage latency.
  std::string handling_bundle_time_;
  std::map<std::string, bool> gitrepo_gone_;  //!< gitrepos key -> spec gone; read once per handler, cleared on entry
  //! Summaries not written yet: put off during a burst of status messages, or a write failed (its message is
  //! redone); written with the next ones, at the latest by flushSummaries.
  Affected unwritten_;
  //! A summary that changed, staged by writeSummary and written by writeAllSummaries with the others.
  struct StagedSummary {
    std::string key;
    Json record;  //!< without `updated`: what the cache keeps
    std::string stored;
    std::string kind;
  };
  std::vector<StagedSummary> summary_outbox_;
  std::mutex public_outbox_mutex_;                       //!< guards the two below (not mutex_: see publishPublic)
  std::vector<bus::JetStream::Outgoing> public_outbox_;  //!< CloudEvents not sent yet (publishPublic)
  std::vector<std::string> public_outbox_types_;         //!< their types, for public_events_total
  bool defer_summaries_ = false;                         //!< a status message with more behind it is handled
  //! Bundles-bucket keys of rollout passes that status reports asked for: queued when the summaries are written.
  std::set<std::string> deferred_passes_;
  std::chrono::steady_clock::time_point deferred_since_;  //!< when unwritten_ gained its first entry
  std::chrono::steady_clock::time_point last_flush_;      //!< when writeSummaries last wrote
  bool loaded_ = false;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> caught_up_{false};
  std::atomic<bool> bound_{false};
  std::atomic<bool> subscribed_{false};
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  std::deque<std::string> reconcile_queue_;  //!< cluster names; "" = everything
  std::set<std::string> rollout_queue_;      //!< bundles-bucket keys waiting for a rollout pass
  std::unique_ptr<service::Consumer> bundle_consumer_;
  std::unique_ptr<service::Consumer> status_consumer_;
  bus::KvWatcher clusters_watcher_;
  bus::Subscription register_subscription_;
  std::unique_ptr<ManifestServer> manifest_server_;  //!< flotilla.manifest.* (manifest_server.h)
  // Partitioned only (partition_view.cpp): what the other partitions hold, for cluster summaries, retiring bundles
  // and deregistrations. Guarded by mutex_.
  std::map<std::string, std::string> bundle_gitrepos_;         //!< bundles key -> GitRepo, every partition's
  std::map<std::string, DeploymentRecord> other_deployments_;  //!< by deployments key
  std::map<std::string, BdStatus> other_statuses_;             //!< by deployments key
  bus::KvWatcher other_records_watcher_;                       //!< deployments, ">"
  bus::KvWatcher other_statuses_watcher_;                      //!< status, "bd.>"
  std::thread other_records_thread_;
  std::thread other_statuses_thread_;
  std::atomic<bool> serving_manifests_{false};
  std::thread watch_thread_;
  std::thread reconcile_thread_;
};

}  // namespace flotilla::scheduler
