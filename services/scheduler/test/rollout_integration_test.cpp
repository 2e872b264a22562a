// Rollouts against a real nats-server -js (rollout.h): partitions released in order by the agents' reports, a
// failing partition halting the rollout and a fixing commit resuming it, maxNew batches, and an offline cluster
// counted as unavailable until it is back and Ready. Agents are played by their deploy durables and StatusEvents.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/events/subjects.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/scheduler/scheduler.h"
#include "scheduler_fixture.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;  // NOLINT(google-build-using-namespace): the shared fixture

const std::string kManifestC(64, 'c');
const std::string kCommit3(40, '3');

//! Partitions "canary" (env=canary, at most 1 unavailable) and "prod" (env=prod).
Json canaryThenProd() {
  return Json::parse(R"({"partitions":[
      {"name":"canary","maxUnavailable":1,"clusterSelector":{"matchLabels":{"env":"canary"}}},
      {"name":"prod","clusterSelector":{"matchLabels":{"env":"prod"}}}]})")
      .value();
}

class RolloutPassTest : public SchedulerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("rollout-test"));
    startSchedulerWith(testOptions());
  }

  //! Registers the clusters (name -> env label) with their durables.
  void registerAll(const std::vector<std::pair<std::string, std::string>>& clusters) {
    for (const auto& [name, env] : clusters) {
      ASSERT_TRUE(registerCluster(name, {{"env", env}}).accepted) << name;
      agents_.emplace(name, harness::agentDurable(hub_, name));
    }
  }

  //! Caps FLOTILLA_DEPLOY at what it holds now (at least a byte), refusing new messages: the next release fails.
  void fillDeployStream() {
    auto info = hub_.js->streamInfo(service::kDeployStream);
    ASSERT_TRUE(info.ok()) << info.error().describe();
    ASSERT_TRUE(
        hub_.js->applyLimits(service::kDeployStream, std::max<int64_t>(1, static_cast<int64_t>(info->bytes)), true)
            .ok());
  }
  void freeDeployStream() { ASSERT_TRUE(hub_.js->applyLimits(service::kDeployStream, -1, false).ok()); }
  //! Now, in the milliseconds a pass's generations are taken from.
  static int64_t wallClockMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  //! Reads the one DeployEvent `cluster` gets next and answers it with `state`.
  events::DeployEvent deployAndAnswer(const std::string& cluster, const std::string& state = "Ready") {
    auto sent = deploys(agents_.at(cluster), 1);
    EXPECT_EQ(sent.size(), 1u) << cluster;
    if (sent.empty()) {
      return {};
    }
    publishStatus(cluster, sent[0].bundle, sent[0].deployment_id, sent[0].generation, state,
                  state == "Ready" ? "" : "it broke");
    return sent[0];
  }

  //! The bundle's summary, once `check` holds for it.
  std::optional<events::BundleSummary> summaryWhen(const std::function<bool(const events::BundleSummary&)>& check,
                                                   std::chrono::milliseconds timeout = 10s) {
    std::optional<events::BundleSummary> last;
    waitFor(
        [&] {
          auto entry = hub_.status->get(events::bundleSummaryKey(kWs, "repo-app"));
          if (!entry.ok()) {
            return false;
          }
          auto decoded = events::decodeRecord<events::BundleSummary>(Json::parse(entry->value).value());
          if (!decoded.ok()) {
            ADD_FAILURE() << decoded.error().describe();
            return false;
          }
          last = *decoded;
          return check(*last);
        },
        timeout);
    return last && check(*last) ? last : std::nullopt;
  }

  static bool rolloutIs(const events::BundleSummary& s, std::string_view state, std::string_view partition = "") {
    return s.rollout && s.rollout->state == state && (partition.empty() || s.rollout->partition == partition);
  }

  //! Every cluster runs `manifest`, Ready.
  void deployEverywhere(const std::string& manifest, const std::string& commit, Json rollout = Json()) {
    auto event = bundleEvent("repo-app", manifest, Json::array(), commit);
    event.rollout_strategy = std::move(rollout);
    publishBundle(event);
    for (const auto& [name, consumer] : agents_) {
      deployAndAnswer(name);
    }
    ASSERT_TRUE(summaryWhen([&](const auto& s) { return s.ready_clusters == "3/3" && rolloutIs(s, "Released"); }));
  }

  std::map<std::string, bus::PullConsumer> agents_;
};

