// flotilla/events/records.h
//
// The records the stages keep in KV (docs/pipeline.md "KV records"): one struct and one strict codec each, next
// to the key builders of subjects.h, so every writer and reader agrees on the shape. decodeRecord<T> rejects an
// unknown field, a wrong type or a missing required field with the field path
// ("DeploymentRecord.generation: expected an integer, got a string"); encode() writes every field.
//
//   bucket       key                               record            writer      readers
//   deployments  <cluster>.<ws>.<bundle>            DeploymentRecord  scheduler   scheduler, CLI
//   status       bd.<cluster>.<ws>.<bundle>         BdStatus          scheduler   scheduler, CLI
//   bundles      <ws>.<bundle>                      BundleRecord      bundler     bundler, scheduler, CLI
//   status       bundle-render.<ws>.<bundle>        RenderStatus      bundler     CLI
//   status       bundle-claim.<ws>.<bundle>.<repo>  BundleClaim       bundler     bundler, CLI
//   status       gitrepo.<ws>.<gitrepo>             PollStatus        poller      poller, CLI
//   status       summary.bundle.<ws>.<bundle>       BundleSummary     scheduler   scheduler, CLI
//   status       summary.gitrepo.<ws>.<gitrepo>     GitRepoSummary    scheduler   scheduler, CLI
//   status       summary.cluster.<cluster>          ClusterSummary    scheduler   scheduler, CLI
//   clusters     deregistered.<cluster>             ClusterDeregistration  CLI   scheduler, bundler, CLI
//   clusters     cluster.<cluster>                  model::Cluster    scheduler   scheduler, bundler, CLI
//
// The cluster and group records of the `clusters` bucket are Fleet resources (Cluster, ClusterGroup); their
// strict codec is libs/model's (model::encode, model::decodeCluster, model::decodeClusterGroup), because the same
// types are what targeting, `flotilla render --cluster` and `get -o yaml` use and this library depends on
// libs/core only. clusters/cluster.<name> (the scheduler's registration record) is documented in
// docs/pipeline.md "KV records", section `Cluster`, and its example is tested in records_test.cpp. Fleet's
// BundleSummary under "summary" and the options subtrees are flotilla::Json here (schema in libs/model), so this
// library stays a leaf.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"

namespace flotilla::events {

//! apiVersion of the bundler's records (BundleRecord, RenderStatus), which carry apiVersion and kind.
inline constexpr std::string_view kBundlerRecordApiVersion = "bundler.flotilla.io/v1";

//! DeploymentRecord::staged_reason: the bundle or the cluster is paused, or the bundle's rollout has not released it.
inline constexpr std::string_view kStagedByPause = "Paused";
inline constexpr std::string_view kStagedByRollout = "Rollout";

//! deployments/<cluster>.<ws>.<bundle>: a BundleDeployment, what the scheduler released to (or staged for) one
//! cluster. Required: cluster, workspace, bundle.
struct DeploymentRecord {
  static constexpr std::string_view kKind = "DeploymentRecord";
  std::string cluster;
  std::string workspace;
  std::string bundle;
  std::string gitrepo;
  std::string commit;
  std::string deployment_id;  //!< released: the last DeployEvent sent ("" while held, e.g. bundle paused)
  std::string manifest_id;
  Json options = Json::object();
  Json depends_on = Json::array();
  std::string target;                //!< the allow-list target that admitted the cluster
  std::string customization;         //!< the targetCustomization that chose manifest/options ("" = default)
  std::string staged_deployment_id;  //!< wanted but not released (paused or rollout); "" when nothing is held
  std::string staged_reason;         //!< why it is held: kStagedByPause or kStagedByRollout ("" with nothing staged)
  int64_t generation = 0;            //!< of the last DeployEvent sent
  std::string updated;               //!< RFC 3339
  //! What the last DeployEvent carried for the agent's ownership and dependsOn decisions (sent again with a delete).
  int64_t commit_sequence = 0;  //!< BundleEvent::commit_sequence of the release (0: unknown)
  StringMap labels;             //!< the bundle's labels
  //! A delete DeployEvent (generation `generation`) was sent; the record stays until the agent reports on it
  //! (docs/pipeline.md "Deletes that cascade").
  bool deleting = false;

