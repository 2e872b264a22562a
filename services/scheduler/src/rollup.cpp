#include "flotilla/scheduler/rollup.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace flotilla::scheduler {

namespace {

using model::BundleState;

void appendMessage(std::string& message, std::string_view more) {
  if (!message.empty()) {
    message += "; ";
  }
  message += more;
}

events::RenderErrorSummary renderErrorOf(const BundleInfo& bundle) {
  return events::RenderErrorSummary{.bundle = bundle.bundle,
                                    .file = bundle.error->file,
                                    .line = bundle.error->line,
                                    .message = bundle.error->message,
                                    .commit = bundle.error_commit,
                                    .time = bundle.error_time};
}

std::string renderErrorText(const BundleInfo& bundle) {
  const auto& e = *bundle.error;
  std::string where = e.file.empty() ? std::string() : e.file + (e.line > 0 ? ":" + std::to_string(e.line) : "");
  // The bundler's messages usually start with file:line already.
  if (!where.empty() && e.message.rfind(where, 0) != 0) {
    return "render failed: " + where + ": " + e.message;
  }
  return "render failed: " + e.message;
}

model::StateSummary summarize(const std::vector<DeploymentView>& deployments,
                              const std::function<std::string(const DeploymentRecord&)>& name) {
  model::StateSummary summary;
  for (const auto& view : deployments) {
    EffectiveState effective = effectiveState(*view.record, view.status);
    summary.add(effective.state, name(*view.record), effective.message);
  }
  return summary;
}

//! The fields every summary has: Fleet's BundleSummary, the worst state and a one-line message.
template <typename Summary>
void putSummary(Summary& out, const model::StateSummary& summary) {
  out.summary = model::encodeStateSummary(summary);
  out.state = std::string(model::stateName(summary.worst()));
  out.message = summary.describe();
}

//! A summary without any deployment: NoTargets, not the Ready an empty count would give (0 of 0 is not ready).
template <typename Summary>
void markNoTargets(Summary& out, std::string_view why) {
  out.state = std::string(events::kNoTargetsState);
  out.message = std::string(why);
}

//! Per group key (cluster, or workspace/gitrepo): whether every deployment in it is Ready.
std::map<std::string, bool> readiness(const std::vector<DeploymentView>& deployments,
                                      const std::function<std::string(const DeploymentRecord&)>& key,
                                      std::map<std::string, bool> into = {}) {
  for (const auto& view : deployments) {
    bool ready = effectiveState(*view.record, view.status).state == BundleState::kReady;
    auto [it, inserted] = into.emplace(key(*view.record), ready);
    if (!inserted) {
      it->second = it->second && ready;
    }
  }
  return into;
}

int64_t countReady(const std::map<std::string, bool>& readiness) {
  int64_t ready = 0;
  for (const auto& [name, is_ready] : readiness) {
    ready += is_ready ? 1 : 0;
  }
  return ready;
}

//! One bundle's line in its GitRepo summary; adds its counts (and its render error) to `total`.
events::GitRepoSummaryBundle gitRepoBundleLine(const GitRepoBundle& item, model::StateSummary& total,
                                               events::GitRepoSummary& out, std::vector<std::string>& error_texts) {
  std::string name;
  if (item.bundle != nullptr) {
    name = item.bundle->bundle;
  } else if (!item.deployments.empty()) {
    name = item.deployments.front().record->bundle;
  }
  auto summary = summarize(item.deployments, [](const DeploymentRecord& r) { return r.cluster + "/" + r.bundle; });
  total.merge(summary);
  events::GitRepoSummaryBundle line{.bundle = name,
                                    .state = item.deployments.empty() ? std::string(events::kNoTargetsState)
                                                                      : std::string(model::stateName(summary.worst())),
                                    .ready = summary.ready(),
                                    .desired_ready = summary.desired_ready};
  if (item.bundle != nullptr && item.bundle->error) {
    line.render_error = renderErrorOf(*item.bundle);
    out.render_errors.push_back(*line.render_error);
    error_texts.push_back(name + ": " + renderErrorText(*item.bundle));
    // Shown among the details (not counted: a render failure is not a deployment; the last good one runs).
    model::StateSummary detail;
    detail.non_ready.push_back(model::NonReadyDetail{name, BundleState::kErrApplied, renderErrorText(*item.bundle)});
    total.merge(detail);
  }
  return line;
}

//! Every bundle of the GitRepo is gone and deployments wait for their deletes: the summary says Deleting and what
//! is left (and keeps the worst state's message when an agent failed a delete).
void markDeleting(const std::vector<GitRepoBundle>& bundles, events::GitRepoSummary& out) {
  int64_t left = 0;
  std::set<std::string> clusters;
  for (const auto& item : bundles) {
    if (item.bundle != nullptr) {
      return;  // a live bundle: the GitRepo is not being deleted
    }
    for (const auto& view : item.deployments) {
      if (view.record->deleting) {
        ++left;
        clusters.insert(view.record->cluster);
      }
    }
  }
  if (left == 0) {
    return;
  }
  std::string message = "deleting: " + std::to_string(left) + (left == 1 ? " deployment" : " deployments") +
                        " left on " + std::to_string(clusters.size()) +
                        (clusters.size() == 1 ? " cluster" : " clusters");
  if (out.state == "ErrApplied") {
    appendMessage(message, out.message);
  }
  out.state = std::string(events::kDeletingState);
  out.message = std::move(message);
}

}  // namespace

