// flotilla/scheduler/state_gauges.h
//
// The state gauges of the hub, from the summaries the scheduler wrote (its cache: key -> record without
// `updated`; docs/metrics.md "State gauges"):
//
//   gitrepos_by_state{state}, bundles_by_state{state}, clusters_by_state{state}   one series per state, always
//                                                                                   (9 states at most each)
//   gitrepo_ready{workspace,gitrepo}, gitrepo_render_error{workspace,gitrepo}     one series each per GitRepo
//   cluster_ready{cluster}, cluster_offline{cluster}                              only with --per-cluster-metrics
//
// With partitions each partition counts what it owns (label `partition`), so a sum over partitions is the hub's.
// A GitRepo or cluster whose summary is gone loses its series.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/metrics.h"

namespace flotilla::scheduler {

//! Which summaries this scheduler counts (its partition's; every one for the whole).
struct StateGaugeScope {
  std::function<bool(const std::string& workspace, const std::string& gitrepo)> owns_gitrepo;
  std::function<bool(const std::string& cluster)> owns_cluster;
};

//! Kept up to date one summary change at a time (a write or removal costs a few map lookups, not a pass over
//! every summary). Not thread-safe: the scheduler calls it under its mutex. Its series go with it (a partition
//! handed to another replica stops counting here).
class StateGauges {
 public:
  //! `base` labels go on every series (the partition's); `per_cluster` turns on the per-cluster series. The
  //! counts start at 0 for every state, so they exist before the first summary.
  StateGauges(Metrics& metrics, prometheus::Labels base, bool per_cluster, StateGaugeScope scope);
  ~StateGauges();
  StateGauges(const StateGauges&) = delete;
  StateGauges& operator=(const StateGauges&) = delete;

  //! The summary at `key` (summary.bundle.*, summary.gitrepo.*, summary.cluster.*; other keys are ignored)
  //! changed from `before` to `after`; nullptr = absent.
  void change(const std::string& key, const Json* before, const Json* after);

 private:
  //! One summary's part in the gauges.
  struct Part {
    const char* count = nullptr;  //!< the *_by_state family, nullptr: not counted here
    std::string state;
    std::vector<std::pair<const char*, double>> series;  //!< per-GitRepo / per-cluster families and values
    prometheus::Labels labels;                           //!< of those series
  };
  [[nodiscard]] Part partOf(const std::string& key, const Json& summary) const;
  void count(const Part& part, double delta);
  [[nodiscard]] prometheus::Labels with(prometheus::Labels labels) const;

  Metrics& metrics_;
  prometheus::Labels base_;
  bool per_cluster_;
  StateGaugeScope scope_;
  std::map<std::string, std::map<std::string, double>> counts_;  //!< family -> state -> count
  std::map<std::string, std::set<prometheus::Labels>> series_;   //!< family -> series set
};

}  // namespace flotilla::scheduler
