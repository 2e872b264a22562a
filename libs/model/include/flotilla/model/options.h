// flotilla/model/options.h
//
// The deployment options and targeting pieces that Fleet shares between GitRepo, fleet.yaml, Bundle and
// BundleDeployment (Fleet's BundleDeploymentOptions, HelmOptions, BundleTarget, RolloutStrategy, ...). Field
// names mirror the JSON keys in snake_case; std::optional marks fields whose absence differs from their zero
// value (Go pointers in Fleet). Free-form subtrees (helm.values, cluster templateValues) stay flotilla::Json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"

namespace flotilla::model {

//! A Kubernetes IntOrString restricted to what Fleet accepts for rollout sizes: a count (10) or a percentage ("10%").
struct IntOrPercent {
  int64_t value = 0;
  bool percent = false;

  //! "10%" or "10".
  [[nodiscard]] std::string toString() const;
  //! The count for `total` items: a percentage is scaled and rounded up or down (Kubernetes' rule).
  [[nodiscard]] int64_t scaled(int64_t total, bool round_up) const;

  bool operator==(const IntOrPercent&) const = default;
};

//! correctDrift: re-apply when live objects drift from the desired state.
struct CorrectDrift {
  bool enabled = false;
  bool force = false;
  bool keep_fail_history = false;

  bool operator==(const CorrectDrift&) const = default;
};

//! A {name, namespace, key} reference to a ConfigMap or Secret key in the downstream cluster (helm.valuesFrom).
struct KeySelector {
  std::string name;
  std::string ns;  //!< "namespace"
  std::string key;

  bool operator==(const KeySelector&) const = default;
};

//! One helm.valuesFrom entry: exactly one of the two references is normally set.
struct ValuesFrom {
  std::optional<KeySelector> config_map_key_ref;
  std::optional<KeySelector> secret_key_ref;

  bool operator==(const ValuesFrom&) const = default;
};

//! helm: chart source, values and install behaviour.
struct HelmOptions {
  std::string chart;
  std::string repo;
  std::string release_name;  //!< <=53 chars, Helm's release-name syntax
  std::string version;
  int64_t timeout_seconds = 0;
  std::optional<Json> values;  //!< a map, free-form
  std::vector<std::string> values_files;
  std::vector<ValuesFrom> values_from;
  std::optional<Labels> template_values;  //!< templateValues (string -> string)
  bool force = false;
  bool take_ownership = false;
  int64_t max_history = 0;
  bool wait_for_jobs = false;
  bool atomic = false;
  bool disable_pre_process = false;
  bool disable_dns = false;
  bool skip_schema_validation = false;
  bool disable_dependency_update = false;

  bool operator==(const HelmOptions&) const = default;
};

//! kustomize: the directory holding kustomization.yaml.
struct KustomizeOptions {
  std::string dir;

  bool operator==(const KustomizeOptions&) const = default;
};

//! yaml: overlay names, mapping to overlays/<name>/ in the bundle directory.
struct YamlOptions {
  std::vector<std::string> overlays;

  bool operator==(const YamlOptions&) const = default;
};

//! One diff.comparePatches[].operations entry ({op: remove|ignore, path}).
struct CompareOperation {
  std::string op;
  std::string path;
  std::string value;

  bool operator==(const CompareOperation&) const = default;
};

//! diff.comparePatches[]: which object, and which fields to ignore when detecting drift.
struct ComparePatch {
  std::string kind;
  std::string api_version;
  std::string ns;  //!< "namespace"
  std::string name;
  std::vector<CompareOperation> operations;
  std::vector<std::string> json_pointers;

  bool operator==(const ComparePatch&) const = default;
};

//! diff: fields ignored when comparing live objects with the desired ones.
struct DiffOptions {
  std::vector<ComparePatch> compare_patches;

  bool operator==(const DiffOptions&) const = default;
};

//! ignore: conditions (each a map such as {type: Active, status: "False"}) that do not make a resource unhealthy.
struct IgnoreOptions {
  std::vector<Labels> conditions;

  bool operator==(const IgnoreOptions&) const = default;
};

//! downstreamResources[]: Secrets/ConfigMaps copied to the downstream cluster.
struct DownstreamResource {
  std::string kind;
  std::string name;

