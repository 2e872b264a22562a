// Objects whose change touches an immutable field (replace.cpp) against a real kube-apiserver: the agent deletes
// and re-creates them, says so in the status, and the bundle is never stuck on the API server's refusal — also when
// the object is handed over from another bundle (a Helm release name in a Deployment's selector that changed with
// a rename).
#include "handover_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

using ReplaceTest = HandoverFixture;

//! Deployment `web` whose selector (and pod labels) carry `release`, as a Helm chart's do.
Json releaseDeployment(const std::string& release) {
  Json object = webDeployment();
  object["spec"]["selector"]["matchLabels"]["release"] = Json(release);
  object["spec"]["template"]["metadata"]["labels"]["release"] = Json(release);
  return object;
}

constexpr std::string_view kNote = "was deleted and re-created (new UID) because field spec.selector is immutable";

// The same bundle changes the selector: the apply is refused (422, field is immutable), so the object is replaced:
// a new UID, the new selector, and the report (not ErrApplied) says why. The next deploy applies in place.
TEST_F(ReplaceTest, ImmutableSelectorChangeReplacesTheObject) {
  startRegisteredAgent();
  std::string bundle = unique("web");
  send(bundle, {releaseDeployment("one")});
  ASSERT_TRUE(status_.waitForState(bundle, "NotReady"));
  std::string before = uidOf("apps/v1", "Deployment", ns_, "web");
  ASSERT_FALSE(before.empty());

  send(bundle, {releaseDeployment("two"), cm("extra")});
  auto replaced = next(bundle);
  ASSERT_TRUE(replaced);
  EXPECT_NE(replaced->state, "ErrApplied") << replaced->message;
  EXPECT_NE(replaced->message.find(kNote), std::string::npos) << replaced->message;
  std::string after = uidOf("apps/v1", "Deployment", ns_, "web");
  EXPECT_FALSE(after.empty());
  EXPECT_NE(after, before) << "the object must have been re-created";
  auto live = get("apps/v1", "Deployment", ns_, "web");
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->at({"spec", "selector", "matchLabels", "release"})->asString(), "two");
  EXPECT_EQ(ownerOfLive("apps/v1", "Deployment", ns_, "web"), bundleOwner(bundle));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "extra"));
  EXPECT_EQ(metric("objects_replaced_total"), 1);

  send(bundle, {releaseDeployment("two"), cm("extra", "changed")});
  auto in_place = next(bundle);
  ASSERT_TRUE(in_place);
  EXPECT_EQ(in_place->message.find(kNote), std::string::npos) << in_place->message;
  EXPECT_EQ(uidOf("apps/v1", "Deployment", ns_, "web"), after);
  EXPECT_EQ(metric("objects_replaced_total"), 1);
}

// A Helm bundle renamed (same GitRepo, newer commit): the new bundle claims `web`, whose selector carries the release
// name that changed. The handover cannot keep the UID: the object is replaced under the new bundle, which says so;
// the old bundle's inventory no longer lists it, so the old bundle's delete leaves it alone.
TEST_F(ReplaceTest, HandoverWithAnImmutableChangeReplacesAndIsNeverStuck) {
  startRegisteredAgent();
  std::string a = unique("a");
  std::string b = unique("b");
  send(a, {releaseDeployment(a)}, {.gitrepo = "repo", .commit_sequence = 1});
  ASSERT_TRUE(status_.waitForState(a, "NotReady"));
  std::string before = uidOf("apps/v1", "Deployment", ns_, "web");

  send(b, {releaseDeployment(b)}, {.gitrepo = "repo", .commit_sequence = 2});
  auto first = next(b);
  ASSERT_TRUE(first);
  EXPECT_NE(first->state, "ErrApplied") << first->message;
  EXPECT_NE(first->message.find(kNote), std::string::npos) << first->message;
  std::string after = uidOf("apps/v1", "Deployment", ns_, "web");
  EXPECT_NE(after, before);
  EXPECT_EQ(ownerOfLive("apps/v1", "Deployment", ns_, "web"), bundleOwner(b));
  auto old_inventory = inventory(a);
  EXPECT_FALSE(old_inventory && old_inventory->lists({"apps/v1", "Deployment", ns_, "web"}));

  sendDelete(a);
  ASSERT_TRUE(eventually([&] { return !inventory(a).has_value(); }, seconds(30)));
  EXPECT_EQ(uidOf("apps/v1", "Deployment", ns_, "web"), after) << "the old bundle's delete must leave it alone";
}

}  // namespace
}  // namespace flotilla::agent
