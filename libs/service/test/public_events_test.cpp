// Public CloudEvents (service::PublicEvents): queued without waiting on the server, published in batches with a
// Nats-Msg-Id per fact (a second announcement of the same fact is dropped), and — the degraded path — a stream that
// does not take them costs a log line and public_event_failures_total, never a blocked or failed caller.
#include "flotilla/service/public_events.h"

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/harness/poll.h"
#include "flotilla/service/hub.h"

namespace flotilla::service {
namespace {

constexpr std::chrono::seconds kWait{20};

class PublicEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = harness::NatsServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    server_ = std::move(server).value();
    auto hub = connectHub(bus::ConnectOptions{.servers = {server_->url()}, .name = "public-events-test"},
                          HubAccess::kProvision, nullptr);
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    hub_ = std::move(hub).value();
    log::setSink([this](std::string_view line) {
      std::lock_guard lock(lines_mutex_);
      lines_.emplace_back(line);
    });
  }
  void TearDown() override { log::setSink(nullptr); }

  static events::CloudEvent commitEvent(const std::string& id) {
    return events::toCloudEvent("io.flotilla.gitrepo.commit", "/flotilla/test", "ws/repo", Json::obj({{"n", 1}}), id);
  }

  uint64_t storedEvents() {
    auto info = hub_.js->streamInfo(kEventsStream);
    return info.ok() ? info->messages : 0;
  }

  size_t linesContaining(std::string_view text) {
    std::lock_guard lock(lines_mutex_);
    size_t count = 0;
    for (const auto& line : lines_) {
      count += line.find(text) != std::string::npos ? 1 : 0;
    }
    return count;
  }

  std::unique_ptr<harness::NatsServer> server_;
  Hub hub_;
  Metrics metrics_{"publictest"};
  std::mutex lines_mutex_;
  std::vector<std::string> lines_;
};

TEST_F(PublicEventsTest, EventsAreStoredOncePerFact) {
  PublicEvents announcer(hub_.js, metrics_);
  const std::string subject = events::eventsSubject("gitrepo", {"ws", "repo"});
  announcer.send(commitEvent("commit/ws/repo/c1"), subject);
  announcer.send(commitEvent("commit/ws/repo/c1"), subject);  // the same fact again (a redelivery): dropped
  announcer.send(commitEvent("commit/ws/repo/c2"), subject);
  ASSERT_TRUE(harness::waitUntil(
      [&] {
        return metrics_.value("public_events_total", {{"type", "io.flotilla.gitrepo.commit"}}) == 3;
      },
      kWait));
  EXPECT_EQ(storedEvents(), 2u);
  auto last = hub_.js->getLastMessage(kEventsStream, subject);
  ASSERT_TRUE(last.ok()) << last.error().describe();
  auto decoded = events::decodeCloudEvent(Json::parse(last->data()).value());
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(decoded->id, "commit/ws/repo/c2");
  EXPECT_EQ(metrics_.value("public_event_failures_total", {{"reason", "publish"}}), 0);
}

// No stream takes the events: send() returns at once every time, the batch is dropped, counted and logged.
TEST_F(PublicEventsTest, AnEventNoStreamTakesIsCountedAndLoggedAndNeverBlocksTheCaller) {
  ASSERT_TRUE(hub_.js->deleteStream(kEventsStream).ok());
  PublicEvents announcer(hub_.js, metrics_);
  for (int i = 0; i < 5; ++i) {
    announcer.send(commitEvent("commit/ws/repo/" + std::to_string(i)),
                   events::eventsSubject("gitrepo", {"ws", "repo"}));
  }
  ASSERT_TRUE(harness::waitUntil(
      [&] {
        return metrics_.value("public_event_failures_total", {{"reason", "publish"}}) >= 5;
      },
      kWait));
  EXPECT_EQ(metrics_.value("public_events_total", {{"type", "io.flotilla.gitrepo.commit"}}), 0);
  EXPECT_GE(linesContaining("cannot publish public events; they are dropped"), 1u);
}

// A queue at its bound drops the newest event (counted, logged) instead of growing while the server is away.
TEST_F(PublicEventsTest, AFullQueueDropsTheNewestEvent) {
  PublicEvents announcer(nullptr, metrics_, 0);
  announcer.send(commitEvent("commit/ws/repo/c1"), events::eventsSubject("gitrepo", {"ws", "repo"}));
  EXPECT_EQ(metrics_.value("public_event_failures_total", {{"reason", "queue-full"}}), 1);
  EXPECT_EQ(linesContaining("public event dropped: too many are waiting to be published"), 1u);
}

}  // namespace
}  // namespace flotilla::service
