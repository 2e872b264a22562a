// The agent chart's rbac.mode=namespaced on a real kube-apiserver with RBAC authorization (tests/harness/kube), with
// the real agent (the library the flotilla-agent binary runs; the fixture of services/agent/test/agent_fixture.h
// plays the scheduler over a real nats-server). The RBAC objects `helm template` renders are applied as the cluster
// admin; the agent then talks to the API server only with a token of the chart's ServiceAccount and with the
// --namespaces value the chart's Deployment passes. It applies a bundle into the listed namespaces (Ready, an edit
// seen by its per-namespace watch as Modified), refuses objects outside them (ErrApplied naming the object and the
// namespaces), and not one of its requests is answered 403 Forbidden: nothing forbidden is even attempted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent_fixture.h"
#include "deploy_util.h"
#include "flotilla/agent/scope.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers
using ::testing::HasSubstr;

constexpr const char* kRelease = "nsagent";

Json clusterRole(const std::string& name) {
  return Json::obj({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRole"},
                    {"metadata", Json::obj({{"name", name}})},
                    {"rules", Json::array()}});
}

class AgentNamespacedOnApiserver : public AgentTest {
 protected:
  void TearDown() override {
    stopAgent();
    for (const auto& [kind, name] : cluster_objects_) {
      (void)kube_->remove("rbac.authorization.k8s.io/v1", kind, "", name);
    }
    AgentTest::TearDown();
  }

  //! Renders the agent chart in release namespace agent_namespace_ with rbac.mode=namespaced for `namespaces` and
  //! applies its ServiceAccount and RBAC objects as the admin; returns the Deployment's --namespaces value.
  void installChartRbac(const std::vector<std::string>& namespaces, std::string& namespaces_flag) {
    std::string list;
    for (const auto& ns : namespaces) {
      list += (list.empty() ? "" : ",") + ns;
    }
    auto objects = deploy_test::renderChart(
        "flotilla-agent",
        {"--set", "clusterName=" + cluster_name_, "--set", "nats.url=nats://hub:4222", "--set", "nats.insecure=true",
         "--set", "rbac.mode=namespaced", "--set", "rbac.namespaces={" + list + "}"},
        kRelease, agent_namespace_);
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    for (const auto& object : *objects) {
      const std::string kind = object.getString("kind");
      if (kind == "Deployment") {
        for (const auto& arg : deploy_test::containerArgs(object)) {
          if (arg.rfind("--namespaces=", 0) == 0) {
            namespaces_flag = arg.substr(std::string("--namespaces=").size());
          }
        }
      }
      if (kind != "ServiceAccount" && kind.find("Role") == std::string::npos) {
        continue;
      }
      Json copy = object;
      if (kind == "ClusterRole" || kind == "ClusterRoleBinding") {
        cluster_objects_.emplace_back(kind, object.at({"metadata", "name"})->asString());
      } else if (copy.at({"metadata", "namespace"}) == nullptr) {
        copy["metadata"]["namespace"] = Json(agent_namespace_);
      }
      auto applied = kube_->apply(copy, kube::ApplyOptions{.field_manager = "test"});
      ASSERT_TRUE(applied.ok()) << kind << ": " << applied.error().describe();
    }
    ASSERT_EQ(cluster_objects_.size(), 2u) << "the read-only ClusterRole and its binding";
  }

  //! A client that authenticates with a token of the chart's ServiceAccount only (no client certificate); its
  //! requests are counted in `metrics` (kube_requests_total{verb,code}).
  std::shared_ptr<kube::KubeClient> agentClient(Metrics& metrics) {
    const std::string account = std::string(kRelease) + "-flotilla-agent";
    Json request = Json::obj({{"apiVersion", "authentication.k8s.io/v1"},
                              {"kind", "TokenRequest"},
                              {"spec", Json::obj({{"expirationSeconds", 3600}})}});
    auto token =
        kube_->requestJson("POST", "/api/v1/namespaces/" + agent_namespace_ + "/serviceaccounts/" + account + "/token",
                           request.dump(), "application/json");
    EXPECT_TRUE(token.ok()) << token.error().describe();
    if (!token.ok()) {
      return nullptr;
    }
    auto config = kube::Kubeconfig::load(cluster_->kubeconfigPath());
    EXPECT_TRUE(config.ok());
    config->client_cert_pem.clear();
    config->client_key_pem.clear();
    config->token = token->at({"status", "token"})->asString();
    auto client = kube::KubeClient::create(*config, kube::KubeClientOptions{.metrics = &metrics});
    EXPECT_TRUE(client.ok());
    return client.ok() ? std::shared_ptr<kube::KubeClient>(std::move(client).value()) : nullptr;
  }

  //! Requests of the agent's client the API server answered 403 Forbidden.
  double forbidden(const Metrics& metrics) {
    double total = 0;
    for (const char* verb : {"GET", "POST", "PUT", "PATCH", "DELETE", "WATCH"}) {
      total += metrics.value("kube_requests_total", {{"verb", verb}, {"code", "403"}});
    }
    return total;
  }