EffectiveState effectiveState(const DeploymentRecord& record, const BdStatus* status) {
  events::DeploymentState state = events::deploymentState(record, status);
  // deploymentState only names the seven states.
  return EffectiveState{model::parseState(state.state).valueOr(BundleState::kErrApplied), std::move(state.reason),
                        std::move(state.message)};
}

std::string readyCount(const model::StateSummary& summary) {
  return std::to_string(summary.ready()) + "/" + std::to_string(summary.desired_ready);
}

events::BundleSummary bundleSummaryRecord(std::string_view workspace, std::string_view bundle_name,
                                          const BundleInfo* bundle, const std::vector<DeploymentView>& deployments,
                                          const events::RolloutStatus* rollout) {
  auto summary = summarize(deployments, [](const DeploymentRecord& r) { return r.cluster; });
  events::BundleSummary out{.workspace = std::string(workspace), .bundle = std::string(bundle_name)};
  putSummary(out, summary);
  if (deployments.empty()) {
    markNoTargets(out, "no registered cluster is targeted");
  }
  out.ready_clusters = readyCount(summary);
  out.gitrepo = bundle != nullptr ? bundle->gitrepo : std::string();
  if (bundle != nullptr && bundle->targeting) {
    out.commit = bundle->targeting->commit;
    out.manifest_id = bundle->targeting->manifest_id;
    out.paused = bundle->targeting->paused;
  }
  out.error = bundle != nullptr && bundle->error.has_value();
  if (out.error) {
    out.render_error = renderErrorOf(*bundle);
    std::string message = renderErrorText(*bundle);
    appendMessage(message, out.message);
    out.message = message;
  }
  if (rollout != nullptr) {
    out.rollout = *rollout;
    if (rollout->state == "Halted") {
      std::string message = "rollout halted at partition " + rollout->partition + ": " +
                            clusterStates(rollout->halted_by) + "; " + std::to_string(rollout->held) + " held";
      appendMessage(message, out.message);
      out.message = message;
    }
  }
  return out;
}

std::string clusterStates(const std::vector<events::RolloutCluster>& clusters) {
  std::string out;
  for (const auto& c : clusters) {
    out += (out.empty() ? "" : ", ") + c.cluster + " (" + c.state + ")";
  }
  return out;
}

events::GitRepoSummary gitRepoSummaryRecord(std::string_view workspace, std::string_view gitrepo,
                                            const std::vector<GitRepoBundle>& bundles) {
  events::GitRepoSummary out{.workspace = std::string(workspace), .gitrepo = std::string(gitrepo)};
  model::StateSummary total;
  std::vector<std::string> error_texts;
  // Per cluster: did every deployment of this GitRepo reach Ready (Fleet's readyClusters/desiredReadyClusters).
  std::map<std::string, bool> cluster_ready;
  for (const auto& item : bundles) {
    cluster_ready = readiness(
        item.deployments, [](const DeploymentRecord& r) { return r.cluster; }, std::move(cluster_ready));
    out.bundles.push_back(gitRepoBundleLine(item, total, out, error_texts));
  }
  putSummary(out, total);
  if (std::all_of(bundles.begin(), bundles.end(), [](const GitRepoBundle& b) { return b.deployments.empty(); })) {
    markNoTargets(out, "no bundle targets a registered cluster");
  }
  out.ready_bundle_deployments = readyCount(total);
  out.ready_clusters = countReady(cluster_ready);
  out.desired_ready_clusters = static_cast<int64_t>(cluster_ready.size());
  out.error = !error_texts.empty();
  if (out.error) {
    std::string message;
    for (const auto& text : error_texts) {
      appendMessage(message, text);
    }
    appendMessage(message, out.message);
    out.message = message;
  }
  markDeleting(bundles, out);
  return out;
}

events::ClusterSummary clusterSummaryRecord(std::string_view cluster_name, const model::Cluster* cluster,
                                            const std::vector<DeploymentView>& deployments,
                                            std::string_view last_heartbeat, bool offline) {
  auto summary = summarize(deployments, [](const DeploymentRecord& r) { return r.workspace + "/" + r.bundle; });
  events::ClusterSummary out{.cluster = std::string(cluster_name)};
  putSummary(out, summary);
  out.ready_bundles = readyCount(summary);
  auto gitrepo_ready = readiness(deployments, [](const DeploymentRecord& r) { return r.workspace + "/" + r.gitrepo; });
  out.ready_git_repos = countReady(gitrepo_ready);
  out.desired_ready_git_repos = static_cast<int64_t>(gitrepo_ready.size());
  out.last_heartbeat = std::string(last_heartbeat);
  out.registered = cluster != nullptr;
  out.last_seen = std::string(last_heartbeat);
  if (cluster != nullptr) {
    out.workspace = cluster->metadata.ns;
    out.agent_version = cluster->status.agent.version;
    out.kubernetes_version = cluster->status.agent.kubernetes_version;
    // Last sign of life: the newer of the last registration and the last heartbeat (RFC 3339 UTC strings
    // of the same shape compare in time order).
    out.last_seen = std::max(cluster->status.agent.last_seen, std::string(last_heartbeat));
  }
  if (offline) {
    out.offline = true;
    out.state = std::string(events::kOfflineState);
    std::string since =
        "the agent has given no sign of life since " + (out.last_seen.empty() ? "it registered" : out.last_seen);
    out.message = out.message.empty() ? since : since + "; " + out.message;
  }
  return out;
}

}  // namespace flotilla::scheduler
