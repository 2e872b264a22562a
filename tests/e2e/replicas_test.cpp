// End-to-end: two replicas of the poller and of the bundler, as the chart runs them (issue 13, "Replicas"). Each
// poller has its own mirrors and polls every GitRepo; a commit both see is stored once (the same Nats-Msg-Id,
// JetStream drops the copy). The bundlers share one durable consumer, so each commit event is rendered by one of
// them. kill -9 of one replica of each loses nothing: the next commit lands on every cluster through the others.
// Two schedulers share the scheduler lease: a SIGTERM'd holder hands it over at once; a holder killed in the
// middle of a commit's fan-out (after the first cluster's deploy) is replaced by the standby after the ttl, which
// deploys the rest from the records, and no cluster applies the commit twice; a holder whose lease was taken stops.
// Two schedulers splitting the work (--partitions 2): each holds one partition, so each places the GitRepos of its
// own; one killed in the middle of a fan-out leaves its partition to the other, which finishes it (each cluster
// applies the commit once) while the other partition's GitRepos never stop.
#include <csignal>

#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/partition.h"

namespace flotilla::e2e {
namespace {

//! Messages stored on `subject` in `stream` (0 when it cannot be read).
uint64_t storedOn(Hub& hub, std::string_view stream, const std::string& subject) {
  auto js = hub.js();
  if (!js.ok()) {
    return 0;
  }
  auto info = (*js)->streamInfo(stream, subject);
  if (!info.ok()) {
    return 0;
  }
  auto it = info->subjects.find(subject);
  return it == info->subjects.end() ? 0 : it->second;
}

//! The holder id in a scheduler lease ("" when free or unreadable).
std::string leaseHolder(Hub& hub, const std::string& key = "lease.scheduler") {
  auto clusters = hub.kv("clusters");
  if (!clusters.ok()) {
    return "";
  }
  auto entry = (*clusters)->get(key);
  if (!entry.ok()) {
    return "";
  }
  auto value = Json::parse(entry->value);
  return value.ok() ? value->getString("holder") : "";
}

TEST(PipelineReplicasTest, TwoSchedulersShareALeaseAndAHolderKilledMidFanOutLosesNothing) {
  const ServiceSettings a{.flags = {"--lease-ttl", "2", "--replica-id", "a", "--ack-wait", "10"}};
  auto started = Hub::start({.services = {{"scheduler", a}}, .secure = true});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  ASSERT_TRUE(Hub::waitFor([&] { return leaseHolder(hub) == "a"; }, std::chrono::seconds(20))) << hub.allLogs();
  hub.configure("scheduler-2", ServiceSettings{.flags = {"--replica-id", "b"}});
  ASSERT_TRUE(hub.startService("scheduler-2").ok()) << hub.logTail("scheduler-2");
  const std::vector<std::string> clusters = clusterNames(hub);
  const std::string name = "sched-" + randomHex(3);
  const std::string ns = "ns-" + name;

  auto first = applyConfigMapRepo(hub, name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, clusters); }, kLands)) << hub.allLogs();
  EXPECT_EQ(leaseHolder(hub), "a");
  EXPECT_NE(hub.logTail("scheduler-2", 400).find("standby until it holds the lease"), std::string::npos)
      << hub.logTail("scheduler-2");

  // The standby is armed to die after the first cluster's deploy of its next bundle event; then the holder is
  // stopped: it releases the lease, the armed replica takes it at once, and the holder started again is the
  // standby.
  hub.configure("scheduler-2", ServiceSettings{.flags = {"--replica-id", "b"},
                                               .env = {{"FLOTILLA_FAULT_POINTS", "scheduler.bundle.deployed"}}});
  ASSERT_TRUE(hub.restartService("scheduler-2").ok()) << hub.logTail("scheduler-2");
  ASSERT_TRUE(hub.stopService("scheduler").ok()) << hub.logTail("scheduler");
  ASSERT_TRUE(Hub::waitFor([&] { return leaseHolder(hub) == "b"; }, std::chrono::seconds(20)))
      << hub.logTail("scheduler") << hub.logTail("scheduler-2");
  ASSERT_TRUE(hub.startService("scheduler").ok()) << hub.logTail("scheduler");
  EXPECT_NE(hub.logTail("scheduler-2", 400).find(R"("how":"released")"), std::string::npos)
      << hub.logTail("scheduler-2");

  auto second = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  auto code = hub.waitExit("scheduler-2", kLands);
  ASSERT_TRUE(code.has_value()) << "the holder did not reach its fault point\n" << hub.logTail("scheduler-2", 80);
  EXPECT_EQ(*code, 128 + SIGKILL);
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, clusters); }, kLands)) << hub.allLogs();
  EXPECT_EQ(leaseHolder(hub), "a");
  EXPECT_NE(hub.logTail("scheduler", 400).find(R"("how":"expired")"), std::string::npos) << hub.logTail("scheduler");
  for (size_t i = 0; i < hub.clusterCount(); ++i) {
    EXPECT_EQ(configMapValue(hub, i, ns, "c", "value"), "v2") << clusters[i];
    EXPECT_EQ(appliesOf(hub, i, *second), 1U) << clusters[i] << " applied the commit more or less than once\n"
                                              << hub.logTail("agent-" + std::to_string(i), 60);
  }

  // A holder that finds its lease written over (here by hand, as a replica back from a long pause would find it)
  // stops: it shuts down rather than publish beside another holder.
  auto clusters_kv = hub.kv("clusters");
  ASSERT_TRUE(clusters_kv.ok());
  ASSERT_TRUE((*clusters_kv)->put("lease.scheduler", R"({"holder":"someone-else","ttlMs":60000})").ok());
  auto stopped = hub.waitExit("scheduler", std::chrono::seconds(30));
  ASSERT_TRUE(stopped.has_value()) << "the holder kept running without its lease\n" << hub.logTail("scheduler");
  EXPECT_NE(hub.logTail("scheduler", 100).find(R"("reason":"taken")"), std::string::npos) << hub.logTail("scheduler");
}