  bool operator==(const DeploymentRecord&) const = default;
};

//! status/bd.<cluster>.<ws>.<bundle>: the agent's last StatusEvent about a BundleDeployment. Required: cluster,
//! bundle; `state` is one of the seven bundle state names (or "").
struct BdStatus {
  static constexpr std::string_view kKind = "BdStatus";
  std::string cluster;
  std::string workspace;
  std::string bundle;
  std::string deployment_id;  //!< the deployment the agent reports on (its applied one)
  int64_t generation = 0;
  std::string state;
  std::string reason;
  std::string message;
  std::vector<ObjectResult> resources;
  bool stale = false;  //!< deployment_id differed from the record's when stored (scheduler README "stale status")
  std::string agent_version;
  std::string reported;  //!< the StatusEvent's time
  std::string event_id;
  std::string updated;  //!< when the scheduler stored it

  bool operator==(const BdStatus&) const = default;
};

//! The record for a StatusEvent (`stale` and `updated` are the caller's).
BdStatus bdStatusFrom(const StatusEvent& event);

//! bundles/<ws>.<bundle>: the bundle's last good render (the BundleEvent the scheduler deploys), the current render
//! error if the latest commit failed, and the stream sequence of the CommitEvent last applied. Required: apiVersion
//! kBundlerRecordApiVersion, kind, workspace, gitrepo, bundle.
struct BundleRecord {
  static constexpr std::string_view kKind = "BundleRecord";
  std::string workspace;
  std::string gitrepo;
  std::string bundle;
  std::string path;
  std::string commit;            //!< the commit last handled (rendered, or failed to render)
  uint64_t commit_sequence = 0;  //!< FLOTILLA_COMMITS stream sequence of that commit's event
  //! The last successful render, as published (what the scheduler deploys); nullopt if none ever succeeded.
  std::optional<BundleEvent> last_good;
  //! Set while `commit` fails to render (cleared by the next good render).
  std::optional<RenderError> error;
  //! The `sources` object of that commit (a bundle rendered per cluster is rendered again from it).
  std::string source_object;
  //! The Helm release name of the last good render ("" for bundles that are not Helm charts).
  std::string release_name;
  //! The bundler's render cache (services/bundler render_key.h): the key of the inputs `last_good` was rendered
  //! from; "" when that render is not cacheable (remote chart, per-cluster, failed) or the record predates it.
  std::string render_key;

  bool operator==(const BundleRecord&) const = default;
};

//! status/bundle-render.<ws>.<bundle>: the latest render's commit and manifestID, or its error.
struct RenderStatus {
  static constexpr std::string_view kKind = "BundleRenderStatus";
  std::string workspace;
  std::string gitrepo;
  std::string bundle;
  std::string path;
  std::string commit;                 //!< the commit this status is about
  std::string manifest_id;            //!< its manifest ("" when it failed)
  std::string last_good_manifest_id;  //!< what stays deployed when it failed
  std::optional<RenderError> error;
  std::string time;  //!< RFC 3339, when it was written
  //! A remote Helm chart as rendered: reference, resolved version, archive sha256 (remote charts only).
  std::string chart;
  std::string chart_version;
  std::string chart_digest;
  //! What the user should know about this render that is not an error (e.g. Helm objects re-created because the
  //! release name changed with the bundle name).
  std::vector<std::string> notes;

  bool operator==(const RenderStatus&) const = default;
};

//! status/bundle-claim.<ws>.<bundle>.<gitrepo>: GitRepo `gitrepo` has a bundle named `bundle` that another GitRepo
//! of the workspace (`owner`) holds, so its render was skipped. When the owner's bundle is deleted the bundler
//! renders it from this claim (the commit's source archive), without waiting for a new commit. Required:
//! apiVersion kBundlerRecordApiVersion, kind, workspace, bundle, gitrepo.
struct BundleClaim {
  static constexpr std::string_view kKind = "BundleClaim";
  std::string workspace;
  std::string bundle;
  std::string gitrepo;  //!< the GitRepo waiting for the name
  std::string owner;    //!< the GitRepo holding it when the claim was recorded
  std::string path;     //!< the bundle's directory in the waiting GitRepo's commit
  std::string commit;
  uint64_t commit_sequence = 0;  //!< FLOTILLA_COMMITS sequence of that commit's event
  std::string source_object;
  int64_t force_sync_generation = 0;
  std::string time;  //!< RFC 3339, when it was recorded

