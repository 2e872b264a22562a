#include "flotilla/scheduler/targeting.h"

#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"

namespace flotilla::scheduler {

Matcher defaultTarget() {
  return Matcher{.name = "default", .cluster_group = std::string(kDefaultGroup)};
}

Result<Matcher> decodeMatcher(const Json& value, std::string_view path, bool allow_do_not_deploy) {
  // model's codecs are strict about fields and selectors; a customization matcher is a BundleTarget without
  // options, a GitRepo target a GitTarget.
  if (allow_do_not_deploy) {
    auto target = model::decodeBundleTarget(value, path);
    if (!target.ok()) {
      return fail(target.error());
    }
    return Matcher{.name = target->name,
                   .cluster_name = target->cluster_name,
                   .cluster_selector = target->cluster_selector,
                   .cluster_group = target->cluster_group,
                   .cluster_group_selector = target->cluster_group_selector,
                   .do_not_deploy = target->do_not_deploy};
  }
  auto target = model::decodeGitTarget(value, path);
  if (!target.ok()) {
    return fail(target.error());
  }
  return Matcher{.name = target->name,
                 .cluster_name = target->cluster_name,
                 .cluster_selector = target->cluster_selector,
                 .cluster_group = target->cluster_group,
                 .cluster_group_selector = target->cluster_group_selector};
}

Result<BundleTargeting> targetingFrom(const events::BundleEvent& event) {
  BundleTargeting out{.workspace = event.workspace,
                      .gitrepo = event.gitrepo,
                      .bundle = event.bundle,
                      .commit = event.commit,
                      .manifest_id = event.manifest_id,
                      .options = event.options.isObject() ? event.options : Json::object(),
                      .customization_mode = event.customization_mode,
                      .depends_on = event.depends_on.isArray() ? event.depends_on : Json::array(),
                      .paused = event.paused,
                      .force_sync_generation = event.force_sync_generation,
                      .variants_object = event.variants_object};
  if (event.manifest_id.empty() && event.variants_object.empty()) {
    return fail(ErrorKind::kInvalid, "BundleEvent.manifestID: required for a rendered bundle");
  }
  std::vector<std::string> problems;
  if (event.targets.isArray()) {
    const auto& list = event.targets.asArray();
    for (size_t i = 0; i < list.size(); ++i) {
      auto matcher = decodeMatcher(list[i], "targets[" + std::to_string(i) + "]", false);
      if (matcher.ok()) {
        out.targets.push_back(std::move(matcher).value());
      } else {
        problems.push_back(matcher.error().message);
      }
    }
  } else if (!event.targets.isNull()) {
    problems.push_back("targets: expected a list");
  }
  if (out.targets.empty() && problems.empty()) {
    out.targets.push_back(defaultTarget());
  }
  for (size_t i = 0; i < event.customizations.size(); ++i) {
    const auto& custom = event.customizations[i];
    auto matcher = decodeMatcher(custom.target, "customizations[" + std::to_string(i) + "].target", true);
    if (!matcher.ok()) {
      problems.push_back(matcher.error().message);
      continue;
    }
    if (matcher->name.empty()) {
      matcher->name = custom.name;
    }
    out.customizations.push_back(Customization{.matcher = std::move(matcher).value(),
                                               .manifest_id = custom.manifest_id,
                                               .options = custom.options.isObject() ? custom.options : Json::object()});
  }
  if (!problems.empty()) {
    std::string message;
    for (const auto& p : problems) {
      message += (message.empty() ? "" : "; ") + p;
    }
    return fail(ErrorKind::kInvalid, message, "BundleEvent " + event.workspace + "/" + event.bundle);
  }
  return out;
}

std::vector<GroupInfo> groupsOf(const ClusterInfo& cluster, const std::vector<GroupInfo>& groups) {
  std::vector<GroupInfo> out;
  bool explicit_default = false;
  for (const auto& group : groups) {
    if (group.workspace != cluster.workspace) {
      continue;
    }
    if (group.name == kDefaultGroup) {
      explicit_default = true;
    }
    if (group.selector && group.selector->matches(cluster.labels)) {
      out.push_back(group);
    }
  }
  if (!explicit_default) {
    out.push_back(GroupInfo{
        .workspace = cluster.workspace, .name = std::string(kDefaultGroup), .selector = model::LabelSelector{}});
  }
  return out;
}

namespace {

bool holds(const Matcher& m, const ClusterInfo& cluster, const std::string& group_name,
           const model::Labels& group_labels) {
  if (!m.cluster_name.empty() && m.cluster_name != cluster.name) {
    return false;
  }
  if (!m.cluster_group.empty() && m.cluster_group != group_name) {
    return false;
  }
  if (m.cluster_group_selector && !m.cluster_group_selector->matches(group_labels)) {
    return false;
  }
  if (m.cluster_selector && !m.cluster_selector->matches(cluster.labels)) {
    return false;
  }
  return true;
}

}  // namespace

bool matches(const Matcher& matcher, const ClusterInfo& cluster, const std::vector<GroupInfo>& cluster_groups) {
  if (matcher.cluster_name.empty() && matcher.cluster_group.empty() && !matcher.cluster_selector &&
      !matcher.cluster_group_selector) {
    return false;
  }
  if (cluster_groups.empty()) {
    return holds(matcher, cluster, "", {});
  }
  for (const auto& group : cluster_groups) {
    if (holds(matcher, cluster, group.name, group.labels)) {
      return true;
    }
  }
  return false;
}

std::optional<Placement> place(const BundleTargeting& bundle, const ClusterInfo& cluster,
                               const std::vector<GroupInfo>& groups) {
  if (cluster.workspace != bundle.workspace) {
    return std::nullopt;
  }
  std::vector<GroupInfo> member_of = groupsOf(cluster, groups);
  const Matcher* admitted = nullptr;
  for (const auto& target : bundle.targets) {
    if (matches(target, cluster, member_of)) {
      admitted = &target;
      break;
    }
  }
  if (admitted == nullptr) {
    return std::nullopt;
  }
  const Customization* chosen = nullptr;
  const bool all_matches = bundle.customization_mode == "AllMatches";
  for (const auto& custom : bundle.customizations) {
    if (!matches(custom.matcher, cluster, member_of)) {
      continue;
    }
    if (custom.matcher.do_not_deploy) {
      return std::nullopt;
    }
    if (chosen == nullptr) {
      chosen = &custom;
    }
    if (!all_matches) {
      break;  // FirstMatch (Fleet): only the first matching customization counts, doNotDeploy included
    }
  }
  Placement out{.target = admitted->name};
  if (!bundle.variants_object.empty()) {
    if (!bundle.variants) {
      out.hold = true;  // the table could not be read yet
      return out;
    }
    auto entry = bundle.variants->clusters.find(cluster.name);
    if (entry == bundle.variants->clusters.end()) {
      out.hold = true;
      return out;
    }
    const auto& variant = bundle.variants->variants[static_cast<size_t>(entry->second)];
    for (const auto& name : variant.customizations) {
      out.customization += (out.customization.empty() ? "" : "+") + name;
    }
    out.manifest_id = variant.manifest_id;
    out.options = variant.options.isObject() ? variant.options : Json::object();
    if (bundle.force_sync_generation != 0 && !out.options.contains("forceSyncGeneration")) {
      out.options["forceSyncGeneration"] = bundle.force_sync_generation;
    }
    out.deployment_id = model::deploymentID(out.manifest_id, out.options);
    return out;
  }
  if (chosen != nullptr && !chosen->manifest_id.empty()) {
    out.customization = chosen->matcher.name;
    out.manifest_id = chosen->manifest_id;
    out.options = chosen->options;
  } else {
    out.manifest_id = bundle.manifest_id;
    out.options = bundle.options;
    if (chosen != nullptr) {
      out.customization = chosen->matcher.name;
    }
  }
  if (bundle.force_sync_generation != 0 && !out.options.contains("forceSyncGeneration")) {
    out.options["forceSyncGeneration"] = bundle.force_sync_generation;
  }
  out.deployment_id = model::deploymentID(out.manifest_id, out.options);
  return out;
}

}  // namespace flotilla::scheduler
