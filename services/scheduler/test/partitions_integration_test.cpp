// Partitioned schedulers (partition.h, partition_set.h) against a real nats-server -js: two partitions of 2 split
// the GitRepos and publish each DeployEvent once; a cluster's summary, written by its partition, counts every
// partition's deployments; a partition started again (a replica taking it over) sends nothing twice and carries on;
// a deregistration spanning both partitions finishes once both partitions' records are gone. PartitionSet: replicas
// share the partitions by rank, hand them over when one joins and take them over when one is killed, and no
// partition ever runs twice.
#include <atomic>
#include <set>

#include "flotilla/scheduler/partition_set.h"
#include "scheduler_fixture.h"

namespace flotilla::scheduler::scheduler_test {
namespace {

using namespace std::chrono_literals;

//! A GitRepo name of kWs in partition `index` of 2.
std::string gitRepoIn(uint32_t index) {
  for (int i = 0;; ++i) {
    std::string name = "repo-" + std::to_string(i);
    if (gitRepoPartition(kWs, name, 2) == index) {
      return name;
    }
  }
}

//! A cluster name in partition `index` of 2.
std::string clusterIn(uint32_t index, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string name = prefix + std::to_string(i);
    if (clusterPartition(name, 2) == index) {
      return name;
    }
  }
}

events::BundleEvent bundleOf(const std::string& gitrepo, const std::string& bundle, const std::string& manifest,
                             const std::string& commit = kCommit1) {
  auto event = bundleEvent(bundle, manifest, Json::array(), commit);
  event.gitrepo = gitrepo;
  return event;
}

class PartitionsTest : public SchedulerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("partitions-test"));
    metrics_ = std::make_unique<Metrics>("scheduler");
  }

  void TearDown() override {
    for (auto& partition : partitions_) {
      if (partition) {
        partition->stop();
      }
    }
    partitions_ = {};
    SchedulerFixture::TearDown();
  }

  //! Starts partition `index` of 2 (both share one registry, as in one process) and waits until it caught up.
  void startPartition(uint32_t index) {
    SchedulerOptions options = testOptions();
    options.partition = Partition{.index = index, .count = 2};
    auto created = Scheduler::create(hub_, *metrics_, options);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    partitions_.at(index) = std::move(created).value();
    auto started = partitions_.at(index)->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
    ASSERT_TRUE(waitFor([&] { return partitions_.at(index)->caughtUp(); }, 20s));
  }

  Scheduler& partition(uint32_t index) { return *partitions_.at(index); }

  std::optional<events::ClusterSummary> clusterSummary(const std::string& cluster) {
    auto entry = hub_.status->get(events::clusterSummaryKey(cluster));
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto summary = events::parseRecord<events::ClusterSummary>(entry->value);
    return summary.ok() ? std::optional(*summary) : std::nullopt;
  }

  std::optional<events::BundleSummary> bundleSummary(const std::string& bundle) {
    auto entry = hub_.status->get(events::bundleSummaryKey(kWs, bundle));
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto summary = events::parseRecord<events::BundleSummary>(entry->value);
    return summary.ok() ? std::optional(*summary) : std::nullopt;
  }

  //! The deployment of `bundle` on `cluster` as the partition holding it has it.
  std::optional<DeploymentRecord> deploymentOf(uint32_t owner, const std::string& cluster, const std::string& bundle) {
    return partition(owner).deployment(cluster, kWs, bundle);
  }

  std::array<std::unique_ptr<Scheduler>, 2> partitions_;
  const std::string repo0_ = gitRepoIn(0);
  const std::string repo1_ = gitRepoIn(1);
};

std::set<std::string> bundlesOf(const std::vector<events::DeployEvent>& deploys) {
  std::set<std::string> out;
  for (const auto& deploy : deploys) {
    out.insert(deploy.bundle);
  }
  return out;
}

