#include "flotilla/scheduler/rollup.h"

#include <functional>
#include <map>
#include <set>

namespace flotilla::scheduler {

namespace {

using model::BundleState;

std::string shortId(std::string_view deployment_id) {
  // "manifest:options" -> the first 12 characters of each half, enough to tell deployments apart in a message.
  auto colon = deployment_id.find(':');
  if (colon == std::string_view::npos) {
    return std::string(deployment_id.substr(0, 12));
  }
  return std::string(deployment_id.substr(0, std::min<size_t>(colon, 12))) + ":" +
         std::string(deployment_id.substr(colon + 1, 12));
}

void appendMessage(std::string& message, std::string_view more) {
  if (!message.empty()) {
    message += "; ";
  }
  message += more;
}

Json renderErrorJson(const BundleInfo& bundle) {
  return Json::obj({{"bundle", bundle.bundle},
                    {"file", bundle.error->file},
                    {"line", bundle.error->line},
                    {"message", bundle.error->message},
                    {"commit", bundle.error_commit},
                    {"time", bundle.error_time}});
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

void putSummary(Json& out, const model::StateSummary& summary) {
  out["summary"] = model::encodeStateSummary(summary);
  out["state"] = std::string(model::stateName(summary.worst()));
  out["message"] = summary.describe();
}

}  // namespace

EffectiveState effectiveState(const DeploymentRecord& record, const BdStatus* status) {
  EffectiveState out;
  if (record.deployment_id.empty()) {
    out = EffectiveState{BundleState::kPending, "Paused", "bundle paused: nothing released to this cluster yet"};
    return out;
  }
  if (status == nullptr) {
    out = EffectiveState{BundleState::kWaitApplied, "WaitingForAgent",
                         "deployment " + shortId(record.deployment_id) + " sent; no status from the agent yet"};
  } else if (status->deployment_id != record.deployment_id) {
    auto reported = model::parseState(status->state);
    if (reported.ok() && *reported == BundleState::kErrApplied && status->generation >= record.generation) {
      out = EffectiveState{BundleState::kErrApplied, status->reason, status->message};
    } else {
      out = EffectiveState{BundleState::kWaitApplied, "WaitingForAgent",
                           "agent reports deployment " +
                               (status->deployment_id.empty() ? std::string("none") : shortId(status->deployment_id)) +
                               " (" + status->state + "); waiting for " + shortId(record.deployment_id)};
    }
  } else {
    auto reported = model::parseState(status->state);
    if (reported.ok()) {
      out = EffectiveState{*reported, status->reason, status->message};
    } else {
      out = EffectiveState{BundleState::kErrApplied, "InvalidStatus",
                           "the agent reported an unknown state \"" + status->state + "\""};
    }
  }
  if (!record.staged_deployment_id.empty() && record.staged_deployment_id != record.deployment_id) {
    if (model::stateRank(out.state) < model::stateRank(BundleState::kOutOfSync)) {
      out.state = BundleState::kOutOfSync;
      out.reason = "Paused";
    }
    appendMessage(out.message, "bundle paused: deployment " + shortId(record.staged_deployment_id) + " is held");
  }
  return out;
}

std::string readyCount(const model::StateSummary& summary) {
  return std::to_string(summary.ready()) + "/" + std::to_string(summary.desired_ready);
}

Json bundleSummaryRecord(std::string_view workspace, std::string_view bundle_name, const BundleInfo* bundle,
                         const std::vector<DeploymentView>& deployments) {
  auto summary = summarize(deployments, [](const DeploymentRecord& r) { return r.cluster; });
  Json out = Json::obj({{"workspace", workspace}, {"bundle", bundle_name}});
  putSummary(out, summary);
  out["readyClusters"] = readyCount(summary);
  out["gitrepo"] = bundle != nullptr ? bundle->gitrepo : std::string();
  if (bundle != nullptr && bundle->targeting) {
    out["commit"] = bundle->targeting->commit;
    out["manifestID"] = bundle->targeting->manifest_id;
    out["paused"] = bundle->targeting->paused;
  }
  out["error"] = bundle != nullptr && bundle->error.has_value();
  if (bundle != nullptr && bundle->error) {
    out["renderError"] = renderErrorJson(*bundle);
    std::string message = renderErrorText(*bundle);
    appendMessage(message, out.getString("message"));
    out["message"] = message;
  }
  return out;
}

Json gitRepoSummaryRecord(std::string_view workspace, std::string_view gitrepo,
                          const std::vector<GitRepoBundle>& bundles) {
  model::StateSummary total;
  Json bundle_list = Json::array();
  Json render_errors = Json::array();
  std::vector<std::string> error_texts;
  // Per cluster: did every deployment of this GitRepo reach Ready (Fleet's readyClusters/desiredReadyClusters).
  std::map<std::string, bool> cluster_ready;
  for (const auto& item : bundles) {
    std::string name;
    if (item.bundle != nullptr) {
      name = item.bundle->bundle;
    } else if (!item.deployments.empty()) {
      name = item.deployments.front().record->bundle;
    }
    auto summary = summarize(item.deployments, [](const DeploymentRecord& r) { return r.cluster + "/" + r.bundle; });
    for (const auto& view : item.deployments) {
      bool ready = effectiveState(*view.record, view.status).state == BundleState::kReady;
      auto [it, inserted] = cluster_ready.emplace(view.record->cluster, ready);
      if (!inserted) {
        it->second = it->second && ready;
      }
    }
    total.merge(summary);
    Json entry = Json::obj({{"bundle", name},
                            {"state", std::string(model::stateName(summary.worst()))},
                            {"ready", summary.ready()},
                            {"desiredReady", summary.desired_ready}});
    if (item.bundle != nullptr && item.bundle->error) {
      entry["renderError"] = renderErrorJson(*item.bundle);
      render_errors.push(renderErrorJson(*item.bundle));
      error_texts.push_back(name + ": " + renderErrorText(*item.bundle));
      // Shown among the details (not counted: a render failure is not a deployment; the last good one runs).
      model::StateSummary detail;
      detail.non_ready.push_back(model::NonReadyDetail{name, BundleState::kErrApplied, renderErrorText(*item.bundle)});
      total.merge(detail);
    }
    bundle_list.push(std::move(entry));
  }
  Json out = Json::obj({{"workspace", workspace}, {"gitrepo", gitrepo}});
  putSummary(out, total);
  out["readyBundleDeployments"] = readyCount(total);
  int64_t ready_clusters = 0;
  for (const auto& [cluster, ready] : cluster_ready) {
    ready_clusters += ready ? 1 : 0;
  }
  out["readyClusters"] = ready_clusters;
  out["desiredReadyClusters"] = static_cast<int64_t>(cluster_ready.size());
  out["bundles"] = std::move(bundle_list);
  out["renderErrors"] = std::move(render_errors);
  out["error"] = !error_texts.empty();
  if (!error_texts.empty()) {
    std::string message;
    for (const auto& text : error_texts) {
      appendMessage(message, text);
    }
    appendMessage(message, out.getString("message"));
    out["message"] = message;
  }
  return out;
}

Json clusterSummaryRecord(std::string_view cluster_name, const model::Cluster* cluster,
                          const std::vector<DeploymentView>& deployments, std::string_view last_heartbeat) {
  auto summary = summarize(deployments, [](const DeploymentRecord& r) { return r.workspace + "/" + r.bundle; });
  Json out = Json::obj({{"cluster", cluster_name}});
  putSummary(out, summary);
  out["readyBundles"] = readyCount(summary);
  std::map<std::string, bool> gitrepo_ready;
  for (const auto& view : deployments) {
    bool ready = effectiveState(*view.record, view.status).state == BundleState::kReady;
    auto [it, inserted] = gitrepo_ready.emplace(view.record->workspace + "/" + view.record->gitrepo, ready);
    if (!inserted) {
      it->second = it->second && ready;
    }
  }
  int64_t ready_gitrepos = 0;
  for (const auto& [name, ready] : gitrepo_ready) {
    ready_gitrepos += ready ? 1 : 0;
  }
  out["readyGitRepos"] = ready_gitrepos;
  out["desiredReadyGitRepos"] = static_cast<int64_t>(gitrepo_ready.size());
  out["lastHeartbeat"] = last_heartbeat;
  out["registered"] = cluster != nullptr;
  if (cluster != nullptr) {
    out["workspace"] = cluster->metadata.ns;
    out["agentVersion"] = cluster->status.agent.version;
    out["kubernetesVersion"] = cluster->status.agent.kubernetes_version;
    // Last sign of life: the newer of the last registration and the last heartbeat (RFC 3339 UTC strings
    // of the same shape compare in time order).
    std::string seen = cluster->status.agent.last_seen;
    if (std::string(last_heartbeat) > seen) {
      seen = std::string(last_heartbeat);
    }
    out["lastSeen"] = seen;
  } else {
    out["lastSeen"] = last_heartbeat;
  }
  return out;
}

}  // namespace flotilla::scheduler
