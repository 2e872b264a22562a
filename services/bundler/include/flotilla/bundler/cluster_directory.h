// flotilla/bundler/cluster_directory.h
//
// What the bundler knows about clusters, for per-cluster variants (variants.h): the scheduler's KV `clusters`
// records (cluster.<name>: a model::Cluster with labels, annotations, spec.templateValues and
// status.agent.kubernetesVersion; group.<ws>.<group>: a ClusterGroup), turned into model::ClusterFacts (groups
// resolved by model::resolveGroups, the rules the scheduler uses too). apply() reports which clusters' facts changed,
// so the bundler can re-render the bundles of their workspaces. Heartbeat keys are ignored. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/kv.h"
#include "flotilla/model/resources.h"
#include "flotilla/model/targeting.h"

namespace flotilla::bundler {

using model::ClusterFacts;

class ClusterDirectory {
 public:
  //! The change one KV entry made: the clusters whose facts changed (appeared, changed or removed) and their
  //! workspaces. An unreadable record is skipped (`invalid` set, logged by the caller).
  struct Change {
    std::set<std::string> clusters;
    std::set<std::string> workspaces;
    bool invalid = false;
    std::string problem;
  };

  Change apply(const bus::KvEntry& entry);
  //! The clusters of `workspace`, sorted by name.
  [[nodiscard]] std::vector<ClusterFacts> snapshot(std::string_view workspace) const;
  [[nodiscard]] size_t size() const;
  //! The workspaces that have clusters.
  [[nodiscard]] std::set<std::string> workspaces() const;

 private:
  //! Recomputes every cluster's facts; returns what changed.
  Change recompute();

  mutable std::mutex mutex_;
  std::map<std::string, model::Cluster> clusters_;     //!< by cluster name
  std::map<std::string, model::ClusterGroup> groups_;  //!< by "<ws>/<group>"
  std::map<std::string, ClusterFacts> facts_;          //!< by cluster name
};

}  // namespace flotilla::bundler
