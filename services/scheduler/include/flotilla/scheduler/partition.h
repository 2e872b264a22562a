// flotilla/scheduler/partition.h
//
// How scheduler replicas split the work without a leader (--partitions N, docs/pipeline.md "Service replicas").
// The work is cut into N partitions by GitRepo: a bundle belongs to the partition of its (workspace, GitRepo), so
// everything that spans clusters — a bundle's placement and rollout (partitions, maxUnavailable across its
// clusters), its summary and its GitRepo's summary — is decided in one place. What spans bundles is per cluster:
// a cluster belongs to the partition of its name, whose holder writes the cluster summary and finishes its
// deregistration, reading the other partitions' deployment records through watches of the KV buckets.
//
// Each partition has a lease (KV clusters/lease.scheduler.p<i>, service::Lease); a replica holds the partitions
// its rank among the live replicas gives it (partitionsOfReplica) and takes any whose holder stopped renewing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::scheduler {

//! The most partitions --partitions accepts (each has two durables on the hub).
inline constexpr uint32_t kMaxPartitions = 256;

//! Which share of the work one Scheduler does: partition `index` of `count` (count 1: all of it).
struct Partition {
  uint32_t index = 0;
  uint32_t count = 1;

  //! One partition: the scheduler does everything (the default).
  [[nodiscard]] bool whole() const { return count <= 1; }
  //! Bundles of this GitRepo ("" for none) are placed, rolled out and summarized here.
  [[nodiscard]] bool ownsGitRepo(std::string_view workspace, std::string_view gitrepo) const;
  //! This cluster's summary and deregistration are written here.
  [[nodiscard]] bool ownsCluster(std::string_view cluster) const;
  //! "" for the whole; "-p<index>" otherwise: the partition's durable names and lease key end with it.
  [[nodiscard]] std::string suffix() const;
  //! "p<index>" (metrics labels, logs); "all" for the whole.
  [[nodiscard]] std::string name() const;
};

//! The partition of `text` among `count` (FNV-1a, 64 bits): the same on every replica and every architecture.
uint32_t partitionOf(std::string_view text, uint32_t count);
//! The partition of a GitRepo's bundles: partitionOf("<workspace>/<gitrepo>").
uint32_t gitRepoPartition(std::string_view workspace, std::string_view gitrepo, uint32_t count);
//! The partition of a cluster: partitionOf("cluster/<name>").
uint32_t clusterPartition(std::string_view cluster, uint32_t count);

//! The partitions replica `id` should hold when `live` (every replica seen renewing, `id` among them) share
//! `count` partitions: partition p goes to the replica of rank p mod |live| in sorted order. Each partition has
//! exactly one replica; shares differ by at most one.
std::vector<uint32_t> partitionsOfReplica(std::vector<std::string> live, const std::string& id, uint32_t count);

//! The KV key (bucket `clusters`) of a partition's lease: "lease.scheduler.p<index>".
std::string partitionLeaseKey(uint32_t index);
//! The KV key (bucket `clusters`) a partitioned replica renews to be counted live: "member.scheduler.<id>" (the id
//! escaped to one token).
std::string replicaMemberKey(std::string_view id);
//! The filter of every replica's member key.
inline constexpr std::string_view kReplicaMemberFilter = "member.scheduler.*";

}  // namespace flotilla::scheduler
