// flotilla/scheduler/targeting.h
//
// What a BundleEvent deploys on a cluster. Which clusters get the bundle is decided by Fleet's targeting rules in
// libs/model (model::place: allow-list, FirstMatch/AllMatches, doNotDeploy, the implicit "default" group); this
// file turns a BundleEvent into those rules and picks the manifest and options of the decision:
// - the customization place() chose supplies manifest and options when it rendered differently from the default
//   (FirstMatch takes the first match; with AllMatches the bundler renders per cluster, so the merged options come
//   from the variants table);
// - per-cluster variants (BundleEvent.variantsObject, events/variants.h): a cluster the targets admit gets the
//   manifest and options of its entry in the table; a cluster missing from the table is held (its deployment, if
//   any, stays as it is) until the bundler renders for it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/variants.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"
#include "flotilla/model/targeting.h"

namespace flotilla::scheduler {

using model::kDefaultGroup;
//! What targeting needs to know about a registered cluster (one facts type for every stage).
using ClusterInfo = model::ClusterFacts;
//! A ClusterGroup of a workspace.
using GroupInfo = model::GroupInfo;
using model::defaultTarget;
using model::groupInfoOf;  // targeting's view of a ClusterGroup
using model::groupsOf;

//! What a targetCustomization deploys (BundleEvent.customizations[], by position like TargetRules.customizations).
struct Customization {
  std::string manifest_id;  //!< "" when doNotDeploy (or when it renders like the default)
  Json options = Json::object();

  bool operator==(const Customization&) const = default;
};

//! The targeting part of a BundleEvent, validated.
struct BundleTargeting {
  std::string workspace;
  std::string gitrepo;
  std::string bundle;
  std::string commit;
  std::string manifest_id;
  Json options = Json::object();
  model::TargetRules rules;                   //!< the allow-list (Fleet's default when the event had none), matchers
  std::vector<Customization> customizations;  //!< parallel to rules.customizations
  Json depends_on = Json::array();
  bool paused = false;
  std::optional<model::RolloutStrategy> rollout;  //!< fleet.yaml rolloutStrategy (nullopt: Fleet's defaults)
  int64_t force_sync_generation = 0;
  std::string variants_object;                     //!< "" unless rendered per cluster
  std::optional<events::BundleVariants> variants;  //!< loaded from the object store (nullopt: not loaded yet)
  //! Passed on in every DeployEvent for the agent (ownership handover, dependsOn selectors).
  int64_t commit_sequence = 0;
  events::StringMap labels;

  bool operator==(const BundleTargeting&) const = default;
};

//! Where and what to deploy on one cluster.
struct Placement {
  std::string target;         //!< name of the allow-list target that admitted the cluster
  std::string customization;  //!< name of the customization that chose manifest/options ("" = default)
  std::string manifest_id;
  Json options = Json::object();
  std::string deployment_id;  //!< model::deploymentID(manifest_id, options)
  bool hold = false;          //!< per-cluster bundle not rendered for this cluster yet: leave its deployment alone

  bool operator==(const Placement&) const = default;
};

//! Validates and extracts the targeting of a (non-error) BundleEvent. The options get forceSyncGeneration when
//! the event carries one and the options do not (so a force-sync changes the deploymentID, as in Fleet).
Result<BundleTargeting> targetingFrom(const events::BundleEvent& event);

//! The placement of a bundle on a cluster, or nullopt when the bundle does not go there. `groups` is every
//! known group (groupsOf picks the cluster's).
std::optional<Placement> place(const BundleTargeting& bundle, const ClusterInfo& cluster,
                               const std::vector<GroupInfo>& groups);

}  // namespace flotilla::scheduler
