// flotilla/model/resources.h
//
// The resource kinds Flotilla stores and serves: GitRepo, Cluster, ClusterGroup (written by users, Fleet's
// schema) and Bundle, BundleDeployment (written by the bundler and scheduler, Fleet's shape). Specs follow
// fleet.cattle.io/v1alpha1; statuses are Flotilla's own, in Fleet's vocabulary where one exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"
#include "flotilla/model/state.h"

namespace flotilla::model {

inline constexpr std::string_view kFleetApiVersion = "fleet.cattle.io/v1alpha1";
inline constexpr std::string_view kFlotillaApiVersion = "flotilla.io/v1alpha1";
//! The namespace (Flotilla workspace) of a resource that names none: Fleet's usual workspace for downstream
//! clusters, so Fleet examples that omit metadata.namespace land where Fleet users expect them.
inline constexpr std::string_view kDefaultNamespace = "fleet-default";

//! The subset of Kubernetes ObjectMeta Flotilla keeps. Server-populated fields of exported objects (managedFields,
//! ownerReferences, finalizers, selfLink, deletionTimestamp, deletionGracePeriodSeconds) are accepted and dropped.
struct ObjectMeta {
  std::string name;  //!< required, DNS-1123 subdomain
  std::string ns;    //!< "namespace" = Flotilla workspace; kDefaultNamespace when absent
  Labels labels;
  Labels annotations;
  int64_t generation = 0;
  std::string resource_version;
  std::string uid;
  std::string creation_timestamp;

  bool operator==(const ObjectMeta&) const = default;
};

//! A status condition (Ready, Accepted, GitPolling, ...).
struct Condition {
  std::string type;
  std::string status;  //!< "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_update_time;
  std::string last_transition_time;

  bool operator==(const Condition&) const = default;
};

//! Number of deployed objects in each state, summed over bundles (Fleet's resourceCounts).
struct ResourceCounts {
  int64_t ready = 0;
  int64_t desired_ready = 0;
  int64_t wait_applied = 0;
  int64_t modified = 0;
  int64_t orphaned = 0;
  int64_t missing = 0;
  int64_t unknown = 0;
  int64_t not_ready = 0;

  bool operator==(const ResourceCounts&) const = default;
};

// ---- GitRepo ----

//! spec.bundles[] ("driven scan"): an explicit bundle directory and its options file.
struct GitRepoBundlePath {
  std::string base;
  std::string options;

  bool operator==(const GitRepoBundlePath&) const = default;
};

//! spec.imageScanCommit.
struct CommitSpec {
  std::string author_name;
  std::string author_email;
  std::string message_template;

  bool operator==(const CommitSpec&) const = default;
};

//! GitRepo.spec: where the repository is, what to read from it and where to deploy it (Fleet's GitRepoSpec).
struct GitRepoSpec {
  std::string repo;    //!< required
  std::string branch;  //!< Fleet's default when empty and no revision: "master"
  std::string revision;
  std::vector<std::string> paths;  //!< globs; empty means "/"
  std::vector<GitRepoBundlePath> bundles;
  std::string target_namespace;
  std::vector<GitTarget> targets;  //!< empty means [{name: default, clusterGroup: default}]
  std::string client_secret_name;
  std::string helm_secret_name;
  std::string helm_secret_name_for_paths;
  std::string helm_repo_url_regex;
  std::string ca_bundle;  //!< base64 PEM, as in the CRD
  bool insecure_skip_tls_verify = false;
  //! Flotilla's own field (insecureAllowHTTP): credentials (clientSecretName, helmSecretName) may be sent over
  //! plain http:// git or Helm repository URLs. Off: such a GitRepo is refused naming the field.
  bool insecure_allow_http = false;
  std::string service_account;
  bool paused = false;
  int64_t force_sync_generation = 0;
  bool keep_resources = false;
  bool delete_namespace = false;
  std::optional<CorrectDrift> correct_drift;
  std::string oci_registry_secret;
  std::optional<Duration> polling_interval;
  bool disable_polling = false;
  std::string webhook_secret;
  std::optional<Duration> image_scan_interval;
  std::optional<CommitSpec> image_scan_commit;

  //! pollingInterval, with Fleet's rule that unset and 0 both mean 15s.
  [[nodiscard]] Duration effectivePollingInterval() const;

  bool operator==(const GitRepoSpec&) const = default;
};

//! GitRepo.status.display: the one-line view the CLI prints.
struct GitRepoDisplay {
  std::string ready_bundle_deployments;  //!< "3/4"
  std::string state;
  std::string message;
  bool error = false;

