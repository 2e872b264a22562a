// The lease that the scheduler's replicas compete for, against a real nats-server: one holder at a time, a standby
// that takes over only once the holder has been silent for its ttl, a release that hands over at once, and a holder
// that stops counting itself the holder when it cannot renew. The rounds are driven with explicit time points, so
// nothing here sleeps for a ttl except the loop test.
#include "flotilla/service/lease.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/poll.h"

namespace flotilla::service {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr milliseconds kTtl{3000};

class LeaseTest : public harness::HubTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(startHub("lease-test")); }

  std::unique_ptr<Lease> lease(const std::string& holder, Metrics& metrics) {
    return std::make_unique<Lease>(hub_.clusters, metrics,
                                   LeaseOptions{.key = "lease.test", .holder = holder, .ttl = kTtl});
  }
  std::string storedHolder() {
    auto entry = hub_.clusters->get("lease.test");
    EXPECT_TRUE(entry.ok());
    auto parsed = Json::parse(entry.ok() ? entry->value : "");
    return parsed.ok() ? parsed->getString("holder") : "(unreadable)";
  }

  Metrics a_metrics_{"lease_a"};
  Metrics b_metrics_{"lease_b"};
};

TEST_F(LeaseTest, TheFirstReplicaTakesAFreeLeaseAndAnotherWaits) {
  auto a = lease("a", a_metrics_);
  auto b = lease("b", b_metrics_);
  const auto now = steady_clock::now();
  EXPECT_EQ(a->tryAcquire(now), LeaseRound::kHeld);
  EXPECT_TRUE(a->held());
  EXPECT_EQ(b->tryAcquire(now), LeaseRound::kWaiting);
  EXPECT_FALSE(b->held());
  EXPECT_EQ(b->holder(), "a");
  EXPECT_EQ(storedHolder(), "a");
  EXPECT_EQ(a_metrics_.value("lease_acquired_total", {{"how", "free"}}), 1);
  EXPECT_EQ(a_metrics_.value("lease_held"), 1);
  EXPECT_EQ(b_metrics_.value("lease_held"), 0);
}

TEST_F(LeaseTest, AStandbyTakesOverOnlyAfterTheHolderWasSilentForItsTtl) {
  auto a = lease("a", a_metrics_);
  auto b = lease("b", b_metrics_);
  const auto start = steady_clock::now();
  ASSERT_EQ(a->tryAcquire(start), LeaseRound::kHeld);
  ASSERT_EQ(b->tryAcquire(start), LeaseRound::kWaiting);
  // Renewed: the standby's clock starts again from the new revision.
  ASSERT_EQ(a->renew(start + kTtl / 3), LeaseRound::kHeld);
  EXPECT_EQ(b->tryAcquire(start + kTtl), LeaseRound::kWaiting);
  EXPECT_EQ(b->tryAcquire(start + kTtl + kTtl / 2), LeaseRound::kWaiting);
  // Silent for a whole ttl since b saw that revision.
  EXPECT_EQ(b->tryAcquire(start + 2 * kTtl), LeaseRound::kHeld);
  EXPECT_EQ(storedHolder(), "b");
  EXPECT_EQ(b_metrics_.value("lease_acquired_total", {{"how", "expired"}}), 1);
  // The old holder, back from its pause, finds its revision overwritten and steps down.
  EXPECT_EQ(a->renew(start + 2 * kTtl), LeaseRound::kLost);
  EXPECT_FALSE(a->held());
  EXPECT_EQ(a_metrics_.value("lease_lost_total", {{"reason", "taken"}}), 1);
  EXPECT_EQ(a_metrics_.value("lease_held"), 0);
  EXPECT_EQ(storedHolder(), "b");
}

TEST_F(LeaseTest, AReleasedLeaseIsTakenAtOnce) {
  auto a = lease("a", a_metrics_);
  auto b = lease("b", b_metrics_);
  const auto now = steady_clock::now();
  ASSERT_EQ(a->tryAcquire(now), LeaseRound::kHeld);
  ASSERT_EQ(b->tryAcquire(now), LeaseRound::kWaiting);
  a->release();
  EXPECT_FALSE(a->held());
  EXPECT_EQ(storedHolder(), "");
  EXPECT_EQ(b->tryAcquire(now), LeaseRound::kHeld);
  EXPECT_EQ(b_metrics_.value("lease_acquired_total", {{"how", "released"}}), 1);
}

TEST_F(LeaseTest, AReplicaRestartedUnderItsOwnIdTakesItsLeaseAtOnce) {
  auto before = lease("a", a_metrics_);
  ASSERT_EQ(before->tryAcquire(steady_clock::now()), LeaseRound::kHeld);
  before.reset();  // killed: no release
  auto after = lease("a", b_metrics_);
  EXPECT_EQ(after->tryAcquire(steady_clock::now()), LeaseRound::kHeld);
  EXPECT_EQ(b_metrics_.value("lease_acquired_total", {{"how", "own"}}), 1);
}

TEST_F(LeaseTest, AnUnreadableValueIsTakenOverAfterTheTtl) {
  ASSERT_TRUE(hub_.clusters->put("lease.test", "not json").ok());
  auto b = lease("b", b_metrics_);
  const auto start = steady_clock::now();
  EXPECT_EQ(b->tryAcquire(start), LeaseRound::kWaiting);
  EXPECT_EQ(b->tryAcquire(start + kTtl), LeaseRound::kHeld);
  EXPECT_EQ(storedHolder(), "b");
}

TEST_F(LeaseTest, AHolderThatCannotRenewStopsCountingItselfTheHolder) {
  auto a = lease("a", a_metrics_);
  const auto start = steady_clock::now();
  ASSERT_EQ(a->tryAcquire(start), LeaseRound::kHeld);
  ASSERT_TRUE(nats_->stop().ok());
  // Within two thirds of the ttl a failed renewal is tried again; after that the holder steps down, before any
  // standby (which waits a whole ttl) could take over.
  EXPECT_EQ(a->renew(start + kTtl / 3), LeaseRound::kError);
  EXPECT_EQ(a_metrics_.value("lease_errors_total", {{"op", "renew"}}), 1);
  EXPECT_EQ(a->renew(start + kTtl * 2 / 3), LeaseRound::kLost);
  EXPECT_FALSE(a->held());
  EXPECT_EQ(a_metrics_.value("lease_lost_total", {{"reason", "unrenewed"}}), 1);
}

TEST_F(LeaseTest, TheLoopHandsTheLeaseToTheStandbyWhenTheHolderDies) {
  auto a = lease("a", a_metrics_);
  auto b = lease("b", b_metrics_);
  std::atomic<int> a_acquired{0};
  std::atomic<int> b_acquired{0};
  std::atomic<int> a_lost{0};
  a->start([&] { ++a_acquired; }, [&] { ++a_lost; });
  ASSERT_TRUE(harness::waitUntil([&] { return a_acquired.load() == 1; }, std::chrono::seconds(10)));
  b->start([&] { ++b_acquired; }, [] {});
  // a keeps renewing: b stays a standby for longer than a ttl.
  std::this_thread::sleep_for(kTtl + kTtl / 2);
  EXPECT_EQ(b_acquired.load(), 0);
  EXPECT_TRUE(a->held());
  a->stop();  // dies without releasing
  ASSERT_TRUE(harness::waitUntil([&] { return b_acquired.load() == 1; }, std::chrono::seconds(20)));
  EXPECT_TRUE(b->held());
  EXPECT_EQ(a_lost.load(), 0);
  b->release();
  EXPECT_EQ(storedHolder(), "");
}

}  // namespace
}  // namespace flotilla::service
