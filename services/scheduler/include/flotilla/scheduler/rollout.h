// flotilla/scheduler/rollout.h
//
// A bundle's rollout as a pure decision (Fleet's rolloutStrategy, fleet-reference "rollout"): which targeted
// clusters may receive the deployment targeting wants now, and where the rollout stands. One pass looks at every
// targeted cluster at once; the scheduler runs a pass whenever something it depends on changes — a BundleEvent, a
// status report, a cluster going offline or coming back, a cluster registering — so the next partition is
// released by the reports that make the previous one healthy, with no requeue timer.
//
// The rules (Fleet's, with the choices Fleet leaves open written down):
// - Partitions. With `partitions`, each targeted cluster belongs to the first partition whose criteria
//   (clusterName, clusterSelector, clusterGroup, clusterGroupSelector, as a target matcher) it matches; a cluster no
//   partition matches is left out of the rollout (Fleet's rule: it gets nothing new) and named in the status.
//   Without, fewer than `autoPartitionThreshold` (200) clusters, or `autoPartitionSize` <= 0 make one partition
//   "All"; otherwise clusters, by name, are cut into partitions of `autoPartitionSize` (25%) named
//   "Partition <from> - <to>".
// - Budgets (Fleet's `limit`): a count is taken as is; a percentage of the total, rounded down, at least 1; no total
//   gives 1. The bundle's budget is `maxUnavailable` (100%) of its clusters; a partition's is its own
//   `maxUnavailable`, else the rollout's, else 100%, of its clusters; `maxUnavailablePartitions` (0) of the
//   partitions.
// - A cluster is unavailable when its released deployment is not applied and Ready, or it is offline. It is up to
//   date when it runs the wanted deployment and is available.
// - A pass walks the partitions in order. In a partition, a cluster that never received the bundle is released
//   while fewer than `maxNew` (50) were in this pass; any other cluster whose released deployment differs from the
//   wanted one is released when it is unavailable already (an update cannot make it worse, and a fix reaches a
//   broken cluster at once), or while both the bundle's and the partition's unavailable counts are under their
//   budgets (each release counts one more). A paused bundle or cluster releases nothing. Then the partition counts
//   its clusters that are not up to date; over its budget it is an unavailable partition, and once more partitions
//   are unavailable than `maxUnavailablePartitions` allows the pass stops: later partitions wait.
// - A pass that left new clusters out only because of `maxNew` asks for another pass at once (Fleet's next
//   reconcile), which checks the budgets again before the next batch. planRollout may walk such passes itself, up
//   to `max_rounds` times, each round releasing the next batch as the next pass would (nothing is reported between
//   them, and a new cluster consults no budget): the scheduler then sends the batches one after another without
//   building the bundle's placement again for each (10,000 new clusters, maxNew 50: 200 batches).
// - State: Released when every targeted cluster has been sent the wanted deployment (how it runs there is the
//   bundle's state); Halted when the pass holds deployments back and a
//   cluster it reached is failing (a report on its released deployment that is ErrApplied, NotReady or Modified,
//   or offline) — the status names them; else Progressing. A newer commit starts a new pass from the first
//   partition, so it supersedes a halted rollout: the failing clusters get it at once.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flotilla/events/records.h"
#include "flotilla/model/options.h"
#include "flotilla/scheduler/targeting.h"

namespace flotilla::scheduler {

//! Fleet's defaults.
inline constexpr int64_t kDefaultMaxNew = 50;
inline constexpr int64_t kDefaultAutoPartitionThreshold = 200;

//! One targeted cluster of the bundle, as the rollout sees it.
struct RolloutTarget {
  std::string cluster;
  ClusterInfo facts;       //!< with its groups resolved (manual partitions match on them)
  std::string wanted;      //!< the deploymentID targeting wants there
  std::string released;    //!< the deploymentID released there ("" = nothing yet: a new cluster for the bundle)
  bool available = false;  //!< the released deployment is applied and Ready, and the cluster is online
  bool failing = false;    //!< offline, or the report on the released deployment is ErrApplied, NotReady or Modified
  bool paused = false;     //!< the bundle or the cluster is paused
  std::string state;       //!< for the status: the deployment's state, or "Offline"
  std::string message;
};

struct RolloutPlan {
  //! Clusters that may have the wanted deployment now (released in this pass, or running it already).
  std::set<std::string> release;
  events::RolloutStatus status;
  bool another_pass = false;  //!< maxNew left new clusters out of a partition the pass reached
  //! The clusters each round released (a maxNew batch each after the first), in order; clusters that run the
  //! wanted deployment already are in `release` only.
  std::vector<std::vector<std::string>> rounds;
};

//! Fleet's `limit`: the budget `value` (else `fallback`, else `def`) gives for `count` items.
int64_t rolloutLimit(int64_t count, const std::optional<model::IntOrPercent>& value,
                     const std::optional<model::IntOrPercent>& fallback, model::IntOrPercent def);

//! One pass over the bundle's targeted clusters (any order; sorted by name inside).
//! `max_rounds`: how many maxNew batches one call may release (the passes it walks; at least 1).
RolloutPlan planRollout(const std::optional<model::RolloutStrategy>& strategy, std::vector<RolloutTarget> targets,
                        size_t max_rounds = 1);

}  // namespace flotilla::scheduler
