// flotilla/scheduler/rollup.h
//
// Status roll-up, as pure functions: the effective state of one BundleDeployment (its record plus the agent's
// last report), and the summary records the scheduler writes to KV `status`:
//
//   summary.bundle.<ws>.<bundle>     across the bundle's clusters (details named by cluster)
//   summary.gitrepo.<ws>.<gitrepo>   across its bundles' deployments, plus render errors (details "cluster/bundle")
//   summary.cluster.<cluster>        across the cluster's bundles, plus the last heartbeat (details "ws/bundle")
//
// Each holds Fleet's BundleSummary under "summary" (model::encodeStateSummary: count per state, desiredReady,
// up to 10 non-ready details with message) plus the worst "state", a one-line "message" and a display count. The
// record types and their codecs are libs/events' (records.h), so the CLI reads what is stored here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/events/records.h"
#include "flotilla/model/resources.h"
#include "flotilla/model/state.h"
#include "flotilla/scheduler/records.h"

namespace flotilla::scheduler {

//! The state a BundleDeployment counts as.
struct EffectiveState {
  model::BundleState state = model::BundleState::kWaitApplied;
  std::string reason;
  std::string message;

  bool operator==(const EffectiveState&) const = default;
};

//! events::deploymentState (the one rule every reader uses) as a model::BundleState.
EffectiveState effectiveState(const DeploymentRecord& record, const BdStatus* status);

//! One deployment with its report.
struct DeploymentView {
  const DeploymentRecord* record = nullptr;
  const BdStatus* status = nullptr;
};

//! "3/4": ready over desired.
std::string readyCount(const model::StateSummary& summary);

//! summary.bundle.<ws>.<bundle>. `bundle` may be null (deployments of a bundle the scheduler no longer knows);
//! `rollout` is its last rollout pass's status (a Halted one leads the message with the partition and clusters).
events::BundleSummary bundleSummaryRecord(std::string_view workspace, std::string_view bundle_name,
                                          const BundleInfo* bundle, const std::vector<DeploymentView>& deployments,
                                          const events::RolloutStatus* rollout = nullptr);

//! "c-1 (ErrApplied), c-2 (Offline)": the clusters that halt a rollout, as its message and log line name them.
std::string clusterStates(const std::vector<events::RolloutCluster>& clusters);

//! One bundle of a GitRepo, for its summary.
struct GitRepoBundle {
  const BundleInfo* bundle = nullptr;
  std::vector<DeploymentView> deployments;
};

//! summary.gitrepo.<ws>.<gitrepo>. State events::kDeletingState ("deleting: N deployments left on M clusters")
//! while none of its bundles is live and deployments wait for their delete to be reported.
events::GitRepoSummary gitRepoSummaryRecord(std::string_view workspace, std::string_view gitrepo,
                                            const std::vector<GitRepoBundle>& bundles);

//! summary.cluster.<cluster>. `cluster` may be null (deployments left for a cluster that is gone);
//! `last_heartbeat` is "" when none was seen. `offline`: state events::kOfflineState, the message says since when (the
//! bundles' states stay in `summary` and `readyBundles`).
events::ClusterSummary clusterSummaryRecord(std::string_view cluster_name, const model::Cluster* cluster,
                                            const std::vector<DeploymentView>& deployments,
                                            std::string_view last_heartbeat, bool offline = false);

}  // namespace flotilla::scheduler
