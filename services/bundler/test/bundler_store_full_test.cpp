// The `manifests` store is full (a small cap on a real nats-server): the bundler stays up, the bundle's render
// status says which store is full, the commit waits (parked, never terminated), and once garbage collection frees
// space the bundle is stored and published without a new commit.
#include "bundler_fixture.h"

namespace flotilla::bundler {
namespace {

using namespace std::chrono_literals;
using namespace flotilla::bundler::bundler_test;

using BundlerStoreFullTest = BundlerIntegrationTest;

TEST_F(BundlerStoreFullTest, FullManifestsStoreIsReportedAndTheCommitProceedsAfterGarbageCollection) {
  ASSERT_NO_FATAL_FAILURE(capStore(service::kManifestsObjects, int64_t{512} << 10));
  // Garbage no record names (a manifest of a bundle deleted long ago) takes most of the store.
  ASSERT_TRUE(hub_.manifests->put("orphan", std::string(size_t{300} << 10, 'o')).ok());
  // Ages are measured on a clock the test steps: until it does, the orphan is young and the early pass that a
  // full store asks for keeps it, so the store stays full for as long as the test looks.
  ManualClock clock(std::chrono::system_clock::now());
  BundlerOptions opts = options();
  opts.handler.clock = &clock;
  // The commit's time budget runs on the same clock: the two hours the test steps must not use it up.
  opts.handler.commit_budget = std::chrono::hours(24);
  bundler_ = std::make_unique<Bundler>(handlerBus(), renderers_, metrics_, opts);
  ASSERT_TRUE(bundler_->start().ok());

  publishCommit(kCommit1, bulkyBundle("big", 1, size_t{250} << 10, 'b'), {"big"});
  ASSERT_TRUE(harness::waitUntil(
      [&] {
        // The metric is counted after the status is written (the status belongs to the store step, the count to
        // the consumer's verdict), so both are awaited.
        auto status = renderStatus("repo-big");
        return status && status->error && status->error->message.find("is full") != std::string::npos &&
               metrics_.value("store_full_total", {{"store", "manifests"}}) >= 1;
      },
      30s));
  auto waiting = *renderStatus("repo-big");
  EXPECT_NE(waiting.error->message.find("object store manifests is full"), std::string::npos) << waiting.error->message;
  EXPECT_EQ(waiting.commit, kCommit1);
  std::string why;
  EXPECT_TRUE(bundler_->ready(why)) << why;
  expectNoMoreEvents();
  EXPECT_EQ(metrics_.value("messages_terminated_total", {{"consumer", "commits"}, {"reason", "StoreFull"}}), 0);

  clock.advance(std::chrono::hours(2));  // the orphan is now past the grace period
  auto pass = bundler_->collectManifests();
  ASSERT_TRUE(pass.ok()) << pass.error().describe();
  EXPECT_EQ(hub_.manifests->info("orphan").error().kind, ErrorKind::kNotFound);
  EXPECT_GE(metrics_.value("gc_deleted_bytes_total", {{"store", "manifests"}}), 300.0 * 1024);

  auto events = readEvents(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].commit, kCommit1);
  EXPECT_TRUE(hub_.manifests->info(events[0].manifest_id).ok());
  ASSERT_TRUE(harness::waitUntil([&] { return renderStatus("repo-big") && !renderStatus("repo-big")->error; }, 10s));
}

}  // namespace
}  // namespace flotilla::bundler