  bool operator==(const BundleClaim&) const = default;
};

//! status/gitrepo.<ws>.<gitrepo>: what the poller last saw and published for a GitRepo, and how polling goes; also
//! the poller's memory across restarts. Never holds a credential. Required: workspace, gitrepo.
struct PollStatus {
  static constexpr std::string_view kKind = "PollStatus";
  std::string workspace;
  std::string gitrepo;
  std::string repo;                   //!< the URL polled (redacted)
  std::string commit;                 //!< last commit published in a CommitEvent
  std::string polling_commit;         //!< last commit the remote advertised for the wanted ref
  std::string source_object;          //!< `sources` object of the last published commit
  bool changed = false;               //!< the last published event's `changed`
  int64_t force_sync_generation = 0;  //!< spec.forceSyncGeneration the last event was published for
  std::string spec_hash;              //!< sourceSpecHash the last event was published for
  int64_t observed_generation = 0;    //!< metadata.generation of the spec last seen
  std::string last_poll_time;         //!< RFC 3339: last ls-remote that answered
  std::string last_publish_time;      //!< RFC 3339: last CommitEvent published
  std::string last_error;             //!< "" when the last attempt succeeded
  std::string last_error_kind;        //!< ErrorKind name ("transient", "invalid", ...)
  std::string last_error_time;        //!< RFC 3339
  std::string next_poll_time;         //!< RFC 3339: the next timed poll or retry ("" when none is planned)
  int64_t failures = 0;               //!< consecutive failed attempts (drives the backoff)
  std::string webhook_commit;         //!< commit the last accepted webhook announced for the followed ref
  std::string last_webhook_time;      //!< RFC 3339: last accepted webhook that triggered a sync

  bool operator==(const PollStatus&) const = default;
};

//! A render error as the summaries show it (bundle, where, and when).
struct RenderErrorSummary {
  std::string bundle;
  std::string file;
  int64_t line = 0;
  std::string message;
  std::string commit;
  std::string time;

  bool operator==(const RenderErrorSummary&) const = default;
};

//! One partition of a bundle's rollout (BundleSummary::rollout), in rollout order.
struct RolloutPartitionStatus {
  std::string name;
  int64_t count = 0;            //!< targeted clusters in it
  int64_t max_unavailable = 0;  //!< its budget
  int64_t unavailable = 0;      //!< clusters not yet up to date and Ready (Fleet's partition count)
  std::string state;            //!< one of kRolloutPartitionStates

  bool operator==(const RolloutPartitionStatus&) const = default;
};

//! Partition states: Ready (nothing unavailable), Rolling (released, within its budget or waiting for agents),
//! Halted (over its budget with failing clusters), Waiting (the rollout has not reached it).
inline constexpr std::string_view kRolloutPartitionStates[] = {"Ready", "Rolling", "Halted", "Waiting"};
//! Rollout states: Released (every targeted cluster was sent the wanted deployment), Progressing (deployments are
//! held until the clusters released before them are healthy), Halted (held, and clusters it reached are failing).
inline constexpr std::string_view kRolloutStates[] = {"Released", "Progressing", "Halted"};

//! A cluster named by a rollout's status: one that halts it, with its state and why.
struct RolloutCluster {
  std::string cluster;
  std::string state;  //!< a bundle state, or "Offline"
  std::string message;

