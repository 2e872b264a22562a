#include "flotilla/service/background_thread.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace flotilla::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

TEST(BackgroundThreadTest, WakeEndsOneSleepAndStopEndsTheLoop) {
  BackgroundThread thread;
  std::atomic<int> rounds{0};
  thread.start([&] {
    while (thread.sleepFor(seconds(60))) {
      ++rounds;
    }
  });
  thread.wake();
  const auto deadline = steady_clock::now() + seconds(10);
  while (rounds.load() == 0 && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(rounds.load(), 1);
  const auto stop_started = steady_clock::now();
  thread.stop();
  EXPECT_LT(steady_clock::now() - stop_started, seconds(10));  // not the 60 s of the sleep
  EXPECT_TRUE(thread.stopping());
  EXPECT_EQ(rounds.load(), 1);
  thread.stop();  // idempotent
}

TEST(BackgroundThreadTest, SleepBeforeStartTimesOutAndStopMakesItFalse) {
  BackgroundThread thread;
  EXPECT_FALSE(thread.stopping());
  EXPECT_TRUE(thread.sleepFor(milliseconds(1)));
  thread.stop();
  EXPECT_FALSE(thread.sleepFor(seconds(60)));
  // A start after stop() runs again.
  std::atomic<bool> ran{false};
  thread.start([&] { ran = true; });
  thread.stop();
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace flotilla::service
