#include <gtest/gtest.h>

#include "decode_expect.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/options.h"
#include "flotilla/model/state.h"

namespace flotilla::model {
namespace {

using test::expectRejected;

TEST(StateTest, OrderIsWorstFirst) {
  // DESIGN.md: ErrApplied > WaitApplied > Modified > OutOfSync > Pending > NotReady > Ready.
  for (size_t i = 0; i + 1 < kAllStates.size(); ++i) {
    EXPECT_GT(stateRank(kAllStates[i]), stateRank(kAllStates[i + 1]));
    EXPECT_EQ(worse(kAllStates[i], kAllStates[i + 1]), kAllStates[i]);
    EXPECT_EQ(worse(kAllStates[i + 1], kAllStates[i]), kAllStates[i]);
  }
  EXPECT_EQ(worse(BundleState::kReady, BundleState::kReady), BundleState::kReady);
  EXPECT_EQ(stateRank(BundleState::kErrApplied), 7);
  EXPECT_EQ(stateRank(BundleState::kReady), 1);
}

TEST(StateTest, NamesRoundTrip) {
  for (BundleState state : kAllStates) {
    auto parsed = parseState(stateName(state));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, state);
  }
  EXPECT_EQ(stateName(BundleState::kWaitApplied), "WaitApplied");
  auto bad = parseState("ready");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kInvalid);
}

TEST(StateTest, SummaryCountsAndWorst) {
  StateSummary s;
  EXPECT_TRUE(s.isReady());
  EXPECT_EQ(s.worst(), BundleState::kReady);
  EXPECT_EQ(s.describe(), "");
  s.add(BundleState::kReady, "c1");
  s.add(BundleState::kNotReady, "c2", "pulling image");
  s.add(BundleState::kWaitApplied, "c3");
  EXPECT_EQ(s.desired_ready, 3);
  EXPECT_EQ(s.ready(), 1);
  EXPECT_FALSE(s.isReady());
  EXPECT_EQ(s.worst(), BundleState::kWaitApplied);
  ASSERT_EQ(s.non_ready.size(), 2u);
  EXPECT_EQ(s.non_ready[0].name, "c3");  // worst first
  EXPECT_EQ(s.describe(), "WaitApplied(1), NotReady(1) [c3; c2: pulling image]");
}

TEST(StateTest, MergeSumsAndCapsDetails) {
  StateSummary a;
  StateSummary b;
  for (int i = 0; i < 8; ++i) {
    a.add(BundleState::kNotReady, "a" + std::to_string(i));
    b.add(BundleState::kModified, "b" + std::to_string(i));
  }
  b.add(BundleState::kErrApplied, "zz", "boom");
  b.add(BundleState::kReady, "ok");
  a.merge(b);
  EXPECT_EQ(a.desired_ready, 18);
  EXPECT_EQ(a.count(BundleState::kNotReady), 8);
  EXPECT_EQ(a.count(BundleState::kModified), 8);
  EXPECT_EQ(a.count(BundleState::kErrApplied), 1);
  EXPECT_EQ(a.ready(), 1);
  EXPECT_EQ(a.worst(), BundleState::kErrApplied);
  ASSERT_EQ(a.non_ready.size(), StateSummary::kMaxNonReadyDetails);
  EXPECT_EQ(a.non_ready[0], (NonReadyDetail{"zz", BundleState::kErrApplied, "boom"}));
  EXPECT_EQ(a.non_ready[1].state, BundleState::kModified);
  EXPECT_EQ(a.non_ready[9].state, BundleState::kNotReady);  // the least bad ones were dropped first
  // Merging is order-independent.
  StateSummary c;
  StateSummary d = b;
  StateSummary a2;
  for (int i = 0; i < 8; ++i) {
    a2.add(BundleState::kNotReady, "a" + std::to_string(i));
  }
  d.merge(a2);
  EXPECT_EQ(d, a);
}

