// HandlerOptions::commit_budget: one commit cannot hold a bundler worker forever. The budget is measured with a
// clock that moves a minute each time it is read, so the test needs no real waiting and no timing assumptions:
// the commit starts at T, its first bundle is checked at T+1 min (inside a 90 s budget), its second at T+2 min.
#include <atomic>

#include "bundler_fixture.h"

namespace flotilla::bundler::bundler_test {
namespace {

//! A clock whose monotonic time advances one minute at every read.
class SteppingClock final : public Clock {
 public:
  [[nodiscard]] SystemTime now() const override { return std::chrono::system_clock::now(); }
  [[nodiscard]] SteadyTime steadyNow() const override { return SteadyTime(std::chrono::minutes(++reads_)); }
  void sleepFor(Duration /*duration*/) override {}

 private:
  mutable std::atomic<int64_t> reads_{0};
};

class CommitBudgetTest : public BundlerIntegrationTest {
 protected:
  void startWithBudget() {
    BundlerOptions budgeted = options();
    budgeted.handler.commit_budget = std::chrono::seconds(90);
    budgeted.handler.render_parallelism = 1;  // bundles checked one after the other
    budgeted.handler.clock = &clock_;
    bundler_ = std::make_unique<Bundler>(handlerBus(), renderers_, metrics_, budgeted);
    auto started = bundler_->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
  }

  SteppingClock clock_;
};

TEST_F(CommitBudgetTest, ACommitOverItsBudgetIsRejectedAndOthersStillRender) {
  ASSERT_NO_FATAL_FAILURE(startWithBudget());
  publishCommit(kCommit1, threeBundles(), {"apps/*"});
  // The first bundle renders and is published; the second would start after the budget: the commit is rejected.
  auto events = readEvents(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "time_budget"}}) == 1; }));
  EXPECT_TRUE(eventually([&] {
    auto info = hub_.js->consumerInfo(service::kCommitsStream, std::string(kConsumerName));
    return info.ok() && info->num_ack_pending == 0 && info->num_pending == 0;  // not redelivered
  }));
  expectNoMoreEvents(500ms);
  EXPECT_TRUE(record(events[0].bundle).has_value());

  // Another GitRepo's commit with one bundle fits in its own budget and renders.
  putGitRepoNamed("other");
  publishCommitFor("other", kCommit2, {{"one/cm.yaml", configMap("one")}});
  auto other = readEvents(1);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].gitrepo, "other");
  EXPECT_EQ(metrics_.value("commits_handled_total", {{"outcome", "time_budget"}}), 1);
}

}  // namespace
}  // namespace flotilla::bundler::bundler_test
