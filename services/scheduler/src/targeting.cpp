#include "flotilla/scheduler/targeting.h"

#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"

namespace flotilla::scheduler {

Result<Matcher> decodeMatcher(const Json& value, std::string_view path, bool allow_do_not_deploy) {
  // model's codecs are strict about fields and selectors; a customization matcher is a BundleTarget without
  // options, a GitRepo target a GitTarget.
  if (allow_do_not_deploy) {
    auto target = model::decodeBundleTarget(value, path);
    if (!target.ok()) {
      return fail(target.error());
    }
    return model::matcherOf(*target);
  }
  auto target = model::decodeGitTarget(value, path);
  if (!target.ok()) {
    return fail(target.error());
  }
  return model::matcherOf(*target);
}

namespace {

//! The allow-list of the event (Fleet's default when it has none), problems appended.
std::vector<Matcher> targetsOf(const events::BundleEvent& event, std::vector<std::string>& problems) {
  std::vector<Matcher> out;
  const size_t known_problems = problems.size();
  if (event.targets.isArray()) {
    const auto& list = event.targets.asArray();
    for (size_t i = 0; i < list.size(); ++i) {
      auto matcher = decodeMatcher(list[i], "targets[" + std::to_string(i) + "]", false);
      if (matcher.ok()) {
        out.push_back(std::move(matcher).value());
      } else {
        problems.push_back(matcher.error().message);
      }
    }
  } else if (!event.targets.isNull()) {
    problems.push_back("targets: expected a list");
  }
  if (out.empty() && problems.size() == known_problems) {
    out.push_back(defaultTarget());
  }
  return out;
}

void addCustomizations(const events::BundleEvent& event, BundleTargeting& out, std::vector<std::string>& problems) {
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
    out.rules.customizations.push_back(std::move(matcher).value());
    out.customizations.push_back(Customization{.manifest_id = custom.manifest_id,
                                               .options = custom.options.isObject() ? custom.options : Json::object()});
  }
}

//! Options with the bundle's forceSyncGeneration (unless set), and the deploymentID they give.
void finish(const BundleTargeting& bundle, Placement& out) {
  if (bundle.force_sync_generation != 0 && !out.options.contains("forceSyncGeneration")) {
    out.options["forceSyncGeneration"] = bundle.force_sync_generation;
  }
  out.deployment_id = model::deploymentID(out.manifest_id, out.options);
}

//! A per-cluster bundle: the cluster's entry of the variants table, or hold.
Placement fromVariants(const BundleTargeting& bundle, const ClusterInfo& cluster, Placement out) {
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
  finish(bundle, out);
  return out;
}

}  // namespace

Result<BundleTargeting> targetingFrom(const events::BundleEvent& event) {
  BundleTargeting out{.workspace = event.workspace,
                      .gitrepo = event.gitrepo,
                      .bundle = event.bundle,
                      .commit = event.commit,
                      .manifest_id = event.manifest_id,
                      .options = event.options.isObject() ? event.options : Json::object(),
                      .rules = {.workspace = event.workspace, .mode = event.customization_mode},
                      .depends_on = event.depends_on.isArray() ? event.depends_on : Json::array(),
                      .paused = event.paused,
                      .force_sync_generation = event.force_sync_generation,
                      .variants_object = event.variants_object,
                      .commit_sequence = event.commit_sequence,
                      .labels = event.labels};
  if (event.manifest_id.empty() && event.variants_object.empty()) {
    return fail(ErrorKind::kInvalid, "BundleEvent.manifestID: required for a rendered bundle");
  }
  std::vector<std::string> problems;
  out.rules.targets = targetsOf(event, problems);
  addCustomizations(event, out, problems);
  if (!event.rollout_strategy.isNull()) {
    auto rollout = model::decodeRolloutStrategy(event.rollout_strategy, "rolloutStrategy");
    if (rollout.ok()) {
      out.rollout = std::move(rollout).value();
    } else {
      problems.push_back(rollout.error().describe());
    }
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

std::optional<Placement> place(const BundleTargeting& bundle, const ClusterInfo& cluster,
                               const std::vector<GroupInfo>& groups) {
  ClusterInfo facts = cluster;
  model::resolveGroups(facts, groups);
  const auto decision = model::place(bundle.rules, facts);
  if (decision.kind != model::TargetDecision::Kind::kDeploy) {
    return std::nullopt;
  }
  Placement out{.target = bundle.rules.targets[*decision.target].name};
  if (!bundle.variants_object.empty()) {
    return fromVariants(bundle, cluster, std::move(out));
  }
  out.manifest_id = bundle.manifest_id;
  out.options = bundle.options;
  if (!decision.customizations.empty()) {
    const size_t chosen = decision.customizations.front();
    out.customization = bundle.rules.customizations[chosen].name;
    if (!bundle.customizations[chosen].manifest_id.empty()) {
      out.manifest_id = bundle.customizations[chosen].manifest_id;
      out.options = bundle.customizations[chosen].options;
    }
  }
  finish(bundle, out);
  return out;
}

}  // namespace flotilla::scheduler
