// Partitions of the scheduler's work (partition.h): ownership, the share of each replica, the --partitions flag.
#include "flotilla/scheduler/partition.h"

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "flotilla/scheduler/flags.h"

namespace flotilla::scheduler {
namespace {

TEST(PartitionTest, TheWholeOwnsEverything) {
  const Partition whole;
  EXPECT_TRUE(whole.whole());
  EXPECT_TRUE(whole.ownsGitRepo("fleet-default", "anything"));
  EXPECT_TRUE(whole.ownsCluster("any-cluster"));
  EXPECT_EQ(whole.suffix(), "");
  EXPECT_EQ(whole.name(), "all");
}

TEST(PartitionTest, EachGitRepoAndClusterHasExactlyOnePartitionSpreadEvenly) {
  constexpr uint32_t kCount = 4;
  std::map<uint32_t, int> gitrepos;
  std::map<uint32_t, int> clusters;
  for (int i = 0; i < 1000; ++i) {
    const std::string name = "repo-" + std::to_string(i);
    int owners = 0;
    int cluster_owners = 0;
    for (uint32_t index = 0; index < kCount; ++index) {
      const Partition partition{.index = index, .count = kCount};
      owners += partition.ownsGitRepo("fleet-default", name) ? 1 : 0;
      cluster_owners += partition.ownsCluster(name) ? 1 : 0;
    }
    EXPECT_EQ(owners, 1) << name;
    EXPECT_EQ(cluster_owners, 1) << name;
    ++gitrepos[gitRepoPartition("fleet-default", name, kCount)];
    ++clusters[clusterPartition(name, kCount)];
  }
  for (uint32_t index = 0; index < kCount; ++index) {
    EXPECT_GT(gitrepos[index], 180) << index;  // 250 each if perfectly even
    EXPECT_GT(clusters[index], 180) << index;
  }
  // The same name in another workspace is another GitRepo.
  EXPECT_EQ(gitRepoPartition("ws", "a", kCount), gitRepoPartition("ws", "a", kCount));
  EXPECT_EQ(partitionOf("anything", 1), 0U);
}

TEST(PartitionTest, TheHashIsFixed) {
  // FNV-1a of the bytes: replicas built by other compilers or on other machines agree.
  EXPECT_EQ(partitionOf("", 1000003), 14695981039346656037ULL % 1000003);
  EXPECT_EQ(partitionOf("a", 1000003), 0xaf63dc4c8601ec8cULL % 1000003);
  const Partition p1{.index = 1, .count = 3};
  EXPECT_EQ(p1.suffix(), "-p1");
  EXPECT_EQ(p1.name(), "p1");
  EXPECT_EQ(partitionLeaseKey(1), "lease.scheduler.p1");
  EXPECT_EQ(replicaMemberKey("scheduler-0"), "member.scheduler.scheduler-0");
}

TEST(PartitionTest, LiveReplicasShareThePartitionsByRank) {
  constexpr uint32_t kCount = 8;
  for (size_t replicas = 1; replicas <= 5; ++replicas) {
    std::vector<std::string> live;
    for (size_t i = 0; i < replicas; ++i) {
      live.push_back("replica-" + std::to_string(i));
    }
    std::set<uint32_t> seen;
    size_t smallest = kCount;
    size_t largest = 0;
    for (const auto& id : live) {
      auto share = partitionsOfReplica(live, id, kCount);
      smallest = std::min(smallest, share.size());
      largest = std::max(largest, share.size());
      for (uint32_t p : share) {
        EXPECT_TRUE(seen.insert(p).second) << "partition " << p << " given twice with " << replicas << " replicas";
      }
    }
    EXPECT_EQ(seen.size(), kCount) << replicas << " replicas";
    EXPECT_LE(largest - smallest, 1U) << replicas << " replicas";
  }
  // The order the replicas were seen in does not matter; a replica always counts itself.
  EXPECT_EQ(partitionsOfReplica({"b", "a"}, "a", 4), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(partitionsOfReplica({"b"}, "a", 4), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(partitionsOfReplica({}, "a", 3), (std::vector<uint32_t>{0, 1, 2}));
  // More replicas than partitions: the last ranks hold none and wait.
  EXPECT_TRUE(partitionsOfReplica({"a", "b", "c"}, "c", 2).empty());
}

Result<ReplicaOptions> replicaOptions(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"flotilla-scheduler"};
  for (const auto& arg : args) {
    argv.push_back(arg.c_str());
  }
  auto parsed = service::Config::parse(static_cast<int>(argv.size()), argv.data(), schedulerFlags());
  FLOTILLA_TRY(parsed);
  return replicaOptionsFrom(*parsed);
}

TEST(PartitionTest, PartitionsFlag) {
  auto two = replicaOptions({"--partitions", "2", "--lease-ttl", "5", "--replica-id", "a"});
  ASSERT_TRUE(two.ok()) << two.error().describe();
  EXPECT_EQ(two->partitions, 2U);
  auto one = replicaOptions({});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->partitions, 1U);
  auto without_lease = replicaOptions({"--partitions", "2"});
  ASSERT_FALSE(without_lease.ok());
  EXPECT_NE(without_lease.error().message.find("--partitions"), std::string::npos);
  EXPECT_FALSE(replicaOptions({"--partitions", "0", "--lease-ttl", "5"}).ok());
  EXPECT_FALSE(replicaOptions({"--partitions", "257", "--lease-ttl", "5"}).ok());
  EXPECT_FALSE(replicaOptions({"--partitions", "two", "--lease-ttl", "5"}).ok());
}

}  // namespace
}  // namespace flotilla::scheduler
