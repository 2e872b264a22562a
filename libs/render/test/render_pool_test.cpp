// The render pool (render_pool.h): results consumed in index order whatever the thread timing, bounded
// concurrency and look-ahead, stop on a consumer failure, exceptions turned into errors.
#include "flotilla/render/render_pool.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace flotilla::render {
namespace {

RenderedBundle bundleNamed(size_t index) {
  RenderedBundle out;
  out.bundle = "b" + std::to_string(index);
  return out;
}

//! Items finish out of order: later ones are quicker.
void staggered(size_t index, size_t count) {
  std::this_thread::sleep_for(std::chrono::microseconds(200 * (count - index)));
}

TEST(RenderPool, ConsumesInIndexOrderWithBoundedConcurrencyAndLookAhead) {
  for (int parallelism : {1, 2, 4, 8}) {
    constexpr size_t kCount = 60;
    std::atomic<int> running{0};
    std::atomic<int> max_running{0};
    std::atomic<size_t> started{0};
    std::atomic<size_t> consumed{0};
    std::atomic<size_t> max_ahead{0};
    std::vector<std::string> order;
    RenderPoolOptions options{.parallelism = parallelism, .window = 6};
    auto status = renderInOrder(
        kCount, options,
        [&](size_t index) -> Result<RenderedBundle> {
          int now = ++running;
          for (int seen = max_running; now > seen && !max_running.compare_exchange_weak(seen, now);) {
          }
          size_t ahead = ++started - consumed;
          for (size_t seen = max_ahead; ahead > seen && !max_ahead.compare_exchange_weak(seen, ahead);) {
          }
          staggered(index, kCount);
          --running;
          return bundleNamed(index);
        },
        [&](size_t index, Result<RenderedBundle>& result) -> Status {
          EXPECT_TRUE(result.ok());
          EXPECT_EQ(result->bundle, "b" + std::to_string(index));
          order.push_back(result->bundle);
          ++consumed;
          return {};
        },
        [] {});
    ASSERT_TRUE(status.ok());
    ASSERT_EQ(order.size(), kCount);
    for (size_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(order[i], "b" + std::to_string(i)) << "parallelism " << parallelism;
    }
    EXPECT_LE(max_running.load(), parallelism);
    EXPECT_LE(max_ahead.load(), parallelism == 1 ? 1u : 6u + 1u);
  }
}

TEST(RenderPool, AFailedConsumerStopsThePoolAndReturnsItsError) {
  std::atomic<size_t> rendered{0};
  size_t consumed = 0;
  auto status = renderInOrder(
      100, RenderPoolOptions{.parallelism = 3},
      [&](size_t index) -> Result<RenderedBundle> {
        ++rendered;
        return bundleNamed(index);
      },
      [&](size_t index, Result<RenderedBundle>&) -> Status {
        ++consumed;
        if (index == 10) {
          return fail(ErrorKind::kTransient, "store unavailable");
        }
        return {};
      },
      [] {});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message, "store unavailable");
  EXPECT_EQ(consumed, 11u);
  EXPECT_LE(rendered.load(), 11u + 6u);  // at most the look-ahead window past the failure
}

TEST(RenderPool, ErrorsAndExceptionsReachTheConsumerInOrder) {
  std::vector<std::string> seen;
  auto status = renderInOrder(
      5, RenderPoolOptions{.parallelism = 2},
      [&](size_t index) -> Result<RenderedBundle> {
        if (index == 1) {
          return fail(ErrorKind::kInternal, "helm is gone");
        }
        if (index == 3) {
          throw std::runtime_error("boom");
        }
        return bundleNamed(index);
      },
      [&](size_t, Result<RenderedBundle>& result) -> Status {
        seen.push_back(result.ok() ? result->bundle : "error: " + result.error().message);
        return {};
      },
      [] {});
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0], "b0");
  EXPECT_EQ(seen[1], "error: helm is gone");
  EXPECT_EQ(seen[2], "b2");
  EXPECT_EQ(seen[3], "error: rendering threw: boom");
  EXPECT_EQ(seen[4], "b4");
}

TEST(RenderPool, IdleRunsWhileTheConsumerWaits) {
  std::atomic<int> idles{0};
  auto status = renderInOrder(
      2, RenderPoolOptions{.parallelism = 2, .idle_interval = std::chrono::milliseconds(5)},
      [&](size_t index) -> Result<RenderedBundle> {
        if (index == 0) {
          // Hold the first item until the consumer has reported progress while waiting for it.
          while (idles.load() < 3) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
        return bundleNamed(index);
      },
      [&](size_t, Result<RenderedBundle>&) -> Status { return {}; }, [&] { ++idles; });
  ASSERT_TRUE(status.ok());
  EXPECT_GE(idles.load(), 3);
}

TEST(RenderPool, NothingToRender) {
  bool called = false;
  auto status = renderInOrder(
      0, RenderPoolOptions{.parallelism = 4},
      [&](size_t) -> Result<RenderedBundle> {
        called = true;
        return RenderedBundle{};
      },
      [&](size_t, Result<RenderedBundle>&) -> Status { return {}; }, [] {});
  EXPECT_TRUE(status.ok());
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace flotilla::render
