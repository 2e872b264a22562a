// flotilla/model/targeting.h
//
// Which clusters a bundle goes to: Fleet's targeting rules (internal/cmd/controller/target/matcher), once, as pure
// functions over one cluster-facts type. The scheduler (deployments), the bundler (per-cluster variants) and
// `flotilla render` all decide through place().
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
// - The targets (GitRepo targets or fleet.yaml overrideTargets; none = Fleet's default) are the allow-list: a
//   cluster gets the bundle only if one of them matches.
// - targetCustomizations choose the options (and manifest): FirstMatch (the default) takes the first matching one,
//   and a first match with doNotDeploy keeps the bundle off the cluster; AllMatches takes every matching one in
//   order, and any matching doNotDeploy keeps the bundle off.
// - Bundles only target clusters of their own workspace.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"
#include "flotilla/model/resources.h"

namespace flotilla::model {

//! The name of the implicit cluster group (Fleet's default target uses it).
inline constexpr std::string_view kDefaultGroup = "default";

//! A ClusterGroup as targeting sees it.
struct GroupInfo {
  std::string workspace;
  std::string name;
  Labels labels;                          //!< the group's own metadata.labels (for clusterGroupSelector)
  std::optional<LabelSelector> selector;  //!< nullopt: no members

  bool operator==(const GroupInfo&) const = default;
};

//! Everything about a cluster that targeting, templating and rendering use.
struct ClusterFacts {
  std::string name;
  std::string workspace;  //!< = .ClusterNamespace (Fleet's cluster namespace)
  Labels labels;
  Labels annotations;
  Json template_values = Json::object();  //!< Cluster.spec.templateValues (.ClusterValues)
  //! The groups the cluster is a member of (resolveGroups). `implicit_default_group` adds Fleet's implicit
  //! "default" group (every cluster is in it while the workspace defines no ClusterGroup named "default").
  std::vector<GroupInfo> groups;
  bool implicit_default_group = true;
  std::string kubernetes_version;         //!< "v1.30.2" or "" when unknown (then helm's default is used)
  std::vector<std::string> api_versions;  //!< `helm --api-versions` entries: what the agent reported (empty = none)

  bool operator==(const ClusterFacts&) const = default;
};

//! A ClusterGroup record as targeting sees it.
GroupInfo groupInfoOf(const ClusterGroup& group);

//! A Cluster record's facts (name, workspace, labels, annotations, templateValues, Kubernetes and API versions); groups
//! are not resolved (see resolveGroups).
ClusterFacts clusterFactsOf(const Cluster& cluster);

//! Sets cluster.groups to the groups of `all` (every group of every workspace) the cluster is a member of, and
//! implicit_default_group to whether its workspace leaves "default" implicit.
void resolveGroups(ClusterFacts& cluster, const std::vector<GroupInfo>& all);

//! The groups a cluster is in for matching: its groups plus the implicit "default" group when it applies.
std::vector<GroupInfo> memberGroups(const ClusterFacts& cluster);

//! The groups `cluster` is in among `all`, implicit default included (resolveGroups then memberGroups).
std::vector<GroupInfo> groupsOf(const ClusterFacts& cluster, const std::vector<GroupInfo>& all);

//! One target matcher: a target's name and cluster criteria (what a GitTarget holds), and whether a match keeps the
//! bundle off the cluster (a targetCustomizations[] entry's doNotDeploy).
struct Matcher : GitTarget {
  bool do_not_deploy = false;

  bool operator==(const Matcher&) const = default;
};

Matcher matcherOf(const GitTarget& target);
Matcher matcherOf(const BundleTarget& target);

//! Fleet's default target when a GitRepo names none: {name: default, clusterGroup: default}.
GitTarget defaultGitTarget();
//! defaultGitTarget() as a matcher.
Matcher defaultTarget();

//! True when every criterion of `matcher` that is set holds for `cluster` in one of its member groups.
bool matches(const Matcher& matcher, const ClusterFacts& cluster);

//! A bundle's targeting rules.
struct TargetRules {
  std::string workspace;                //!< the bundle's workspace; "" when the caller picked the clusters already
  std::vector<Matcher> targets;         //!< the allow-list
  std::vector<Matcher> customizations;  //!< targetCustomizations' matchers, in fleet.yaml order
  std::string mode;                     //!< "", "FirstMatch" or "AllMatches"

  bool operator==(const TargetRules&) const = default;
};

//! A targetCustomization's matcher as a rendered bundle carries it (BundleEvent.customizations[]): the
//! customization's name and its target, a BundleTarget without options, as JSON.
struct CustomizationTarget {
  std::string name;
  Json target = Json::object();
};

//! One matcher from its JSON form: a GitTarget ({name, clusterName, clusterSelector, clusterGroup,
//! clusterGroupSelector}), or with `allow_do_not_deploy` a BundleTarget without options (doNotDeploy too). Strict like
//! every codec: unknown fields and bad selectors are kInvalid naming `path`.
Result<Matcher> decodeMatcher(const Json& value, std::string_view path, bool allow_do_not_deploy);

//! The targeting rules of a rendered bundle from the JSON it is carried in (a BundleEvent's targets,
//! customizations and customizationMode), as the scheduler places it and `flotilla explain` predicts it:
//! `targets` is a list of GitTargets (Fleet's default target when null or empty); each customization's matcher is
//! named after the customization unless it names itself. Every problem (targets not a list, a malformed matcher)
//! is appended to `problems` naming its path, and the rules hold the matchers that decoded (with a problem in
//! `targets`, no default is added).
TargetRules targetRulesOf(std::string workspace, const Json& targets,
                          const std::vector<CustomizationTarget>& customizations, std::string mode,
                          std::vector<std::string>& problems);

//! What place() decided for one cluster.
struct TargetDecision {
  enum class Kind {
    kNotTargeted,  //!< another workspace, or no allow-list target matches the cluster
    kDeploy,       //!< the bundle goes to the cluster
    kDoNotDeploy,  //!< a matching customization has doNotDeploy
  };
  Kind kind = Kind::kNotTargeted;
  std::optional<size_t> target;  //!< index of the allow-list target that admitted the cluster
  //! Indexes of the matching customizations that apply, in order (FirstMatch: at most one). With kDoNotDeploy the
  //! last one is the doNotDeploy customization.
  std::vector<size_t> customizations;

  bool operator==(const TargetDecision&) const = default;
};

//! Fleet's targeting of a bundle on one cluster (see the file comment).
TargetDecision place(const TargetRules& rules, const ClusterFacts& cluster);

}  // namespace flotilla::model
