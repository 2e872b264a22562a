// The `sources` store fills up (a small cap on a real nats-server): the poller stays up, the GitRepo's status says
// which store is full, the refused writes are counted, and after garbage collection frees space the newest commit
// is published without anyone stepping in.
#include <random>

#include "poller_fixture.h"

namespace flotilla::poller {
namespace {

using namespace flotilla::poller::poller_test;

//! `size` bytes of text that does not repeat, so every commit's archive is new and as large as its content.
std::string noise(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(size, '0');
  for (char& c : out) {
    c = kHex[rng() % 16];
  }
  return out;
}

using PollerStoreFullTest = PollerIntegrationTest;

TEST_F(PollerStoreFullTest, FullSourcesStoreIsReportedAndThePollerRecoversAfterGarbageCollection) {
  ASSERT_NO_FATAL_FAILURE(capStore(service::kSourcesObjects, int64_t{700} << 10));
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", noise(size_t{200} << 10, 0)}}, "c0").ok());
  // Garbage collection measures ages on a clock the test steps: until it does, every archive is young and the
  // early pass a full store asks for frees nothing, so the full store stays full for as long as the test looks.
  ManualClock clock(std::chrono::system_clock::now());
  PollerOptions options = defaultOptions();
  options.gc_clock = &clock;
  Poller& poller = startPoller(options);
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));

  // New commits until the store refuses one (each archive is ~270 KB of a 700 KiB store).
  std::string newest;
  bool full = false;
  for (uint64_t i = 1; i <= 8 && !full; ++i) {
    auto head =
        git_->commitFiles("app", "main", {{"simple/a.yaml", noise(size_t{200} << 10, i)}}, "c" + std::to_string(i));
    ASSERT_TRUE(head.ok());
    newest = *head;
    ASSERT_TRUE(waitFor([&] {
      auto s = status("app");
      return s && (s->commit == newest || s->last_error_kind == "StoreFull");
    }));
    full = status("app")->last_error_kind == "StoreFull";
  }
  ASSERT_TRUE(full) << "the capped store never filled";
  auto stuck = *status("app");
  EXPECT_NE(stuck.last_error.find("object store sources is full"), std::string::npos) << stuck.last_error;
  EXPECT_NE(stuck.commit, newest);
  EXPECT_GE(metric("store_full_total", {{"store", "sources"}}), 1);
  std::string why;
  EXPECT_TRUE(poller.ready(why)) << why;  // up and answering, only this GitRepo waits
  // It keeps retrying (with backoff), never giving the commit up.
  const int64_t failures = stuck.failures;
  ASSERT_TRUE(waitFor([&] { return status("app")->failures > failures; }));

  clock.advance(std::chrono::hours(2));  // past the grace period of every archive
  auto pass = poller.collectSources();   // (a pass the next refused write asks for may have run first)
  ASSERT_TRUE(pass.ok()) << pass.error().describe();
  EXPECT_GE(metric("gc_deleted_objects_total", {{"store", "sources"}}), 1);
  EXPECT_TRUE(hub_.sources->info(stuck.source_object).ok()) << "the poll status names it: kept";

  ASSERT_TRUE(waitFor([&] {
    auto s = status("app");
    return s && s->commit == newest && s->last_error.empty();
  }));
  auto [event, msg_id] = commitEvent(commitCount());
  EXPECT_EQ(event.commit, newest);
  EXPECT_EQ(archive(event.source_object).commit, newest);
}

}  // namespace
}  // namespace flotilla::poller
