// Re-renders whose result equals one published earlier for the same commit, against a real nats-server -js (and
// the pinned helm, the bundler and the scheduler in process, variants_fixture.h): a cluster's API-version set goes
// A -> B -> A (a CRD installed, then deleted again) inside JetStream's duplicate window. The third render's table
// is the first one's, yet it must reach the scheduler and redeploy the cluster: the re-render's Nats-Msg-Id names
// the BundleRecord revision it replaces (records.h). The same re-render published again keeps its id and is dropped.
#include "variants_fixture.h"

namespace flotilla::bundler {
namespace {

std::vector<std::string> plainSet() {
  return {"apps/v1", "apps/v1/Deployment", "v1", "v1/ConfigMap"};
}
std::vector<std::string> widgetsSet() {
  return {"apps/v1", "apps/v1/Deployment", "example.com/v1", "example.com/v1/Widget", "v1", "v1/ConfigMap"};
}

//! The BundleEvent the record of `bundle` holds as its last good render.
events::BundleEvent lastGood(bus::KeyValue& bundles, const std::string& bundle) {
  auto entry = bundles.get(events::bundleKey(kWs, bundle));
  EXPECT_TRUE(entry.ok());
  auto record = entry.ok() ? parseBundleRecord(entry->value) : Result<BundleRecord>(fail(entry.error()));
  EXPECT_TRUE(record.ok() && record->last_good);
  return record.ok() && record->last_good ? *record->last_good : events::BundleEvent{};
}

TEST_F(VariantsIntegrationTest, ApiVersionSetReturningToAnEarlierOneRedeploys) {
  registerCluster("flip-a", {}, plainSet());
  auto a = agent("flip-a");
  startBundler();
  publishCommit("5555555555555555555555555555555555555555", kCapabilitiesFiles);
  const std::string caps = "apps-caps";

  auto first = deploys(a, caps, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_NE(manifestText(first[0].manifest_id).find(R"("widgets":"false")"), std::string::npos);
  const events::BundleEvent set_a = lastGood(*hub_.bundles, caps);

  // B: the cluster serves example.com/v1 now.
  registerCluster("flip-a", {}, widgetsSet());
  auto second = deploys(a, caps, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].manifest_id, first[0].manifest_id);
  EXPECT_NE(manifestText(second[0].manifest_id).find(R"("kind":"Widget")"), std::string::npos);
  const events::BundleEvent set_b = lastGood(*hub_.bundles, caps);

  // Back to A: the same table as the commit's own render, published again and deployed again.
  registerCluster("flip-a", {}, plainSet());
  auto third = deploys(a, caps, 1);
  ASSERT_EQ(third.size(), 1u) << "the A -> B -> A re-render was dropped as a duplicate";
  EXPECT_EQ(third[0].manifest_id, first[0].manifest_id);
  EXPECT_GT(third[0].generation, second[0].generation);
  const events::BundleEvent back_to_a = lastGood(*hub_.bundles, caps);
  EXPECT_EQ(back_to_a.variants_object, set_a.variants_object);
  EXPECT_NE(back_to_a.id, set_a.id);
  EXPECT_NE(back_to_a.id, set_b.id);
  EXPECT_NE(back_to_a.id.find("/rerender-"), std::string::npos) << back_to_a.id;
  EXPECT_EQ(bundler_metrics_.value("events_published_total", {{"result", "duplicate"}}), 0);
  // Counted once the publish is acknowledged, which can come after the scheduler already deployed it.
  EXPECT_TRUE(waitFor([&] {
    return bundler_metrics_.value("rerenders_total", {{"result", "published"}}) >= 2;
  })) << bundler_metrics_.value("rerenders_total", {{"result", "published"}});

  // B again, then A again: every flip publishes (the revision moves on with each record written).
  registerCluster("flip-a", {}, widgetsSet());
  auto fourth = deploys(a, caps, 1);
  ASSERT_EQ(fourth.size(), 1u);
  EXPECT_EQ(fourth[0].manifest_id, second[0].manifest_id);
  registerCluster("flip-a", {}, plainSet());
  auto fifth = deploys(a, caps, 1);
  ASSERT_EQ(fifth.size(), 1u);
  EXPECT_EQ(fifth[0].manifest_id, first[0].manifest_id);
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 2) << "both inputs came from the render cache";

  // A retry of the same re-render carries the same Msg-Id: JetStream drops it.
  const events::BundleEvent last = lastGood(*hub_.bundles, caps);
  auto again = hub_.js->publish(events::bundleSubject(kWs, caps), events::encode(last).dump(), last.id);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_TRUE(again->duplicate) << last.id;
  EXPECT_TRUE(deploys(a, caps, 1, 1500ms).empty()) << "nothing changed, nothing is deployed";
}

}  // namespace
}  // namespace flotilla::bundler
