// Parallel bundles (--parallel-bundles, docs/pipeline.md stage 5) against a real nats-server and kube-apiserver:
// different bundles are applied at once and one bundle's deploys in order; a slow bundle (a CRD that never gets
// Established) or one waiting for a dependency never holds up another; and bundles that claim and release the same
// objects at the same moment (two handler calls racing, no consumer in between) end with one owner per object, listed
// in that owner's inventory only (the lock order is in deploy_handler.h).
#include "handler_rig.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

class ParallelTest : public ConfigMapBundlesTest {
 protected:
  ParallelTest() : ConfigMapBundlesTest("par") {}

  static std::vector<Json> cms(const std::string& prefix, int n) {
    std::vector<Json> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(cm(prefix + std::to_string(i)));
    }
    return out;
  }
  ObjectRef ref(const std::string& name) { return ObjectRef{"v1", "ConfigMap", ns_, name}; }
};

// A bundle stuck in its CRD wait (a CRD that never gets Established, --crd-timeout 120s) does not hold up another
// bundle: the other is applied and Ready while the slow one has reported nothing yet.
TEST_F(ParallelTest, ASlowBundleDoesNotHoldUpAnother) {
  startResponder();
  AgentOptions options = agentOptions();
  options.crd_timeout = seconds(120);
  startAgent(nullptr, true, options);
  const std::string group = randomHex(4) + ".example.com";
  ASSERT_NO_FATAL_FAILURE(applyEstablishedCrd(group, "widgets", "Widget"));
  const std::string slow = unique("slow");
  const std::string fast = unique("fast");
  // Same kind under another plural: the API server never accepts its names, so it is never Established.
  Json gizmo = Json::obj({{"apiVersion", group + "/v1"}, {"kind", "Gizmo"}, {"metadata", Json::obj({{"name", "g"}})}});
  deploy(slow, putManifest({crd(group, "gizmos", "Widget"), gizmo}), Json::object());
  ASSERT_TRUE(
      eventually([&] { return exists("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gizmos." + group); },
                 seconds(30)));  // stage 1 applied: the slow deploy now waits
  deploy(fast, putManifest({cm("a")}), options_);
  auto ready = status_.waitForState(fast, "Ready", seconds(60));
  ASSERT_TRUE(ready);
  EXPECT_TRUE(status_.all(slow).empty()) << "the slow bundle was handled before the fast one";
  stopAgent();  // ends the CRD wait
  for (const char* plural : {"widgets", "gizmos"}) {
    (void)kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", std::string(plural) + "." + group);
  }
}

// A bundle parked for dependsOn holds no worker: another bundle is applied meanwhile, and the parked one is applied
// when its dependency becomes Ready.
TEST_F(ParallelTest, ABundleWaitingForADependencyDoesNotHoldUpAnother) {
  startRegisteredAgent();
  const std::string waits = unique("waits");
  const std::string other = unique("other");
  const std::string dep = unique("dep");
  auto event = makeEvent(waits, putManifest({cm("w")}), options_);
  event.depends_on = Json(Json::Array{Json::obj({{"name", dep}})});
  publish(event);
  ASSERT_TRUE(status_.waitForState(waits, "WaitApplied"));
  deploy(other, putManifest({cm("o")}), options_);
  EXPECT_TRUE(status_.waitForState(other, "Ready"));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns_, "w"));
  deploy(dep, putManifest({cm("d")}), options_);
  EXPECT_TRUE(status_.waitForState(dep, "Ready"));
  EXPECT_TRUE(status_.waitForState(waits, "Ready"));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "w"));
}

// One bundle's deploys run in stream order while other bundles run beside them: its reports come in generation
// order and the last deployment is what stays applied.
TEST_F(ParallelTest, OneBundlesDeploysRunInOrder) {
  startRegisteredAgent();
  const std::string bundle = unique("ordered");
  std::vector<std::string> others;
  for (int generation = 1; generation <= 6; ++generation) {
    deploy(bundle, putManifest({cm("x", "g" + std::to_string(generation))}), options_);
    others.push_back(unique("other"));
    deploy(others.back(), putManifest({cm(others.back())}), options_);
  }
  ASSERT_TRUE(status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.generation == 6; }));
  for (const auto& other : others) {
    EXPECT_TRUE(status_.waitForState(other, "Ready")) << other;
  }
  int64_t last = 0;
  for (const auto& status : status_.all(bundle)) {
    EXPECT_GE(status.generation, last) << "reports out of order";
    last = status.generation;
  }
  EXPECT_EQ(get("v1", "ConfigMap", ns_, "x")->at({"data", "k"})->asString(), "g6");
  EXPECT_EQ(inventory(bundle)->generation, 6);
}