  bool operator==(const RolloutCluster&) const = default;
};

//! BundleSummary::rollout: where the bundle's rollout stands (scheduler README "Rollouts").
struct RolloutStatus {
  std::string state;                   //!< one of kRolloutStates
  std::string partition;               //!< the first partition not up to date, or the one the rollout stopped at
  int64_t unavailable = 0;             //!< across the bundle's clusters
  int64_t max_unavailable = 0;         //!< rolloutStrategy.maxUnavailable, resolved
  int64_t unavailable_partitions = 0;  //!< partitions over their budget, up to where the rollout stopped
  int64_t max_unavailable_partitions = 0;
  int64_t max_new = 0;
  int64_t held = 0;  //!< clusters whose wanted deployment is staged, waiting for the rollout
  std::vector<RolloutPartitionStatus> partitions;
  std::vector<RolloutCluster> halted_by;  //!< up to 10 clusters that halt it (state Halted)
  //! Targeted clusters no manual partition matches: Fleet leaves them out of the rollout (up to 10 named).
  std::vector<std::string> outside_partitions;
  int64_t outside_partitions_count = 0;

  bool operator==(const RolloutStatus&) const = default;
};

//! status/summary.bundle.<ws>.<bundle>: a bundle across its clusters. Required: workspace, bundle.
struct BundleSummary {
  static constexpr std::string_view kKind = "BundleSummary";
  std::string workspace;
  std::string bundle;
  Json summary = Json::object();  //!< Fleet's BundleSummary (model::encodeStateSummary), details named by cluster
  std::string state;              //!< the worst state
  std::string message;
  std::string ready_clusters;  //!< "3/4"
  std::string gitrepo;
  std::string commit;       //!< of the last good rendering ("" if none)
  std::string manifest_id;  //!< of the last good rendering
  bool paused = false;
  bool error = false;  //!< the latest commit failed to render (render_error says how)
  std::optional<RenderErrorSummary> render_error;
  std::optional<RolloutStatus> rollout;  //!< nullopt while the bundle targets no cluster
  std::string updated;                   //!< RFC 3339, when the scheduler wrote it ("" in memory)

  bool operator==(const BundleSummary&) const = default;
};

//! One bundle of a GitRepo summary.
struct GitRepoSummaryBundle {
  std::string bundle;
  std::string state;
  int64_t ready = 0;
  int64_t desired_ready = 0;
  std::optional<RenderErrorSummary> render_error;

  bool operator==(const GitRepoSummaryBundle&) const = default;
};

//! status/summary.gitrepo.<ws>.<gitrepo>: a GitRepo across its bundles' deployments. Required: workspace, gitrepo.
//! GitRepoSummary::state while every bundle of the GitRepo is deleted and deployments are left
//! (docs/pipeline.md "Deletes that cascade"); the summary's other states are the seven bundle states.
inline constexpr std::string_view kDeletingState = "Deleting";
//! ClusterSummary::state of a cluster whose agent has given no sign of life for the scheduler's
//! --cluster-offline-after (`offline` is then true); its other states are the seven bundle states.
inline constexpr std::string_view kOfflineState = "Offline";
//! BundleSummary::state (and a GitRepoSummary's, and its bundle lines') while the bundle (every bundle of the
//! GitRepo) has no deployment: no registered cluster is targeted, so nothing is Ready or failing yet (0/0 is not
//! Ready). The public event on the change is io.flotilla.bundle.notargets (docs/events/cloudevents.md).
inline constexpr std::string_view kNoTargetsState = "NoTargets";

struct GitRepoSummary {
  static constexpr std::string_view kKind = "GitRepoSummary";
  std::string workspace;
  std::string gitrepo;
  Json summary = Json::object();  //!< details named "cluster/bundle"
  std::string state;
  std::string message;
  std::string ready_bundle_deployments;  //!< "5/6"
  int64_t ready_clusters = 0;            //!< clusters where every deployment of the GitRepo is Ready
  int64_t desired_ready_clusters = 0;
  std::vector<GitRepoSummaryBundle> bundles;
  std::vector<RenderErrorSummary> render_errors;
  bool error = false;
  std::string updated;

