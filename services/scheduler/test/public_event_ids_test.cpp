// The ids of the scheduler's roll-up and cluster CloudEvents (real nats-server -js): derived from what the event says
// (events::bundleStateEventId, events::clusterEventId; docs/events/cloudevents.md "Ids and duplicates"), with the
// Nats-Msg-Id event/<type>/<id>, so a fact announced twice is stored once and a subscriber can de-duplicate on `id`
// as it does for the poller's and the bundler's events.
#include <mutex>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/events/cloudevents.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/service/hub.h"
#include "scheduler_fixture.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;  // NOLINT(google-build-using-namespace): the shared fixture

//! A public event as a core subscriber sees it: every publish, also one JetStream drops as a duplicate.
struct Seen {
  std::string msg_id;
  events::CloudEvent event;
};

class PublicEventIdsTest : public SchedulerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("public-event-ids-test"));
    auto subscription = hub_.connection->subscribe("flotilla.events.>", "", [this](const bus::Message& message) {
      events::CloudEvent event;
      if (auto json = Json::parse(message.data()); json.ok()) {
        auto decoded = events::decodeCloudEvent(*json);
        EXPECT_TRUE(decoded.ok()) << message.data();
        event = decoded.ok() ? *decoded : events::CloudEvent{};
      }
      std::lock_guard lock(mutex_);
      seen_.push_back({.msg_id = message.header("Nats-Msg-Id").value_or(""), .event = std::move(event)});
    });
    ASSERT_TRUE(subscription.ok()) << subscription.error().describe();
    subscription_ = std::move(subscription).value();
    startSchedulerWith(testOptions());
  }

  void TearDown() override {
    subscription_.unsubscribe();  // before the connection goes
    SchedulerFixture::TearDown();
  }

  //! Every event seen so far of `type`.
  std::vector<Seen> seenOf(const std::string& type) {
    std::lock_guard lock(mutex_);
    std::vector<Seen> out;
    for (const auto& seen : seen_) {
      if (seen.event.type == type) {
        out.push_back(seen);
      }
    }
    return out;
  }

  //! The events FLOTILLA_EVENTS stores on `subject`.
  uint64_t stored(const std::string& subject) {
    auto info = hub_.js->streamInfo(service::kEventsStream, subject);
    EXPECT_TRUE(info.ok()) << info.error().describe();
    if (!info.ok()) {
      return 0;
    }
    auto it = info->subjects.find(subject);
    return it == info->subjects.end() ? 0 : it->second;
  }

  std::mutex mutex_;
  std::vector<Seen> seen_;
  bus::Subscription subscription_;
};

// registered, updated and deregistered: the id is cluster/<ws>/<cluster>/<what>/<digest of the data>, the
// Nats-Msg-Id event/<type>/<id>.
TEST_F(PublicEventIdsTest, ClusterEventsCarryIdsDerivedFromWhatTheySay) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "dev"}}).accepted);
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  ASSERT_TRUE(waitFor([&] { return !seenOf("io.flotilla.cluster.updated").empty(); }));
  ASSERT_TRUE(
      hub_.clusters
          ->put(events::clusterDeregisteredKey("c-1"),
                events::encode(events::ClusterDeregistration{.cluster = "c-1", .time = log::nowRfc3339()}).dump())
          .ok());
  ASSERT_TRUE(waitFor([&] { return !seenOf("io.flotilla.cluster.deregistered").empty(); }));
  std::set<std::string> ids;
  for (const std::string what : {"registered", "updated", "deregistered"}) {
    const std::string type = "io.flotilla.cluster." + what;
    auto seen = seenOf(type);
    ASSERT_EQ(seen.size(), 1u) << type;
    const events::CloudEvent& event = seen[0].event;
    EXPECT_EQ(event.id, events::clusterEventId(kWs, "c-1", what, event.data)) << type;
    EXPECT_EQ(seen[0].msg_id, "event/" + type + "/" + event.id);
    ids.insert(event.id);
  }
  EXPECT_EQ(ids.size(), 3u);
}

// A bundle's new state is announced while the summary recording it is staged; a write that fails is redone (the
// flush each second), announcing the state again. The repeats carry the same id — the summary record they replace
// has not changed — so FLOTILLA_EVENTS stores one event per state, not one per attempt. Faulted for real: the
// status bucket is full.
TEST_F(PublicEventIdsTest, ARollUpAnnouncedAgainWhileItsSummaryIsNotWrittenKeepsItsId) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  auto c1 = harness::agentDurable(hub_, "c-1");
  ASSERT_TRUE(waitFor([&] { return hub_.status->get(events::clusterSummaryKey("c-1")).ok(); }));
  const std::string status_stream = "KV_" + std::string(events::kStatusBucket);
  auto info = hub_.js->streamInfo(status_stream);
  ASSERT_TRUE(info.ok()) << info.error().describe();
  ASSERT_TRUE(hub_.js->applyLimits(status_stream, static_cast<int64_t>(info->bytes), true).ok());

  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  ASSERT_EQ(deploys(c1, 1).size(), 1u);
  ASSERT_TRUE(waitFor([&] { return metric("summary_write_failures_total") >= 3; }, 20s))
      << "the summary write must fail and be redone";
  EXPECT_FALSE(hub_.status->get(events::bundleSummaryKey(kWs, "repo-app")).ok());
  ASSERT_TRUE(hub_.js->applyLimits(status_stream, -1, true).ok());
  ASSERT_TRUE(waitFor([&] { return hub_.status->get(events::bundleSummaryKey(kWs, "repo-app")).ok(); }));

  const std::string subject = events::eventsSubject("bundle", {kWs, "repo-app"});
  std::set<std::string> types;
  size_t announced = 0;
  {
    std::lock_guard lock(mutex_);
    for (const auto& seen : seen_) {
      if (seen.event.subject == kWs + "/repo-app" && seen.event.type.rfind("io.flotilla.bundle.", 0) == 0) {
        ++announced;
        types.insert(seen.event.type);
        EXPECT_EQ(seen.event.id.rfind("summary/bundle/" + kWs + "/repo-app/", 0), 0u) << seen.event.id;
        EXPECT_EQ(seen.msg_id, "event/" + seen.event.type + "/" + seen.event.id);
      }
    }
  }
  ASSERT_FALSE(types.empty());
  EXPECT_GT(announced, types.size()) << "announced again while the summary was not written";
  for (const auto& type : types) {
    std::set<std::string> ids;
    for (const auto& seen : seenOf(type)) {
      ids.insert(seen.event.id);
    }
    EXPECT_EQ(ids.size(), 1u) << type << ": one fact, one id";
  }
  EXPECT_TRUE(waitFor([&] { return stored(subject) == types.size(); }, 3s))
      << stored(subject) << " stored for " << types.size() << " states";
}

}  // namespace
}  // namespace flotilla::scheduler