// Two bundles that want the same 12 objects, handled at the same instant: every object ends with exactly one owner
// (its annotation), listed in that bundle's inventory and claimed by the other; when one bundle is deleted, the
// other takes every object over.
TEST_F(ParallelTest, TwoBundlesClaimingTheSameObjectsAtOnceEndWithOneOwnerEach) {
  auto r = rig();
  const std::string x = unique("x");
  const std::string y = unique("y");
  const auto objects = cms("o", 12);
  auto x_event = makeEvent(x, putManifest(objects), options_);
  auto y_event = makeEvent(y, putManifest(objects), options_);
  r->race({x_event, y_event});
  auto x_inventory = inventory(x);
  auto y_inventory = inventory(y);
  ASSERT_TRUE(x_inventory && y_inventory);
  for (int i = 0; i < 12; ++i) {
    const std::string name = "o" + std::to_string(i);
    const std::string live_owner = owner(name);
    ASSERT_TRUE(live_owner == bundleOwner(x) || live_owner == bundleOwner(y)) << name << ": " << live_owner;
    const bool x_owns = live_owner == bundleOwner(x);
    const Inventory& holder = x_owns ? *x_inventory : *y_inventory;
    const Inventory& claimant = x_owns ? *y_inventory : *x_inventory;
    EXPECT_TRUE(holder.lists(ref(name))) << name;
    EXPECT_FALSE(claimant.lists(ref(name))) << name;
    EXPECT_TRUE(std::any_of(claimant.claims.begin(), claimant.claims.end(), [&](const ObjectRef& c) {
      return c.identity() == ref(name).identity();
    })) << name;
  }
  // x goes: what it held is handed over to y, whose re-run (the wake) takes everything.
  r->race({makeEvent(x, "", Json::object(), /*remove=*/true)});
  r->race({y_event});
  y_inventory = inventory(y);
  ASSERT_TRUE(y_inventory);
  EXPECT_TRUE(y_inventory->claims.empty());
  EXPECT_EQ(y_inventory->objects.size(), 12u);
  EXPECT_FALSE(inventory(x));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(owner("o" + std::to_string(i)), bundleOwner(y));
  }
}

// A release and a claim of the same objects at the same instant (a's new deployment drops them while b's takes
// them), with and without a hold: after b's re-run (the wake) every object exists, is b's and listed by b alone,
// a keeps only what it still wants, and nothing is left in the hold list.
TEST_F(ParallelTest, ARaceBetweenReleaseAndClaimConverges) {
  for (auto hold : {milliseconds(0), milliseconds(60000)}) {
    SCOPED_TRACE("hold " + std::to_string(hold.count()) + " ms");
    auto r = rig({.release_hold = hold});
    const std::string a = unique("a");
    const std::string b = unique("b");
    const std::string prefix = "m" + randomHex(2) + "-";
    auto moved = cms(prefix, 8);
    auto first = moved;
    first.push_back(cm(prefix + "keep"));
    ASSERT_EQ(r->race({makeEvent(a, putManifest(first), options_)})[0].result, "applied");
    auto b_event = makeEvent(b, putManifest(moved), options_);
    r->race({makeEvent(a, putManifest({cm(prefix + "keep")}), options_), b_event});
    r->race({b_event});
    auto a_inventory = inventory(a);
    auto b_inventory = inventory(b);
    ASSERT_TRUE(a_inventory && b_inventory);
    EXPECT_EQ(a_inventory->objects.size(), 1u);
    EXPECT_EQ(b_inventory->objects.size(), 8u);
    EXPECT_TRUE(b_inventory->claims.empty());
    for (int i = 0; i < 8; ++i) {
      const std::string name = prefix + std::to_string(i);
      EXPECT_EQ(owner(name), bundleOwner(b)) << name;
      EXPECT_FALSE(a_inventory->lists(ref(name))) << name;
    }
    for (const auto& entry : held()) {
      EXPECT_NE(entry.ref.name.rfind(prefix, 0), 0u) << "still held: " << entry.ref.describe();
    }
  }
}

}  // namespace
}  // namespace flotilla::agent
