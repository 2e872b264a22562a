// The Nats-Msg-Id of a re-render (records.h): the commit render's id plus the revision of the BundleRecord it
// replaces, so an event equal to an earlier one (cluster facts A -> B -> A) still gets a new id, while the same
// re-render retried (same event, same revision) gets the same id and JetStream drops the copy.
#include <gtest/gtest.h>

#include "flotilla/bundler/records.h"
#include "flotilla/core/util.h"

namespace flotilla::bundler {
namespace {

events::BundleEvent perClusterEvent(const std::string& variants_object) {
  events::BundleEvent event;
  event.workspace = "fleet-default";
  event.gitrepo = "apps";
  event.bundle = "apps-caps";
  event.path = "caps";
  event.commit = "0123456789abcdef0123456789abcdef01234567";
  event.variants_object = variants_object;
  event.commit_sequence = 7;
  return event;
}

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