// An update goes to the canary partition first, one cluster at a time; prod gets it only once the canary's reports
// bring the partition within its budget. Held clusters are OutOfSync with reason Rollout.
TEST_F(RolloutPassTest, PartitionsAreReleasedInOrderByTheAgentsReports) {
  ASSERT_NO_FATAL_FAILURE(registerAll({{"c-1", "canary"}, {"c-2", "canary"}, {"p-1", "prod"}}));
  ASSERT_NO_FATAL_FAILURE(deployEverywhere(kManifestA, kCommit1));

  auto update = bundleEvent("repo-app", kManifestB, Json::array(), kCommit2);
  update.rollout_strategy = canaryThenProd();
  publishBundle(update);
  auto first = deployAndAnswer("c-1", "NotReady");  // starting: not Ready yet
  EXPECT_EQ(first.manifest_id, kManifestB);
  auto progressing = summaryWhen([](const auto& s) { return rolloutIs(s, "Halted", "canary"); });
  ASSERT_TRUE(progressing) << "a NotReady canary halts until it is Ready";
  EXPECT_EQ(progressing->rollout->held, 2);
  ASSERT_EQ(progressing->rollout->partitions.size(), 2u);
  EXPECT_EQ(progressing->rollout->partitions[1].state, "Waiting");
  EXPECT_TRUE(noMoreDeploys(agents_.at("c-2")));
  EXPECT_TRUE(noMoreDeploys(agents_.at("p-1")));
  auto held = hub_.deployments->get(events::deploymentKey("p-1", kWs, "repo-app"));
  ASSERT_TRUE(held.ok());
  auto record = events::decodeRecord<events::DeploymentRecord>(Json::parse(held->value).value());
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->staged_reason, events::kStagedByRollout);
  EXPECT_FALSE(record->staged_deployment_id.empty());

  // c-1 Ready: c-2 is released, which leaves the canary within its budget, so prod goes too.
  publishStatus("c-1", "repo-app", first.deployment_id, first.generation, "Ready");
  deployAndAnswer("c-2");
  deployAndAnswer("p-1");
  auto done = summaryWhen([](const auto& s) { return rolloutIs(s, "Released") && s.ready_clusters == "3/3"; });
  ASSERT_TRUE(done);
  EXPECT_EQ(done->rollout->held, 0);
  EXPECT_EQ(done->rollout->partitions[0].state, "Ready");
  EXPECT_EQ(done->commit, kCommit2);
  EXPECT_GE(metric("deploys_held_total", {{"reason", "Rollout"}}), 2);
}

// A canary that fails halts the rollout: the summary names the cluster and why, the rest stays on the old
// deployment. The next commit (the fix) reaches the failing cluster at once and, once it is Ready, the rest.
TEST_F(RolloutPassTest, AFailingPartitionHaltsAndAFixResumes) {
  ASSERT_NO_FATAL_FAILURE(registerAll({{"c-1", "canary"}, {"c-2", "canary"}, {"p-1", "prod"}}));
  ASSERT_NO_FATAL_FAILURE(deployEverywhere(kManifestA, kCommit1));

  auto broken = bundleEvent("repo-app", kManifestB, Json::array(), kCommit2);
  broken.rollout_strategy = canaryThenProd();
  publishBundle(broken);
  deployAndAnswer("c-1", "ErrApplied");
  auto halted = summaryWhen([](const auto& s) { return rolloutIs(s, "Halted", "canary"); });
  ASSERT_TRUE(halted);
  ASSERT_EQ(halted->rollout->halted_by.size(), 1u);
  EXPECT_EQ(halted->rollout->halted_by[0].cluster, "c-1");
  EXPECT_EQ(halted->rollout->halted_by[0].state, "ErrApplied");
  EXPECT_EQ(halted->rollout->halted_by[0].message, "it broke");
  EXPECT_EQ(halted->message.rfind("rollout halted at partition canary: c-1 (ErrApplied)", 0), 0u) << halted->message;
  EXPECT_TRUE(noMoreDeploys(agents_.at("c-2")));
  EXPECT_TRUE(noMoreDeploys(agents_.at("p-1")));
  EXPECT_TRUE(waitFor([&] { return metric("rollouts_halted_total") == 1; }));

  auto fix = bundleEvent("repo-app", kManifestC, Json::array(), kCommit3);
  fix.rollout_strategy = canaryThenProd();
  publishBundle(fix);
  EXPECT_EQ(deployAndAnswer("c-1").manifest_id, kManifestC);
  EXPECT_EQ(deployAndAnswer("c-2").manifest_id, kManifestC) << "the broken commit never reached c-2";
  EXPECT_EQ(deployAndAnswer("p-1").manifest_id, kManifestC);
  ASSERT_TRUE(summaryWhen([](const auto& s) { return rolloutIs(s, "Released") && s.ready_clusters == "3/3"; }));
  EXPECT_TRUE(waitFor([&] { return metric("rollouts_resumed_total") == 1; }));
}