//! A GitRepo name of fleet-default in scheduler partition `index` of 2.
std::string gitRepoInPartition(uint32_t index, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string name = prefix + std::to_string(i);
    if (scheduler::gitRepoPartition("fleet-default", name, 2) == index) {
      return name;
    }
  }
}

TEST(PipelineReplicasTest, TwoPartitionedSchedulersSplitTheGitReposAndOneKilledMidFanOutLosesNothing) {
  const ServiceSettings a{.flags = {"--partitions", "2", "--lease-ttl", "3", "--replica-id", "a", "--ack-wait", "10"}};
  auto started = Hub::start({.services = {{"scheduler", a}}, .secure = true});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  const std::string p0 = scheduler::partitionLeaseKey(0);
  const std::string p1 = scheduler::partitionLeaseKey(1);
  ASSERT_TRUE(Hub::waitFor([&] { return leaseHolder(hub, p0) == "a" && leaseHolder(hub, p1) == "a"; },
                           std::chrono::seconds(20)))
      << "alone, a holds both partitions\n"
      << hub.allLogs();
  hub.configure("scheduler-2", ServiceSettings{.flags = {"--replica-id", "b"}});
  ASSERT_TRUE(hub.startService("scheduler-2").ok()) << hub.logTail("scheduler-2");
  ASSERT_TRUE(Hub::waitFor([&] { return leaseHolder(hub, p0) == "a" && leaseHolder(hub, p1) == "b"; },
                           std::chrono::seconds(30)))
      << "b joined: a hands partition 1 over\n"
      << hub.logTail("scheduler") << hub.logTail("scheduler-2");

  const std::vector<std::string> clusters = clusterNames(hub);
  const std::string tag = randomHex(3);
  const std::string zero = gitRepoInPartition(0, "zero-" + tag + "-");
  const std::string one = gitRepoInPartition(1, "one-" + tag + "-");
  auto zero_first = applyConfigMapRepo(hub, zero);
  ASSERT_TRUE(zero_first.ok()) << zero_first.error().describe();
  auto one_first = applyConfigMapRepo(hub, one);
  ASSERT_TRUE(one_first.ok()) << one_first.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, zero, *zero_first, clusters); }, kLands)) << hub.allLogs();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, one, *one_first, clusters); }, kLands)) << hub.allLogs();
  // Each replica placed its own partition's GitRepo.
  EXPECT_NE(hub.logTail("scheduler", 2000).find(zero + "-app"), std::string::npos) << hub.logTail("scheduler");
  EXPECT_EQ(hub.logTail("scheduler", 2000).find("\"" + one + "-app\""), std::string::npos)
      << "a placed partition 1's bundle\n"
      << hub.logTail("scheduler");
  EXPECT_NE(hub.logTail("scheduler-2", 2000).find(one + "-app"), std::string::npos) << hub.logTail("scheduler-2");

  // b, armed to die after the first cluster's deploy of its next bundle event, is restarted: it releases partition
  // 1 on SIGTERM, a takes it, and hands it back once b is live again.
  hub.configure("scheduler-2", ServiceSettings{.flags = {"--replica-id", "b"},
                                               .env = {{"FLOTILLA_FAULT_POINTS", "scheduler.bundle.deployed"}}});
  ASSERT_TRUE(hub.restartService("scheduler-2").ok()) << hub.logTail("scheduler-2");
  ASSERT_TRUE(Hub::waitFor([&] { return leaseHolder(hub, p1) == "b"; }, std::chrono::seconds(30)))
      << hub.logTail("scheduler") << hub.logTail("scheduler-2");
  // (a stopped its partition 1 before releasing the lease: the commit below waits for b in the partition's durable)

  auto one_second = hub.git().commitFiles(one, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(one_second.ok());
  auto code = hub.waitExit("scheduler-2", kLands);
  ASSERT_TRUE(code.has_value()) << "b did not reach its fault point\n" << hub.logTail("scheduler-2", 80);
  EXPECT_EQ(*code, 128 + SIGKILL);
  // Partition 0 never stopped: a commit there lands while partition 1 waits for its lease to lapse.
  auto zero_second = hub.git().commitFiles(zero, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(zero_second.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, zero, *zero_second, clusters); }, kLands))
      << hub.allLogs();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, one, *one_second, clusters); }, kLands)) << hub.allLogs();
  EXPECT_EQ(leaseHolder(hub, p1), "a");
  EXPECT_NE(hub.logTail("scheduler", 2000).find(R"("how":"expired")"), std::string::npos) << hub.logTail("scheduler");
  for (size_t i = 0; i < hub.clusterCount(); ++i) {
    EXPECT_EQ(appliesOf(hub, i, *one_second), 1U) << clusters[i] << " applied the commit more or less than once\n"
                                                  << hub.logTail("agent-" + std::to_string(i), 60);
    EXPECT_EQ(appliesOf(hub, i, *zero_second), 1U) << clusters[i];
  }
}

