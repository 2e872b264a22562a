// flotilla/render/variants.h
//
// Per-cluster variants: the pieces shared by the bundler service (renderBundle with a cluster list) and
// renderForCluster (cluster_render.h). A bundle is rendered per cluster ("variant mode") when its output depends on
// the cluster:
//   - a helm value (default or any customization) holds a `${ }` template or a "global.fleet.clusterLabels.<L>"
//     reference, or helm.templateValues is set;
//   - targetCustomizationMode AllMatches with two or more customizations (the merged combination depends on which
//     match);
//   - a Helm chart that reads .Capabilities (its output depends on the cluster's Kubernetes and API versions).
// Otherwise a bundle renders once per distinct customization (no per-cluster work).
//
// In variant mode every cluster of the workspace is placed (placeBundle), its options pre-processed
// (preprocessValues) and rendered once per distinct render input (renderKey of the processed options, plus
// capabilitiesKey — Kubernetes version and API-version set — when the chart reads .Capabilities); equal outputs
// share one manifestID.
// The result, an events::BundleVariants table (libs/events variants.h), is stored content-addressed in the
// `manifests` object store and named by BundleEvent.variantsObject; the scheduler deploys each cluster's variant
// and holds clusters missing from it.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/model/options.h"
#include "flotilla/model/targeting.h"
#include "flotilla/render/bundle_spec.h"
#include "flotilla/render/cluster_render.h"

namespace flotilla::render {

//! The string prefix Fleet replaces with a cluster label's value in helm values.
inline constexpr std::string_view kClusterLabelPrefix = "global.fleet.clusterLabels.";

//! A bundle's targeting inputs, as the bundler reads them from fleet.yaml and the GitRepo.
struct BundleTargetingInput {
  model::BundleDeploymentOptions defaults;    //!< defaultOptions(...)
  std::vector<Customization> customizations;  //!< customizations(...), fleet.yaml order
  //! The allow-list (overrideTargets / GitRepo targets / default), the customizations' matchers and the mode; no
  //! workspace (the caller renders for clusters of the bundle's workspace).
  model::TargetRules rules;
  std::string forced_namespace;  //!< the GitRepo's targetNamespace (wins over customizations)
};

//! Builds the input from a decoded fleet.yaml and its GitRepo.
BundleTargetingInput targetingInput(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo,
                                    int64_t force_sync_generation);

//! Where a bundle goes on one cluster, before templating.
struct BundlePlacement {
  ClusterBundle::Decision decision = ClusterBundle::Decision::kNotTargeted;
  std::string target;                       //!< the allow-list target that admitted the cluster
  std::vector<std::string> customizations;  //!< applied, in order
  model::BundleDeploymentOptions options;   //!< merged (Fleet's rules for FirstMatch / AllMatches)
};

//! Fleet's targeting for one cluster (model::place) with the options it gives: FirstMatch takes the chosen
//! customization's merged options, AllMatches merges every chosen one in order (see cluster_render.h).
BundlePlacement placeBundle(const BundleTargetingInput& input, const ClusterFacts& cluster);

//! True when `options` need per-cluster value processing (templates, label references, templateValues).
bool valuesNeedCluster(const model::BundleDeploymentOptions& options);

//! The template context for a cluster: {ClusterName, ClusterNamespace, ClusterLabels, ClusterAnnotations,
//! ClusterValues}.
Json templateContext(const ClusterFacts& cluster);

//! Fleet's preprocessHelmValues for one cluster: label references ("" for a missing label), then (unless
//! helm.disablePreProcess) `${ }` templates in every string of helm.values (map keys included), then
//! helm.templateValues entries as top-level values. Errors are kInvalid with where = `file` and a message naming
//! the value path ("helm.values.replicas"), the cluster and the template problem (unsupported function, syntax,
//! missing key).
Status preprocessValues(model::BundleDeploymentOptions& options, const ClusterFacts& cluster, const std::string& file);

//! True when the Helm chart at `chart_dir` (absolute) reads .Capabilities in a template or has a packaged
//! sub-chart (not inspected, so assumed to).
bool chartReadsCapabilities(const std::string& chart_dir);

//! The part of a cluster's render input that Helm's .Capabilities sees: "kube=<kubernetesVersion>;apis=<16 hex
//! digits of sha256 over the sorted, de-duplicated API versions>" ("" when the cluster reported neither), so
//! clusters with the same version and the same served APIs share one render of a chart that reads .Capabilities.
std::string capabilitiesKey(const ClusterFacts& cluster);

//! Manifests rendered for earlier variants, so re-rendering a bundle after one cluster changed runs the renderer
//! only for the render inputs not seen before. Keys name the bundle, commit and render input; values are manifestIDs
//! already in the object store. Bounded (oldest entries dropped first); thread-safe.
class VariantCache {
 public:
  explicit VariantCache(size_t capacity = 8192) : capacity_(capacity) {}
  [[nodiscard]] std::optional<std::string> find(const std::string& key) const;
  void put(const std::string& key, const std::string& manifest_id);
  [[nodiscard]] size_t size() const;
  //! The manifests the cache names: garbage collection keeps them, since a cache hit reuses one without storing it.
  [[nodiscard]] std::set<std::string> manifestIds() const;

 private:
  mutable std::mutex mutex_;
  size_t capacity_;
  std::map<std::string, std::string> entries_;
  std::deque<std::string> order_;
};

}  // namespace flotilla::render
