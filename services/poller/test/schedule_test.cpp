// Unit tests of the poll schedule: phases, grid times, backoff, jitter, time formatting.
#include "flotilla/poller/schedule.h"

#include <set>

#include <gtest/gtest.h>

namespace flotilla::poller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// GitRepos with equal intervals get different, stable phases inside the interval.
TEST(PollerScheduleTest, PhaseOffsetsDifferForEqualIntervals) {
  const Millis interval = seconds(15);
  EXPECT_NE(phaseOffset("fleet-default", "app-a", interval), phaseOffset("fleet-default", "app-b", interval));
  EXPECT_NE(phaseOffset("ws1", "app", interval), phaseOffset("ws2", "app", interval));
  // The same GitRepo always gets the same phase (restarts, replicas).
  EXPECT_EQ(phaseOffset("fleet-default", "app-a", interval), phaseOffset("fleet-default", "app-a", interval));

  std::set<int64_t> phases;
  for (int i = 0; i < 200; ++i) {
    Millis phase = phaseOffset("fleet-default", "repo-" + std::to_string(i), interval);
    EXPECT_GE(phase.count(), 0);
    EXPECT_LT(phase, interval);
    phases.insert(phase.count());
  }
  // 200 GitRepos over 15000 slots: nearly all distinct (a birthday collision or two is fine).
  EXPECT_GE(phases.size(), 195u);
  // And they spread over the whole interval rather than bunching at its start.
  EXPECT_LT(*phases.begin(), 1000);
  EXPECT_GT(*phases.rbegin(), 14000);
}

// A zero interval cannot be divided; the phase is 0.
TEST(PollerScheduleTest, PhaseOffsetOfZeroIntervalIsZero) {
  EXPECT_EQ(phaseOffset("ws", "x", Millis(0)).count(), 0);
}

// Poll times land on phase + k * interval, at least min_gap in the future.
TEST(PollerScheduleTest, NextGridTimeIsOnThePhaseGrid) {
  const Millis interval = seconds(15);
  const Millis phase = milliseconds(4200);
  const int64_t now = 1'764'670'000'000;  // an epoch time in ms
  int64_t next = nextGridTime(now, interval, phase, Millis(0));
  EXPECT_GE(next, now);
  EXPECT_LT(next, now + interval.count());
  EXPECT_EQ((next - phase.count()) % interval.count(), 0);

  // Exactly on a grid point with no gap: that point; with a gap: the next one.
  EXPECT_EQ(nextGridTime(next, interval, phase, Millis(0)), next);
  EXPECT_EQ(nextGridTime(next, interval, phase, milliseconds(1)), next + interval.count());
  // A gap of a quarter interval skips a grid point that is too close.
  EXPECT_EQ(nextGridTime(next - 100, interval, phase, interval / 4), next + interval.count());
}

// Two GitRepos with the same interval are polled at different times.
TEST(PollerScheduleTest, EqualIntervalsDoNotFireTogether) {
  const Millis interval = seconds(1);
  const int64_t now = 1'764'670'000'123;
  int64_t a = nextGridTime(now, interval, phaseOffset("ws", "a", interval), Millis(0));
  int64_t b = nextGridTime(now, interval, phaseOffset("ws", "b", interval), Millis(0));
  EXPECT_NE(a, b);
}

// Failures back off exponentially from the interval up to the cap.
TEST(PollerScheduleTest, BackoffDoublesUpToTheCap) {
  const Millis interval = seconds(15);
  const Millis cap = std::chrono::minutes(5);
  EXPECT_EQ(backoffDelay(1, interval, cap), seconds(15));
  EXPECT_EQ(backoffDelay(2, interval, cap), seconds(30));
  EXPECT_EQ(backoffDelay(3, interval, cap), seconds(60));
  EXPECT_EQ(backoffDelay(5, interval, cap), seconds(240));
  EXPECT_EQ(backoffDelay(6, interval, cap), cap);
  EXPECT_EQ(backoffDelay(1000, interval, cap), cap);  // no overflow
  // Sub-second intervals back off from 1 s.
  EXPECT_EQ(backoffDelay(1, milliseconds(200), seconds(4)), seconds(1));
  EXPECT_EQ(backoffDelay(3, seconds(1), seconds(4)), seconds(4));
  EXPECT_EQ(backoffDelay(4, seconds(1), seconds(4)), seconds(4));
}

// Jitter is small compared to the interval.
TEST(PollerScheduleTest, JitterIsBounded) {
  for (int i = 0; i < 100; ++i) {
    Millis jitter = pollJitter(seconds(15));
    EXPECT_GE(jitter.count(), 0);
    EXPECT_LE(jitter.count(), 500);
    EXPECT_LE(pollJitter(seconds(1)).count(), 50);
  }
  EXPECT_EQ(pollJitter(Millis(10)).count(), 0);
}

// Mirror-keyed phases and grid jitter: the same key gets the same phase and jitter (the GitRepos of one URL fire
// together); different keys spread; the jitter varies per grid point and stays bounded.
TEST(PollerScheduleTest, MirrorPhaseAndGridJitterAreSharedPerKey) {
  const Millis interval = seconds(10);
  EXPECT_EQ(phaseOffsetOf("mirror-a", interval), phaseOffsetOf("mirror-a", interval));
  EXPECT_EQ(phaseOffset("ws", "name", interval), phaseOffsetOf("ws/name", interval));
  std::set<int64_t> phases;
  std::set<int64_t> jitters;
  for (int i = 0; i < 50; ++i) {
    const std::string key = "mirror-" + std::to_string(i);
    phases.insert(phaseOffsetOf(key, interval).count());
    EXPECT_LT(phaseOffsetOf(key, interval), interval);
    const Millis jitter = gridJitter(key, 1'000'000, interval);
    EXPECT_EQ(jitter, gridJitter(key, 1'000'000, interval));
    EXPECT_GE(jitter.count(), 0);
    EXPECT_LE(jitter.count(), 500);
    jitters.insert(gridJitter("mirror-a", 1'000'000 + i * 10'000, interval).count());
  }
  EXPECT_GT(phases.size(), 40u);
  EXPECT_GT(jitters.size(), 10u);
  EXPECT_EQ(gridJitter("k", 0, Millis(10)).count(), 0);
}

TEST(PollerScheduleTest, FormatsEpochMillisAsRfc3339) {
  EXPECT_EQ(formatEpochMillis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(formatEpochMillis(1'764'669'600'123), "2025-12-02T10:00:00.123Z");
}

}  // namespace
}  // namespace flotilla::poller