TEST(PipelineReplicasTest, TwoPollersAndTwoBundlersPublishEachCommitOnceAndSurviveKillingOneOfEach) {
  // With the hub's identities: a second replica connects as its service, as in the chart.
  auto started = Hub::start({.secure = true});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  ASSERT_TRUE(hub.startService("poller-2").ok());
  ASSERT_TRUE(hub.startService("bundler-2").ok());
  const std::vector<std::string> clusters = clusterNames(hub);
  const std::string name = "replicas-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string commits = events::commitSubject("fleet-default", name);

  auto first = applyConfigMapRepo(hub, name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, clusters); }, kLands)) << hub.allLogs();
  auto second = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, clusters); }, kLands)) << hub.allLogs();
  // Both pollers polled both commits (1 s interval); each is stored once.
  EXPECT_EQ(storedOn(hub, events::kCommitStream, commits), 2U) << hub.logTail("poller") << hub.logTail("poller-2");
  EXPECT_NE(hub.logTail("poller-2", 400).find("commit event"), std::string::npos) << hub.logTail("poller-2");

  hub.kill9("poller");
  hub.kill9("bundler");
  auto third = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v3")}}, "third");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *third, clusters); }, kLands)) << hub.allLogs();
  for (size_t i = 0; i < hub.clusterCount(); ++i) {
    EXPECT_EQ(configMapValue(hub, i, ns, "c", "value"), "v3") << clusters[i];
  }
  EXPECT_EQ(storedOn(hub, events::kCommitStream, commits), 3U);
  // One bundle event per commit (the bundle's own Msg-Id): no commit was rendered into two.
  EXPECT_EQ(storedOn(hub, events::kBundleStream, events::bundleSubject("fleet-default", name + "-app")), 3U)
      << hub.logTail("bundler-2");
}

}  // namespace
}  // namespace flotilla::e2e
