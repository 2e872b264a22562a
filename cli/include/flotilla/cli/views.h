// flotilla/cli/views.h
//
// What `flotilla get` and `flotilla describe` show, built from a Snapshot of the hub. Each kind has one JSON view
// per object (Kubernetes-style: apiVersion, kind, metadata, spec, status), which `-o json` prints as a list; the
// tables and the describe text are rendered from those same views, so every output agrees.
//
//   GitRepo           spec from gitrepos; status from the poller (commit, last poll, last error) and the
//                     scheduler's summary.gitrepo (counts, worst state, bundles, render errors); a summary
//                     without a spec is a GitRepo being deleted (state Deleting, the summary's message)
//   Bundle            spec = the bundler's bundles record; status from summary.bundle, bundle-render and the
//                     bundle's deployments
//   Cluster           the registration record overlaid by the admin's document (model::effectiveCluster; a
//                     document alone is WaitCheckIn); status from summary.cluster (counts, last heartbeat);
//                     Deregistering while its tombstone exists
//   ClusterGroup      the spec; status = member clusters and how many are ready
//   BundleDeployment  spec = the deployments record; status = the effective state and the agent's last report
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/cli/hub_reader.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::cli {

enum class Kind { kGitRepo, kBundle, kCluster, kClusterGroup, kBundleDeployment };

//! "gitrepos", "gitrepo", "gitrepos.fleet.cattle.io", "bundles", "clusters", "clustergroups", "bundledeployments",
//! "bd", ... (case-insensitive). kInvalid lists the accepted kinds.
Result<Kind> parseKind(std::string_view text);
//! "GitRepo", "Bundle", ...
std::string_view kindName(Kind kind);
//! "gitrepo.fleet.cattle.io" style, for apply/delete messages.
std::string qualifiedKind(Kind kind);

//! Which objects: a workspace ("" = all) and a name ("" = all; for bundledeployments "<cluster>/<bundle>", a
//! bundle or a cluster).
struct Filter {
  std::string workspace;
  std::string name;
};

//! The JSON views of every object of `kind` that passes `filter`, sorted by workspace and name.
std::vector<Json> listViews(const Snapshot& snapshot, Kind kind, const Filter& filter);

//! A kubectl-like table of `views` (with a WORKSPACE column when `with_workspace`). `now` is for ages.
std::string renderTable(Kind kind, const std::vector<Json>& views, bool with_workspace,
                        std::chrono::system_clock::time_point now);

//! The describe text of one view (spec, status, summary, per-cluster states and messages, last error).
std::string describeView(const Snapshot& snapshot, Kind kind, const Json& view,
                         std::chrono::system_clock::time_point now);

//! "5s", "3m", "2h", "4d" since an RFC 3339 time; "-" when empty or unreadable.
std::string age(std::string_view rfc3339, std::chrono::system_clock::time_point now);

}  // namespace flotilla::cli
