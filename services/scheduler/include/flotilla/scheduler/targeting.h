// flotilla/scheduler/targeting.h
//
// Which clusters a bundle goes to, and with which manifest and options: Fleet's targeting rules
// (internal/cmd/controller/target/matcher), as pure functions over in-memory records.
//
// - A cluster belongs to a ClusterGroup of its own workspace when the group's selector matches the cluster's
//   labels (a group without a selector has no members; an empty selector selects every cluster). The group
//   "default" is implicit: while a workspace defines no ClusterGroup named "default", every cluster of the
//   workspace is in it. So a GitRepo without targets (Fleet's default target `{name: default, clusterGroup:
//   default}`) deploys to every cluster of its workspace, and a user narrows that by creating a "default" group.
// - A matcher (GitRepo target or fleet.yaml targetCustomization) holds clusterName, clusterSelector, clusterGroup
//   and clusterGroupSelector; every criterion that is set must hold (AND), a matcher with none matches nothing.
//   Group criteria are evaluated per group the cluster is in (clusterGroupSelector matches the group's labels);
//   a cluster in no group is evaluated with an empty group name and no group labels.
// - The GitRepo targets (BundleEvent.targets, empty meaning Fleet's default) are the allow-list: a cluster
//   gets the bundle only if one of them matches.
// - targetCustomizations only choose the manifest and options: the first match wins (FirstMatch: a first match
//   with doNotDeploy keeps the bundle off the cluster); with AllMatches any matching doNotDeploy keeps it off (the
//   bundler renders AllMatches bundles per cluster, so the merged options come from the variants table).
// - Per-cluster variants (BundleEvent.variantsObject, events/variants.h): a cluster the targets admit gets the
//   manifest and options of its entry in the table; a cluster missing from the table is held (its deployment, if
//   any, stays as it is) until the bundler renders for it.
// - Bundles only target clusters of their own workspace.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/variants.h"
#include "flotilla/model/labels.h"

namespace flotilla::scheduler {

//! The name of the implicit cluster group (Fleet's default target uses it).
inline constexpr std::string_view kDefaultGroup = "default";

//! What targeting needs to know about a registered cluster.
struct ClusterInfo {
  std::string name;
  std::string workspace;
  model::Labels labels;

  bool operator==(const ClusterInfo&) const = default;
};

//! A ClusterGroup of a workspace.
struct GroupInfo {
  std::string workspace;
  std::string name;
  model::Labels labels;                          //!< the group's own metadata.labels (for clusterGroupSelector)
  std::optional<model::LabelSelector> selector;  //!< nullopt: no members

  bool operator==(const GroupInfo&) const = default;
};

//! One target matcher.
struct Matcher {
  std::string name;
  std::string cluster_name;
  std::optional<model::LabelSelector> cluster_selector;
  std::string cluster_group;
  std::optional<model::LabelSelector> cluster_group_selector;
  bool do_not_deploy = false;

  bool operator==(const Matcher&) const = default;
};

//! A rendered targetCustomization: its matcher and what it deploys.
struct Customization {
  Matcher matcher;
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
  std::vector<Customization> customizations;
  std::string customization_mode;
  std::vector<Matcher> targets;  //!< the allow-list; Fleet's default when the event had none
  Json depends_on = Json::array();
  bool paused = false;
  int64_t force_sync_generation = 0;
  std::string variants_object;                     //!< "" unless rendered per cluster
  std::optional<events::BundleVariants> variants;  //!< loaded from the object store (nullopt: not loaded yet)

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

//! Fleet's default target when a GitRepo names none: {name: default, clusterGroup: default}.
Matcher defaultTarget();

//! Parses a matcher from its JSON form ({name, clusterName, clusterSelector, clusterGroup, clusterGroupSelector,
//! doNotDeploy}); unknown fields and bad selectors are kInvalid naming `path`.
Result<Matcher> decodeMatcher(const Json& value, std::string_view path, bool allow_do_not_deploy);

//! Validates and extracts the targeting of a (non-error) BundleEvent. The options get forceSyncGeneration when
//! the event carries one and the options do not (so a force-sync changes the deploymentID, as in Fleet).
Result<BundleTargeting> targetingFrom(const events::BundleEvent& event);

//! The groups `cluster` is in, among `groups` (all groups of every workspace), plus the implicit default group.
std::vector<GroupInfo> groupsOf(const ClusterInfo& cluster, const std::vector<GroupInfo>& groups);

//! True when every criterion of `matcher` that is set holds for `cluster` in one of `cluster_groups`.
bool matches(const Matcher& matcher, const ClusterInfo& cluster, const std::vector<GroupInfo>& cluster_groups);

//! The placement of a bundle on a cluster, or nullopt when the bundle does not go there. `groups` is every
//! known group (groupsOf picks the cluster's).
std::optional<Placement> place(const BundleTargeting& bundle, const ClusterInfo& cluster,
                               const std::vector<GroupInfo>& groups);

}  // namespace flotilla::scheduler
