// Which registered clusters a subject's bundles target but have no deployment on yet (explain_records.h): Fleet's
// targeting (model::place, the scheduler's own rules and facts: model::targetRulesOf over the last good render,
// the registration overlaid by the admin's Cluster document, the workspace's ClusterGroups), so `explain` and
// `wait` await every targeted cluster, not only the ones the scheduler has already placed bundles on.
#include <algorithm>
#include <optional>
#include <set>

#include "explain_records.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/targeting.h"

namespace flotilla::cli::detail {

namespace {

//! The registered clusters as the scheduler places on them: each registration overlaid by its document, with its
//! groups resolved; a cluster being deregistered is left out (the scheduler removes its deployments).
std::vector<model::ClusterFacts> targetableClusters(const Snapshot& snapshot) {
  std::vector<model::GroupInfo> groups;
  groups.reserve(snapshot.groups.size());
  for (const auto& group : snapshot.groups) {
    groups.push_back(model::groupInfoOf(group));
  }
  std::vector<model::ClusterFacts> out;
  for (const auto& registration : snapshot.clusters) {
    const std::string& name = registration.metadata.name;
    if (snapshot.deregistrations.contains(name)) {
      continue;
    }
    auto document = snapshot.cluster_specs.find(name);
    model::ClusterFacts facts = model::clusterFactsOf(
        model::effectiveCluster(registration, document == snapshot.cluster_specs.end() ? nullptr : &document->second));
    model::resolveGroups(facts, groups);
    out.push_back(std::move(facts));
  }
  return out;
}

//! The targeting rules of the bundle's last good render (nullopt: none, or rules the scheduler refuses too).
std::optional<model::TargetRules> rulesOf(const events::BundleRecord& bundle) {
  if (!bundle.last_good) {
    return std::nullopt;
  }
  const events::BundleEvent& event = *bundle.last_good;
  std::vector<model::CustomizationTarget> customizations;
  customizations.reserve(event.customizations.size());
  for (const auto& custom : event.customizations) {
    customizations.push_back({.name = custom.name, .target = custom.target});
  }
  std::vector<std::string> problems;
  auto rules = model::targetRulesOf(event.workspace, event.targets, customizations, event.customization_mode, problems);
  if (!problems.empty()) {
    return std::nullopt;
  }
  return rules;
}

}  // namespace

std::vector<Unplaced> targetedWithoutDeployment(const Snapshot& snapshot, const SubjectRecords& r) {
  std::set<std::pair<std::string, std::string>> placed;  // (bundle, cluster)
  for (const auto* deployment : r.deployments) {
    placed.emplace(deployment->bundle, deployment->cluster);
  }
  std::vector<Unplaced> out;
  const auto clusters = targetableClusters(snapshot);
  for (const auto* bundle : r.bundles) {
    auto rules = rulesOf(*bundle);
    if (!rules) {
      continue;
    }
    for (const auto& cluster : clusters) {
      if (model::place(*rules, cluster).kind == model::TargetDecision::Kind::kDeploy &&
          !placed.contains({bundle->bundle, cluster.name})) {
        out.push_back({.bundle = bundle->bundle, .cluster = cluster.name});
      }
    }
  }
  return out;
}

std::vector<std::string> clustersOf(const std::vector<Unplaced>& unplaced) {
  std::vector<std::string> clusters;
  for (const auto& item : unplaced) {
    if (std::find(clusters.begin(), clusters.end(), item.cluster) == clusters.end()) {
      clusters.push_back(item.cluster);
    }
  }
  return clusters;
}

}  // namespace flotilla::cli::detail