TEST_F(PartitionsTest, TwoPartitionsSplitTheGitReposAndPublishEachDeployOnce) {
  ASSERT_NO_FATAL_FAILURE(startPartition(0));
  ASSERT_NO_FATAL_FAILURE(startPartition(1));
  const std::string c0 = clusterIn(0, "c-");
  const std::string c1 = clusterIn(1, "c-");
  ASSERT_TRUE(registerCluster(c0, {}).accepted);
  ASSERT_TRUE(registerCluster(c1, {}).accepted);
  auto agent0 = harness::agentDurable(hub_, c0);
  auto agent1 = harness::agentDurable(hub_, c1);

  publishBundle(bundleOf(repo0_, "zero-app", kManifestA));
  publishBundle(bundleOf(repo1_, "one-app", kManifestB));
  for (auto* agent : {&agent0, &agent1}) {
    auto sent = deploys(*agent, 2);
    EXPECT_EQ(bundlesOf(sent), (std::set<std::string>{"zero-app", "one-app"}));
    EXPECT_TRUE(noMoreDeploys(*agent)) << "a bundle was deployed by both partitions";
  }
  // Each partition holds its own GitRepo's records only.
  EXPECT_TRUE(partition(0).deployment(c0, kWs, "zero-app").has_value());
  EXPECT_FALSE(partition(0).deployment(c0, kWs, "one-app").has_value());
  EXPECT_TRUE(partition(1).deployment(c0, kWs, "one-app").has_value());
  EXPECT_FALSE(partition(1).deployment(c0, kWs, "zero-app").has_value());
  EXPECT_GE(metrics_->value("messages_total", {{"consumer", "bundles-p0"}, {"outcome", "other-partition"}}), 1);
  EXPECT_GE(metrics_->value("messages_total", {{"consumer", "bundles-p1"}, {"outcome", "other-partition"}}), 1);

  // The agents report Ready: each report is judged by the partition of its bundle, and each cluster's summary —
  // written by the cluster's partition — counts both.
  for (const auto& cluster : {c0, c1}) {
    for (uint32_t owner : {0U, 1U}) {
      const std::string bundle = owner == 0 ? "zero-app" : "one-app";
      auto record = deploymentOf(owner, cluster, bundle);
      ASSERT_TRUE(record.has_value()) << cluster << " " << bundle;
      publishStatus(cluster, bundle, record->deployment_id, record->generation, "Ready");
    }
  }
  for (const auto& cluster : {c0, c1}) {
    ASSERT_TRUE(waitFor([&] {
      auto summary = clusterSummary(cluster);
      return summary && summary->ready_bundles == "2/2" && summary->ready_git_repos == 2;
    })) << cluster
        << ": " << (clusterSummary(cluster) ? events::encode(*clusterSummary(cluster)).dump() : "none");
  }
  for (const auto& bundle : {"zero-app", "one-app"}) {
    ASSERT_TRUE(waitFor([&] {
      auto summary = bundleSummary(bundle);
      return summary && summary->ready_clusters == "2/2";
    })) << bundle;
  }
  EXPECT_GE(metrics_->value("messages_total", {{"consumer", "status-p0"}, {"outcome", "other-partition"}}), 2);
  EXPECT_GE(metrics_->value("messages_total", {{"consumer", "status-p1"}, {"outcome", "other-partition"}}), 2);
  EXPECT_EQ(metrics_->value("bundles", {{"partition", "p0"}}), 1);
  EXPECT_EQ(metrics_->value("bundles", {{"partition", "p1"}}), 1);

  // A partition stopped and started again (as a replica taking it over does) loads only its own records, sends
  // nothing again, and places the next commit of its GitRepo; the other partition never touches it.
  partition(1).stop();
  publishBundle(bundleOf(repo1_, "one-app", kManifestA, kCommit2));
  EXPECT_TRUE(noMoreDeploys(agent0, 1500ms)) << "partition 0 deployed partition 1's bundle";
  ASSERT_NO_FATAL_FAILURE(startPartition(1));
  for (auto* agent : {&agent0, &agent1}) {
    auto sent = deploys(*agent, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].bundle, "one-app");
    EXPECT_EQ(sent[0].manifest_id, kManifestA);
    EXPECT_TRUE(noMoreDeploys(*agent));
  }
  EXPECT_FALSE(partition(1).deployment(c0, kWs, "zero-app").has_value());
}

