// A burst of status reports against a real nats-server -js (summaries.cpp): while more reports are queued behind
// one (its delivery's num_pending), the summaries it changed wait, for at most SchedulerOptions::summary_delay;
// the report with nothing behind it writes them, and each report's own record (status/bd.*) is written at once.
// Reports are handed to Scheduler::handleStatus directly, with the backlog the consumer runtime would pass.
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/poll.h"
#include "flotilla/scheduler/scheduler.h"
#include "scheduler_fixture.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;  // NOLINT(google-build-using-namespace): the shared fixture

class StatusBurstTest : public SchedulerFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(startHub("status-burst-test")); }

  //! Starts the scheduler with `delay`, registers c-1 and c-2 and deploys repo-app to both; their DeployEvents.
  std::vector<events::DeployEvent> deployedWith(std::chrono::milliseconds delay, size_t visits_at_once = 2000) {
    auto options = testOptions();
    options.summary_delay = delay;
    options.summary_visits_at_once = visits_at_once;
    startSchedulerWith(options);
    std::vector<events::DeployEvent> out;
    for (const std::string cluster : {"c-1", "c-2"}) {
      EXPECT_TRUE(registerCluster(cluster, {}).accepted);
      auto durable = harness::agentDurable(hub_, cluster);
      if (out.empty()) {
        publishBundle(bundleEvent("repo-app", kManifestA, Json::array()));
      }
      auto sent = deploys(durable, 1);
      EXPECT_EQ(sent.size(), 1u) << cluster;
      if (!sent.empty()) {
        out.push_back(sent.front());
      }
    }
    EXPECT_TRUE(statusWhen(summaryKey(), [](const Json& s) { return s.find("summary")->getInt("waitApplied") == 2; }));
    return out;
  }

  static std::string summaryKey() { return events::bundleSummaryKey(kWs, "repo-app"); }

  //! Waits until the status record at `key` exists and `check` holds for it.
  std::optional<Json> statusWhen(const std::string& key, const std::function<bool(const Json&)>& check) {
    std::optional<Json> last;
    harness::waitUntil(
        [&] {
          auto entry = hub_.status->get(key);
          auto json = entry.ok() ? Json::parse(entry->value) : Result<Json>(fail(entry.error()));
          last = json.ok() ? std::optional<Json>(*json) : std::nullopt;
          return last && check(*last);
        },
        10s);
    return last && check(*last) ? last : std::nullopt;
  }

  //! The stored bundle summary, read once (no waiting).
  Json summaryNow() {
    auto entry = hub_.status->get(summaryKey());
    EXPECT_TRUE(entry.ok());
    return entry.ok() ? Json::parse(entry->value).valueOr(Json::object()) : Json::object();
  }

  //! The agent's Ready report of `deploy`, handled with `backlog` messages behind it.
  Outcome reportReady(const events::DeployEvent& deploy, uint64_t backlog) {
    events::StatusEvent event{
        .id = events::statusMsgId(deploy.cluster, deploy.bundle, deploy.deployment_id, "Ready", 1),
        .time = log::nowRfc3339(),
        .cluster = deploy.cluster,
        .workspace = kWs,
        .bundle = deploy.bundle,
        .deployment_id = deploy.deployment_id,
        .generation = deploy.generation,
        .sequence = 1,
        .state = "Ready"};
    return scheduler_->handleStatus(events::statusSubject(deploy.cluster, deploy.bundle), events::encode(event).dump(),
                                    1, backlog);
  }
};

TEST_F(StatusBurstTest, SummariesWaitForTheLastReportOfABurst) {
  auto sent = deployedWith(1h);  // nothing but the end of the burst writes them
  ASSERT_EQ(sent.size(), 2u);

  EXPECT_EQ(reportReady(sent[0], /*backlog=*/1).action, Outcome::Action::kAck);
  auto bd = hub_.status->get(events::bundleDeploymentStatusKey("c-1", kWs, "repo-app"));
  ASSERT_TRUE(bd.ok()) << "the report's own record is written at once";
  EXPECT_EQ(Json::parse(bd->value)->getString("state"), "Ready");
  EXPECT_EQ(summaryNow().find("summary")->getInt("waitApplied"), 2) << "the summary waits for the burst's end";
  EXPECT_GE(metrics_->value("summaries_deferred_total"), 1);

  EXPECT_EQ(reportReady(sent[1], /*backlog=*/0).action, Outcome::Action::kAck);
  Json summary = summaryNow();
  EXPECT_EQ(summary.getString("readyClusters"), "2/2") << summary.dump();
  EXPECT_EQ(summary.getString("state"), "Ready");
}

TEST_F(StatusBurstTest, SummariesPutOffAreWrittenWithoutAnotherReport) {
  auto sent = deployedWith(300ms);
  ASSERT_EQ(sent.size(), 2u);
  // Two reports that each had more behind them, and nothing after them (the last one was rejected, say).
  EXPECT_EQ(reportReady(sent[0], 5).action, Outcome::Action::kAck);
  EXPECT_EQ(reportReady(sent[1], 4).action, Outcome::Action::kAck);
  // The scheduler's watch loop writes them once the delay has passed.
  EXPECT_TRUE(statusWhen(summaryKey(), [](const Json& s) { return s.getString("readyClusters") == "2/2"; }));
  EXPECT_TRUE(
      statusWhen(events::clusterSummaryKey("c-2"), [](const Json& s) { return s.getString("readyBundles") == "1/1"; }));
}

// Summaries of large bundles and GitRepos (here: anything above one record visit) are written at most once per
// summary_delay, even when each report has nothing behind it; the watch loop writes what was put off.
TEST_F(StatusBurstTest, LargeSummariesAreWrittenAtMostOncePerDelay) {
  auto sent = deployedWith(2s, /*visits_at_once=*/1);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(reportReady(sent[0], /*backlog=*/0).action, Outcome::Action::kAck);
  EXPECT_EQ(reportReady(sent[1], /*backlog=*/0).action, Outcome::Action::kAck);
  EXPECT_GE(metrics_->value("summaries_coalesced_total"), 1) << "within 2 s of the deploys' summaries";
  EXPECT_TRUE(statusWhen(summaryKey(), [](const Json& s) { return s.getString("readyClusters") == "2/2"; }));
  EXPECT_TRUE(
      statusWhen(events::clusterSummaryKey("c-1"), [](const Json& s) { return s.getString("readyBundles") == "1/1"; }));
}

}  // namespace
}  // namespace flotilla::scheduler
