// Fleet-shaped Bundle and BundleDeployment views (views.h).
#include "flotilla/gateway/views.h"

#include "flotilla/model/state.h"

namespace flotilla::gateway {
namespace {

constexpr const char* kApiVersion = "fleet.cattle.io/v1alpha1";
constexpr size_t kMaxNonReady = 10;  // as Fleet's summaries: the first ten are enough to see where it is stuck

Json readyCondition(const std::string& state, const std::string& message) {
  const bool ready = state == "Ready";
  return Json::obj({{"type", Json("Ready")},
                    {"status", Json(ready           ? "True"
                                    : state.empty() ? "Unknown"
                                                    : "False")},
                    {"reason", Json(state.empty() ? "Pending" : state)},
                    {"message", Json(message)}});
}

Json objectOf(const std::string& kind, const std::string& ns, const std::string& name, Json labels, Json spec) {
  return Json::obj(
      {{"apiVersion", Json(kApiVersion)},
       {"kind", Json(kind)},
       {"metadata", Json::obj({{"name", Json(name)}, {"namespace", Json(ns)}, {"labels", std::move(labels)}})},
       {"spec", std::move(spec)}});
}

void label(Json& labels, const std::string& key, const std::string& value) {
  if (!value.empty()) {
    labels[key] = Json(value);
  }
}

}  // namespace

std::string bundleDeploymentName(const std::string& cluster, const std::string& bundle) {
  return bundle + "." + cluster;
}

View bundleView(const events::BundleSummary& summary) {
  Json labels = Json::object();
  label(labels, "fleet.cattle.io/repo-name", summary.gitrepo);
  label(labels, "fleet.cattle.io/commit", summary.commit);
  Json spec = Json::obj({{"manifestID", Json(summary.manifest_id)}, {"paused", Json(summary.paused)}});
  Json status = Json::obj(
      {{"summary", summary.summary},
       {"display", Json::obj({{"readyClusters", Json(summary.ready_clusters)}, {"state", Json(summary.state)}})},
       {"conditions", Json(Json::Array{readyCondition(summary.state, summary.message)})}});
  if (summary.render_error) {
    status["renderError"] = Json::obj({{"file", Json(summary.render_error->file)},
                                       {"line", Json(summary.render_error->line)},
                                       {"message", Json(summary.render_error->message)},
                                       {"commit", Json(summary.render_error->commit)}});
  }
  return View{.object = objectOf("Bundle", summary.workspace, summary.bundle, std::move(labels), std::move(spec)),
              .status = std::move(status)};
}

std::optional<View> bundleDeploymentView(const DeploymentFacts& facts) {
  if (!facts.record && !facts.status) {
    return std::nullopt;
  }
  const std::string cluster = facts.record ? facts.record->cluster : facts.status->cluster;
  const std::string ns = facts.record ? facts.record->workspace : facts.status->workspace;
  const std::string bundle = facts.record ? facts.record->bundle : facts.status->bundle;
  Json labels = Json::obj({{"fleet.cattle.io/bundle-name", Json(bundle)},
                           {"fleet.cattle.io/bundle-namespace", Json(ns)},
                           {"fleet.cattle.io/cluster", Json(cluster)}});
  Json spec = Json::object();
  if (facts.record) {
    label(labels, "fleet.cattle.io/repo-name", facts.record->gitrepo);
    label(labels, "fleet.cattle.io/commit", facts.record->commit);
    spec["deploymentID"] = Json(facts.record->deployment_id);
    if (!facts.record->staged_deployment_id.empty()) {
      spec["stagedDeploymentID"] = Json(facts.record->staged_deployment_id);
    }
  }
  const std::string wanted = facts.record ? facts.record->deployment_id : "";
  const std::string applied = facts.status ? facts.status->deployment_id : "";
  const std::string state = facts.status ? facts.status->state : "";
  const std::string message = facts.status ? facts.status->message : "";
  const bool deployed = !applied.empty() && applied == wanted;
  Json non_ready = Json::array();
  if (facts.status) {
    for (const auto& object : facts.status->resources) {
      if (object.state != "Ready" && non_ready.size() < kMaxNonReady) {
        non_ready.push(Json::obj({{"apiVersion", Json(object.api_version)},
                                  {"kind", Json(object.kind)},
                                  {"namespace", Json(object.ns)},
                                  {"name", Json(object.name)},
                                  {"state", Json(object.state)},
                                  {"message", Json(object.message)}}));
      }
    }
  }
  Json status = Json::obj(
      {{"appliedDeploymentID", Json(applied)},
       {"state", Json(state)},
       {"nonReadyStatus", std::move(non_ready)},
       {"display", Json::obj({{"deployed", Json(deployed          ? "Yes"
                                                : applied.empty() ? "No"
                                                                  : "No: an older deployment")},
                              {"monitored", Json(state == "Ready" ? "Yes"
                                                 : state.empty()  ? "No"
                                                                  : state + ": " + message)},
                              {"state", Json(state)}})},
       {"conditions",
        Json(Json::Array{readyCondition(deployed ? state : (state.empty() ? "" : "WaitApplied"),
                                        deployed         ? message
                                        : wanted.empty() ? "held: " + (facts.record ? facts.record->staged_reason : "")
                                                         : "waiting for " + wanted)})}});
  return View{.object = objectOf("BundleDeployment", ns, bundleDeploymentName(cluster, bundle), std::move(labels),
                                 std::move(spec)),
              .status = std::move(status)};
}

}  // namespace flotilla::gateway
