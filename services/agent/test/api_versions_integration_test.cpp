// The agent reports the cluster's API versions (discovery) at registration and registers again when a CRD changes
// them — a CRD created by anyone, not only by a bundle — against a real kube-apiserver; the test plays the
// scheduler (agent_fixture.h).
#include <algorithm>
#include <atomic>

#include "agent_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

Json widgetCrd(const std::string& group) {
  return Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.)" +
                     group + R"("},"spec":{"group":")" + group + R"(","scope":"Namespaced",
      "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
      "versions":[{"name":"v1","served":true,"storage":true,
        "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})")
      .value();
}

bool has(const events::RegisterRequest& request, const std::string& entry) {
  return std::binary_search(request.api_versions.begin(), request.api_versions.end(), entry);
}

class ApiVersionsAgentTest : public AgentTest {
 protected:
  void TearDown() override {
    for (const auto& group : groups_) {
      (void)kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group);
    }
    AgentTest::TearDown();
  }
  std::vector<std::string> groups_;
};

// Discovery at registration; a CRD created by another field manager (not a bundle) is reported by registering
// again; deleting it is reported too. No re-registration while nothing changes.
TEST_F(ApiVersionsAgentTest, CrdCreatedAndDeletedByAnyoneReRegisters) {
  startRegisteredAgent();
  auto first = requests();
  ASSERT_FALSE(first.empty());
  const auto& initial = first.front();
  EXPECT_TRUE(std::is_sorted(initial.api_versions.begin(), initial.api_versions.end()));
  for (const char* entry : {"v1", "v1/ConfigMap", "apps/v1", "apps/v1/Deployment"}) {
    EXPECT_TRUE(has(initial, entry)) << entry;
  }
  EXPECT_GT(metric("api_versions"), 0);
  // The watch starts with one discovery read: the same set, so nothing is sent again. (A CRD an earlier test of
  // this process deleted may still be going away, so only "never the same set twice in a row" is checked.)
  std::this_thread::sleep_for(seconds(2));
  auto sent = requests();
  for (size_t i = 1; i < sent.size(); ++i) {
    EXPECT_NE(sent[i].api_versions, sent[i - 1].api_versions) << "an unchanged set must not re-register";
  }

  const std::string group = randomHex(4) + ".apis.example.com";
  groups_.push_back(group);
  ASSERT_TRUE(kube_->apply(widgetCrd(group), {.field_manager = "someone-else"}).ok());
  ASSERT_TRUE(latestRegistration([&](const auto& r) { return has(r, group + "/v1") && has(r, group + "/v1/Widget"); }))
      << "the new CRD was not reported";
  // Counted when the hub's reply arrives, just after the responder recorded the request.
  EXPECT_TRUE(eventually(
      [&] {
        return metric("api_versions_reregistrations_total", {{"result", "accepted"}}) >= 1;
      },
      seconds(10)));
  EXPECT_EQ(requests().back().labels, initial.labels) << "a re-registration carries the same labels";

  ASSERT_TRUE(kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group).ok());
  ASSERT_TRUE(latestRegistration([&](const auto& r) { return !has(r, group + "/v1/Widget"); }))
      << "the deleted CRD is still reported";
  EXPECT_EQ(metric("api_discovery_errors_total"), 0);
  sent = requests();
  for (size_t i = 1; i < sent.size(); ++i) {
    EXPECT_NE(sent[i].api_versions, sent[i - 1].api_versions) << "an unchanged set must not re-register";
  }
}

// The hub refuses the re-registration for a while: counted as failed, retried with backoff until it is accepted.
TEST_F(ApiVersionsAgentTest, RefusedReRegistrationIsRetried) {
  std::atomic<bool> refuse{false};
  ASSERT_NO_FATAL_FAILURE(startResponderAsking([&refuse] { return !refuse.load(); }));
  startAgent();

  refuse = true;
  const std::string group = randomHex(4) + ".apis.example.com";
  groups_.push_back(group);
  ASSERT_TRUE(kube_->apply(widgetCrd(group), {.field_manager = "someone-else"}).ok());
  ASSERT_TRUE(eventually(
      [&] {
        return metric("api_versions_reregistrations_total", {{"result", "failed"}}) >= 2;
      },
      seconds(60)));
  refuse = false;
  EXPECT_TRUE(eventually(
      [&] {
        return metric("api_versions_reregistrations_total", {{"result", "accepted"}}) >= 1;
      },
      seconds(60)));
  EXPECT_TRUE(has(requests().back(), group + "/v1/Widget"));
}

// Discovery cannot be read (the API server is unreachable): the agent registers without API versions (the hub
// renders with Helm's defaults), and counts the failures.
TEST_F(ApiVersionsAgentTest, UnreadableDiscoveryRegistersWithoutApiVersions) {
  startResponder();
  std::shared_ptr<kube::KubeClient> unreachable;
  ASSERT_NO_FATAL_FAILURE(makeUnreachableKubeClient(unreachable));
  startAgent(unreachable);
  auto all = requests();
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(all.front().api_versions.empty());
  EXPECT_GE(metric("api_discovery_errors_total"), 1);
  EXPECT_TRUE(eventually([&] { return metric("crd_watch_errors_total", {{"step", "list"}}) >= 1; }, seconds(30)));
}

}  // namespace
}  // namespace flotilla::agent