TEST(StateTest, SummaryJsonRoundTripsInFleetShape) {
  StateSummary s;
  s.add(BundleState::kReady, "c1");
  s.add(BundleState::kErrApplied, "c2", "boom");
  s.add(BundleState::kPending);
  Json json = encodeStateSummary(s);
  EXPECT_EQ(json.dump(),
            R"({"desiredReady":3,"errApplied":1,"nonReadyResources":[{"bundleState":"ErrApplied","message":"boom",)"
            R"("name":"c2"}],"pending":1,"ready":1})");
  auto back = decodeStateSummary(json);
  ASSERT_TRUE(back.ok()) << back.error().describe();
  EXPECT_EQ(*back, s);
  auto bad = decodeStateSummary(Json::obj({{"ready", "1"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "summary.ready: expected a non-negative integer, got a string");
  expectRejected(
      decodeStateSummary(Json::obj({{"nonReadyResources", Json(Json::Array{Json::obj({{"bundleState", "Broken"}})})}}),
                         "status.summary"),
      {"status.summary.nonReadyResources[0].bundleState: unknown bundle state"});
  auto unknown = decodeStateSummary(Json::obj({{"readyy", 1}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "summary.readyy: unknown field (did you mean \"ready\"?)");
}

TEST(DurationTest, ParsesGoDurations) {
  struct Case {
    const char* text;
    int64_t ms;
  };
  for (const Case& c :
       {Case{"15s", 15'000}, Case{"1m30s", 90'000}, Case{"2h", 7'200'000}, Case{"500ms", 500}, Case{"0", 0},
        Case{"0s", 0}, Case{"1.5h", 5'400'000}, Case{"+5s", 5'000}, Case{"1h2m3s4ms", 3'723'004}, Case{"1500us", 1},
        Case{"2\xC2\xB5s", 0}, Case{".5s", 500}, Case{"3000000ns", 3}}) {
    auto d = parseDuration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.error().describe();
    EXPECT_EQ(d->count(), c.ms) << c.text;
  }
}

TEST(DurationTest, RejectsInvalidDurations) {
  for (const char* text : {"", "15", "s", "1x", "-5s", "1.2.3s", "15 s", "1e3s", "10 minutes", "9999999999999h"}) {
    auto d = parseDuration(text);
    EXPECT_FALSE(d.ok()) << text;
    if (!d.ok()) {
      EXPECT_EQ(d.error().kind, ErrorKind::kInvalid);
      EXPECT_NE(d.error().message.find("invalid duration"), std::string::npos);
    }
  }
}

TEST(DurationTest, FormatsLikeGo) {
  EXPECT_EQ(formatDuration(Duration{0}), "0s");
  EXPECT_EQ(formatDuration(Duration{500}), "500ms");
  EXPECT_EQ(formatDuration(Duration{15'000}), "15s");
  EXPECT_EQ(formatDuration(Duration{90'500}), "1m30.5s");
  EXPECT_EQ(formatDuration(Duration{7'200'000}), "2h0m0s");
  EXPECT_EQ(formatDuration(Duration{1'001}), "1.001s");
  for (int64_t ms : {1, 999, 1000, 61'000, 3'600'001, 86'400'000}) {
    auto back = parseDuration(formatDuration(Duration{ms}));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->count(), ms);
  }
}

TEST(IntOrPercentTest, ScalesLikeKubernetes) {
  EXPECT_EQ((IntOrPercent{10, true}).scaled(15, true), 2);
  EXPECT_EQ((IntOrPercent{10, true}).scaled(15, false), 1);
  EXPECT_EQ((IntOrPercent{100, true}).scaled(7, false), 7);
  EXPECT_EQ((IntOrPercent{3, false}).scaled(100, true), 3);
  EXPECT_EQ((IntOrPercent{25, true}).toString(), "25%");
  EXPECT_EQ((IntOrPercent{25, false}).toString(), "25");
}

}  // namespace
}  // namespace flotilla::model
