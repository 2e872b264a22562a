// `flotilla describe`: the text of one view (spec, status, summary, per-cluster states and messages, last error).
#include <sstream>

#include "flotilla/cli/views.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "view_util.h"

namespace flotilla::cli {

namespace {

using namespace detail;  // the helpers of view_util.h

void line(std::ostringstream& out, std::string_view label, const std::string& value, int indent = 0) {
  std::string key = std::string(static_cast<size_t>(indent), ' ') + std::string(label) + ":";
  out << key << std::string(key.size() < 22 ? 22 - key.size() : 1, ' ') << (value.empty() ? "-" : value) << "\n";
}

//! Each non-empty line of `text`, indented by two spaces.
void indented(std::ostringstream& out, const std::string& text) {
  for (const auto& row : split(text, '\n')) {
    if (!row.empty()) {
      out << "  " << row << "\n";
    }
  }
}

void block(std::ostringstream& out, std::string_view title, const Json& value) {
  out << title << ":\n";
  indented(out, toYaml(value));
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
  detail::Table table({by_cluster ? "CLUSTER" : "BUNDLE", "STATE", "DEPLOYMENT", "MESSAGE"});
  for (const auto& d : deployments.asArray()) {
    table.add({d.getString(by_cluster ? "cluster" : "bundle"), d.getString("state"),
               detail::shortId(d.getString("deploymentID")), detail::truncate(d.getString("message"), 120)});
  }
  indented(out, table.str());
}

//! `heading`, then `item(element)` for each element of `list`; nothing when `list` is not a non-empty array.
template <typename Item>
void listBlock(std::ostringstream& out, const Json& list, std::string_view heading, Item item) {
  if (!list.isArray() || list.size() == 0) {
    return;
  }
  out << heading;
  for (const auto& element : list.asArray()) {
    item(element);
  }
}

void renderErrorsBlock(std::ostringstream& out, const Json& errors) {
  listBlock(out, errors, "Render errors:\n", [&](const Json& e) {
    std::string where = e.getString("file");
    if (e.getInt("line") > 0) {
      where += ":" + std::to_string(e.getInt("line"));
    }
    out << "  " << e.getString("bundle") << ": " << (where.empty() ? "" : where + ": ") << e.getString("message")
        << " (commit " << e.getString("commit").substr(0, 8) << ", at " << orDash(e.getString("time")) << ")\n";
  });
}

//! The deployments of a GitRepo (named cluster/bundle) or of a cluster (named ws/bundle), from their views.
Json deploymentLines(const Snapshot& snapshot, const Json& view, Kind kind) {
  bool of_gitrepo = kind == Kind::kGitRepo;
  Filter filter = of_gitrepo ? Filter{.workspace = workspaceOf(view)} : Filter{.name = nameOf(view)};
  Json deployments = Json::array();
  for (const auto& bd : listViews(snapshot, Kind::kBundleDeployment, filter)) {
    const Json& spec = orEmpty(bd.find("spec"));
    if (spec.getString(of_gitrepo ? "gitrepo" : "cluster") != nameOf(view)) {
      continue;
    }
    std::string name = of_gitrepo ? spec.getString("cluster") + "/" + spec.getString("bundle")
                                  : spec.getString("workspace") + "/" + spec.getString("bundle");
    deployments.push(Json::obj({{of_gitrepo ? "cluster" : "bundle", name},
                                {"state", statusOf(bd).getString("state")},
                                {"deploymentID", spec.getString("deploymentID")},
                                {"message", statusOf(bd).getString("message")}}));
  }
  return deployments;
}

void describeGitRepo(std::ostringstream& out, const Snapshot& snapshot, const Json& view) {
  const Json& spec = orEmpty(view.find("spec"));
  const Json& status = statusOf(view);
  line(out, "Repo", spec.getString("repo"));
  const Json* generation = view.at({"metadata", "generation"});
  line(out, "Generation", std::to_string(generation != nullptr ? generation->asInt() : 0));
  out << "Status:\n";
  line(out, "Commit", status.getString("commit"), 2);
  line(out, "Polling commit", status.getString("pollingCommit"), 2);
  line(out, "Last poll", status.getString("lastPollingTime"), 2);
  line(out, "Next poll", status.getString("nextPollTime"), 2);
  std::string error = status.getString("lastError");
  line(out, "Last error", error.empty() ? "none" : error + " (at " + orDash(status.getString("lastErrorTime")) + ")",
       2);
  summaryBlock(out, orEmpty(status.find("summary")), displayOf(view), "readyBundleDeployments", "Ready");
  line(out, "Ready clusters",
       std::to_string(status.getInt("readyClusters")) + "/" + std::to_string(status.getInt("desiredReadyClusters")), 2);
  out << "Bundles:\n";
  const Json& bundles = orEmpty(status.find("bundles"));
  if (!bundles.isArray() || bundles.size() == 0) {
    out << "  <none>\n";
  } else {
    detail::Table table({"BUNDLE", "STATE", "READY"});
    for (const auto& b : bundles.asArray()) {
      table.add({b.getString("bundle"), b.getString("state"),
                 std::to_string(b.getInt("ready")) + "/" + std::to_string(b.getInt("desiredReady"))});
    }
    indented(out, table.str());
  }
  deploymentsBlock(out, deploymentLines(snapshot, view, Kind::kGitRepo), true);
  renderErrorsBlock(out, orEmpty(status.find("renderErrors")));
  block(out, "Spec", spec);
}

//! The bundle's rollout: state, budgets, each partition's progress, and who halts it.
void rolloutBlock(std::ostringstream& out, const Json& rollout) {
  out << "Rollout:\n";
  std::string state = rollout.getString("state");
  if (!rollout.getString("partition").empty()) {
    state += " at partition " + rollout.getString("partition");
  }
  line(out, "State", state, 2);
  line(out, "Unavailable",
       std::to_string(rollout.getInt("unavailable")) + " (max " + std::to_string(rollout.getInt("maxUnavailable")) +
           "), partitions " + std::to_string(rollout.getInt("unavailablePartitions")) + " (max " +
           std::to_string(rollout.getInt("maxUnavailablePartitions")) + ")",
       2);
  line(out, "Held",
       std::to_string(rollout.getInt("held")) + " (maxNew " + std::to_string(rollout.getInt("maxNew")) + ")", 2);
  listBlock(out, orEmpty(rollout.find("partitions")), "  Partitions:\n", [&](const Json& p) {
    out << "    " << p.getString("name") << ": " << p.getString("state") << ", " << p.getInt("unavailable") << " of "
        << p.getInt("count") << " unavailable (max " << p.getInt("maxUnavailable") << ")\n";
  });
  listBlock(out, orEmpty(rollout.find("haltedBy")), "  Halted by:\n", [&](const Json& c) {
    out << "    " << c.getString("cluster") << ": " << c.getString("state")
        << (c.getString("message").empty() ? "" : " - " + c.getString("message")) << "\n";
  });
  if (rollout.getInt("outsidePartitionsCount") > 0) {
    std::string names;
    const Json& outside = orEmpty(rollout.find("outsidePartitions"));
    for (const auto& name : outside.isArray() ? outside.asArray() : Json::Array{}) {
      names += (names.empty() ? "" : ", ") + name.asString();
    }
    line(out, "Outside partitions",
         std::to_string(rollout.getInt("outsidePartitionsCount")) + " (not rolled out): " + names, 2);
  }
}

void describeBundle(std::ostringstream& out, const Json& view) {
  const Json& status = statusOf(view);
  line(out, "GitRepo", status.getString("gitrepo"));
  line(out, "Commit", status.getString("commit"));
  line(out, "Manifest", status.getString("manifestID"));
  summaryBlock(out, orEmpty(status.find("summary")), displayOf(view), "readyClusters", "Ready clusters");
  if (const Json* rollout = status.find("rollout"); rollout != nullptr && rollout->isObject()) {
    rolloutBlock(out, *rollout);
  }
  if (const Json* error = status.find("renderError"); error != nullptr) {
    Json one = Json::array();
    one.push(*error);
    renderErrorsBlock(out, one);
  }
  deploymentsBlock(out, orEmpty(status.find("deployments")), true);
  block(out, "Spec", orEmpty(view.find("spec")));
}

std::string lastRegistration(const Json& status) {
  std::string last;
  if (const Json* conditions = status.find("conditions"); conditions != nullptr && conditions->isArray()) {
    for (const auto& c : conditions->asArray()) {
      if (c.getString("type") == "Registered") {
        last = c.getString("lastUpdateTime");
      }
    }
  }
  return last;
}

void describeCluster(std::ostringstream& out, const Snapshot& snapshot, const Json& view,
                     std::chrono::system_clock::time_point now) {
  const Json& status = statusOf(view);
  const Json& agent = orEmpty(status.find("agent"));
  line(out, "Labels", detail::labelsText(view.at({"metadata", "labels"})));
  if (const Json* reported = agent.find("labels"); reported != nullptr) {
    // What the agent asked for; of these only the keys the scheduler's --agent-labels allows are in Labels.
    line(out, "Agent labels", detail::labelsText(reported));
  }
  line(out, "Annotations", detail::labelsText(view.at({"metadata", "annotations"})));
  const Json* paused = view.at({"spec", "paused"});
  line(out, "Paused",
       paused != nullptr && paused->isBool() && paused->asBool() ? "true (new deployments are held)" : "false");
  if (const Json* values = view.at({"spec", "templateValues"}); values != nullptr && values->isObject()) {
    block(out, "Template values", *values);
  }
  const Json& deregistration = orEmpty(status.find("deregistration"));
  if (!deregistration.getString("cluster").empty()) {
    line(out, "Deregistered",
         deregistration.getString("time") + (deregistration.getBool("keepResources") ? " (keepResources)" : ""));
  }
  line(out, "Kubernetes", agent.getString("kubernetesVersion"));
  line(out, "Agent", agent.getString("version"));
  line(out, "Registered", orEmpty(view.find("metadata")).getString("creationTimestamp"));
  line(out, "Last registration", lastRegistration(status));
  line(out, "Last heartbeat", status.getString("lastHeartbeat"));
  std::string seen = agent.getString("lastSeen");
  line(out, "Last seen", seen.empty() ? std::string() : seen + " (" + age(seen, now) + " ago)");
  summaryBlock(out, orEmpty(status.find("summary")), displayOf(view), "readyBundles", "Ready bundles");
  deploymentsBlock(out, deploymentLines(snapshot, view, Kind::kCluster), false);
}

void describeClusterGroup(std::ostringstream& out, const Json& view) {
  const Json& status = statusOf(view);
  block(out, "Spec", orEmpty(view.find("spec")));
  line(out, "Clusters", std::to_string(status.getInt("clusterCount")));
  line(out, "Ready clusters", displayOf(view).getString("readyClusters"));
  std::string members;
  const Json& clusters = orEmpty(status.find("clusters"));
  for (const auto& m : clusters.isArray() ? clusters.asArray() : Json::Array{}) {
    members += (members.empty() ? "" : ", ") + m.asString();
  }
  line(out, "Members", members);
}

void describeResources(std::ostringstream& out, const Json& resources) {
  listBlock(out, resources, "  Resources:\n", [&](const Json& r) {
    std::string ns = r.getString("namespace");
    out << "    " << r.getString("kind") << " " << (ns.empty() ? "" : ns + "/") << r.getString("name") << ": "
        << r.getString("state") << (r.getString("message").empty() ? "" : " - " + r.getString("message")) << "\n";
  });
}

void describeBundleDeployment(std::ostringstream& out, const Json& view) {
  const Json& spec = orEmpty(view.find("spec"));
  const Json& status = statusOf(view);
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
  describeResources(out, orEmpty(report.find("resources")));
  block(out, "Options", orEmpty(spec.find("options")));
}

}  // namespace

std::string describeView(const Snapshot& snapshot, Kind kind, const Json& view,
                         std::chrono::system_clock::time_point now) {
  std::ostringstream out;
  line(out, "Name", nameOf(view));
  line(out, "Workspace", workspaceOf(view));
  line(out, "Kind", std::string(kindName(kind)));
  switch (kind) {
    case Kind::kGitRepo:
      describeGitRepo(out, snapshot, view);
      break;
    case Kind::kBundle:
      describeBundle(out, view);
      break;
    case Kind::kCluster:
      describeCluster(out, snapshot, view, now);
      break;
    case Kind::kClusterGroup:
      describeClusterGroup(out, view);
      break;
    case Kind::kBundleDeployment:
      describeBundleDeployment(out, view);
      break;
  }
  return out.str();
}

}  // namespace flotilla::cli