  bool operator==(const GitRepoSummary&) const = default;
};

//! status/summary.cluster.<cluster>: a cluster across its bundles, plus its last sign of life. Required: cluster.
struct ClusterSummary {
  static constexpr std::string_view kKind = "ClusterSummary";
  std::string cluster;
  Json summary = Json::object();  //!< details named "ws/bundle"
  std::string state;
  std::string message;
  std::string ready_bundles;  //!< "2/2"
  int64_t ready_git_repos = 0;
  int64_t desired_ready_git_repos = 0;
  std::string last_heartbeat;  //!< RFC 3339, "" when none was seen
  bool registered = false;     //!< a cluster record exists (else: deployments left for a cluster that is gone)
  //! No sign of life (registration or heartbeat) for the scheduler's --cluster-offline-after: state "Offline".
  bool offline = false;
  std::string workspace;
  std::string agent_version;
  std::string kubernetes_version;
  std::string last_seen;  //!< the newer of the last registration and the last heartbeat
  std::string updated;

  bool operator==(const ClusterSummary&) const = default;
};

//! clusters/deregistered.<cluster>: the tombstone `flotilla delete cluster` writes. While it exists the scheduler
//! cleans the cluster's records (first sending its agent a delete for each deployment when the agent is connected;
//! keepResources orphans the objects instead) and refuses a registration under that name; `flotilla apply` of a
//! Cluster document with that name removes it. The scheduler adds credentialKeys when the deregistration finishes.
//! Required: cluster.
struct ClusterDeregistration {
  static constexpr std::string_view kKind = "ClusterDeregistration";
  std::string cluster;
  std::string time;             //!< RFC 3339, when it was written
  bool keep_resources = false;  //!< leave the deployed objects on the cluster (orphaned), delete only the records
  //! Written by the scheduler as the deregistration finishes: the user keys of the credentials its registrar gave
  //! the cluster (the latest and the previous), which `flotilla auth revoke --cluster` revokes at the server.
  std::vector<std::string> credential_keys;

  bool operator==(const ClusterDeregistration&) const = default;
};

//! The KV record types above.
template <typename T>
concept Record = std::same_as<T, DeploymentRecord> || std::same_as<T, BdStatus> || std::same_as<T, BundleRecord> ||
    std::same_as<T, RenderStatus> || std::same_as<T, BundleClaim> || std::same_as<T, PollStatus> ||
    std::same_as<T, BundleSummary> || std::same_as<T, GitRepoSummary> || std::same_as<T, ClusterSummary> ||
    std::same_as<T, ClusterDeregistration>;

namespace detail {
//! The codec of one record type, instantiated in the library for every Record (record_codec.h).
template <typename T>
struct RecordCodec {
  static Json encode(const T& value);
  static Result<T> decode(const Json& json);
};
}  // namespace detail

//! A record as JSON: every field, empty ones included.
template <Record T>
Json encode(const T& value) {
  return detail::RecordCodec<T>::encode(value);
}

//! Strict decoding of a record of type T (see the file comment).
template <Record T>
Result<T> decodeRecord(const Json& json) {
  return detail::RecordCodec<T>::decode(json);
}

//! Parses a KV value and decodes it as T.
template <typename T>
Result<T> parseRecord(std::string_view data) {
  auto json = Json::parse(data);
  if (!json.ok()) {
    return fail(ErrorKind::kInvalid, std::string(T::kKind) + ": " + json.error().message);
  }
  return decodeRecord<T>(*json);
}

//! The state a BundleDeployment counts as, from its record and the agent's last report (`status` may be null):
//! being deleted -> WaitApplied (reason Deleting; ErrApplied when the agent failed the delete); nothing released yet
//! (paused) -> Pending; released but no report -> WaitApplied; a report about another
//! deployment -> WaitApplied (ErrApplied if the agent failed on this generation or a newer one); a report about
//! this deployment -> its state; a newer deployment held back (paused) -> at least OutOfSync. Every reader (the
//! scheduler's roll-up, the CLI) uses this one rule.
struct DeploymentState {
  std::string state;  //!< a bundle state name
  std::string reason;
  std::string message;

  bool operator==(const DeploymentState&) const = default;
};
DeploymentState deploymentState(const DeploymentRecord& record, const BdStatus* status);
//! deploymentState without what is staged: the state of what was released (or is being deleted) there, as the
//! agent reported it. The scheduler's rollout judges availability by it.
DeploymentState releasedState(const DeploymentRecord& record, const BdStatus* status);

}  // namespace flotilla::events
