// flotilla/gateway/views.h
//
// The read-only views the gateway keeps on the hub cluster, in Fleet's shape, so that `kubectl get gitrepo ->
// bundle -> bundledeployment` finds where a commit is stuck with nothing but the `view` ClusterRole:
//   - Bundle <ws>/<bundle>, from the scheduler's roll-up (status/summary.bundle.<ws>.<bundle>);
//   - BundleDeployment <ws>/<bundle>.<cluster>, from the scheduler's record (deployments/<cluster>.<ws>.<bundle>)
//     and the agent's last report (status/bd.<cluster>.<ws>.<bundle>).
// Labels (Fleet's): fleet.cattle.io/repo-name, fleet.cattle.io/commit, fleet.cattle.io/bundle-name,
// fleet.cattle.io/bundle-namespace, fleet.cattle.io/cluster. Pure functions; the gateway's writer applies them.
#pragma once

#include <optional>
#include <string>

#include "flotilla/core/json.h"
#include "flotilla/events/records.h"

namespace flotilla::gateway {

//! One view: the object to server-side apply (apiVersion, kind, metadata with labels, spec) and its status.
struct View {
  Json object;
  Json status;

  bool operator==(const View&) const = default;
};

//! The facts of one BundleDeployment; a view exists while either is there.
struct DeploymentFacts {
  std::optional<events::DeploymentRecord> record;
  std::optional<events::BdStatus> status;
};

//! The BundleDeployment view's name: <bundle>.<cluster> (a DNS-1123 subdomain, as both parts are).
std::string bundleDeploymentName(const std::string& cluster, const std::string& bundle);

View bundleView(const events::BundleSummary& summary);
//! nullopt when there is neither a record nor a report.
std::optional<View> bundleDeploymentView(const DeploymentFacts& facts);

}  // namespace flotilla::gateway
