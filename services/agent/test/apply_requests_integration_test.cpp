// Fewer API requests per bundle (issue 11): a re-deploy applies the objects the drift watch knows as the bundle's own
// without reading them first, with their resourceVersion as the apply's precondition; a stale cache (a handover or
// a delete the watch has not delivered) fails the precondition and the object is read and decided as before. A new
// bundle without CRDs records its inventory intent in one write. Real kube-apiserver and nats-server.
#include <gtest/gtest.h>

#include "agent_fixture.h"
#include "flotilla/agent/applier.h"

namespace flotilla::agent::testing {
namespace {

class ApplyRequestsTest : public AgentTest {
 protected:
  static double requests(kube::KubeClient& client, const std::string& verb) {
    double total = 0;
    for (const char* code : {"200", "201", "404", "409"}) {
      total += client.metrics().value("kube_requests_total", {{"verb", verb}, {"code", code}});
    }
    return total;
  }
  //! Applies `object` with the owner annotation of `owner` as field manager flotilla; its resourceVersion.
  uint64_t applyAs(Json object, const std::string& owner) {
    object["metadata"]["annotations"][std::string(kBundleAnnotation)] = owner;
    auto applied = kube_->apply(object, kube::ApplyOptions{.field_manager = std::string(kFieldManager)});
    EXPECT_TRUE(applied.ok()) << applied.error().describe();
    const Json* version = applied.ok() ? applied->at({"metadata", "resourceVersion"}) : nullptr;
    return version != nullptr ? std::stoull(version->asString()) : 0;
  }
  ApplyRequest requestFor(const std::string& owner, std::vector<Json> manifest) {
    return ApplyRequest{.owner = owner, .manifest = std::move(manifest)};
  }
};

TEST_F(ApplyRequestsTest, RedeploySkipsTheReadsOfObjectsTheWatchKnows) {
  auto client = newKubeClient();  // a client of its own: its request counters are this test's
  ASSERT_NE(client, nullptr);
  // The agent namespace exists (its first inventory write does not create it) and no resync reads in between.
  ASSERT_TRUE(kube_->apply(namespaceObject(agent_namespace_)).ok());
  AgentOptions options = agentOptions();
  options.resync_interval = seconds(600);
  startResponder();
  ASSERT_NO_FATAL_FAILURE(startAgent(client, true, options));
  const std::string ns = unique("req");
  const std::string bundle = unique("b");
  auto objects = [&](const std::string& round) {
    return std::vector<Json>{namespaceObject(ns), configMap("a", ns, {{"round", round}}),
                             configMap("b", ns, {{"round", round}}), configMap("c", ns, {{"round", round}})};
  };
  const double puts_before = requests(*client, "PATCH");
  deploy(bundle, putManifest(objects("1")), Json::object());
  ASSERT_TRUE(status_.waitForState(bundle, "Ready").has_value());
  // A new bundle without CRDs: its intent (all four objects) in one inventory write, the final inventory in another,
  // and one apply per object.
  EXPECT_EQ(requests(*client, "PATCH") - puts_before, 4 + 2);
  EXPECT_EQ(metric("owner_reads_skipped_total", {{"result", "applied"}}), 0);

  // The watches of the two kinds have listed (their reads are not the deploy's).
  ASSERT_TRUE(eventually([&] { return metric("watch_lists_total") >= 2; }, seconds(10)));
  const double gets_before = requests(*client, "GET");
  deploy(bundle, putManifest(objects("2")), Json::object());
  ASSERT_TRUE(status_.waitForState(bundle, "Ready").has_value());
  EXPECT_EQ(metric("owner_reads_skipped_total", {{"result", "applied"}}), 4);
  EXPECT_EQ(metric("owner_reads_skipped_total", {{"result", "read"}}), 0);
  // Only the inventory is read; none of the four objects.
  EXPECT_EQ(requests(*client, "GET") - gets_before, 1);
  auto live = get("v1", "ConfigMap", ns, "b");
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->at({"data", "round"})->asString(), "2");
  // Once the deploys are quiet, the heap they freed goes back to the OS.
  EXPECT_TRUE(eventually([&] { return metric("memory_trims_total") >= 1; }, seconds(10)));
}

TEST_F(ApplyRequestsTest, AStaleCacheFallsBackToReadingTheOwner) {
  auto client = newKubeClient();  // a client of its own: its request counters are this test's
  ASSERT_NE(client, nullptr);
  const std::string ns = unique("stale");
  ASSERT_TRUE(kube_->apply(namespaceObject(ns)).ok());
  ASSERT_TRUE(client->mapping("v1", "ConfigMap").ok());  // discovery loaded: its reads are not the apply's
  const std::string mine = "fleet-default/mine";
  const std::string other = "fleet-default/other";
  // "handed": the cache saw it as mine, then another bundle took it. "current": the cache is right.
  // "deleted": the cache saw it, then it was deleted.
  const uint64_t handed_seen = applyAs(configMap("handed", ns, {{"v", "mine"}}), mine);
  applyAs(configMap("handed", ns, {{"v", "other"}}), other);
  const uint64_t current_seen = applyAs(configMap("current", ns, {{"v", "old"}}), mine);
  const uint64_t deleted_seen = applyAs(configMap("deleted", ns, {{"v", "old"}}), mine);
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", ns, "deleted").ok());

  Metrics metrics("agent");
  std::map<std::string, uint64_t> seen = {
      {"handed", handed_seen}, {"current", current_seen}, {"deleted", deleted_seen}};
  Applier applier(*client,
                  ApplierOptions{.owned_version =
                                     [&](const ObjectRef& ref, const std::string& owner) {
                                       return owner == mine && seen.contains(ref.name) ? seen[ref.name] : 0;
                                     }},
                  metrics, [] { return false; });

  auto applyOne = [&](const std::string& name) {
    const double gets = requests(*client, "GET");
    auto result = applier.apply(requestFor(mine, {configMap(name, ns, {{"v", "new"}})}), [] {});
    EXPECT_TRUE(result.ok()) << result.error().describe();
    return std::pair{result.ok() ? *result : ApplyResult{}, requests(*client, "GET") - gets};
  };

  // Each apply also reads the target namespace once (ensureNamespaces: the request has no Namespace object).
  auto [current, current_gets] = applyOne("current");
  EXPECT_EQ(current.applied, 1U);
  EXPECT_EQ(current_gets, 1) << "the cache vouched for the owner: the object was not read";
  EXPECT_EQ(metrics.value("owner_reads_skipped_total", {{"result", "applied"}}), 1);

  auto [handed, handed_gets] = applyOne("handed");
  EXPECT_EQ(handed_gets, 2) << "the precondition failed: the owner was read";
  ASSERT_EQ(handed.claims.size(), 1U) << "another bundle's object stays a conflict";
  EXPECT_TRUE(handed.outcomes[0].conflict);
  EXPECT_EQ(ownerOfLive("v1", "ConfigMap", ns, "handed"), other);
  EXPECT_EQ(get("v1", "ConfigMap", ns, "handed")->at({"data", "v"})->asString(), "other");
  EXPECT_EQ(metrics.value("owner_reads_skipped_total", {{"result", "read"}}), 1);

  // A server-side apply that creates the object does not check the resourceVersion: the object is created again,
  // as the read (404) then apply would have done.
  auto [deleted, deleted_gets] = applyOne("deleted");
  EXPECT_EQ(deleted.applied, 1U) << "a deleted object is created again";
  EXPECT_EQ(ownerOfLive("v1", "ConfigMap", ns, "deleted"), mine);
  EXPECT_LE(deleted_gets, 2);
}

}  // namespace
}  // namespace flotilla::agent::testing
