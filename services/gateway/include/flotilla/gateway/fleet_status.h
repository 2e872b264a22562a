// flotilla/gateway/fleet_status.h
//
// A GitRepo CR's status in Fleet's shape, from what the hub knows of it: whether the gateway accepted the CR's spec,
// the poller's record (status/gitrepo.<ws>.<name>) and the scheduler's roll-up (status/summary.gitrepo.<ws>.<name>).
// Pure functions: the gateway's writer calls them, tests check them without a cluster.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/events/records.h"

namespace flotilla::gateway {

//! The gateway's verdict on a CR's spec at one metadata.generation.
struct Acceptance {
  int64_t generation = 0;
  bool accepted = false;
  std::string message;  //!< why not: the decoder's error, naming the field path ("spec.paths: expected ...")

  bool operator==(const Acceptance&) const = default;
};

//! Everything the status of one GitRepo is made from; any part may be missing (not seen yet).
struct GitRepoFacts {
  std::optional<Acceptance> acceptance;
  std::optional<events::PollStatus> poll;
  std::optional<events::GitRepoSummary> summary;
  //! The status the CR has (from the last list or watch event): what a restarted gateway compares with, so it does
  //! not write every status again.
  Json current;
};

//! What the status of one Cluster CR is made from: the gateway's verdict on its spec and the scheduler's roll-up of
//! the cluster (status/summary.cluster.<name>).
struct ClusterFacts {
  std::string ns;  //!< the CR's namespace (the cluster's workspace); "" while no CR was seen
  std::optional<Acceptance> acceptance;
  std::optional<events::ClusterSummary> summary;
  Json current;  //!< the CR's status as last listed or watched
};

//! One cluster of a ClusterGroup and its roll-up (nullopt: the scheduler has written none yet).
struct GroupMember {
  std::string name;
  std::optional<events::ClusterSummary> summary;
};

//! A ClusterGroup CR's: the gateway's verdict on its spec, and the clusters its stored selector holds with their
//! roll-ups (cluster_registry.h).
struct ClusterGroupFacts {
  std::optional<Acceptance> acceptance;
  //! nullopt while the group's spec is not in KV (refused, or not stored yet): then no counts are written.
  std::optional<std::vector<GroupMember>> members;
  Json current;
};

//! A Cluster's status in Fleet's shape: observedGeneration, display {readyBundles, state}, agent {lastSeen},
//! readyGitRepos, desiredReadyGitRepos, summary, and the conditions Accepted and Ready (False while Offline).
Json clusterStatus(const ClusterFacts& facts, const std::string& now);
//! A ClusterGroup's in Fleet's shape: observedGeneration, clusterCount, nonReadyClusterCount, nonReadyClusters (at
//! most 10 names), summary (the members' bundle summaries added up), display {readyClusters "2/3", readyBundles,
//! state}, and the conditions Accepted and Ready. A member is ready when its roll-up is Ready and it is not Offline;
//! an empty group is Ready (nothing in it waits).
Json clusterGroupStatus(const ClusterGroupFacts& facts, const std::string& now);

//! status in Fleet's shape: observedGeneration, commit, pollingCommit, webhookCommit, lastPollingTriggered,
//! readyClusters, desiredReadyClusters, summary, display {readyBundleDeployments, state, message, error} and the
//! conditions Accepted, GitPolling and Ready (lastTransitionTime set to `now`, see keepTransitionTimes).
Json gitRepoStatus(const GitRepoFacts& facts, const std::string& now);

//! A condition whose type, status, reason and message are unchanged from `previous` keeps its lastTransitionTime,
//! so writing the same state again changes nothing (and is not written: see sameStatus).
void keepTransitionTimes(Json& status, const Json& previous);

//! How stale the times that move with every sign of life may get on a CR before they are written by themselves: a
//! GitRepo's lastPollingTriggered (every poll) and a Cluster's agent.lastSeen (the scheduler refreshes a cluster's
//! roll-up every 5 minutes). Fleet's agents check in every 15 minutes, so its users see that grain. Without it,
//! 1,000 GitRepos polled every 15 s would ask for 67 writes a second for that field alone, more than the default
//! budget, and every real change would wait behind them. Any other change is written at once, with these times.
inline constexpr std::chrono::minutes kLivenessRefresh{15};

//! True when `status` differs from `previous` only in lastPollingTriggered or agent.lastSeen moved forward by less
//! than kLivenessRefresh (and in transition times): not worth a write.
bool onlyLivenessTimesMoved(const Json& status, const Json& previous);

//! True when `a` and `b` differ at most in the conditions' lastTransitionTime.
bool sameStatus(const Json& a, const Json& b);

}  // namespace flotilla::gateway
