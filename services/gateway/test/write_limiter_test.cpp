// The gateway's write bound: a token bucket and a queue that coalesces repeated changes (write_limiter.h).
#include "flotilla/gateway/write_limiter.h"

#include <thread>

#include <gtest/gtest.h>

namespace flotilla::gateway {
namespace {

using Clock = TokenBucket::Clock;
using std::chrono::milliseconds;

TEST(TokenBucket, GivesTheBurstAtOnceThenOneTokenPerIntervalAndNeverMoreThanTheBurst) {
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  TokenBucket bucket(20, 5, t0);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(bucket.waitFrom(t0), Clock::duration::zero()) << i;
    bucket.take();
  }
  const auto wait = bucket.waitFrom(t0);
  EXPECT_GT(wait, milliseconds(49));
  EXPECT_LE(wait, milliseconds(50));
  EXPECT_EQ(bucket.waitFrom(t0 + milliseconds(50)), Clock::duration::zero());
  bucket.take();
  // A long quiet spell saves at most the burst.
  const auto later = t0 + std::chrono::minutes(10);
  int at_once = 0;
  while (bucket.waitFrom(later) == Clock::duration::zero()) {
    bucket.take();
    ++at_once;
  }
  EXPECT_EQ(at_once, 5);
}

TEST(TokenBucket, UnderSteadyDemandWritesAtMostTheRate) {
  auto now = Clock::time_point{} + std::chrono::hours(1);
  TokenBucket bucket(20, 20, now);
  const auto end = now + std::chrono::seconds(100);
  int writes = 0;
  while (now < end) {
    const auto wait = bucket.waitFrom(now);
    if (wait == Clock::duration::zero()) {
      bucket.take();
      ++writes;
    } else {
      now += wait;
    }
  }
  EXPECT_LE(writes, 20 * 100 + 20);
  EXPECT_GE(writes, 20 * 100 - 1);
}

TEST(CoalescingQueue, AKeyWaitsOnceInFirstQueuedOrder) {
  CoalescingQueue queue;
  EXPECT_TRUE(queue.push("a"));
  EXPECT_TRUE(queue.push("b"));
  EXPECT_FALSE(queue.push("a"));  // coalesced
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.pop(milliseconds(0)), "a");
  EXPECT_TRUE(queue.push("a"));  // popped: may wait again
  EXPECT_EQ(queue.pop(milliseconds(0)), "b");
  EXPECT_EQ(queue.pop(milliseconds(0)), "a");
  EXPECT_EQ(queue.pop(milliseconds(10)), std::nullopt);
}

TEST(CoalescingQueue, CloseWakesAWaitingPop) {
  CoalescingQueue queue;
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    queue.close();
  });
  EXPECT_EQ(queue.pop(std::chrono::seconds(30)), std::nullopt);
  closer.join();
  EXPECT_FALSE(queue.push("late"));
}

TEST(RetrySchedule, AFailedKeyIsDueAfterABackoffThatDoublesUpToTheMaxAndResetsOnSuccess) {
  RetrySchedule retries(milliseconds(500), milliseconds(1500));
  const Clock::time_point start{};
  EXPECT_EQ(retries.failed("a", start), milliseconds(500));
  EXPECT_EQ(retries.untilNext(start), milliseconds(500));
  EXPECT_TRUE(retries.due(start + milliseconds(499)).empty());
  EXPECT_EQ(retries.due(start + milliseconds(500)), std::vector<std::string>{"a"});
  EXPECT_FALSE(retries.untilNext(start).has_value());
  EXPECT_EQ(retries.failed("a", start), milliseconds(1000));
  EXPECT_EQ(retries.failed("a", start), milliseconds(1500));
  EXPECT_EQ(retries.failed("a", start), milliseconds(1500));
  retries.succeeded("a");
  EXPECT_EQ(retries.failed("a", start), milliseconds(500));
}

TEST(RetrySchedule, KeysAreDueEachAfterItsOwnBackoff) {
  RetrySchedule retries(milliseconds(100), milliseconds(1000));
  const Clock::time_point start{};
  retries.failed("slow", start);
  retries.failed("slow", start);  // now due at start + 200 ms
  retries.failed("fast", start);  // due at start + 100 ms
  EXPECT_EQ(retries.size(), 2U);
  EXPECT_EQ(retries.untilNext(start), milliseconds(100));
  EXPECT_EQ(retries.due(start + milliseconds(150)), std::vector<std::string>{"fast"});
  EXPECT_EQ(retries.due(start + milliseconds(250)), std::vector<std::string>{"slow"});
  EXPECT_EQ(retries.size(), 0U);
}

}  // namespace
}  // namespace flotilla::gateway
