// `flotilla get` tables: one row per view, columns per kind.
#include <memory>

#include "flotilla/cli/views.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"
#include "view_util.h"

namespace flotilla::cli {

namespace {

using namespace detail;  // the helpers of view_util.h

std::vector<std::string> gitRepoRow(const Json& v, std::chrono::system_clock::time_point /*now*/) {
  std::string commit = statusOf(v).getString("commit");
  return {nameOf(v), orDash(orEmpty(v.find("spec")).getString("repo")), orDash(commit.substr(0, 8)),
          displayOf(v).getString("readyBundleDeployments", "0/0"), statusText(displayOf(v))};
}

std::vector<std::string> bundleRow(const Json& v, std::chrono::system_clock::time_point /*now*/) {
  return {nameOf(v), orDash(statusOf(v).getString("gitrepo")),
          orDash(statusOf(v).getString("manifestID").substr(0, 12)), displayOf(v).getString("readyClusters", "0/0"),
          statusText(displayOf(v))};
}

std::vector<std::string> clusterRow(const Json& v, std::chrono::system_clock::time_point now) {
  const Json& agent = orEmpty(statusOf(v).find("agent"));
  return {nameOf(v),
          detail::labelsText(v.at({"metadata", "labels"})),
          orDash(agent.getString("kubernetesVersion")),
          displayOf(v).getString("readyBundles", "0/0"),
          age(agent.getString("lastSeen"), now),
          statusText(displayOf(v))};
}

std::vector<std::string> clusterGroupRow(const Json& v, std::chrono::system_clock::time_point /*now*/) {
  std::string selector = "<none>";
  if (const Json* s = v.at({"spec", "selector"}); s != nullptr) {
    auto decoded = model::decodeSelector(*s);
    selector = decoded.ok() ? model::formatSelector(*decoded) : s->dump();
    if (selector.empty()) {
      selector = "<all>";
    }
  }
  return {nameOf(v), selector, displayOf(v).getString("readyClusters", "0/0")};
}

std::vector<std::string> bundleDeploymentRow(const Json& v, std::chrono::system_clock::time_point /*now*/) {
  const Json& spec = orEmpty(v.find("spec"));
  std::string deployment = spec.getString("deploymentID");
  if (deployment.empty()) {
    deployment = "(held) " + detail::shortId(spec.getString("stagedDeploymentID"));
  }
  return {spec.getString("cluster"), spec.getString("bundle"), detail::shortId(deployment),
          statusOf(v).getString("state"), detail::truncate(statusOf(v).getString("message"), 100)};
}

using RowFn = std::vector<std::string> (*)(const Json&, std::chrono::system_clock::time_point);

struct Layout {
  std::vector<std::string> header;
  RowFn row;
};

Layout layoutOf(Kind kind) {
  switch (kind) {
    case Kind::kGitRepo:
      return {{"NAME", "REPO", "COMMIT", "BUNDLES-READY", "STATUS"}, gitRepoRow};
    case Kind::kBundle:
      return {{"NAME", "GITREPO", "MANIFEST", "READY", "STATUS"}, bundleRow};
    case Kind::kCluster:
      return {{"NAME", "LABELS", "K8S", "BUNDLES-READY", "LAST-SEEN", "STATUS"}, clusterRow};
    case Kind::kClusterGroup:
      return {{"NAME", "SELECTOR", "CLUSTERS-READY"}, clusterGroupRow};
    case Kind::kBundleDeployment:
      return {{"CLUSTER", "BUNDLE", "DEPLOYMENT", "STATE", "MESSAGE"}, bundleDeploymentRow};
  }
  return {};
}

}  // namespace

std::string renderTable(Kind kind, const std::vector<Json>& views, bool with_workspace,
                        std::chrono::system_clock::time_point now) {
  Layout layout = layoutOf(kind);
  if (with_workspace) {
    layout.header.insert(layout.header.begin(), "WORKSPACE");
  }
  detail::Table table(layout.header);
  for (const auto& view : views) {
    std::vector<std::string> cells = layout.row(view, now);
    if (with_workspace) {
      cells.insert(cells.begin(), detail::workspaceOf(view));
    }
    table.add(std::move(cells));
  }
  return table.str();
}

}  // namespace flotilla::cli