// A deregistration spans partitions: each sends the deletes of its own deployments and drops their records as the
// agent answers; the cluster's partition removes the registration once no partition has a record left.
TEST_F(PartitionsTest, ADeregistrationFinishesOnceEveryPartitionsRecordsAreGone) {
  ASSERT_NO_FATAL_FAILURE(startPartition(0));
  ASSERT_NO_FATAL_FAILURE(startPartition(1));
  const std::string cluster = clusterIn(0, "leaving-");
  ASSERT_TRUE(registerCluster(cluster, {}).accepted);
  auto agent = harness::agentDurable(hub_, cluster);
  publishBundle(bundleOf(repo0_, "zero-app", kManifestA));
  publishBundle(bundleOf(repo1_, "one-app", kManifestB));
  auto applied = deploys(agent, 2);
  ASSERT_EQ(applied.size(), 2U);
  heartbeat(cluster);
  ASSERT_TRUE(waitFor([&] { return !partition(0).lastHeartbeat(cluster).empty(); }));
  ASSERT_TRUE(waitFor([&] { return !partition(1).lastHeartbeat(cluster).empty(); }))
      << "every partition keeps the heartbeats";

  events::ClusterDeregistration tombstone{.cluster = cluster, .time = log::nowRfc3339(), .keep_resources = true};
  ASSERT_TRUE(hub_.clusters->put(events::clusterDeregisteredKey(cluster), events::encode(tombstone).dump()).ok());
  auto deletes = deploys(agent, 2);
  ASSERT_EQ(deletes.size(), 2U);
  EXPECT_TRUE(noMoreDeploys(agent));
  const events::DeployEvent& zero = deletes[0].bundle == "zero-app" ? deletes[0] : deletes[1];
  const events::DeployEvent& one = deletes[0].bundle == "zero-app" ? deletes[1] : deletes[0];
  ASSERT_TRUE(zero.remove && one.remove);

  // Partition 0's answer alone does not finish: partition 1's record is still there.
  publishStatus(cluster, zero.bundle, zero.deployment_id, zero.generation, "Ready");
  ASSERT_TRUE(waitFor([&] { return !hub_.deployments->get(events::deploymentKey(cluster, kWs, "zero-app")).ok(); }));
  std::this_thread::sleep_for(1500ms);  // the deregistration check runs about once a second
  EXPECT_TRUE(hub_.clusters->get(events::clusterKey(cluster)).ok()) << "finished before partition 1's answer";

  publishStatus(cluster, one.bundle, one.deployment_id, one.generation, "Ready");
  ASSERT_TRUE(waitFor([&] { return !hub_.clusters->get(events::clusterKey(cluster)).ok(); }))
      << "the cluster's partition did not finish the deregistration";
  EXPECT_FALSE(hub_.deployments->get(events::deploymentKey(cluster, kWs, "one-app")).ok());
  ASSERT_TRUE(waitFor([&] { return !hub_.status->get(events::clusterSummaryKey(cluster)).ok(); }));
  EXPECT_EQ(metrics_->value("deregistrations_total", {{"result", "completed"}}), 1);
  EXPECT_FALSE(hub_.js->consumerInfo(service::kDeployStream, "agent-" + cluster).ok());
}

// ---- PartitionSet ----

//! A partition's stand-in: records which partitions run, and whether one ever ran twice at once.
struct Running {
  std::mutex mutex;
  std::multiset<uint32_t> partitions;
  std::atomic<bool> twice{false};
};

class FakePartition final : public service::Component {
 public:
  FakePartition(Running& running, uint32_t index) : running_(running), index_(index) {}
  Status start() override {
    std::lock_guard lock(running_.mutex);
    if (running_.partitions.contains(index_)) {
      running_.twice = true;
    }
    running_.partitions.insert(index_);
    started_ = true;
    return {};
  }
  void stop() override {
    if (!started_.exchange(false)) {
      return;
    }
    std::lock_guard lock(running_.mutex);
    running_.partitions.erase(running_.partitions.find(index_));
  }
  bool ready(std::string& /*why*/) const override { return true; }

 private:
  Running& running_;
  uint32_t index_;
  std::atomic<bool> started_{false};
};