  bool operator==(const DownstreamResource&) const = default;
};

//! Fleet's BundleDeploymentOptions: how a bundle is deployed on a cluster. Appears inline in fleet.yaml, in each
//! targetCustomizations[] entry, in Bundle.spec and as BundleDeployment.spec.options.
struct BundleDeploymentOptions {
  std::string default_namespace;  //!< defaultNamespace (Fleet's default: "default", applied by the renderer)
  std::string target_namespace;   //!< namespace: forces every object into it
  std::optional<KustomizeOptions> kustomize;
  std::optional<HelmOptions> helm;
  std::string service_account;
  int64_t force_sync_generation = 0;
  std::optional<YamlOptions> yaml;
  std::optional<DiffOptions> diff;
  bool keep_resources = false;
  bool delete_crd_resources = false;
  bool delete_namespace = false;
  bool create_namespace = false;
  std::optional<IgnoreOptions> ignore;
  std::optional<CorrectDrift> correct_drift;
  std::optional<Labels> namespace_labels;
  std::optional<Labels> namespace_annotations;
  std::vector<DownstreamResource> downstream_resources;

  bool operator==(const BundleDeploymentOptions&) const = default;
};

//! A GitRepo target (and fleet.yaml overrideTargets[] entry, and a Bundle's targetRestrictions[] entry).
struct GitTarget {
  std::string name;
  std::string cluster_name;
  std::optional<LabelSelector> cluster_selector;
  std::string cluster_group;
  std::optional<LabelSelector> cluster_group_selector;

  bool operator==(const GitTarget&) const = default;
};

//! A Bundle target / fleet.yaml targetCustomizations[] entry: a matcher plus option overrides.
struct BundleTarget {
  std::string name;  //!< defaults to "target%03d" at bundling time
  std::string cluster_name;
  std::optional<LabelSelector> cluster_selector;
  std::string cluster_group;
  std::optional<LabelSelector> cluster_group_selector;
  bool do_not_deploy = false;
  BundleDeploymentOptions options;  //!< inline in JSON

  bool operator==(const BundleTarget&) const = default;
};

//! dependsOn[]: a bundle by name, or bundles by label; the states that count as satisfied (default [Ready]).
struct BundleRef {
  std::string name;
  std::optional<LabelSelector> selector;
  std::vector<std::string> accepted_states;

  bool operator==(const BundleRef&) const = default;
};

//! rolloutStrategy.partitions[].
struct Partition {
  std::string name;
  std::optional<IntOrPercent> max_unavailable;  //!< default 10%
  std::string cluster_name;
  std::optional<LabelSelector> cluster_selector;
  std::string cluster_group;
  std::optional<LabelSelector> cluster_group_selector;

  bool operator==(const Partition&) const = default;
};

//! rolloutStrategy: how fast a bundle change reaches clusters.
struct RolloutStrategy {
  std::optional<IntOrPercent> max_unavailable;             //!< default 100%
  std::optional<IntOrPercent> max_unavailable_partitions;  //!< default 0
  std::optional<IntOrPercent> auto_partition_size;         //!< default 25%
  std::optional<int64_t> auto_partition_threshold;         //!< default 200
  std::optional<int64_t> max_new;                          //!< default 50
  std::vector<Partition> partitions;

  bool operator==(const RolloutStrategy&) const = default;
};

//! spec.resources[] of a Fleet Bundle (inline content; Flotilla keeps rendered content in the object store).
struct BundleResource {
  std::string name;
  std::string content;
  std::string encoding;  //!< "" or "base64+gz"

  bool operator==(const BundleResource&) const = default;
};

//! Fleet's BundleSpec (inline in fleet.yaml without the internal fields resources, targetRestrictions,
//! contentsId and valuesHash).
struct BundleSpec {
  BundleDeploymentOptions options;  //!< inline in JSON
  bool paused = false;
  std::optional<RolloutStrategy> rollout_strategy;
  std::vector<BundleResource> resources;
  std::vector<BundleTarget> targets;
  std::vector<GitTarget> target_restrictions;
  std::vector<BundleRef> depends_on;
  std::string target_customization_mode;  //!< "", "FirstMatch" or "AllMatches"
  std::string contents_id;
  std::string values_hash;

  bool operator==(const BundleSpec&) const = default;
};

//! fleet.yaml imageScans[] (experimental in Fleet; decoded so such files are accepted).
struct ImageScanYaml {
  std::string name;
  std::string tag_name;
  std::string image;
  std::optional<Duration> interval;
  std::string secret_ref_name;  //!< secretRef.name
  bool suspend = false;
  std::string semver_range;        //!< policy.semver.range
  std::string alphabetical_order;  //!< policy.alphabetical.order

  bool operator==(const ImageScanYaml&) const = default;
};

//! The repository file fleet.yaml: a name override, labels, an inline BundleSpec and per-target customizations.
struct FleetYaml {
  std::string name;  //!< bundle name override, used verbatim
  Labels labels;
  BundleSpec spec;  //!< inline in the file
  std::vector<BundleTarget> target_customizations;
  std::vector<ImageScanYaml> image_scans;
  std::optional<std::vector<GitTarget>> override_targets;  //!< set (even empty) replaces the GitRepo targets

  bool operator==(const FleetYaml&) const = default;
};

}  // namespace flotilla::model