  bool operator==(const GitRepoDisplay&) const = default;
};

//! GitRepo.status, written by the poller (commits) and the scheduler (roll-up).
struct GitRepoStatus {
  int64_t observed_generation = 0;
  int64_t update_generation = 0;  //!< forceSyncGeneration last acted on
  std::string commit;             //!< last commit turned into bundles
  std::string polling_commit;     //!< last commit seen by polling
  std::string webhook_commit;     //!< last commit announced by a webhook
  std::string last_polling_time;  //!< RFC 3339 ("lastPollingTriggered")
  int64_t ready_clusters = 0;
  int64_t desired_ready_clusters = 0;
  StateSummary summary;
  GitRepoDisplay display;
  ResourceCounts resource_counts;
  std::vector<Condition> conditions;

  bool operator==(const GitRepoStatus&) const = default;
};

//! A git repository to watch and deploy from.
struct GitRepo {
  ObjectMeta metadata;
  GitRepoSpec spec;
  GitRepoStatus status;

  bool operator==(const GitRepo&) const = default;
};

// ---- Cluster ----

//! Cluster.spec. Agent deployment settings Flotilla does not use (agentEnvVars, agentTolerations, agentAffinity,
//! agentResources, agentSchedulingCustomization) are accepted and kept as JSON so Fleet clusters decode unchanged.
struct ClusterSpec {
  bool paused = false;
  std::string client_id;
  std::string kube_config_secret;
  std::string kube_config_secret_namespace;
  int64_t redeploy_agent_generation = 0;
  std::string agent_namespace;
  std::string private_repo_url;
  std::optional<Json> template_values;  //!< a map: .ClusterValues in fleet.yaml templating
  std::optional<Json> agent_env_vars;
  std::optional<Json> agent_tolerations;
  std::optional<Json> agent_affinity;
  std::optional<Json> agent_resources;
  std::optional<Json> agent_scheduling_customization;
  std::optional<bool> host_network;

  bool operator==(const ClusterSpec&) const = default;
};

//! Cluster.status.display.
struct ClusterDisplay {
  std::string ready_bundles;  //!< "5/6"
  std::string state;          //!< a bundle state or "WaitCheckIn"
  std::string message;

  bool operator==(const ClusterDisplay&) const = default;
};

//! What the agent last reported about itself.
struct AgentStatus {
  std::string last_seen;  //!< RFC 3339
  std::string version;
  std::string kubernetes_version;
  //! The cluster's served "group/version" and "group/version/Kind" entries, sorted (the agent's discovery, for
  //! Helm's .Capabilities.APIVersions); empty when the agent reported none. A Flotilla addition to Fleet's schema.
  std::vector<std::string> api_versions;
  //! Every label the agent reported at its last registration. Only the keys the hub admin allows (the
  //! scheduler's --agent-labels) are copied into metadata.labels, where they take part in targeting; the rest are
  //! kept here so `describe` shows what was reported and left out. A Flotilla addition to Fleet's schema.
  Labels labels;

  bool operator==(const AgentStatus&) const = default;
};

//! Cluster.status, written by the scheduler from registrations, heartbeats and deployment states.
struct ClusterStatus {
  StateSummary summary;
  ResourceCounts resource_counts;
  int64_t ready_git_repos = 0;
  int64_t desired_ready_git_repos = 0;
  ClusterDisplay display;
  AgentStatus agent;
  std::vector<Condition> conditions;

  bool operator==(const ClusterStatus&) const = default;
};

//! A downstream cluster, registered by its agent or created by a user.
struct Cluster {
  ObjectMeta metadata;
  ClusterSpec spec;
  ClusterStatus status;

  bool operator==(const Cluster&) const = default;
};

// ---- ClusterGroup ----

//! ClusterGroup.spec: which clusters (by label) belong to the group.
struct ClusterGroupSpec {
  std::optional<LabelSelector> selector;

  bool operator==(const ClusterGroupSpec&) const = default;
};

//! ClusterGroup.status.display.
struct ClusterGroupDisplay {
  std::string ready_clusters;  //!< "2/3"
  std::string ready_bundles;
  std::string state;

  bool operator==(const ClusterGroupDisplay&) const = default;
};

//! ClusterGroup.status, rolled up from its clusters.
struct ClusterGroupStatus {
  int64_t cluster_count = 0;
  int64_t non_ready_cluster_count = 0;
  std::vector<std::string> non_ready_clusters;
  StateSummary summary;
  ResourceCounts resource_counts;
  ClusterGroupDisplay display;
  std::vector<Condition> conditions;

  bool operator==(const ClusterGroupStatus&) const = default;
};

//! A named, label-selected set of clusters to target. The group "default" is implicit.
struct ClusterGroup {
  ObjectMeta metadata;
  ClusterGroupSpec spec;
  ClusterGroupStatus status;

  bool operator==(const ClusterGroup&) const = default;
};

// ---- Bundle ----

//! Bundle.status.partitions[]: rollout progress of one partition.
struct PartitionStatus {
  std::string name;
  int64_t count = 0;
  int64_t max_unavailable = 0;
  int64_t unavailable = 0;
  StateSummary summary;