  std::vector<std::pair<std::string, std::string>> cluster_objects_;  //!< (kind, name) to delete at the end
  //! The agent's client's requests; outlives the agent (stopped in TearDown).
  Metrics kube_metrics_{"agent_kube"};
};

TEST_F(AgentNamespacedOnApiserver, AppliesInTheListedNamespacesAndRefusesTheRestBeforeAnyRequest) {
  // The release namespace and the listed ones exist before the agent (it creates no namespace); `other` is not
  // listed.
  ASSERT_TRUE(kube_->apply(namespaceObject(agent_namespace_), kube::ApplyOptions{.field_manager = "test"}).ok());
  const std::string ns_a = preexistingNamespace("nsa");
  const std::string ns_b = preexistingNamespace("nsb");
  const std::string other = preexistingNamespace("nso");
  std::string flag;
  ASSERT_NO_FATAL_FAILURE(installChartRbac({ns_a, ns_b}, flag));
  auto scope = NamespaceScope::parse(flag);
  ASSERT_TRUE(scope.ok()) << scope.error().describe();
  ASSERT_EQ(scope->namespaces().size(), 2u) << flag;
  const std::string allowed = scope->describe();

  auto client = agentClient(kube_metrics_);
  ASSERT_NE(client, nullptr);
  AgentOptions options = agentOptions();
  options.namespaces = *scope;
  options.resync_interval = seconds(3600);  // Ready, NotReady and Modified come from the namespaced watches
  startResponder();
  ASSERT_NO_FATAL_FAILURE(startAgent(client, true, options));

  // Only objects in the listed namespaces: applied, Ready, and an edit by another writer is seen as Modified.
  const std::string good = unique("inside");
  deploy(good, putManifest({configMap("a", ns_a, {{"k", "v"}}), configMap("b", ns_b, {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns_a}}));
  ASSERT_TRUE(status_.waitForState(good, "Ready"));
  EXPECT_EQ(dataOf(ns_a, "a", "k"), "v");
  EXPECT_EQ(dataOf(ns_b, "b", "k"), "v");
  EXPECT_EQ(agent_->drift().watchCount(), 2u) << "one ConfigMap watch per listed namespace";
  ASSERT_TRUE(editData("kubectl-edit", ns_b, "b", "k", Json("edited")).ok());
  auto modified = status_.waitForState(good, "Modified");
  ASSERT_TRUE(modified);
  EXPECT_THAT(modified->message, HasSubstr("kubectl-edit"));

  // Cluster-scoped objects (a Namespace too, even a listed one) and another namespace: refused, the rest applied.
  const std::string mixed = unique("outside");
  const std::string role = unique("ns-agent-role");
  deploy(mixed,
         putManifest({configMap("c", "", {{"k", "v"}}), configMap("stray", other, {{"k", "v"}}), clusterRole(role),
                      namespaceObject(ns_b)}),
         Json::obj({{"defaultNamespace", ns_a}}));
  auto refused = status_.waitForState(mixed, "ErrApplied");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->reason, "OutsideNamespaces");
  EXPECT_THAT(refused->message, HasSubstr("ClusterRole " + role +
                                          " is cluster-scoped; this agent may deploy only to "
                                          "namespaces " +
                                          allowed + " (--namespaces)"));
  EXPECT_THAT(refused->message, HasSubstr("ConfigMap " + other + "/stray is in namespace " + other +
                                          "; this agent may deploy only to namespaces " + allowed));
  EXPECT_THAT(refused->message, HasSubstr("Namespace " + ns_b + " is cluster-scoped"));
  EXPECT_EQ(dataOf(ns_a, "c", "k"), "v");
  EXPECT_TRUE(absent("v1", "ConfigMap", other, "stray"));
  EXPECT_TRUE(absent("rbac.authorization.k8s.io/v1", "ClusterRole", "", role));
  auto recorded = inventory(mixed);
  ASSERT_TRUE(recorded);
  EXPECT_EQ(recorded->objects.size(), 1u) << "only ConfigMap c: refused objects were never created";
  EXPECT_EQ(metric("outside_namespaces_total", {{"scope", "cluster"}}), 2);
  EXPECT_EQ(metric("outside_namespaces_total", {{"scope", "namespace"}}), 1);

  // Nothing was forbidden: not the watches, not the CRD and APIService watches (the read-only ClusterRole), not the
  // inventories, and not a single request of the agent's client.
  EXPECT_EQ(metric("watch_errors_total", {{"step", "list"}}), 0);
  EXPECT_EQ(metric("watch_errors_total", {{"step", "watch"}}), 0);
  EXPECT_EQ(metric("crd_watch_errors_total", {{"step", "list"}}), 0);
  EXPECT_EQ(metric("apiservice_watch_errors_total", {{"step", "list"}}), 0);
  EXPECT_EQ(forbidden(kube_metrics_), 0);
  EXPECT_GT(kube_metrics_.value("kube_requests_total", {{"verb", "WATCH"}, {"code", "200"}}), 0);
}

}  // namespace
}  // namespace flotilla::agent
