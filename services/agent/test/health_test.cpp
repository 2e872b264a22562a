// Unit tests for the per-kind health rules.
#include "flotilla/agent/health.h"

#include <gtest/gtest.h>

#include "flotilla/testing/json.h"

namespace flotilla::agent {
namespace {

//! A JSON object written in the test.
Json live(const char* text) {
  return flotilla::testing::parseJson(text);
}

// Objects without controllers are Ready as soon as they exist.
TEST(HealthTest, PlainObjectsAreReadyOnceApplied) {
  for (const char* kind : {"ConfigMap", "Secret", "ServiceAccount", "Role", "ClusterRoleBinding"}) {
    Json o = Json::obj({{"apiVersion", "v1"}, {"kind", kind}, {"metadata", Json::obj({{"name", "x"}})}});
    EXPECT_TRUE(evaluateHealth(o).ready) << kind;
  }
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"v1","kind":"Service","spec":{"type":"ClusterIP"}})")).ready);
}

// Something being deleted is never Ready.
TEST(HealthTest, DeletionMakesNotReady) {
  Health h = evaluateHealth(live(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","deletionTimestamp":"2026-01-01T00:00:00Z"}})"));
  EXPECT_FALSE(h.ready);
  EXPECT_EQ(h.message, "being deleted");
}

TEST(HealthTest, NamespacePhase) {
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"v1","kind":"Namespace","status":{"phase":"Active"}})")).ready);
  Health terminating =
      evaluateHealth(live(R"({"apiVersion":"v1","kind":"Namespace","status":{"phase":"Terminating"}})"));
  EXPECT_FALSE(terminating.ready);
  EXPECT_EQ(terminating.message, "namespace is Terminating");
}

TEST(HealthTest, CrdNeedsEstablished) {
  EXPECT_FALSE(
      evaluateHealth(live(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition"})")).ready);
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
      "status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":"True"}]}})"))
                  .ready);
}

TEST(HealthTest, LoadBalancerServiceWaitsForAddress) {
  Health waiting = evaluateHealth(live(R"({"apiVersion":"v1","kind":"Service","spec":{"type":"LoadBalancer"}})"));
  EXPECT_FALSE(waiting.ready);
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"v1","kind":"Service","spec":{"type":"LoadBalancer"},
      "status":{"loadBalancer":{"ingress":[{"ip":"10.0.0.1"}]}}})"))
                  .ready);
}

// Without a controller (no kubelet in the test clusters) a Deployment stays NotReady, which is correct.
TEST(HealthTest, DeploymentWithoutControllerIsNotReady) {
  Health h = evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":1},
      "spec":{"replicas":2}})"));
  EXPECT_FALSE(h.ready);
  EXPECT_EQ(h.message, "waiting for the controller to observe generation 1");
}

TEST(HealthTest, DeploymentRollout) {
  Health partial = evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":2},
      "spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"availableReplicas":1}})"));
  EXPECT_FALSE(partial.ready);
  EXPECT_EQ(partial.message, "1 of 3 replicas available");
  Health old = evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":2},
      "spec":{"replicas":3},"status":{"observedGeneration":1,"replicas":3,"updatedReplicas":3,"availableReplicas":3}})"));
  EXPECT_FALSE(old.ready);
  Health done = evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generation":2},
      "spec":{"replicas":3},"status":{"observedGeneration":2,"replicas":3,"updatedReplicas":3,"availableReplicas":3}})"));
  EXPECT_TRUE(done.ready) << done.message;
}

TEST(HealthTest, StatefulSetAndDaemonSet) {
  EXPECT_FALSE(evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"generation":1},
      "spec":{"replicas":2},"status":{"observedGeneration":1,"readyReplicas":1,"updatedReplicas":2}})"))
                   .ready);
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"generation":1},
      "spec":{"replicas":2},"status":{"observedGeneration":1,"readyReplicas":2,"updatedReplicas":2}})"))
                  .ready);
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"generation":1},
      "status":{"observedGeneration":1,"desiredNumberScheduled":0}})"))
                  .ready);
  EXPECT_FALSE(evaluateHealth(live(R"({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"generation":1},
      "status":{"observedGeneration":1,"desiredNumberScheduled":2,"updatedNumberScheduled":2,"numberAvailable":1}})"))
                   .ready);
}

TEST(HealthTest, JobCompletion) {
  EXPECT_FALSE(evaluateHealth(live(R"({"apiVersion":"batch/v1","kind":"Job"})")).ready);
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"batch/v1","kind":"Job",
      "status":{"conditions":[{"type":"Complete","status":"True"}]}})"))
                  .ready);
  Health failed = evaluateHealth(live(R"({"apiVersion":"batch/v1","kind":"Job",
      "status":{"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded"}]}})"));
  EXPECT_FALSE(failed.ready);
  EXPECT_NE(failed.message.find("BackoffLimitExceeded"), std::string::npos);
}

// Custom resources: no status or no Ready/Available condition is Ready; otherwise the condition decides.
TEST(HealthTest, UnknownKindsFollowConditions) {
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"example.com/v1","kind":"Widget"})")).ready);
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"example.com/v1","kind":"Widget","status":{"size":3}})")).ready);
  Health not_ready = evaluateHealth(live(R"({"apiVersion":"example.com/v1","kind":"Widget",
      "status":{"conditions":[{"type":"Ready","status":"False","reason":"Pending","message":"waiting"}]}})"));
  EXPECT_FALSE(not_ready.ready);
  EXPECT_EQ(not_ready.message, "Ready=False (Pending): waiting");
  EXPECT_TRUE(evaluateHealth(live(R"({"apiVersion":"example.com/v1","kind":"Widget",
      "status":{"conditions":[{"type":"Available","status":"True"}]}})"))
                  .ready);
  EXPECT_FALSE(evaluateHealth(live(R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"generation":3},
      "status":{"observedGeneration":2}})"))
                   .ready);
  EXPECT_FALSE(evaluateHealth(live(R"({"apiVersion":"example.com/v1","kind":"Widget",
      "status":{"conditions":[{"type":"Stalled","status":"True"},{"type":"Ready","status":"True"}]}})"))
                   .ready);
}

}  // namespace
}  // namespace flotilla::agent
