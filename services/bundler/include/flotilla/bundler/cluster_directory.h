// flotilla/bundler/cluster_directory.h
//
// What the bundler knows about clusters, for per-cluster variants (variants.h): the KV `clusters` records
// (cluster.<name>: the agent's registration, a model::Cluster with labels and status.agent.kubernetesVersion;
// spec.<name>: the hub admin's Cluster document with hub labels, annotations and spec.templateValues, overlaid on
// the registration by model::effectiveCluster as the scheduler does; deregistered.<name>: a tombstone, the cluster
// is left out; group.<ws>.<group>: a ClusterGroup), turned into model::ClusterFacts (groups resolved by
// model::resolveGroups, the rules the scheduler uses too). A document without a registration makes no cluster.
// apply() reports which clusters' facts changed, so the bundler can re-render the bundles of their workspaces.
// Heartbeat keys are ignored. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
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
  static Change invalid(const Error& error);
  Change applyGroup(const bus::KvEntry& entry);
  Change applyCluster(const bus::KvEntry& entry);
  Change applyTombstone(const bus::KvEntry& entry);
  //! Recomputes every cluster's facts (a group changed); returns what changed.
  Change recompute();
  //! Recomputes one cluster's facts (its registration, document or tombstone changed); returns what changed.
  Change recomputeCluster(const std::string& name);
  [[nodiscard]] std::vector<model::GroupInfo> groupInfos() const;
  //! The facts of a registered, not deregistered cluster (nullopt otherwise).
  [[nodiscard]] std::optional<ClusterFacts> factsOf(const std::string& name,
                                                    const std::vector<model::GroupInfo>& groups) const;
  //! Keeps `facts` as the cluster's (nullopt: removes it) and notes in `change` what that changed.
  void store(const std::string& name, std::optional<ClusterFacts> facts, Change& change);

  mutable std::mutex mutex_;
  std::map<std::string, model::Cluster> registrations_;  //!< by cluster name: clusters/cluster.*
  std::map<std::string, model::Cluster> documents_;      //!< by cluster name: clusters/spec.*
  std::set<std::string> deregistered_;                   //!< clusters/deregistered.* (no renders for them)
  std::map<std::string, model::ClusterGroup> groups_;    //!< by "<ws>/<group>"
  std::map<std::string, ClusterFacts> facts_;            //!< by cluster name
};

}  // namespace flotilla::bundler
