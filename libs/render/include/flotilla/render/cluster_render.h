// flotilla/render/cluster_render.h
//
// Per-cluster rendering: what one cluster gets from a repository checkout, and the variant rendering the bundler
// service uses for bundles whose output depends on the cluster. Both go through the same functions
// (placeBundle -> preprocessValues -> renderBundle), so `flotilla render` shows exactly what the bundler renders.
//
// For one cluster and one bundle:
//   1. targeting (Fleet's rules, model/targeting.h): the bundle's allow-list (GitRepo targets, or fleet.yaml
//      overrideTargets; none = {clusterGroup: default}) must match, else "not targeted"; then targetCustomizations:
//      FirstMatch (default) takes the first matching one, AllMatches merges every matching one in fleet.yaml order
//      (Fleet v0.16: Merge(defaults, Merge(Merge({}, c1), c2)...)); a matching customization with doNotDeploy (any
//      of them, in AllMatches) keeps the bundle off the cluster.
//   2. values pre-processing (Fleet's preprocessHelmValues), unless helm.disablePreProcess for the `${ }` part:
//      string values "global.fleet.clusterLabels.<L>" become the label's value ("" when the cluster lacks it);
//      `${ }` templates in helm.values are evaluated with .ClusterName, .ClusterNamespace, .ClusterLabels,
//      .ClusterAnnotations, .ClusterValues (libs/template); helm.templateValues entries are evaluated and set as
//      top-level values.
//   3. render with the cluster's Kubernetes version (helm --kube-version, --api-versions) when known.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"
#include "flotilla/model/resources.h"
#include "flotilla/model/targeting.h"
#include "flotilla/render/manifest.h"
#include "flotilla/render/render.h"

namespace flotilla::render {

//! Everything about a cluster that targeting, templating and rendering use (one type for every stage).
using ClusterFacts = model::ClusterFacts;

//! The renderer binaries and limits for renderForCluster.
struct RenderTools {
  std::string helm_binary = "helm";            //!< a path, or a name searched in $PATH; "none" disables Helm
  std::string kustomize_binary = "kustomize";  //!< likewise
  RenderLimits limits;
};

//! The repository side of renderForCluster.
struct RepoInput {
  //! The GitRepo the checkout belongs to: metadata.name (bundle IDs; defaults to the directory's name when empty),
  //! spec.paths (none = the root), spec.targets (the allow-list), targetNamespace, serviceAccount, ... — all optional.
  model::GitRepo gitrepo;
};

//! What happened to one bundle for the cluster.
struct ClusterBundle {
  enum class Decision {
    kDeploy,       //!< targeted: `manifest` and `options` are what the agent gets
    kNotTargeted,  //!< no allow-list target matches the cluster
    kDoNotDeploy,  //!< a matching customization has doNotDeploy
    kError,        //!< the bundle's files are bad or a template fails: see `error` (file, line, message)
  };
  std::string bundle;  //!< the bundle ID
  std::string path;    //!< its directory in the checkout ("." for the root)
  Decision decision = Decision::kNotTargeted;
  std::string target;                         //!< the allow-list target that admitted the cluster
  std::vector<std::string> customizations;    //!< the customizations applied (several with AllMatches)
  std::string renderer;                       //!< raw, helm, kustomize
  model::BundleDeploymentOptions options;     //!< merged and pre-processed (templated helm values)
  std::optional<CanonicalManifest> manifest;  //!< kDeploy: the canonical objects (docs/manifests.md) and manifestID
  std::optional<events::RenderError> error;   //!< kError
};

//! Renders every bundle under `checkout` (a repository checkout or a single bundle directory) as the bundler would
//! for `cluster`, without NATS. Every bundle goes through the per-cluster path, so helm gets the cluster's
//! --kube-version and --api-versions when set. The checkout is copied to a temporary directory first (renderers
//! write next to it). Bad user input is reported per bundle (kError); only I/O failures (the directory, temp space,
//! a renderer binary that cannot run) fail the call. Logs (renderer set-up, info level) go to core's log (stderr).
Result<std::vector<ClusterBundle>> renderForCluster(const std::filesystem::path& checkout, const ClusterFacts& cluster,
                                                    const RenderTools& tools, const RepoInput& repo = {});

}  // namespace flotilla::render
