#include "flotilla/bundler/records.h"

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "sample_events.h"

namespace flotilla::bundler {
namespace {

using events::test::sampleBundleEvent;

TEST(BundleRecord, RoundTrip) {
  // The bundle's last good render, and a later commit of it that failed to render.
  events::BundleEvent good = sampleBundleEvent();
  stampEvent(good);
  BundleRecord record{.workspace = good.workspace,
                      .gitrepo = good.gitrepo,
                      .bundle = good.bundle,
                      .path = good.path,
                      .commit = "c2",
                      .commit_sequence = 42,
                      .last_good = good,
                      .error = events::RenderError{"app/x.yaml", 3, "app/x.yaml:3: bad"}};
  auto json = encode(record);
  EXPECT_EQ(json.getString("manifestID"), std::string(64, 'a'));
  auto decoded = decodeBundleRecord(json);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, record);
}

TEST(BundleRecord, StrictDecoding) {
  BundleRecord record{"ws", "repo", "b", ".", "c", 1, std::nullopt, std::nullopt};
  auto json = encode(record);
  json["surprise"] = 1;
  auto decoded = decodeBundleRecord(json);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.error().message.find("surprise: unknown field"), std::string::npos);
  auto wrong = encode(record);
  wrong["commitSequence"] = "x";
  EXPECT_FALSE(decodeBundleRecord(wrong).ok());
  auto other = encode(record);
  other["kind"] = "Other";
  EXPECT_FALSE(decodeBundleRecord(other).ok());
}

TEST(RenderStatus, RoundTripWithAndWithoutError) {
  RenderStatus status{"ws", "repo", "b", ".", "c", "", "m", events::RenderError{"f", 1, "f:1: x"}, "t"};
  auto decoded = decodeRenderStatus(encode(status));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, status);
  status.error.reset();
  EXPECT_TRUE(encode(status).find("error")->isNull());
  EXPECT_EQ(*decodeRenderStatus(encode(status)), status);
}

TEST(Keys, RenderStatusKeyEscapesNames) {
  EXPECT_EQ(renderStatusKey("fleet-default", "a.b"), "bundle-render.fleet-default.a=2Eb");
}

TEST(MsgId, StateAndDigest) {
  auto event = sampleBundleEvent();
  const std::string id = bundleMsgId(event);
  EXPECT_TRUE(startsWith(
      id, "bundle/fleet-default/simple-app/0123456789abcdef0123456789abcdef01234567/" + std::string(64, 'a') + "/"));
  // id and time do not change it (a redelivery re-stamps them).
  stampEvent(event);
  EXPECT_EQ(bundleMsgId(event), id);
  // Options do (a force-sync or a target change with the same commit and manifest must not be deduplicated).
  event.force_sync_generation = 2;
  EXPECT_NE(bundleMsgId(event), id);

  auto failed = sampleBundleEvent();
  failed.manifest_id.clear();
  failed.error = events::RenderError{"x", 1, "x:1: bad"};
  EXPECT_EQ(eventState(failed), "error");
  auto deleted = sampleBundleEvent();
  deleted.manifest_id.clear();
  deleted.deleted = true;
  EXPECT_EQ(eventState(deleted), "deleted");
  EXPECT_NE(bundleMsgId(deleted).find("/deleted/"), std::string::npos);
}

TEST(StampEvent, TheIdIsTheMsgId) {
  auto a = sampleBundleEvent();
  auto b = sampleBundleEvent();
  stampEvent(a);
  stampEvent(b);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.id, bundleMsgId(a));
  EXPECT_FALSE(a.time.empty());
}

//! A per-cluster render of sampleBundleEvent's bundle from `variants_object`.
events::BundleEvent perClusterEvent(const std::string& variants_object) {
  events::BundleEvent event = sampleBundleEvent();
  event.variants_object = variants_object;
  event.commit_sequence = 7;
  return event;
}

// The Nats-Msg-Id of a re-render: the commit render's id plus the revision of the BundleRecord it replaces, so an
// event equal to an earlier one (cluster facts A -> B -> A) still gets a new id, while the same re-render retried
// (same event, same revision) gets the same id and JetStream drops the copy.
TEST(RerenderMsgId, TheRevisionTellsEqualEventsApart) {
  const auto a = perClusterEvent("variants-" + std::string(64, 'a'));
  const auto b = perClusterEvent("variants-" + std::string(64, 'b'));
  // The commit render of A and a re-render back to A: the same event, different ids.
  EXPECT_EQ(rerenderMsgId(a, 12), bundleMsgId(a) + "/rerender-12");
  EXPECT_NE(rerenderMsgId(a, 12), bundleMsgId(a));
  // A -> B -> A -> B: each flip replaces another revision, so no id repeats.
  EXPECT_NE(rerenderMsgId(b, 12), rerenderMsgId(b, 14));
  EXPECT_NE(rerenderMsgId(a, 13), rerenderMsgId(a, 15));
  // A retry of one re-render: the same id.
  EXPECT_EQ(rerenderMsgId(a, 13), rerenderMsgId(perClusterEvent("variants-" + std::string(64, 'a')), 13));
}

TEST(RerenderMsgId, StampEventUsesItOnlyForReRenders) {
  auto commit = perClusterEvent("variants-" + std::string(64, 'a'));
  auto rerender = commit;
  stampEvent(commit);
  stampEvent(rerender, 42);
  EXPECT_EQ(commit.id, bundleMsgId(commit));
  EXPECT_EQ(rerender.id, rerenderMsgId(rerender, 42));
  EXPECT_TRUE(endsWith(rerender.id, "/rerender-42"));
  EXPECT_FALSE(rerender.time.empty());
}

}  // namespace
}  // namespace flotilla::bundler