class PartitionSetTest : public SchedulerFixture {
 protected:
  std::unique_ptr<PartitionSet> replica(const std::string& id) {
    return std::make_unique<PartitionSet>(
        hub_.clusters, *metrics_, PartitionSetOptions{.id = id, .ttl = 1500ms, .partitions = 4},
        [this](Partition partition,
               const std::function<bool()>& /*may_publish*/) -> Result<std::shared_ptr<service::Component>> {
          if (partition.index == 1 && failing_starts_.fetch_sub(1) > 0) {
            return fail(ErrorKind::kTransient, "partition 1 cannot be made (test)");
          }
          return std::shared_ptr<service::Component>(std::make_shared<FakePartition>(running_, partition.index));
        });
  }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("partition-set-test"));
    metrics_ = std::make_unique<Metrics>("scheduler");
  }

  Running running_;
  std::atomic<int> failing_starts_{0};  //!< partition 1's next starts that fail
};

TEST_F(PartitionSetTest, ReplicasShareByRankHandOverOnJoinAndTakeOverFromAKilledOne) {
  auto a = replica("a");
  a->start();
  ASSERT_TRUE(waitFor([&] { return a->held() == std::vector<uint32_t>{0, 1, 2, 3}; }, 15s)) << "alone, a holds all";

  auto b = replica("b");
  b->start();
  ASSERT_TRUE(waitFor(
      [&] {
        return a->held() == std::vector<uint32_t>{0, 2} && b->held() == std::vector<uint32_t>{1, 3};
      },
      20s))
      << "b joined: a hands over its share";
  EXPECT_EQ(a->live(), (std::vector<std::string>{"a", "b"}));
  EXPECT_GE(metrics_->value("partition_stops_total", {{"why", "handed over"}}), 2);

  // b killed: nothing released; a takes its partitions once b's membership and leases lapse.
  b->abandon();
  ASSERT_TRUE(waitFor([&] { return a->held() == std::vector<uint32_t>{0, 1, 2, 3}; }, 20s)) << "a took b's over";
  EXPECT_FALSE(running_.twice) << "a partition ran on two replicas at once";

  // A clean stop releases everything at once: a new replica takes all without waiting for a ttl.
  a->stop();
  EXPECT_TRUE(running_.partitions.empty());
  auto c = replica("c");
  c->start();
  ASSERT_TRUE(waitFor([&] { return c->held() == std::vector<uint32_t>{0, 1, 2, 3}; }, 10s));
  c->stop();
  EXPECT_FALSE(running_.twice);
}

// A partition whose lease another holder wrote over (a replica back from a long pause would find it so) is stopped at
// once, and taken again once that holder stops renewing.
TEST_F(PartitionSetTest, APartitionWhoseLeaseIsTakenStopsAndIsTakenBackWhenTheHolderIsSilent) {
  auto a = replica("a");
  a->start();
  ASSERT_TRUE(waitFor([&] { return a->held() == std::vector<uint32_t>{0, 1, 2, 3}; }, 15s));
  ASSERT_TRUE(hub_.clusters->put(partitionLeaseKey(2), R"({"holder":"intruder","ttlMs":1500})").ok());
  // (stopped on the partition's own thread: the count follows the stop)
  ASSERT_TRUE(waitFor(
      [&] {
        return a->held() == std::vector<uint32_t>{0, 1, 3} &&
               metrics_->value("partition_stops_total", {{"why", "lease lost"}}) >= 1;
      },
      10s))
      << "partition 2 kept running";
  EXPECT_GE(metrics_->value("lease_lost_total", {{"partition", "p2"}, {"reason", "taken"}}), 1);
  // The intruder never renews: after its ttl the partition is a's again.
  ASSERT_TRUE(waitFor([&] { return a->held() == std::vector<uint32_t>{0, 1, 2, 3}; }, 15s));
  EXPECT_GE(metrics_->value("lease_acquired_total", {{"partition", "p2"}, {"how", "expired"}}), 1);
  a->stop();
  EXPECT_FALSE(running_.twice);
}

// A partition whose start fails (its records cannot be read, say) is handed back and tried again at a later round.
TEST_F(PartitionSetTest, APartitionThatCannotStartIsHandedBackAndTriedAgain) {
  failing_starts_ = 2;
  auto a = replica("a");
  a->start();
  ASSERT_TRUE(waitFor([&] { return a->held() == std::vector<uint32_t>{0, 1, 2, 3}; }, 15s));
  EXPECT_EQ(metrics_->value("partition_starts_total", {{"result", "failed"}}), 2);
  a->stop();
}

}  // namespace
}  // namespace flotilla::scheduler::scheduler_test