// maxNew: a first deployment reaches new clusters in batches, each pass asking for the next.
TEST_F(RolloutPassTest, MaxNewReleasesNewClustersInBatches) {
  ASSERT_NO_FATAL_FAILURE(registerAll({{"a-1", "prod"}, {"a-2", "prod"}, {"a-3", "prod"}}));
  auto event = bundleEvent("repo-app", kManifestA, Json::array(), kCommit1);
  event.rollout_strategy = Json::parse(R"({"maxNew":1})").value();
  publishBundle(event);
  for (const auto& name : {"a-1", "a-2", "a-3"}) {
    deployAndAnswer(name);
  }
  ASSERT_TRUE(summaryWhen([](const auto& s) { return rolloutIs(s, "Released") && s.ready_clusters == "3/3"; }));
  EXPECT_EQ(metric("rollout_batches_total"), 2) << "three new clusters, one per pass";
}

// A release the deploy stream did not take (here: full) is sent again under the same generation and message id
// when the pass is redone: had the first copy been stored with its ack lost, JetStream would drop the second.
TEST_F(RolloutPassTest, AReleaseRedoneAfterAFailedBatchKeepsItsGeneration) {
  ASSERT_NO_FATAL_FAILURE(registerAll({{"a-1", "prod"}, {"a-2", "prod"}}));
  auto event = bundleEvent("repo-app", kManifestA, Json::array(), kCommit1);
  event.rollout_strategy =
      Json::parse(R"({"autoPartitionThreshold":1,"autoPartitionSize":1,"maxUnavailable":0})").value();
  publishBundle(event);
  auto first = deploys(agents_.at("a-1"), 1);
  ASSERT_EQ(first.size(), 1u);
  // The stream refuses what comes next; a-1's Ready report asks for the pass that releases a-2.
  ASSERT_NO_FATAL_FAILURE(fillDeployStream());
  publishStatus("a-1", first[0].bundle, first[0].deployment_id, first[0].generation, "Ready", "");
  ASSERT_TRUE(waitFor([&] { return metric("reconcile_failures_total") >= 1; })) << "the batch was refused";
  // Generations come from the clock of the pass: a redo under a new one would be at least this.
  const int64_t restored_ms = wallClockMs();
  ASSERT_NO_FATAL_FAILURE(freeDeployStream());
  auto second = deploys(agents_.at("a-2"), 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_GE(metric("deploys_redone_total"), 1);
  EXPECT_LT(second[0].generation, restored_ms) << "the generation of the refused attempt, not of the redo";
  EXPECT_TRUE(noMoreDeploys(agents_.at("a-2"), 300ms)) << "one copy";
  ASSERT_TRUE(summaryWhen([](const auto& s) { return rolloutIs(s, "Released"); }));
}

// The same for the first release of a bundle event, which is published alone: refused by a full deploy stream, it is
// sent again under the same generation once there is room.
TEST_F(RolloutPassTest, AFirstReleaseRedoneAfterARefusedPublishKeepsItsGeneration) {
  ASSERT_NO_FATAL_FAILURE(registerAll({{"a-1", "prod"}}));
  ASSERT_NO_FATAL_FAILURE(fillDeployStream());
  publishBundle(bundleEvent("repo-app", kManifestA, Json::array(), kCommit1));
  ASSERT_TRUE(waitFor([&] {
    return metric("store_full_total", {{"store", "FLOTILLA_DEPLOY"}}) >= 1;
  })) << "the release was refused";
  const int64_t restored_ms = wallClockMs();
  ASSERT_NO_FATAL_FAILURE(freeDeployStream());
  auto first = deploys(agents_.at("a-1"), 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_GE(metric("deploys_redone_total"), 1);
  EXPECT_LT(first[0].generation, restored_ms) << "the generation of the refused attempt, not of the redo";
  EXPECT_TRUE(noMoreDeploys(agents_.at("a-1"), 300ms)) << "one copy";
}

// Above autoPartitionThreshold the clusters are cut into partitions of autoPartitionSize; with a budget of 0 a first
// deployment goes one partition at a time, each released by the previous one's Ready report.
TEST_F(RolloutPassTest, AutoPartitionsAboveTheThresholdGoOneAfterAnother) {
  ASSERT_NO_FATAL_FAILURE(registerAll({{"a-1", "prod"}, {"a-2", "prod"}, {"a-3", "prod"}}));
  auto event = bundleEvent("repo-app", kManifestA, Json::array(), kCommit1);
  event.rollout_strategy =
      Json::parse(R"({"autoPartitionThreshold":2,"autoPartitionSize":1,"maxUnavailable":0})").value();
  publishBundle(event);
  auto first = summaryWhen([](const auto& s) { return rolloutIs(s, "Progressing", "Partition 0 - 1"); });
  ASSERT_TRUE(first);
  ASSERT_EQ(first->rollout->partitions.size(), 3u);
  EXPECT_EQ(first->rollout->partitions[2].name, "Partition 2 - 3");
  EXPECT_EQ(first->rollout->held, 2);
  EXPECT_EQ(first->summary.getInt("pending"), 2) << "held clusters with nothing released are Pending";
  EXPECT_TRUE(noMoreDeploys(agents_.at("a-2")));
  deployAndAnswer("a-1");
  EXPECT_TRUE(noMoreDeploys(agents_.at("a-3"), 300ms));
  deployAndAnswer("a-2");
  deployAndAnswer("a-3");
  ASSERT_TRUE(summaryWhen([](const auto& s) { return rolloutIs(s, "Released") && s.ready_clusters == "3/3"; }));
}

// An offline cluster's deployment counts as unavailable: with a budget of one, the others wait until it is back
// and Ready (its deploy waited in its durable meanwhile).
TEST_F(RolloutPassTest, AnOfflineClusterCountsAsUnavailableUntilItIsBack) {
  stopScheduler();
  auto options = testOptions();
  options.heartbeat_interval = 300ms;  // offline after 900 ms of silence
  startSchedulerWith(options);
  ASSERT_NO_FATAL_FAILURE(registerAll({{"a-1", "prod"}, {"a-2", "prod"}, {"a-3", "prod"}}));
  // a-2 and a-3 keep beating (a thread joined however the test ends); a-1 stays silent.
  struct Beating {
    std::atomic<bool> on{true};
    std::thread thread;
    ~Beating() {
      on = false;
      if (thread.joinable()) {
        thread.join();
      }
    }
  } beating;
  beating.thread = std::thread([&] {
    while (beating.on) {
      heartbeat("a-2");
      heartbeat("a-3");
      std::this_thread::sleep_for(150ms);
    }
  });
  ASSERT_NO_FATAL_FAILURE(deployEverywhere(kManifestA, kCommit1));
  EXPECT_TRUE(waitFor([&] { return scheduler_->offline("a-1"); }, 5s)) << "a-1 stays silent";
  EXPECT_FALSE(scheduler_->offline("a-2"));

  auto update = bundleEvent("repo-app", kManifestB, Json::array(), kCommit2);
  update.rollout_strategy = Json::parse(R"({"maxUnavailable":1})").value();
  publishBundle(update);
  auto halted = summaryWhen([](const auto& s) { return rolloutIs(s, "Halted"); });
  EXPECT_TRUE(halted && !halted->rollout->halted_by.empty() && halted->rollout->halted_by[0].cluster == "a-1" &&
              halted->rollout->halted_by[0].state == events::kOfflineState);
  EXPECT_TRUE(noMoreDeploys(agents_.at("a-2")));

  // a-1 is back: it reads B from its durable and reports Ready; then a-2, then a-3.
  heartbeat("a-1");
  EXPECT_EQ(deployAndAnswer("a-1").manifest_id, kManifestB);
  EXPECT_EQ(deployAndAnswer("a-2").manifest_id, kManifestB);
  EXPECT_EQ(deployAndAnswer("a-3").manifest_id, kManifestB);
  EXPECT_TRUE(summaryWhen([](const auto& s) { return rolloutIs(s, "Released") && s.ready_clusters == "3/3"; }));
}

}  // namespace
}  // namespace flotilla::scheduler
