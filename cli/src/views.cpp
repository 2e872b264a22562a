#include "flotilla/cli/views.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"
#include "flotilla/scheduler/keys.h"
#include "flotilla/scheduler/rollup.h"
#include "flotilla/scheduler/targeting.h"

namespace flotilla::cli {

namespace {

using scheduler::DeploymentRecord;

const Json* statusRecord(const Snapshot& snap, const std::string& key) {
  auto it = snap.status.find(key);
  return it == snap.status.end() ? nullptr : &it->second;
}

const Json& orEmpty(const Json* value) {
  static const Json kEmpty = Json::object();
  return value != nullptr ? *value : kEmpty;
}

std::string shortId(std::string_view id, size_t n = 12) {
  auto colon = id.find(':');
  if (colon == std::string_view::npos) {
    return std::string(id.substr(0, n));
  }
  return std::string(id.substr(0, std::min(colon, n))) + ":" + std::string(id.substr(colon + 1, 8));
}

std::string truncate(std::string text, size_t n) {
  for (char& c : text) {
    if (c == '\n' || c == '\t') {
      c = ' ';
    }
  }
  if (text.size() > n) {
    text = text.substr(0, n - 3) + "...";
  }
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string joinMessages(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    if (part.empty()) {
      continue;
    }
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

std::string labelsText(const Json* labels) {
  if (labels == nullptr || !labels->isObject()) {
    return "<none>";
  }
  std::string out;
  for (const auto& [key, value] : labels->asObject()) {
    out += (out.empty() ? "" : ",") + key + "=" + (value.isString() ? value.asString() : value.dump());
  }
  return out.empty() ? "<none>" : out;
}

std::optional<std::chrono::system_clock::time_point> parseTime(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &year, &month, &day, &hour, &minute, &second) != 6) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
  // Offset "+hh:mm" / "-hh:mm" after the seconds (and fraction); "Z" is UTC.
  size_t pos = 19;
  while (pos < s.size() && (s[pos] == '.' || std::isdigit(static_cast<unsigned char>(s[pos])))) {
    ++pos;
  }
  if (pos + 6 <= s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d", &oh, &om) == 2) {
      auto offset = std::chrono::hours(oh) + std::chrono::minutes(om);
      at = s[pos] == '+' ? at - offset : at + offset;
    }
  }
  return at;
}

//! The newest of several RFC 3339 times (by parsed value).
std::string newest(std::initializer_list<std::string> times) {
  std::string best;
  std::optional<std::chrono::system_clock::time_point> best_at;
  for (const auto& t : times) {
    auto at = parseTime(t);
    if (at && (!best_at || *at > *best_at)) {
      best = t;
      best_at = at;
    }
  }
  return best;
}

// ---- tables ----

class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  [[nodiscard]] std::string str() const {
    std::vector<size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (size_t i = 0; i < row.size(); ++i) {
        widths[i] = std::max(widths[i], row[i].size());
      }
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        line += row[i];
        if (i + 1 < row.size()) {
          line += std::string(widths[i] - row[i].size() + 3, ' ');
        }
      }
      while (!line.empty() && line.back() == ' ') {
        line.pop_back();
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string statusText(const Json& display) {
  std::string state = display.getString("state");
  std::string message = display.getString("message");
  if (state.empty()) {
    state = "-";
  }
  return truncate(message.empty() ? state : state + ": " + message, 100);
}

std::string orDash(std::string text) {
  return text.empty() ? "-" : text;
}

// ---- views ----

std::vector<scheduler::DeploymentView> deploymentViews(const Snapshot& snap,
                                                       const std::function<bool(const DeploymentRecord&)>& pick) {
  std::vector<scheduler::DeploymentView> out;
  for (const auto& record : snap.deployments) {
    if (!pick(record)) {
      continue;
    }
    auto it = snap.bd_statuses.find(scheduler::deploymentRecordKey(record.cluster, record.workspace, record.bundle));
    out.push_back({&record, it == snap.bd_statuses.end() ? nullptr : &it->second});
  }
  return out;
}

Json deploymentEntry(const scheduler::DeploymentView& view) {
  auto effective = scheduler::effectiveState(*view.record, view.status);
  return Json::obj({{"cluster", view.record->cluster},
                    {"bundle", view.record->bundle},
                    {"workspace", view.record->workspace},
                    {"state", std::string(model::stateName(effective.state))},
                    {"reason", effective.reason},
                    {"message", effective.message},
                    {"deploymentID", view.record->deployment_id},
                    {"appliedDeploymentID", view.status != nullptr ? view.status->deployment_id : std::string()}});
}

Json gitRepoView(const Snapshot& snap, const model::GitRepo& gitrepo) {
  model::GitRepo spec_only = gitrepo;
  spec_only.status = {};
  Json view = model::encode(spec_only);
  const std::string& ws = gitrepo.metadata.ns;
  const std::string& name = gitrepo.metadata.name;
  const Json* poll = statusRecord(snap, scheduler::pollStatusKey(ws, name));
  const Json* rollup = statusRecord(snap, scheduler::gitRepoSummaryKey(ws, name));
  Json computed;
  if (rollup == nullptr) {
    std::map<std::string, scheduler::GitRepoBundle> members;
    for (const auto& deployment :
         deploymentViews(snap, [&](const DeploymentRecord& r) { return r.workspace == ws && r.gitrepo == name; })) {
      members[deployment.record->bundle].deployments.push_back(deployment);
    }
    if (!members.empty()) {
      std::vector<scheduler::GitRepoBundle> list;
      for (auto& [bundle, member] : members) {
        list.push_back(std::move(member));
      }
      computed = scheduler::gitRepoSummaryRecord(ws, name, list);
      rollup = &computed;
    }
  }
  Json status = Json::object();
  std::string last_error;
  if (poll != nullptr) {
    status["commit"] = poll->getString("commit");
    status["pollingCommit"] = poll->getString("pollingCommit");
    status["lastPollingTime"] = poll->getString("lastPollTime");
    status["nextPollTime"] = poll->getString("nextPollTime");
    status["observedGeneration"] = poll->getInt("observedGeneration");
    last_error = poll->getString("lastError");
    status["lastError"] = last_error;
    status["lastErrorTime"] = poll->getString("lastErrorTime");
    status["poll"] = *poll;
  }
  std::string state = "Pending";
  std::string message;
  bool error = !last_error.empty();
  if (rollup != nullptr) {
    status["summary"] = orEmpty(rollup->find("summary"));
    status["readyClusters"] = rollup->getInt("readyClusters");
    status["desiredReadyClusters"] = rollup->getInt("desiredReadyClusters");
    status["bundles"] = rollup->find("bundles") != nullptr ? *rollup->find("bundles") : Json::array();
    status["renderErrors"] = rollup->find("renderErrors") != nullptr ? *rollup->find("renderErrors") : Json::array();
    status["summaryUpdated"] = rollup->getString("updated");
    state = rollup->getString("state", state);
    message = rollup->getString("message");
    error = error || rollup->getBool("error");
  } else {
    status["summary"] = Json::obj({{"ready", 0}, {"desiredReady", 0}});
    status["bundles"] = Json::array();
    status["renderErrors"] = Json::array();
  }
  status["display"] = Json::obj(
      {{"readyBundleDeployments", rollup != nullptr ? rollup->getString("readyBundleDeployments", "0/0") : "0/0"},
       {"state", state},
       {"message", joinMessages({last_error.empty() ? std::string() : "git: " + last_error, message})},
       {"error", error}});
  view["status"] = std::move(status);
  return view;
}

struct BundleId {
  std::string workspace;
  std::string name;
  auto operator<=>(const BundleId&) const = default;
};

std::set<BundleId> bundleIds(const Snapshot& snap) {
  std::set<BundleId> ids;
  for (const auto& [key, record] : snap.bundles) {
    auto names = scheduler::keyNames(key, "", 2);
    if (names.ok()) {
      ids.insert({(*names)[0], (*names)[1]});
    }
  }
  for (const auto& [key, record] : snap.status) {
    if (startsWith(key, "summary.bundle.")) {
      auto names = scheduler::keyNames(key, "summary.bundle", 2);
      if (names.ok()) {
        ids.insert({(*names)[0], (*names)[1]});
      }
    }
  }
  for (const auto& record : snap.deployments) {
    ids.insert({record.workspace, record.bundle});
  }
  return ids;
}

Json bundleView(const Snapshot& snap, const BundleId& id) {
  auto raw_it = snap.bundles.find(scheduler::bundleRecordKey(id.workspace, id.name));
  const Json* raw = raw_it == snap.bundles.end() ? nullptr : &raw_it->second;
  // The bundler's record is either the BundleEvent or holds it; read the common fields from whichever it is.
  const Json* event = raw;
  if (raw != nullptr && raw->getString("kind") != "BundleEvent") {
    for (const char* key : {"lastGood", "event", "lastEvent", "bundleEvent"}) {
      if (raw->find(key) != nullptr) {
        event = raw->find(key);
        break;
      }
    }
  }
  const Json* stored = statusRecord(snap, scheduler::bundleSummaryKey(id.workspace, id.name));
  const Json* render = statusRecord(snap, scheduler::renderStatusKey(id.workspace, id.name));
  auto views = deploymentViews(
      snap, [&](const DeploymentRecord& r) { return r.workspace == id.workspace && r.bundle == id.name; });
  std::optional<scheduler::BundleInfo> info;
  if (raw != nullptr) {
    if (auto parsed = scheduler::bundleFromRecord(raw->dump()); parsed.ok()) {
      info = std::move(parsed).value();
    }
  }
  Json rollup = stored != nullptr
                    ? *stored
                    : scheduler::bundleSummaryRecord(id.workspace, id.name, info ? &*info : nullptr, views);

  Json metadata = Json::obj({{"name", id.name}, {"namespace", id.workspace}});
  if (event != nullptr && event->find("labels") != nullptr && event->find("labels")->isObject()) {
    metadata["labels"] = *event->find("labels");
  }
  std::string gitrepo = rollup.getString("gitrepo");
  if (gitrepo.empty() && event != nullptr) {
    gitrepo = event->getString("gitrepo");
  }
  if (gitrepo.empty() && !views.empty()) {
    gitrepo = views.front().record->gitrepo;
  }
  // Without the bundler's record or a summary, the deployments still say what was sent.
  std::string commit = rollup.getString("commit", event != nullptr ? event->getString("commit") : "");
  std::string manifest = rollup.getString("manifestID", event != nullptr ? event->getString("manifestID") : "");
  if (commit.empty() && !views.empty()) {
    commit = views.front().record->commit;
  }
  if (manifest.empty() && !views.empty()) {
    manifest = views.front().record->manifest_id;
  }
  Json status = Json::obj({{"gitrepo", gitrepo},
                           {"commit", commit},
                           {"manifestID", manifest},
                           {"summary", orEmpty(rollup.find("summary"))},
                           {"error", rollup.getBool("error")}});
  if (rollup.find("renderError") != nullptr) {
    status["renderError"] = *rollup.find("renderError");
  }
  if (render != nullptr) {
    status["render"] = *render;
  }
  status["display"] = Json::obj({{"readyClusters", rollup.getString("readyClusters", "0/0")},
                                 {"state", rollup.getString("state")},
                                 {"message", rollup.getString("message")}});
  Json deployments = Json::array();
  for (const auto& view : views) {
    deployments.push(deploymentEntry(view));
  }
  status["deployments"] = std::move(deployments);
  return Json::obj({{"apiVersion", std::string(model::kFlotillaApiVersion)},
                    {"kind", "Bundle"},
                    {"metadata", std::move(metadata)},
                    {"spec", raw != nullptr ? *raw : Json::object()},
                    {"status", std::move(status)}});
}

Json clusterView(const Snapshot& snap, const model::Cluster& cluster) {
  Json view = model::encode(cluster);
  const Json* rollup = statusRecord(snap, scheduler::clusterSummaryKey(cluster.metadata.name));
  Json computed;
  auto views = deploymentViews(snap, [&](const DeploymentRecord& r) { return r.cluster == cluster.metadata.name; });
  if (rollup == nullptr && !views.empty()) {
    computed = scheduler::clusterSummaryRecord(cluster.metadata.name, &cluster, views, "");
    rollup = &computed;
  }
  Json& status = view["status"];
  if (!status.isObject()) {
    status = Json::object();
  }
  auto beat = snap.heartbeats.find(cluster.metadata.name);
  std::string heartbeat = newest({beat != snap.heartbeats.end() ? beat->second : std::string(),
                                  rollup != nullptr ? rollup->getString("lastHeartbeat") : std::string()});
  std::string last_seen =
      newest({cluster.status.agent.last_seen, heartbeat, rollup != nullptr ? rollup->getString("lastSeen") : ""});
  status["lastHeartbeat"] = heartbeat;
  Json& agent = status["agent"];
  if (!agent.isObject()) {
    agent = Json::object();
  }
  agent["lastSeen"] = last_seen;
  if (rollup != nullptr) {
    status["summary"] = orEmpty(rollup->find("summary"));
    status["readyGitRepos"] = rollup->getInt("readyGitRepos");
    status["desiredReadyGitRepos"] = rollup->getInt("desiredReadyGitRepos");
  }
  status["display"] = Json::obj({{"readyBundles", rollup != nullptr ? rollup->getString("readyBundles", "0/0") : "0/0"},
                                 {"state", rollup != nullptr ? rollup->getString("state") : "WaitCheckIn"},
                                 {"message", rollup != nullptr ? rollup->getString("message") : ""}});
  return view;
}

Json clusterGroupView(const Snapshot& snap, const model::ClusterGroup& group) {
  Json view = model::encode(group);
  auto info = scheduler::groupInfoOf(group);
  Json members = Json::array();
  Json non_ready = Json::array();
  int64_t count = 0;
  for (const auto& cluster : snap.clusters) {
    auto in = scheduler::groupsOf(scheduler::clusterInfoOf(cluster), {info});
    bool member = std::any_of(in.begin(), in.end(), [&](const scheduler::GroupInfo& g) { return g.name == info.name; });
    if (!member) {
      continue;
    }
    ++count;
    members.push(cluster.metadata.name);
    const Json* rollup = statusRecord(snap, scheduler::clusterSummaryKey(cluster.metadata.name));
    if (rollup == nullptr || rollup->getString("state") != "Ready") {
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

Json bundleDeploymentView(const scheduler::DeploymentView& view) {
  const DeploymentRecord& record = *view.record;
  auto effective = scheduler::effectiveState(record, view.status);
  Json status = Json::obj({{"state", std::string(model::stateName(effective.state))},
                           {"reason", effective.reason},
                           {"message", effective.message},
                           {"appliedDeploymentID", view.status != nullptr ? view.status->deployment_id : ""},
                           {"display", Json::obj({{"state", std::string(model::stateName(effective.state))}})}});
  if (view.status != nullptr) {
    status["report"] = scheduler::encode(*view.status);
  }
  return Json::obj({{"apiVersion", std::string(model::kFlotillaApiVersion)},
                    {"kind", "BundleDeployment"},
                    {"metadata", Json::obj({{"name", record.bundle},
                                            {"namespace", record.workspace},
                                            {"labels", Json::obj({{"flotilla.io/cluster", record.cluster}})}})},
                    {"spec", scheduler::encode(record)},
                    {"status", std::move(status)}});
}

std::string workspaceOf(const Json& view) {
  const Json* ns = view.at({"metadata", "namespace"});
  return ns != nullptr && ns->isString() ? ns->asString() : std::string();
}
std::string nameOf(const Json& view) {
  const Json* name = view.at({"metadata", "name"});
  return name != nullptr && name->isString() ? name->asString() : std::string();
}
const Json& statusOf(const Json& view) {
  return orEmpty(view.find("status"));
}
const Json& displayOf(const Json& view) {
  return orEmpty(statusOf(view).find("display"));
}

}  // namespace

Result<Kind> parseKind(std::string_view text) {
  std::string name = lower(text);
  auto dot = name.find('.');
  if (dot != std::string::npos) {
    std::string group = name.substr(dot + 1);
    if (group != "fleet.cattle.io" && group != "flotilla.io") {
      return fail(ErrorKind::kInvalid, "unknown resource type \"" + std::string(text) + "\"");
    }
    name = name.substr(0, dot);
  }
  if (name == "gitrepo" || name == "gitrepos") {
    return Kind::kGitRepo;
  }
  if (name == "bundle" || name == "bundles") {
    return Kind::kBundle;
  }
  if (name == "cluster" || name == "clusters") {
    return Kind::kCluster;
  }
  if (name == "clustergroup" || name == "clustergroups") {
    return Kind::kClusterGroup;
  }
  if (name == "bundledeployment" || name == "bundledeployments" || name == "bd" || name == "bds") {
    return Kind::kBundleDeployment;
  }
  return fail(ErrorKind::kInvalid, "unknown resource type \"" + std::string(text) +
                                       "\" (expected gitrepos, bundles, clusters, clustergroups or bundledeployments)");
}

std::string_view kindName(Kind kind) {
  switch (kind) {
    case Kind::kGitRepo:
      return "GitRepo";
    case Kind::kBundle:
      return "Bundle";
    case Kind::kCluster:
      return "Cluster";
    case Kind::kClusterGroup:
      return "ClusterGroup";
    case Kind::kBundleDeployment:
      return "BundleDeployment";
  }
  return "";
}

std::string qualifiedKind(Kind kind) {
  return lower(kindName(kind)) + ".fleet.cattle.io";
}

std::string age(std::string_view rfc3339, std::chrono::system_clock::time_point now) {
  auto at = parseTime(rfc3339);
  if (!at) {
    return "-";
  }
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - *at).count();
  if (seconds < 0) {
    seconds = 0;
  }
  if (seconds < 120) {
    return std::to_string(seconds) + "s";
  }
  if (seconds < 2 * 3600) {
    return std::to_string(seconds / 60) + "m";
  }
  if (seconds < 2 * 86400) {
    return std::to_string(seconds / 3600) + "h";
  }
  return std::to_string(seconds / 86400) + "d";
}

std::vector<Json> listViews(const Snapshot& snapshot, Kind kind, const Filter& filter) {
  std::vector<Json> out;
  auto wanted = [&](const std::string& workspace, const std::string& name) {
    return (filter.workspace.empty() || filter.workspace == workspace) && (filter.name.empty() || filter.name == name);
  };
  switch (kind) {
    case Kind::kGitRepo:
      for (const auto& gitrepo : snapshot.gitrepos) {
        if (wanted(gitrepo.metadata.ns, gitrepo.metadata.name)) {
          out.push_back(gitRepoView(snapshot, gitrepo));
        }
      }
      break;
    case Kind::kBundle:
      for (const auto& id : bundleIds(snapshot)) {
        if (wanted(id.workspace, id.name)) {
          out.push_back(bundleView(snapshot, id));
        }
      }
      break;
    case Kind::kCluster:
      for (const auto& cluster : snapshot.clusters) {
        if (wanted(cluster.metadata.ns, cluster.metadata.name)) {
          out.push_back(clusterView(snapshot, cluster));
        }
      }
      break;
    case Kind::kClusterGroup:
      for (const auto& group : snapshot.groups) {
        if (wanted(group.metadata.ns, group.metadata.name)) {
          out.push_back(clusterGroupView(snapshot, group));
        }
      }
      break;
    case Kind::kBundleDeployment: {
      auto views = deploymentViews(snapshot, [&](const DeploymentRecord& r) {
        if (!filter.workspace.empty() && filter.workspace != r.workspace) {
          return false;
        }
        return filter.name.empty() || filter.name == r.cluster + "/" + r.bundle || filter.name == r.bundle ||
               filter.name == r.cluster;
      });
      for (const auto& view : views) {
        out.push_back(bundleDeploymentView(view));
      }
      break;
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    auto key = [](const Json& v) {
      std::string extra;
      if (const Json* cluster = v.at({"metadata", "labels", "flotilla.io/cluster"}); cluster != nullptr) {
        extra = cluster->isString() ? cluster->asString() : "";
      }
      return std::make_tuple(workspaceOf(v), extra, nameOf(v));
    };
    return key(a) < key(b);
  });
  return out;
}

std::string renderTable(Kind kind, const std::vector<Json>& views, bool with_workspace,
                        std::chrono::system_clock::time_point now) {
  auto header = [&](std::vector<std::string> columns) {
    if (with_workspace) {
      columns.insert(columns.begin(), "WORKSPACE");
    }
    return columns;
  };
  auto row = [&](const Json& view, std::vector<std::string> cells) {
    if (with_workspace) {
      cells.insert(cells.begin(), workspaceOf(view));
    }
    return cells;
  };
  std::unique_ptr<Table> table;
  switch (kind) {
    case Kind::kGitRepo:
      table = std::make_unique<Table>(header({"NAME", "REPO", "COMMIT", "BUNDLES-READY", "STATUS"}));
      for (const auto& v : views) {
        std::string commit = statusOf(v).getString("commit");
        table->add(row(v, {nameOf(v), orDash(orEmpty(v.find("spec")).getString("repo")), orDash(commit.substr(0, 8)),
                           displayOf(v).getString("readyBundleDeployments", "0/0"), statusText(displayOf(v))}));
      }
      break;
    case Kind::kBundle:
      table = std::make_unique<Table>(header({"NAME", "GITREPO", "MANIFEST", "READY", "STATUS"}));
      for (const auto& v : views) {
        table->add(row(v, {nameOf(v), orDash(statusOf(v).getString("gitrepo")),
                           orDash(statusOf(v).getString("manifestID").substr(0, 12)),
                           displayOf(v).getString("readyClusters", "0/0"), statusText(displayOf(v))}));
      }
      break;
    case Kind::kCluster:
      table = std::make_unique<Table>(header({"NAME", "LABELS", "K8S", "BUNDLES-READY", "LAST-SEEN", "STATUS"}));
      for (const auto& v : views) {
        const Json& agent = orEmpty(statusOf(v).find("agent"));
        table->add(row(v, {nameOf(v), labelsText(v.at({"metadata", "labels"})),
                           orDash(agent.getString("kubernetesVersion")), displayOf(v).getString("readyBundles", "0/0"),
                           age(agent.getString("lastSeen"), now), statusText(displayOf(v))}));
      }
      break;
    case Kind::kClusterGroup:
      table = std::make_unique<Table>(header({"NAME", "SELECTOR", "CLUSTERS-READY"}));
      for (const auto& v : views) {
        std::string selector = "<none>";
        if (const Json* s = v.at({"spec", "selector"}); s != nullptr) {
          auto decoded = model::decodeSelector(*s);
          selector = decoded.ok() ? model::formatSelector(*decoded) : s->dump();
          if (selector.empty()) {
            selector = "<all>";
          }
        }
        table->add(row(v, {nameOf(v), selector, displayOf(v).getString("readyClusters", "0/0")}));
      }
      break;
    case Kind::kBundleDeployment:
      table = std::make_unique<Table>(header({"CLUSTER", "BUNDLE", "DEPLOYMENT", "STATE", "MESSAGE"}));
      for (const auto& v : views) {
        const Json& spec = orEmpty(v.find("spec"));
        std::string deployment = spec.getString("deploymentID");
        if (deployment.empty()) {
          deployment = "(held) " + shortId(spec.getString("stagedDeploymentID"));
        }
        table->add(row(v, {spec.getString("cluster"), spec.getString("bundle"), shortId(deployment),
                           statusOf(v).getString("state"), truncate(statusOf(v).getString("message"), 100)}));
      }
      break;
  }
  return table->str();
}

namespace {

void line(std::ostringstream& out, std::string_view label, const std::string& value, int indent = 0) {
  std::string key = std::string(static_cast<size_t>(indent), ' ') + std::string(label) + ":";
  out << key << std::string(key.size() < 22 ? 22 - key.size() : 1, ' ') << (value.empty() ? "-" : value) << "\n";
}

void block(std::ostringstream& out, std::string_view title, const Json& value) {
  out << title << ":\n";
  std::string yaml = toYaml(value);
  for (const auto& text : split(yaml, '\n')) {
    if (!text.empty()) {
      out << "  " << text << "\n";
    }
  }
}

void summaryBlock(std::ostringstream& out, const Json& summary, const Json& display, std::string_view ready_key,
                  std::string_view ready_label) {
  out << "Summary:\n";
  line(out, "State", display.getString("state"), 2);
  line(out, std::string(ready_label), display.getString(ready_key), 2);
  std::string counts;
  for (const auto& [key, value] : summary.isObject() ? summary.asObject() : Json::Object{}) {
    if (key == "nonReadyResources" || !value.isInt()) {
      continue;
    }
    counts += (counts.empty() ? "" : ", ") + key + " " + std::to_string(value.asInt());
  }
  line(out, "Counts", counts, 2);
  if (!display.getString("message").empty()) {
    line(out, "Message", display.getString("message"), 2);
  }
  const Json* details = summary.find("nonReadyResources");
  if (details != nullptr && details->isArray() && details->size() > 0) {
    out << "  Not ready:\n";
    for (const auto& detail : details->asArray()) {
      out << "    " << detail.getString("name") << ": " << detail.getString("bundleState")
          << (detail.getString("message").empty() ? "" : " - " + detail.getString("message")) << "\n";
    }
  }
}

void deploymentsBlock(std::ostringstream& out, const Json& deployments, bool by_cluster) {
  out << "Deployments:\n";
  if (!deployments.isArray() || deployments.size() == 0) {
    out << "  <none>\n";
    return;
  }
  Table table({by_cluster ? "CLUSTER" : "BUNDLE", "STATE", "DEPLOYMENT", "MESSAGE"});
  for (const auto& d : deployments.asArray()) {
    table.add({d.getString(by_cluster ? "cluster" : "bundle"), d.getString("state"),
               shortId(d.getString("deploymentID")), truncate(d.getString("message"), 120)});
  }
  for (const auto& text : split(table.str(), '\n')) {
    if (!text.empty()) {
      out << "  " << text << "\n";
    }
  }
}

void renderErrorsBlock(std::ostringstream& out, const Json& errors) {
  if (!errors.isArray() || errors.size() == 0) {
    return;
  }
  out << "Render errors:\n";
  for (const auto& e : errors.asArray()) {
    std::string where = e.getString("file");
    if (e.getInt("line") > 0) {
      where += ":" + std::to_string(e.getInt("line"));
    }
    out << "  " << e.getString("bundle") << ": " << (where.empty() ? "" : where + ": ") << e.getString("message")
        << " (commit " << e.getString("commit").substr(0, 8) << ", at " << orDash(e.getString("time")) << ")\n";
  }
}

}  // namespace

std::string describeView(const Snapshot& snapshot, Kind kind, const Json& view,
                         std::chrono::system_clock::time_point now) {
  std::ostringstream out;
  const Json& status = statusOf(view);
  const Json& display = displayOf(view);
  line(out, "Name", nameOf(view));
  line(out, "Workspace", workspaceOf(view));
  line(out, "Kind", std::string(kindName(kind)));
  switch (kind) {
    case Kind::kGitRepo: {
      const Json& spec = orEmpty(view.find("spec"));
      line(out, "Repo", spec.getString("repo"));
      line(out, "Generation",
           std::to_string(view.at({"metadata", "generation"}) != nullptr ? view.at({"metadata", "generation"})->asInt()
                                                                         : 0));
      out << "Status:\n";
      line(out, "Commit", status.getString("commit"), 2);
      line(out, "Polling commit", status.getString("pollingCommit"), 2);
      line(out, "Last poll", status.getString("lastPollingTime"), 2);
      line(out, "Next poll", status.getString("nextPollTime"), 2);
      std::string error = status.getString("lastError");
      line(out, "Last error",
           error.empty() ? "none" : error + " (at " + orDash(status.getString("lastErrorTime")) + ")", 2);
      summaryBlock(out, orEmpty(status.find("summary")), display, "readyBundleDeployments", "Ready");
      line(out, "Ready clusters",
           std::to_string(status.getInt("readyClusters")) + "/" + std::to_string(status.getInt("desiredReadyClusters")),
           2);
      out << "Bundles:\n";
      const Json& bundles = orEmpty(status.find("bundles"));
      if (!bundles.isArray() || bundles.size() == 0) {
        out << "  <none>\n";
      } else {
        Table table({"BUNDLE", "STATE", "READY"});
        for (const auto& b : bundles.asArray()) {
          table.add({b.getString("bundle"), b.getString("state"),
                     std::to_string(b.getInt("ready")) + "/" + std::to_string(b.getInt("desiredReady"))});
        }
        for (const auto& text : split(table.str(), '\n')) {
          if (!text.empty()) {
            out << "  " << text << "\n";
          }
        }
      }
      Json deployments = Json::array();
      for (const auto& bd : listViews(snapshot, Kind::kBundleDeployment, {.workspace = workspaceOf(view)})) {
        const Json& spec_bd = orEmpty(bd.find("spec"));
        if (spec_bd.getString("gitrepo") != nameOf(view)) {
          continue;
        }
        deployments.push(Json::obj({{"cluster", spec_bd.getString("cluster") + "/" + spec_bd.getString("bundle")},
                                    {"state", statusOf(bd).getString("state")},
                                    {"deploymentID", spec_bd.getString("deploymentID")},
                                    {"message", statusOf(bd).getString("message")}}));
      }
      deploymentsBlock(out, deployments, true);
      renderErrorsBlock(out, orEmpty(status.find("renderErrors")));
      block(out, "Spec", spec);
      break;
    }
    case Kind::kBundle: {
      line(out, "GitRepo", status.getString("gitrepo"));
      line(out, "Commit", status.getString("commit"));
      line(out, "Manifest", status.getString("manifestID"));
      summaryBlock(out, orEmpty(status.find("summary")), display, "readyClusters", "Ready clusters");
      if (const Json* error = status.find("renderError"); error != nullptr) {
        Json one = Json::array();
        one.push(*error);
        renderErrorsBlock(out, one);
      }
      deploymentsBlock(out, orEmpty(status.find("deployments")), true);
      block(out, "Spec", orEmpty(view.find("spec")));
      break;
    }
    case Kind::kCluster: {
      const Json& agent = orEmpty(status.find("agent"));
      line(out, "Labels", labelsText(view.at({"metadata", "labels"})));
      line(out, "Kubernetes", agent.getString("kubernetesVersion"));
      line(out, "Agent", agent.getString("version"));
      line(out, "Registered", orEmpty(view.find("metadata")).getString("creationTimestamp"));
      std::string last_registration;
      if (const Json* conditions = status.find("conditions"); conditions != nullptr && conditions->isArray()) {
        for (const auto& c : conditions->asArray()) {
          if (c.getString("type") == "Registered") {
            last_registration = c.getString("lastUpdateTime");
          }
        }
      }
      line(out, "Last registration", last_registration);
      line(out, "Last heartbeat", status.getString("lastHeartbeat"));
      line(out, "Last seen",
           agent.getString("lastSeen").empty()
               ? std::string()
               : agent.getString("lastSeen") + " (" + age(agent.getString("lastSeen"), now) + " ago)");
      summaryBlock(out, orEmpty(status.find("summary")), display, "readyBundles", "Ready bundles");
      Json deployments = Json::array();
      for (const auto& bd : listViews(snapshot, Kind::kBundleDeployment, {.name = nameOf(view)})) {
        const Json& spec_bd = orEmpty(bd.find("spec"));
        if (spec_bd.getString("cluster") != nameOf(view)) {
          continue;
        }
        deployments.push(Json::obj({{"bundle", spec_bd.getString("workspace") + "/" + spec_bd.getString("bundle")},
                                    {"state", statusOf(bd).getString("state")},
                                    {"deploymentID", spec_bd.getString("deploymentID")},
                                    {"message", statusOf(bd).getString("message")}}));
      }
      deploymentsBlock(out, deployments, false);
      break;
    }
    case Kind::kClusterGroup: {
      block(out, "Spec", orEmpty(view.find("spec")));
      line(out, "Clusters", std::to_string(status.getInt("clusterCount")));
      line(out, "Ready clusters", display.getString("readyClusters"));
      std::string members;
      for (const auto& m :
           orEmpty(status.find("clusters")).isArray() ? status.find("clusters")->asArray() : Json::Array{}) {
        members += (members.empty() ? "" : ", ") + m.asString();
      }
      line(out, "Members", members);
      break;
    }
    case Kind::kBundleDeployment: {
      const Json& spec = orEmpty(view.find("spec"));
      line(out, "Cluster", spec.getString("cluster"));
      line(out, "Bundle", spec.getString("bundle"));
      line(out, "GitRepo", spec.getString("gitrepo"));
      line(out, "Commit", spec.getString("commit"));
      line(out, "Deployment", spec.getString("deploymentID"));
      if (!spec.getString("stagedDeploymentID").empty()) {
        line(out, "Held (paused)", spec.getString("stagedDeploymentID"));
      }
      line(out, "Generation", std::to_string(spec.getInt("generation")));
      line(out, "Sent", spec.getString("updated"));
      out << "Status:\n";
      line(out, "State", status.getString("state"), 2);
      line(out, "Reason", status.getString("reason"), 2);
      line(out, "Message", status.getString("message"), 2);
      line(out, "Applied", status.getString("appliedDeploymentID"), 2);
      const Json& report = orEmpty(status.find("report"));
      line(out, "Reported", report.getString("reported"), 2);
      const Json& resources = orEmpty(report.find("resources"));
      if (resources.isArray() && resources.size() > 0) {
        out << "  Resources:\n";
        for (const auto& r : resources.asArray()) {
          std::string ns = r.getString("namespace");
          out << "    " << r.getString("kind") << " " << (ns.empty() ? "" : ns + "/") << r.getString("name") << ": "
              << r.getString("state") << (r.getString("message").empty() ? "" : " - " + r.getString("message")) << "\n";
        }
      }
      block(out, "Options", orEmpty(spec.find("options")));
      break;
    }
  }
  return out.str();
}

}  // namespace flotilla::cli
