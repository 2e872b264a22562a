#include "flotilla/scheduler/state_gauges.h"

#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/model/state.h"

namespace flotilla::scheduler {

namespace {

constexpr std::string_view kBundlePrefix = "summary.bundle.";
constexpr std::string_view kGitRepoPrefix = "summary.gitrepo.";
constexpr std::string_view kClusterPrefix = "summary.cluster.";

constexpr const char* kGitRepos = "gitrepos_by_state";
constexpr const char* kBundles = "bundles_by_state";
constexpr const char* kClusters = "clusters_by_state";

const char* helpOf(std::string_view family) {
  if (family == kGitRepos) {
    return "GitRepos by the state of their summary";
  }
  if (family == kBundles) {
    return "Bundles by the state of their summary";
  }
  if (family == kClusters) {
    return "Clusters by the state of their summary (Offline: the agent is silent)";
  }
  if (family == "gitrepo_ready") {
    return "1 while the GitRepo's summary is Ready, else 0 (one series per GitRepo)";
  }
  if (family == "gitrepo_render_error") {
    return "1 while the GitRepo's latest commit failed to render, else 0 (one series per GitRepo)";
  }
  if (family == "cluster_ready") {
    return "1 while the cluster's summary is Ready, else 0 (only with --per-cluster-metrics)";
  }
  return "1 while the cluster is Offline, else 0 (only with --per-cluster-metrics)";
}

std::string stateOf(const Json& summary) {
  std::string state = summary.getString("state");
  return state.empty() ? "Unknown" : state;
}

}  // namespace

StateGauges::StateGauges(Metrics& metrics, prometheus::Labels base, bool per_cluster, StateGaugeScope scope)
    : metrics_(metrics), base_(std::move(base)), per_cluster_(per_cluster), scope_(std::move(scope)) {
  // Every state reads 0 rather than no data while nothing is in it.
  for (const char* family : {kGitRepos, kBundles, kClusters}) {
    auto& counts = counts_[family];
    for (auto state : model::kAllStates) {
      counts[std::string(model::stateName(state))] = 0;
    }
  }
  counts_[kGitRepos][std::string(events::kDeletingState)] = 0;
  counts_[kClusters][std::string(events::kOfflineState)] = 0;
  for (const auto& [family, counts] : counts_) {
    for (const auto& [state, value] : counts) {
      metrics_.gauge(family, helpOf(family), with({{"state", state}})).Set(value);
    }
  }
}

StateGauges::~StateGauges() {
  for (const auto& [family, counts] : counts_) {
    for (const auto& [state, value] : counts) {
      metrics_.removeGauge(family, with({{"state", state}}));
    }
  }
  for (const auto& [family, series] : series_) {
    for (const auto& labels : series) {
      metrics_.removeGauge(family, with(labels));
    }
  }
}

prometheus::Labels StateGauges::with(prometheus::Labels labels) const {
  labels.insert(base_.begin(), base_.end());
  return labels;
}

StateGauges::Part StateGauges::partOf(const std::string& key, const Json& summary) const {
  Part part;
  const std::string workspace = summary.getString("workspace");
  part.state = stateOf(summary);
  if (startsWith(key, kGitRepoPrefix)) {
    const std::string gitrepo = summary.getString("gitrepo");
    if (scope_.owns_gitrepo(workspace, gitrepo)) {
      part.count = kGitRepos;
      part.labels = {{"workspace", workspace}, {"gitrepo", gitrepo}};
      part.series = {{"gitrepo_ready", part.state == "Ready" ? 1 : 0},
                     {"gitrepo_render_error", summary.getBool("error") ? 1 : 0}};
    }
  } else if (startsWith(key, kBundlePrefix)) {
    if (scope_.owns_gitrepo(workspace, summary.getString("gitrepo"))) {
      part.count = kBundles;
    }
  } else if (startsWith(key, kClusterPrefix)) {
    const std::string cluster = summary.getString("cluster");
    if (scope_.owns_cluster(cluster)) {
      part.count = kClusters;
      if (per_cluster_) {
        part.labels = {{"cluster", cluster}};
        part.series = {{"cluster_ready", part.state == "Ready" ? 1 : 0},
                       {"cluster_offline", summary.getBool("offline") ? 1 : 0}};
      }
    }
  }
  return part;
}

void StateGauges::count(const Part& part, double delta) {
  if (part.count == nullptr) {
    return;
  }
  double& value = counts_[part.count][part.state];
  value += delta;
  metrics_.gauge(part.count, helpOf(part.count), with({{"state", part.state}})).Set(value);
}

void StateGauges::change(const std::string& key, const Json* before, const Json* after) {
  if (!startsWith(key, "summary.")) {
    return;
  }
  Part old_part = before != nullptr ? partOf(key, *before) : Part{};
  Part new_part = after != nullptr ? partOf(key, *after) : Part{};
  count(old_part, -1);
  count(new_part, +1);
  for (const auto& [family, value] : old_part.series) {
    if (new_part.series.empty() || new_part.labels != old_part.labels) {
      metrics_.removeGauge(family, with(old_part.labels));
      series_[family].erase(old_part.labels);
    }
  }
  for (const auto& [family, value] : new_part.series) {
    metrics_.gauge(family, helpOf(family), with(new_part.labels)).Set(value);
    series_[family].insert(new_part.labels);
  }
}

}  // namespace flotilla::scheduler
