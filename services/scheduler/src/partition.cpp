// Partitions of the scheduler's work (partition.h): the hash, ownership and the share of each replica.
#include "flotilla/scheduler/partition.h"

#include <algorithm>

#include "flotilla/events/subjects.h"

namespace flotilla::scheduler {

uint32_t partitionOf(std::string_view text, uint32_t count) {
  if (count <= 1) {
    return 0;
  }
  // FNV-1a: stable across builds and machines (std::hash is neither), good enough spread for names.
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return static_cast<uint32_t>(hash % count);
}

uint32_t gitRepoPartition(std::string_view workspace, std::string_view gitrepo, uint32_t count) {
  std::string text;
  text.reserve(workspace.size() + gitrepo.size() + 1);
  text.append(workspace).append("/").append(gitrepo);
  return partitionOf(text, count);
}

uint32_t clusterPartition(std::string_view cluster, uint32_t count) {
  return partitionOf(std::string("cluster/").append(cluster), count);
}

bool Partition::ownsGitRepo(std::string_view workspace, std::string_view gitrepo) const {
  return whole() || gitRepoPartition(workspace, gitrepo, count) == index;
}

bool Partition::ownsCluster(std::string_view cluster) const {
  return whole() || clusterPartition(cluster, count) == index;
}

std::string Partition::suffix() const {
  return whole() ? std::string() : "-p" + std::to_string(index);
}

std::string Partition::name() const {
  return whole() ? std::string("all") : "p" + std::to_string(index);
}

std::vector<uint32_t> partitionsOfReplica(std::vector<std::string> live, const std::string& id, uint32_t count) {
  std::sort(live.begin(), live.end());
  live.erase(std::unique(live.begin(), live.end()), live.end());
  auto self = std::find(live.begin(), live.end(), id);
  if (self == live.end()) {
    live.push_back(id);  // this replica always counts itself
    std::sort(live.begin(), live.end());
    self = std::find(live.begin(), live.end(), id);
  }
  const auto rank = static_cast<uint32_t>(self - live.begin());
  const auto replicas = static_cast<uint32_t>(live.size());
  std::vector<uint32_t> mine;
  for (uint32_t p = rank; p < count; p += replicas) {
    mine.push_back(p);
  }
  return mine;
}

std::string partitionLeaseKey(uint32_t index) {
  return "lease.scheduler.p" + std::to_string(index);
}

std::string replicaMemberKey(std::string_view id) {
  return "member.scheduler." + events::escapeToken(id);
}

}  // namespace flotilla::scheduler