  bool operator==(const PartitionStatus&) const = default;
};

//! An object a bundle is expected to deploy.
struct ResourceKey {
  std::string kind;
  std::string api_version;
  std::string ns;  //!< "namespace"
  std::string name;

  bool operator==(const ResourceKey&) const = default;
};

//! Bundle.status.display.
struct BundleDisplay {
  std::string ready_clusters;  //!< "2/3"
  std::string state;

  bool operator==(const BundleDisplay&) const = default;
};

//! Bundle.status, written by the scheduler.
struct BundleStatus {
  std::vector<Condition> conditions;
  StateSummary summary;
  int64_t newly_created = 0;
  int64_t unavailable = 0;
  int64_t unavailable_partitions = 0;
  int64_t max_unavailable = 0;
  int64_t max_unavailable_partitions = 0;
  int64_t max_new = 0;
  std::vector<PartitionStatus> partitions;
  BundleDisplay display;
  std::vector<ResourceKey> resource_key;
  int64_t observed_generation = 0;
  std::string commit;       //!< Flotilla: the commit the bundle was rendered from
  std::string manifest_id;  //!< Flotilla: the default customization's manifestID

  bool operator==(const BundleStatus&) const = default;
};

//! One deployable unit rendered from a GitRepo path (written by the bundler).
struct Bundle {
  ObjectMeta metadata;
  BundleSpec spec;
  BundleStatus status;

  bool operator==(const Bundle&) const = default;
};

// ---- BundleDeployment ----

//! BundleDeployment.spec: what the scheduler wants on one cluster (staged) and has released.
struct BundleDeploymentSpec {
  bool paused = false;
  BundleDeploymentOptions staged_options;
  std::string staged_deployment_id;
  BundleDeploymentOptions options;
  std::string deployment_id;
  std::vector<BundleRef> depends_on;
  std::optional<CorrectDrift> correct_drift;
  bool oci_contents = false;
  std::string values_hash;
  bool off_schedule = false;

  bool operator==(const BundleDeploymentSpec&) const = default;
};

//! A kstatus-style summary of one object.
struct ObjectSummary {
  std::string state;
  bool error = false;
  bool transitioning = false;
  std::vector<std::string> message;

  bool operator==(const ObjectSummary&) const = default;
};

//! An object that is not ready, with its kstatus summary.
struct NonReadyStatus {
  std::string uid;
  std::string kind;
  std::string api_version;
  std::string ns;  //!< "namespace"
  std::string name;
  ObjectSummary summary;

  bool operator==(const NonReadyStatus&) const = default;
};

//! An object that drifted from the desired state (missing, extra or patched).
struct ModifiedStatus {
  std::string kind;
  std::string api_version;
  std::string ns;  //!< "namespace"
  std::string name;
  bool missing = false;
  bool deleted = false;  //!< "delete": exists but should not
  bool exist = false;    //!< exists but is owned by someone else
  std::string patch;

  bool operator==(const ModifiedStatus&) const = default;
};

//! An object a deployment applied.
struct DeployedResource {
  std::string kind;
  std::string api_version;
  std::string ns;  //!< "namespace"
  std::string name;
  std::string created_at;

  bool operator==(const DeployedResource&) const = default;
};

//! display; Flotilla adds the machine-readable reason and human message DESIGN.md asks of every non-Ready state.
struct BundleDeploymentDisplay {
  std::string deployed;
  std::string monitored;
  std::string state;
  std::string reason;
  std::string message;

  bool operator==(const BundleDeploymentDisplay&) const = default;
};

//! BundleDeployment.status, from the agent's StatusEvents.
struct BundleDeploymentStatus {
  std::vector<Condition> conditions;
  std::string applied_deployment_id;
  std::string release;
  bool ready = false;
  bool non_modified = false;
  std::vector<NonReadyStatus> non_ready_status;
  std::vector<ModifiedStatus> modified_status;
  BundleDeploymentDisplay display;
  std::optional<int64_t> sync_generation;
  std::vector<DeployedResource> resources;
  bool incomplete_state = false;

  bool operator==(const BundleDeploymentStatus&) const = default;
};

//! A bundle on one cluster (written by the scheduler; the agent reports on it).
struct BundleDeployment {
  ObjectMeta metadata;
  BundleDeploymentSpec spec;
  BundleDeploymentStatus status;

  bool operator==(const BundleDeployment&) const = default;
};

//! Any decodable resource document.
using Resource = std::variant<GitRepo, Cluster, ClusterGroup, Bundle, BundleDeployment>;

//! "GitRepo", "Cluster", "ClusterGroup", "Bundle" or "BundleDeployment".
std::string_view kindOf(const Resource& resource);
const ObjectMeta& metaOf(const Resource& resource);
ObjectMeta& metaOf(Resource& resource);

}  // namespace flotilla::model
