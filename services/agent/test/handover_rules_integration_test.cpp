// The claim rule `retiring` and dependsOn's acceptedStates and by-name scope (docs/pipeline.md "Ownership
// handover" and "dependsOn") against a real nats-server and kube-apiserver.
#include "handover_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

using HandoverRulesTest = HandoverFixture;

Json dependsOnName(const std::string& name, const std::vector<std::string>& accepted = {}) {
  Json entry = Json::obj({{"name", name}});
  for (const auto& state : accepted) {
    entry["acceptedStates"].push(Json(state));
  }
  return Json(Json::Array{entry});
}

// Rule retiring: A (GitRepo `old`) owns O; B (GitRepo `new`, a different repository, no newer-commit rule) claims
// O while its DeployEvent lists A as retiring (the hub saw A's GitRepo deleted). B takes O over on its first apply:
// first status Ready, same UID, A's inventory drops O. A's delete then arrives and prunes only what A still owns.
TEST_F(HandoverRulesTest, RetiringOwnerIsHandedOverOnTheFirstApply) {
  startWithHold(seconds(60));
  std::string a = unique("a");
  std::string b = unique("b");
  send(a, {cm("o", "a"), cm("a-own")}, {.gitrepo = "old", .commit_sequence = 9});
  ASSERT_TRUE(status_.waitForState(a, "Ready"));
  std::string before = uid("o");
  ASSERT_FALSE(before.empty());
  send(b, {cm("o", "b")}, {.gitrepo = "new", .commit_sequence = 1, .retiring = {a}});
  auto first = next(b);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->state, "Ready") << first->reason << ": " << first->message;
  EXPECT_EQ(uid("o"), before);
  EXPECT_EQ(owner("o"), bundleOwner(b));
  EXPECT_FALSE(lists(a, "o"));
  EXPECT_TRUE(lists(a, "a-own"));
  EXPECT_EQ(metric("handovers_total", {{"rule", "retiring"}}), 1);
  EXPECT_EQ(metric("ownership_conflicts_total"), 0);

  sendDelete(a);
  ASSERT_TRUE(eventually([&] { return !inventory(a).has_value(); }, seconds(30)));
  EXPECT_EQ(uid("o"), before) << "the handed-over object must survive the old bundle's delete";
  EXPECT_EQ(owner("o"), bundleOwner(b));
  EXPECT_EQ(status_.all(b).size(), 1u) << "the new bundle reports once: Ready";
}

// `retiring` names bundles of the claimant's workspace only: a bundle of the same name in another workspace is not
// retiring, so its object stays its own (a conflict).
TEST_F(HandoverRulesTest, RetiringIsScopedToTheWorkspace) {
  startRegisteredAgent();
  std::string a = unique("a");
  std::string b = unique("b");
  send(a, {cm("o", "a")}, {.gitrepo = "old"});
  ASSERT_TRUE(status_.waitForState(a, "Ready"));
  auto claim = event(b, {cm("o", "b")}, {.gitrepo = "new", .retiring = {a}});
  claim.workspace = "elsewhere";
  claim.retiring = {a};
  publish(claim);
  auto first = next(b);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->state, "ErrApplied");
  EXPECT_EQ(first->reason, "OwnershipConflict");
  EXPECT_EQ(owner("o"), bundleOwner(a));
}

// acceptedStates: a dependency NotReady releases a dependent that accepts NotReady at once, while one with the
// default (Ready) waits, its message naming the state and what it accepts.
TEST_F(HandoverRulesTest, DependsOnAcceptedStates) {
  startRegisteredAgent();
  std::string db = unique("db");
  std::string lenient = unique("lenient");
  std::string strict = unique("strict");
  std::string by_label = unique("bylabel");
  send(db, {webDeployment()}, {.labels = {{"tier", "db"}}});
  ASSERT_TRUE(status_.waitForState(db, "NotReady"));

  send(lenient, {cm("lenient")}, {.depends_on = dependsOnName(db, {"NotReady", "Ready"})});
  auto released = next(lenient);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->state, "Ready") << released->message;
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "lenient"));

  Json selector = selectorOn("tier", "db");
  selector.asArray()[0]["acceptedStates"].push(Json("NotReady"));
  send(by_label, {cm("bylabel")}, {.depends_on = selector});
  auto by_selector = next(by_label);
  ASSERT_TRUE(by_selector);
  EXPECT_EQ(by_selector->state, "Ready") << by_selector->message;

  send(strict, {cm("strict")}, {.depends_on = dependsOnName(db)});
  auto waiting = next(strict);
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "WaitApplied");
  EXPECT_EQ(waiting->reason, "DependenciesNotReady");
  EXPECT_NE(waiting->message.find("bundle " + db + " is NotReady (accepted: Ready)"), std::string::npos)
      << waiting->message;
  EXPECT_TRUE(absent("v1", "ConfigMap", ns_, "strict"));
}

// dependsOn by name looks in the dependent's workspace only: a Ready bundle of that name in another workspace does
// not count; the dependency deployed in the same workspace releases the dependent at once (woken, no new event).
TEST_F(HandoverRulesTest, DependsOnByNameIsScopedToTheWorkspace) {
  startRegisteredAgent();
  std::string infra = unique("infra");
  std::string app = unique("app");
  auto elsewhere = event(infra, {cm("infra-elsewhere")});
  elsewhere.workspace = "elsewhere";
  publish(elsewhere);
  ASSERT_TRUE(status_.waitForState(infra, "Ready"));

  send(app, {cm("app")}, {.depends_on = dependsOnName(infra)});
  auto waiting = next(app);
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "WaitApplied") << waiting->message;
  EXPECT_NE(waiting->message.find("bundle " + infra + " is not deployed"), std::string::npos) << waiting->message;

  send(infra, {cm("infra")});
  auto woken = status_.waitForState(app, "Ready", seconds(20));
  ASSERT_TRUE(woken) << "the dependent was not woken by its dependency in the same workspace";
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "app"));
}

}  // namespace
}  // namespace flotilla::agent
