#include "flotilla/scheduler/targeting.h"

#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"

namespace flotilla::scheduler {

namespace {

//! The matchers of the event's customizations (model::targetRulesOf decodes them).
std::vector<model::CustomizationTarget> customizationTargets(const events::BundleEvent& event) {
  std::vector<model::CustomizationTarget> out;
  out.reserve(event.customizations.size());
  for (const auto& custom : event.customizations) {
    out.push_back({.name = custom.name, .target = custom.target});
  }
  return out;
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
  out.rules = model::targetRulesOf(event.workspace, event.targets, customizationTargets(event),
                                   event.customization_mode, problems);
  // Parallel to rules.customizations (a customization that does not decode fails the event below).
  for (const auto& custom : event.customizations) {
    out.customizations.push_back(Customization{.manifest_id = custom.manifest_id,
                                               .options = custom.options.isObject() ? custom.options : Json::object()});
  }
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
