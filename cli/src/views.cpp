// The JSON views of `flotilla get` / `describe`, built from the records of a Snapshot. Roll-ups (counts, worst
// state, ready counts) are the summaries the scheduler stored, never recomputed here; a BundleDeployment's state
// is events::deploymentState, the one rule the scheduler uses too.
#include "flotilla/cli/views.h"

#include <algorithm>
#include <functional>
#include <set>

#include "flotilla/core/ascii.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"
#include "view_util.h"

namespace flotilla::cli {

namespace {

using events::DeploymentRecord;

//! A deployment record with the agent's last report about it.
struct DeploymentView {
  const DeploymentRecord* record = nullptr;
  const events::BdStatus* status = nullptr;
};

template <typename T>
const T* findRecord(const std::map<std::string, T>& records, const std::string& key) {
  auto it = records.find(key);
  return it == records.end() ? nullptr : &it->second;
}

std::vector<DeploymentView> deploymentViews(const Snapshot& snap,
                                            const std::function<bool(const DeploymentRecord&)>& pick) {
  std::vector<DeploymentView> out;
  for (const auto& record : snap.deployments) {
    if (pick(record)) {
      out.push_back({&record, findRecord(snap.bd_statuses,
                                         events::deploymentKey(record.cluster, record.workspace, record.bundle))});
    }
  }
  return out;
}

Json deploymentEntry(const DeploymentView& view) {
  auto state = events::deploymentState(*view.record, view.status);
  return Json::obj({{"cluster", view.record->cluster},
                    {"bundle", view.record->bundle},
                    {"workspace", view.record->workspace},
                    {"state", state.state},
                    {"reason", state.reason},
                    {"message", state.message},
                    {"deploymentID", view.record->deployment_id},
                    {"appliedDeploymentID", view.status != nullptr ? view.status->deployment_id : std::string()}});
}

// ---- GitRepo ----

void putPollStatus(Json& status, const events::PollStatus& poll) {
  status["commit"] = poll.commit;
  status["pollingCommit"] = poll.polling_commit;
  status["lastPollingTime"] = poll.last_poll_time;
  status["nextPollTime"] = poll.next_poll_time;
  status["observedGeneration"] = poll.observed_generation;
  status["lastError"] = poll.last_error;
  status["lastErrorTime"] = poll.last_error_time;
  status["poll"] = events::encode(poll);
}

void putGitRepoSummary(Json& status, const events::GitRepoSummary* rollup) {
  if (rollup == nullptr) {
    status["summary"] = Json::obj({{"ready", 0}, {"desiredReady", 0}});
    status["bundles"] = Json::array();
    status["renderErrors"] = Json::array();
    return;
  }
  Json encoded = events::encode(*rollup);
  status["summary"] = rollup->summary;
  status["readyClusters"] = rollup->ready_clusters;
  status["desiredReadyClusters"] = rollup->desired_ready_clusters;
  status["bundles"] = *encoded.find("bundles");
  status["renderErrors"] = *encoded.find("renderErrors");
  status["summaryUpdated"] = rollup->updated;
}

Json gitRepoView(const Snapshot& snap, const model::GitRepo& gitrepo) {
  model::GitRepo spec_only = gitrepo;
  spec_only.status = {};
  Json view = model::encode(spec_only);
  const std::string& ws = gitrepo.metadata.ns;
  const std::string& name = gitrepo.metadata.name;
  const auto* poll = findRecord(snap.poll_statuses, events::gitRepoStatusKey(ws, name));
  const auto* rollup = findRecord(snap.gitrepo_summaries, events::gitRepoSummaryKey(ws, name));
  Json status = Json::object();
  std::string last_error = poll != nullptr ? poll->last_error : std::string();
  if (poll != nullptr) {
    putPollStatus(status, *poll);
  }
  putGitRepoSummary(status, rollup);
  status["display"] =
      Json::obj({{"readyBundleDeployments", rollup != nullptr ? rollup->ready_bundle_deployments : "0/0"},
                 {"state", rollup != nullptr ? rollup->state : "Pending"},
                 {"message", detail::joinMessages({last_error.empty() ? std::string() : "git: " + last_error,
                                                   rollup != nullptr ? rollup->message : std::string()})},
                 {"error", !last_error.empty() || (rollup != nullptr && rollup->error)}});
  view["status"] = std::move(status);
  return view;
}

//! A GitRepo whose spec is gone while its summary is still stored: the scheduler is deleting what it deployed
//! (docs/pipeline.md "Deletes that cascade") and keeps the summary, with how many deployments are left, until the
//! agents have reported.
Json deletingGitRepoView(const Snapshot& snap, const events::GitRepoSummary& rollup) {
  Json status = Json::object();
  if (const auto* poll = findRecord(snap.poll_statuses, events::gitRepoStatusKey(rollup.workspace, rollup.gitrepo))) {
    putPollStatus(status, *poll);
  }
  putGitRepoSummary(status, &rollup);
  status["display"] = Json::obj({{"readyBundleDeployments", rollup.ready_bundle_deployments},
                                 {"state", "Deleting"},
                                 {"message", rollup.message},
                                 {"error", rollup.error}});
  return Json::obj({{"apiVersion", std::string(model::kFlotillaApiVersion)},
                    {"kind", "GitRepo"},
                    {"metadata", Json::obj({{"name", rollup.gitrepo}, {"namespace", rollup.workspace}})},
                    {"spec", Json::object()},
                    {"status", std::move(status)}});
}

// ---- Bundle ----

struct BundleId {
  std::string workspace;
  std::string name;
  auto operator<=>(const BundleId&) const = default;  // NOLINT(modernize-use-nullptr): a false positive
};

std::set<BundleId> bundleIds(const Snapshot& snap) {
  std::set<BundleId> ids;
  for (const auto& [key, record] : snap.bundles) {
    ids.insert({record.workspace, record.bundle});
  }
  for (const auto& [key, summary] : snap.bundle_summaries) {
    ids.insert({summary.workspace, summary.bundle});
  }
  for (const auto& record : snap.deployments) {
    ids.insert({record.workspace, record.bundle});
  }
  return ids;
}

//! The first non-empty of the candidates.
std::string firstOf(std::initializer_list<std::string> candidates) {
  for (const auto& candidate : candidates) {
    if (!candidate.empty()) {
      return candidate;
    }
  }
  return {};
}

//! What was rendered and sent: from the summary, else the bundler's record, else the deployments.
Json bundleIdentity(const events::BundleSummary* rollup, const events::BundleRecord* record,
                    const std::vector<DeploymentView>& views) {
  const events::BundleEvent* good = record != nullptr && record->last_good ? &*record->last_good : nullptr;
  const DeploymentRecord* sent = views.empty() ? nullptr : views.front().record;
  return Json::obj(
      {{"gitrepo", firstOf({rollup != nullptr ? rollup->gitrepo : "", record != nullptr ? record->gitrepo : "",
                            sent != nullptr ? sent->gitrepo : ""})},
       {"commit", firstOf({rollup != nullptr ? rollup->commit : "", good != nullptr ? good->commit : "",
                           sent != nullptr ? sent->commit : ""})},
       {"manifestID", firstOf({rollup != nullptr ? rollup->manifest_id : "", good != nullptr ? good->manifest_id : "",
                               sent != nullptr ? sent->manifest_id : ""})}});
}

void putBundleSummary(Json& status, const events::BundleSummary* rollup, const events::BundleRecord* record) {
  status["summary"] = rollup != nullptr ? rollup->summary : Json::object();
  status["error"] = rollup != nullptr ? rollup->error : (record != nullptr && record->error.has_value());
  if (rollup != nullptr && rollup->render_error) {
    status["renderError"] = *events::encode(*rollup).find("renderError");
  } else if (rollup == nullptr && record != nullptr && record->error) {
    // No summary yet: the bundler's record still says why the latest commit failed.
    status["renderError"] = Json::obj({{"bundle", record->bundle},
                                       {"file", record->error->file},
                                       {"line", record->error->line},
                                       {"message", record->error->message},
                                       {"commit", record->commit}});
  }
  if (rollup != nullptr && rollup->rollout) {
    status["rollout"] = *events::encode(*rollup).find("rollout");
  }
  status["display"] = Json::obj({{"readyClusters", rollup != nullptr ? rollup->ready_clusters : "0/0"},
                                 {"state", rollup != nullptr ? rollup->state : ""},
                                 {"message", rollup != nullptr ? rollup->message : ""}});
}

Json bundleView(const Snapshot& snap, const BundleId& id) {
  const auto* record = findRecord(snap.bundles, events::bundleKey(id.workspace, id.name));
  const auto* rollup = findRecord(snap.bundle_summaries, events::bundleSummaryKey(id.workspace, id.name));
  const auto* render = findRecord(snap.render_statuses, events::bundleRenderStatusKey(id.workspace, id.name));
  auto views = deploymentViews(
      snap, [&](const DeploymentRecord& r) { return r.workspace == id.workspace && r.bundle == id.name; });
  Json metadata = Json::obj({{"name", id.name}, {"namespace", id.workspace}});
  if (record != nullptr && record->last_good) {
    metadata["labels"] = *events::encode(*record->last_good).find("labels");
  }
  Json status = bundleIdentity(rollup, record, views);
  putBundleSummary(status, rollup, record);
  if (render != nullptr) {
    status["render"] = events::encode(*render);
  }
  Json deployments = Json::array();
  for (const auto& view : views) {
    deployments.push(deploymentEntry(view));
  }
  status["deployments"] = std::move(deployments);
  return Json::obj({{"apiVersion", std::string(model::kFlotillaApiVersion)},
                    {"kind", "Bundle"},
                    {"metadata", std::move(metadata)},
                    {"spec", record != nullptr ? events::encode(*record) : Json::object()},
                    {"status", std::move(status)}});
}

// ---- Cluster, ClusterGroup, BundleDeployment ----

//! A cluster as `get clusters` shows it: the registration overlaid by the admin's document (hub labels, paused),
//! or a document alone while no agent has registered under its name.
struct ClusterEntry {
  model::Cluster cluster;
  bool registered = false;
};

std::vector<ClusterEntry> clusterEntries(const Snapshot& snap) {
  std::vector<ClusterEntry> out;
  std::set<std::string> registered;
  for (const auto& registration : snap.clusters) {
    const auto* document = findRecord(snap.cluster_specs, registration.metadata.name);
    out.push_back({model::effectiveCluster(registration, document), true});
    registered.insert(registration.metadata.name);
  }
  for (const auto& [name, document] : snap.cluster_specs) {
    if (!registered.contains(name)) {
      out.push_back({document, false});
    }
  }
  return out;
}

//! State and message of a cluster's display: Deregistering while its tombstone exists, WaitCheckIn before its
//! agent registered, else the scheduler's summary; a paused cluster says so.
Json clusterDisplay(const Snapshot& snap, const ClusterEntry& entry, const events::ClusterSummary* rollup) {
  const std::string& name = entry.cluster.metadata.name;
  std::string state = rollup != nullptr ? rollup->state : "WaitCheckIn";
  std::string message = rollup != nullptr ? rollup->message : "";
  if (const auto* tombstone = findRecord(snap.deregistrations, name)) {
    auto left = std::count_if(snap.deployments.begin(), snap.deployments.end(),
                              [&](const DeploymentRecord& r) { return r.cluster == name; });
    state = "Deregistering";
    message = "deregistered at " + tombstone->time + (tombstone->keep_resources ? " (keepResources)" : "") + ": " +
              std::to_string(left) + " deployments left";
  } else if (!entry.registered) {
    state = "WaitCheckIn";
    message = "no agent has registered under this name yet";
  } else if (entry.cluster.spec.paused) {
    message = detail::joinMessages({"paused: new deployments are held", message});
  }
  return Json::obj(
      {{"readyBundles", rollup != nullptr ? rollup->ready_bundles : "0/0"}, {"state", state}, {"message", message}});
}

Json clusterView(const Snapshot& snap, const ClusterEntry& entry) {
  const model::Cluster& cluster = entry.cluster;
  Json view = model::encode(cluster);
  const auto* rollup = findRecord(snap.cluster_summaries, events::clusterSummaryKey(cluster.metadata.name));
  Json& status = view["status"];
  if (!status.isObject()) {
    status = Json::object();
  }
  auto beat = snap.heartbeats.find(cluster.metadata.name);
  std::string heartbeat = detail::newest({beat != snap.heartbeats.end() ? beat->second : std::string(),
                                          rollup != nullptr ? rollup->last_heartbeat : std::string()});
  status["lastHeartbeat"] = heartbeat;
  Json& agent = status["agent"];
  if (!agent.isObject()) {
    agent = Json::object();
  }
  agent["lastSeen"] = detail::newest(
      {cluster.status.agent.last_seen, heartbeat, rollup != nullptr ? rollup->last_seen : std::string()});
  if (rollup != nullptr) {
    status["summary"] = rollup->summary;
    status["readyGitRepos"] = rollup->ready_git_repos;
    status["desiredReadyGitRepos"] = rollup->desired_ready_git_repos;
    status["offline"] = rollup->offline;
  }
  status["registered"] = entry.registered;
  if (const auto* tombstone = findRecord(snap.deregistrations, cluster.metadata.name)) {
    status["deregistration"] = events::encode(*tombstone);
  }
  status["display"] = clusterDisplay(snap, entry, rollup);
  return view;
}

//! Members of a group: clusters of its workspace its selector matches (no selector: none).
bool isMember(const model::ClusterGroup& group, const model::Cluster& cluster) {
  return cluster.metadata.ns == group.metadata.ns && group.spec.selector &&
         group.spec.selector->matches(cluster.metadata.labels);
}

Json clusterGroupView(const Snapshot& snap, const model::ClusterGroup& group) {
  Json view = model::encode(group);
  Json members = Json::array();
  Json non_ready = Json::array();
  int64_t count = 0;
  for (const auto& entry : clusterEntries(snap)) {
    const model::Cluster& cluster = entry.cluster;
    if (!entry.registered || !isMember(group, cluster)) {
      continue;
    }
    ++count;
    members.push(cluster.metadata.name);
    const auto* rollup = findRecord(snap.cluster_summaries, events::clusterSummaryKey(cluster.metadata.name));
    if (rollup == nullptr || rollup->state != "Ready") {
      non_ready.push(cluster.metadata.name);
    }
  }
  int64_t not_ready = static_cast<int64_t>(non_ready.size());
  view["status"] = Json::obj(
      {{"clusterCount", count},
       {"nonReadyClusterCount", not_ready},
       {"nonReadyClusters", std::move(non_ready)},
       {"clusters", std::move(members)},
       {"display", Json::obj({{"readyClusters", std::to_string(count - not_ready) + "/" + std::to_string(count)}})}});
  return view;
}

Json bundleDeploymentView(const DeploymentView& view) {
  const DeploymentRecord& record = *view.record;
  auto state = events::deploymentState(record, view.status);
  Json status = Json::obj({{"state", state.state},
                           {"reason", state.reason},
                           {"message", state.message},
                           {"appliedDeploymentID", view.status != nullptr ? view.status->deployment_id : ""},
                           {"display", Json::obj({{"state", state.state}})}});
  if (view.status != nullptr) {
    status["report"] = events::encode(*view.status);
  }
  return Json::obj({{"apiVersion", std::string(model::kFlotillaApiVersion)},
                    {"kind", "BundleDeployment"},
                    {"metadata", Json::obj({{"name", record.bundle},
                                            {"namespace", record.workspace},
                                            {"labels", Json::obj({{"flotilla.io/cluster", record.cluster}})}})},
                    {"spec", events::encode(record)},
                    {"status", std::move(status)}});
}

bool deploymentWanted(const Filter& filter, const DeploymentRecord& r) {
  if (!filter.workspace.empty() && filter.workspace != r.workspace) {
    return false;
  }
  return filter.name.empty() || filter.name == r.cluster + "/" + r.bundle || filter.name == r.bundle ||
         filter.name == r.cluster;
}

bool nameWanted(const Filter& filter, const std::string& workspace, const std::string& name) {
  return (filter.workspace.empty() || filter.workspace == workspace) && (filter.name.empty() || filter.name == name);
}

//! The views (`view(snapshot, resource)`) of the Fleet resources that pass `filter`.
template <typename Resource, typename View>
void addResourceViews(std::vector<Json>& out, const Snapshot& snapshot, const std::vector<Resource>& resources,
                      const Filter& filter, View view) {
  for (const auto& resource : resources) {
    if (nameWanted(filter, resource.metadata.ns, resource.metadata.name)) {
      out.push_back(view(snapshot, resource));
    }
  }
}

//! The views of GitRepos being deleted (a summary without a spec) that pass `filter`.
void addDeletingGitRepoViews(std::vector<Json>& out, const Snapshot& snapshot, const Filter& filter) {
  std::set<std::string> specs;
  for (const auto& gitrepo : snapshot.gitrepos) {
    specs.insert(events::gitRepoKey(gitrepo.metadata.ns, gitrepo.metadata.name));
  }
  for (const auto& [key, rollup] : snapshot.gitrepo_summaries) {
    if (!specs.contains(events::gitRepoKey(rollup.workspace, rollup.gitrepo)) &&
        nameWanted(filter, rollup.workspace, rollup.gitrepo)) {
      out.push_back(deletingGitRepoView(snapshot, rollup));
    }
  }
}

//! Every view of `kind` that passes `filter`.
std::vector<Json> viewsOf(const Snapshot& snapshot, Kind kind, const Filter& filter) {
  std::vector<Json> out;
  switch (kind) {
    case Kind::kGitRepo:
      addResourceViews(out, snapshot, snapshot.gitrepos, filter, gitRepoView);
      addDeletingGitRepoViews(out, snapshot, filter);
      break;
    case Kind::kBundle:
      for (const auto& id : bundleIds(snapshot)) {
        if (nameWanted(filter, id.workspace, id.name)) {
          out.push_back(bundleView(snapshot, id));
        }
      }
      break;
    case Kind::kCluster:
      for (const auto& entry : clusterEntries(snapshot)) {
        if (nameWanted(filter, entry.cluster.metadata.ns, entry.cluster.metadata.name)) {
          out.push_back(clusterView(snapshot, entry));
        }
      }
      break;
    case Kind::kClusterGroup:
      addResourceViews(out, snapshot, snapshot.groups, filter, clusterGroupView);
      break;
    case Kind::kBundleDeployment:
      for (const auto& view :
           deploymentViews(snapshot, [&](const DeploymentRecord& r) { return deploymentWanted(filter, r); })) {
        out.push_back(bundleDeploymentView(view));
      }
      break;
  }
  return out;
}

//! Every kind with its name and the names parseKind accepts for it (lower case, without the API group).
struct KindNames {
  Kind kind;
  std::string_view name;
  std::vector<std::string_view> accepted;
};

const std::vector<KindNames>& kindNames() {
  static const std::vector<KindNames> kKinds = {
      {Kind::kGitRepo, "GitRepo", {"gitrepo", "gitrepos"}},
      {Kind::kBundle, "Bundle", {"bundle", "bundles"}},
      {Kind::kCluster, "Cluster", {"cluster", "clusters"}},
      {Kind::kClusterGroup, "ClusterGroup", {"clustergroup", "clustergroups"}},
      {Kind::kBundleDeployment, "BundleDeployment", {"bundledeployment", "bundledeployments", "bd", "bds"}}};
  return kKinds;
}

}  // namespace

Result<Kind> parseKind(std::string_view text) {
  std::string name = toLowerAscii(text);
  auto dot = name.find('.');
  if (dot != std::string::npos) {
    std::string group = name.substr(dot + 1);
    if (group != "fleet.cattle.io" && group != "flotilla.io") {
      return fail(ErrorKind::kInvalid, "unknown resource type \"" + std::string(text) + "\"");
    }
    name = name.substr(0, dot);
  }
  for (const auto& kind : kindNames()) {
    if (std::find(kind.accepted.begin(), kind.accepted.end(), name) != kind.accepted.end()) {
      return kind.kind;
    }
  }
  return fail(ErrorKind::kInvalid, "unknown resource type \"" + std::string(text) +
                                       "\" (expected gitrepos, bundles, clusters, clustergroups or bundledeployments)");
}

std::string_view kindName(Kind kind) {
  for (const auto& known : kindNames()) {
    if (known.kind == kind) {
      return known.name;
    }
  }
  return "";
}

std::string qualifiedKind(Kind kind) {
  return toLowerAscii(kindName(kind)) + ".fleet.cattle.io";
}

std::string age(std::string_view rfc3339, std::chrono::system_clock::time_point now) {
  auto at = parseRfc3339(rfc3339);
  if (!at) {
    return "-";
  }
  auto seconds = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(now - *at).count());
  if (seconds < 120) {
    return std::to_string(seconds) + "s";
  }
  if (seconds < int64_t{2} * 3600) {
    return std::to_string(seconds / 60) + "m";
  }
  if (seconds < int64_t{2} * 86400) {
    return std::to_string(seconds / 3600) + "h";
  }
  return std::to_string(seconds / 86400) + "d";
}

std::vector<Json> listViews(const Snapshot& snapshot, Kind kind, const Filter& filter) {
  std::vector<Json> out = viewsOf(snapshot, kind, filter);
  std::stable_sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    auto key = [](const Json& v) {
      std::string extra;
      if (const Json* cluster = v.at({"metadata", "labels", "flotilla.io/cluster"}); cluster != nullptr) {
        extra = cluster->isString() ? cluster->asString() : "";
      }
      return std::make_tuple(detail::workspaceOf(v), extra, detail::nameOf(v));
    };
    return key(a) < key(b);
  });
  return out;
}

}  // namespace flotilla::cli
