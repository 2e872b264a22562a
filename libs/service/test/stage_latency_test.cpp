// Stage latencies: observed from an event's time, a time ahead of the host's clock counted as skew and observed
// as 0, an unparsable time counted and not observed; each degraded case logged at most once per interval.
#include "flotilla/service/stage_latency.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"

namespace flotilla::service {
namespace {

class StageLatencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::setSink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override { log::setSink(nullptr); }

  size_t linesContaining(std::string_view text) const {
    size_t count = 0;
    for (const auto& line : lines_) {
      count += line.find(text) != std::string::npos ? 1 : 0;
    }
    return count;
  }

  Metrics metrics_{"test"};
  ManualClock clock_;
  std::vector<std::string> lines_;
};

TEST_F(StageLatencyTest, ObservesTheTimeSinceTheEventUnderItsStage) {
  StageLatency stages(metrics_, &clock_);
  stages.observe(Stage::kCommitToBundle, formatRfc3339(clock_.now() - std::chrono::milliseconds(250)));
  stages.observe(Stage::kCommitToBundle, clock_.now() - std::chrono::seconds(2));
  EXPECT_EQ(metrics_.value("stage_latency_seconds", {{"stage", "commit_to_bundle"}}), 2);
  EXPECT_EQ(metrics_.value("stage_latency_seconds", {{"stage", "bundle_to_deploy"}}), 0);
  const std::string text = metrics_.exposition();
  // 0.25 s and 2 s: one sample in the 0.25 bucket, both by 2.5 s, the sum 2.25.
  EXPECT_NE(text.find(R"(flotilla_test_stage_latency_seconds_bucket{stage="commit_to_bundle",le="0.25"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(flotilla_test_stage_latency_seconds_sum{stage="commit_to_bundle"} 2.25)"), std::string::npos)
      << text;
  EXPECT_EQ(lines_.size(), 0U);
}

TEST_F(StageLatencyTest, AnEventAheadOfThisHostsClockIsCountedAsSkewAndObservedAsZero) {
  StageLatency stages(metrics_, &clock_, std::chrono::minutes(1));
  for (int i = 0; i < 3; ++i) {
    stages.observe(Stage::kDeployToApplied, formatRfc3339(clock_.now() + std::chrono::seconds(5)));
  }
  EXPECT_EQ(metrics_.value("stage_latency_clock_skew_total", {{"stage", "deploy_to_applied"}}), 3);
  EXPECT_EQ(metrics_.value("stage_latency_seconds", {{"stage", "deploy_to_applied"}}), 3);
  EXPECT_NE(metrics_.exposition().find(R"(flotilla_test_stage_latency_seconds_sum{stage="deploy_to_applied"} 0)"),
            std::string::npos);
  EXPECT_EQ(linesContaining("ahead of this host's clock"), 1U);  // once per interval, not per event
  clock_.advance(std::chrono::minutes(1));
  stages.observe(Stage::kDeployToApplied, clock_.now() + std::chrono::seconds(1));
  EXPECT_EQ(linesContaining("ahead of this host's clock"), 2U);
}

TEST_F(StageLatencyTest, AnUnparsableTimeIsCountedAndNotObserved) {
  StageLatency stages(metrics_, &clock_);
  stages.observe(Stage::kStatusToRecorded, "yesterday");
  stages.observe(Stage::kStatusToRecorded, "");
  EXPECT_EQ(metrics_.value("stage_latency_unmeasured_total", {{"stage", "status_to_recorded"}}), 2);
  EXPECT_EQ(metrics_.value("stage_latency_seconds", {{"stage", "status_to_recorded"}}), 0);
  EXPECT_EQ(linesContaining("not an RFC 3339 time"), 1U);
  EXPECT_EQ(linesContaining("yesterday"), 1U);
}

TEST(StageNames, EveryStageHasItsLabel) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kStageCount; ++i) {
    names.insert(stageName(static_cast<Stage>(i)));
  }
  EXPECT_EQ(names.size(), kStageCount);
  EXPECT_EQ(names.count("unknown"), 0U);
}

}  // namespace
}  // namespace flotilla::service
