#include "flotilla/events/cloudevents.h"

#include <gtest/gtest.h>

#include "flotilla/events/subjects.h"
#include "flotilla/testing/expect.h"

namespace flotilla::events {
namespace {

using testing::expectMentionsAll;

TEST(CloudEventsTest, EncodesStructuredModeAndRoundTrips) {
  CloudEvent e = toCloudEvent(cloudEventType("Bundle", "Ready"), "/flotilla/scheduler", "ws/web",
                              Json::obj({{"bundle", "web"}}), "id-1", "2026-12-02T10:00:00Z");
  EXPECT_EQ(e.type, "io.flotilla.bundle.ready");
  Json json = encode(e);
  EXPECT_EQ(json.getString("specversion"), "1.0");
  EXPECT_EQ(json.getString("datacontenttype"), "application/json");
  EXPECT_EQ(json.getString("subject"), "ws/web");
  auto back = decodeCloudEvent(json);
  ASSERT_TRUE(back.ok()) << back.error().describe();
  EXPECT_EQ(*back, e);
}

TEST(CloudEventsTest, DefaultsIdAndTime) {
  CloudEvent e = toCloudEvent("io.flotilla.x.y", "/s", "", Json::object());
  EXPECT_EQ(e.id.size(), 32u);
  EXPECT_TRUE(isRfc3339(e.time)) << e.time;
}

// The scheduler's roll-up and cluster events get ids derived from what they say: equal facts, equal ids; a
// different state, summary, replaced record or registration, a different id.
TEST(CloudEventsTest, RollUpAndClusterIdsComeFromWhatTheEventSays) {
  Json ready = Json::obj({{"bundle", "web"}, {"summary", Json::obj({{"ready", 2}, {"desiredReady", 2}})}});
  const std::string id = bundleStateEventId("ws", "web", "Ready", 7, ready);
  EXPECT_EQ(id.rfind("summary/bundle/ws/web/Ready/7/", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("summary/bundle/ws/web/Ready/7/").size() + 16);
  EXPECT_EQ(bundleStateEventId("ws", "web", "Ready", 7, ready), id);
  EXPECT_NE(bundleStateEventId("ws", "web", "Ready", 9, ready), id) << "reached again later: a new event";
  EXPECT_NE(bundleStateEventId("ws", "web", "NotReady", 7, ready), id);
  EXPECT_NE(bundleStateEventId("ws", "api", "Ready", 7, ready), id);
  Json fewer = ready;
  fewer["summary"]["ready"] = 1;
  EXPECT_NE(bundleStateEventId("ws", "web", "Ready", 7, fewer), id);

  Json request = Json::obj({{"id", "r-1"}, {"cluster", "eu-1"}});
  const std::string registered = clusterEventId("ws", "eu-1", "registered", request);
  EXPECT_EQ(registered.rfind("cluster/ws/eu-1/registered/", 0), 0u) << registered;
  EXPECT_EQ(clusterEventId("ws", "eu-1", "registered", request), registered);
  EXPECT_NE(clusterEventId("ws", "eu-1", "updated", request), registered);
  Json again = request;
  again["id"] = "r-2";
  EXPECT_NE(clusterEventId("ws", "eu-1", "registered", again), registered) << "another registration";
}

TEST(CloudEventsTest, FromInternalEvents) {
  StatusEvent status{
      .id = "s1", .time = "2026-12-02T10:00:00Z", .cluster = "eu-1", .bundle = "web", .state = "ErrApplied"};
  CloudEvent s = toCloudEvent(status, "/flotilla/scheduler");
  EXPECT_EQ(s.type, "io.flotilla.bundledeployment.errapplied");
  EXPECT_EQ(s.subject, "eu-1/web");
  EXPECT_EQ(s.id, "s1");
  EXPECT_EQ(s.data, encode(status));
  EXPECT_EQ(eventsSubject("bundledeployment", {status.cluster, status.bundle}),
            "flotilla.events.bundledeployment.eu-1.web");

  BundleEvent bundle{.id = "b1", .time = "2026-12-02T10:00:00Z", .workspace = "ws", .bundle = "web"};
  EXPECT_EQ(toCloudEvent(bundle, "/b").type, "io.flotilla.bundle.rendered");
  bundle.error = RenderError{"f.yaml", 1, "bad"};
  EXPECT_EQ(toCloudEvent(bundle, "/b").type, "io.flotilla.bundle.failed");
  EXPECT_EQ(toCloudEvent(bundle, "/b").subject, "ws/web");
  bundle.deleted = true;
  EXPECT_EQ(toCloudEvent(bundle, "/b").type, "io.flotilla.bundle.deleted");

  CommitEvent commit{.id = "c1", .time = "2026-12-02T10:00:00Z", .workspace = "ws", .gitrepo = "repo"};
  EXPECT_EQ(toCloudEvent(commit, "/p").type, "io.flotilla.gitrepo.commit");
  DeployEvent deploy{.id = "d1", .time = "2026-12-02T10:00:00Z", .cluster = "eu-1", .bundle = "web"};
  EXPECT_EQ(toCloudEvent(deploy, "/s").type, "io.flotilla.bundledeployment.scheduled");
  deploy.remove = true;
  EXPECT_EQ(toCloudEvent(deploy, "/s").type, "io.flotilla.bundledeployment.deleted");
}

TEST(CloudEventsTest, DecodingIsStrictButAllowsExtensions) {
  Json json = encode(toCloudEvent("io.flotilla.a.b", "/s", "x", Json::object(), "1", "2026-12-02T10:00:00Z"));
  json["traceparent"] = "00-abc";
  EXPECT_TRUE(decodeCloudEvent(json).ok());
  Json bad = json;
  bad["specversion"] = "0.3";
  bad["Bad-Name"] = 1;
  bad["datacontenttype"] = "text/plain";
  bad.erase("id");
  auto r = decodeCloudEvent(bad);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message;
  expectMentionsAll(
      m, {"CloudEvent.specversion: unsupported specversion \"0.3\"", "CloudEvent.id: required field is missing",
          "CloudEvent.Bad-Name: not a CloudEvents attribute", "CloudEvent.datacontenttype: expected application/json"});
}

}  // namespace
}  // namespace flotilla::events
