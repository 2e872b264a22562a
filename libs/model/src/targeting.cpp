#include "flotilla/model/targeting.h"

#include <utility>

#include "flotilla/model/codec.h"

namespace flotilla::model {

Result<Matcher> decodeMatcher(const Json& value, std::string_view path, bool allow_do_not_deploy) {
  // The codecs are strict about fields and selectors; a customization matcher is a BundleTarget without options, a
  // GitRepo target a GitTarget.
  if (allow_do_not_deploy) {
    auto target = decodeBundleTarget(value, path);
    if (!target.ok()) {
      return fail(target.error());
    }
    return matcherOf(*target);
  }
  auto target = decodeGitTarget(value, path);
  if (!target.ok()) {
    return fail(target.error());
  }
  return matcherOf(*target);
}

TargetRules targetRulesOf(std::string workspace, const Json& targets,
                          const std::vector<CustomizationTarget>& customizations, std::string mode,
                          std::vector<std::string>& problems) {
  TargetRules rules{.workspace = std::move(workspace), .mode = std::move(mode)};
  const size_t known_problems = problems.size();
  if (targets.isArray()) {
    const auto& list = targets.asArray();
    for (size_t i = 0; i < list.size(); ++i) {
      auto matcher = decodeMatcher(list[i], "targets[" + std::to_string(i) + "]", false);
      if (matcher.ok()) {
        rules.targets.push_back(std::move(matcher).value());
      } else {
        problems.push_back(matcher.error().message);
      }
    }
  } else if (!targets.isNull()) {
    problems.push_back("targets: expected a list");
  }
  if (rules.targets.empty() && problems.size() == known_problems) {
    rules.targets.push_back(defaultTarget());
  }
  for (size_t i = 0; i < customizations.size(); ++i) {
    auto matcher = decodeMatcher(customizations[i].target, "customizations[" + std::to_string(i) + "].target", true);
    if (!matcher.ok()) {
      problems.push_back(matcher.error().message);
      continue;
    }
    if (matcher->name.empty()) {
      matcher->name = customizations[i].name;
    }
    rules.customizations.push_back(std::move(matcher).value());
  }
  return rules;
}

GroupInfo groupInfoOf(const ClusterGroup& group) {
  return GroupInfo{.workspace = group.metadata.ns,
                   .name = group.metadata.name,
                   .labels = group.metadata.labels,
                   .selector = group.spec.selector};
}

ClusterFacts clusterFactsOf(const Cluster& cluster) {
  ClusterFacts facts{.name = cluster.metadata.name,
                     .workspace = cluster.metadata.ns,
                     .labels = cluster.metadata.labels,
                     .annotations = cluster.metadata.annotations};
  if (cluster.spec.template_values && cluster.spec.template_values->isObject()) {
    facts.template_values = *cluster.spec.template_values;
  }
  facts.kubernetes_version = cluster.status.agent.kubernetes_version;
  facts.api_versions = cluster.status.agent.api_versions;
  return facts;
}

void resolveGroups(ClusterFacts& cluster, const std::vector<GroupInfo>& all) {
  cluster.groups.clear();
  cluster.implicit_default_group = true;
  for (const auto& group : all) {
    if (group.workspace != cluster.workspace) {
      continue;
    }
    if (group.name == kDefaultGroup) {
      cluster.implicit_default_group = false;
    }
    if (group.selector && group.selector->matches(cluster.labels)) {
      cluster.groups.push_back(group);
    }
  }
}

std::vector<GroupInfo> memberGroups(const ClusterFacts& cluster) {
  std::vector<GroupInfo> out = cluster.groups;
  if (!cluster.implicit_default_group) {
    return out;
  }
  for (const auto& group : out) {
    if (group.name == kDefaultGroup) {
      return out;
    }
  }
  out.push_back(
      GroupInfo{.workspace = cluster.workspace, .name = std::string(kDefaultGroup), .selector = LabelSelector{}});
  return out;
}

std::vector<GroupInfo> groupsOf(const ClusterFacts& cluster, const std::vector<GroupInfo>& all) {
  ClusterFacts resolved = cluster;
  resolveGroups(resolved, all);
  return memberGroups(resolved);
}

Matcher matcherOf(const GitTarget& target) {
  return Matcher{target, /*do_not_deploy=*/false};
}

Matcher matcherOf(const BundleTarget& target) {
  GitTarget criteria{.name = target.name,
                     .cluster_name = target.cluster_name,
                     .cluster_selector = target.cluster_selector,
                     .cluster_group = target.cluster_group,
                     .cluster_group_selector = target.cluster_group_selector};
  return Matcher{std::move(criteria), target.do_not_deploy};
}

GitTarget defaultGitTarget() {
  return GitTarget{.name = "default", .cluster_group = std::string(kDefaultGroup)};
}

Matcher defaultTarget() {
  return matcherOf(defaultGitTarget());
}

namespace {

bool holds(const Matcher& m, const ClusterFacts& cluster, const std::string& group_name, const Labels& group_labels) {
  if (!m.cluster_name.empty() && m.cluster_name != cluster.name) {
    return false;
  }
  if (!m.cluster_group.empty() && m.cluster_group != group_name) {
    return false;
  }
  if (m.cluster_group_selector && !m.cluster_group_selector->matches(group_labels)) {
    return false;
  }
  return !m.cluster_selector || m.cluster_selector->matches(cluster.labels);
}

bool matchesIn(const Matcher& matcher, const ClusterFacts& cluster, const std::vector<GroupInfo>& member_of) {
  if (matcher.cluster_name.empty() && matcher.cluster_group.empty() && !matcher.cluster_selector &&
      !matcher.cluster_group_selector) {
    return false;
  }
  if (member_of.empty()) {
    return holds(matcher, cluster, "", {});
  }
  for (const auto& group : member_of) {
    if (holds(matcher, cluster, group.name, group.labels)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool matches(const Matcher& matcher, const ClusterFacts& cluster) {
  return matchesIn(matcher, cluster, memberGroups(cluster));
}

TargetDecision place(const TargetRules& rules, const ClusterFacts& cluster) {
  TargetDecision out;
  if (!rules.workspace.empty() && cluster.workspace != rules.workspace) {
    return out;
  }
  const std::vector<GroupInfo> member_of = memberGroups(cluster);
  for (size_t i = 0; i < rules.targets.size() && !out.target; ++i) {
    if (matchesIn(rules.targets[i], cluster, member_of)) {
      out.target = i;
    }
  }
  if (!out.target) {
    return out;
  }
  out.kind = TargetDecision::Kind::kDeploy;
  const bool all_matches = rules.mode == "AllMatches";
  for (size_t i = 0; i < rules.customizations.size(); ++i) {
    if (!matchesIn(rules.customizations[i], cluster, member_of)) {
      continue;
    }
    out.customizations.push_back(i);
    if (rules.customizations[i].do_not_deploy) {
      out.kind = TargetDecision::Kind::kDoNotDeploy;
      return out;
    }
    if (!all_matches) {
      break;  // FirstMatch (Fleet): only the first matching customization counts, doNotDeploy included
    }
  }
  return out;
}

}  // namespace flotilla::model
