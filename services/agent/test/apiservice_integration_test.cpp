// Aggregated APIs (APIService objects, apiregistration.k8s.io/v1) change the cluster's API versions too: the agent
// watches them beside CRDs and registers again when discovery changed, against a real kube-apiserver; the test plays
// the scheduler (agent_fixture.h). The aggregated API is served by a real HTTPS server (python3, the cluster's
// serving certificate) that the APIService reaches through an ExternalName Service; stopping it makes the
// APIService unavailable, as for a metrics-server that went away. An unavailable APIService counts for nothing
// (api_versions.h). An agent that may not watch APIServices still follows CRDs, and counts the failure.
#include <algorithm>
#include <csignal>

#include <gmock/gmock.h>

#include "agent_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

bool has(const events::RegisterRequest& request, const std::string& entry) {
  return std::binary_search(request.api_versions.begin(), request.api_versions.end(), entry);
}

bool hasKindOf(const events::RegisterRequest& request, const std::string& group_version) {
  return std::any_of(request.api_versions.begin(), request.api_versions.end(),
                     [&](const std::string& entry) { return entry.starts_with(group_version + "/"); });
}

class ApiServiceAgentTest : public AgentTest {
 protected:
  void TearDown() override {
    if (backend_.running()) {
      backend_.stop();
    }
    for (const auto& name : apiservices_) {
      (void)kube_->remove("apiregistration.k8s.io/v1", "APIService", "", name);
    }
    for (const auto& group : crd_groups_) {
      (void)kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets." + group);
    }
    for (const auto& ns : namespaces_) {
      (void)kube_->remove("v1", "Namespace", "", ns);
    }
    AgentTest::TearDown();
  }

  //! A namespace for the test's Services.
  std::string testNamespace(const std::string& prefix) {
    std::string ns = unique(prefix);
    namespaces_.push_back(ns);
    EXPECT_TRUE(
        kube_->apply(Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", ns}})}}))
            .ok());
    return ns;
  }

  //! A Service named `name` in `ns`: ExternalName localhost (the aggregator dials localhost:<port>) or, when
  //! `external` is false, a ClusterIP Service without endpoints (the APIService never becomes Available).
  void createService(const std::string& ns, const std::string& name, bool external) {
    auto service = Json::parse(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")" + name +
                               R"(","namespace":")" + ns + R"("},"spec":)" +
                               (external ? R"({"type":"ExternalName","externalName":"localhost"})"
                                         : R"({"ports":[{"port":443,"targetPort":6443}]})") +
                               "}");
    ASSERT_TRUE(service.ok());
    auto applied = kube_->apply(*service);
    ASSERT_TRUE(applied.ok()) << applied.error().describe();
  }

  //! An APIService v1beta1.<group> reached through Service ns/name on `port`, created by another field manager.
  void createApiService(const std::string& group, const std::string& ns, const std::string& name, int port) {
    apiservices_.push_back("v1beta1." + group);
    auto apiservice = Json::parse(R"({"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
      "metadata":{"name":"v1beta1.)" +
                                  group + R"("},
      "spec":{"group":")" + group +
                                  R"(","version":"v1beta1","insecureSkipTLSVerify":true,
        "groupPriorityMinimum":100,"versionPriority":100,
        "service":{"namespace":")" +
                                  ns + R"(","name":")" + name + R"(","port":)" + std::to_string(port) + "}}}");
    ASSERT_TRUE(apiservice.ok());
    auto applied = kube_->apply(*apiservice, {.field_manager = "someone-else"});
    ASSERT_TRUE(applied.ok()) << applied.error().describe();
  }

  //! Serves the discovery document of <group>/v1beta1 (one kind, Gauge) over HTTPS on 127.0.0.1:`port`.
  void startBackend(const std::string& group, int port) {
    const std::string script = cluster_->dir() + "/aggregated-api.py";
    ASSERT_TRUE(writeFile(script, R"PY(import http.server, json, ssl, sys
group, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
doc = json.dumps({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group + "/v1beta1",
                  "resources": [{"name": "gauges", "singularName": "gauge", "namespaced": True, "kind": "Gauge",
                                 "verbs": ["get", "list"]}]}).encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        found = self.path.split("?")[0] == "/apis/" + group + "/v1beta1"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(doc) if found else 0))
        self.end_headers()
        if found:
            self.wfile.write(doc)
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
)PY")
                    .ok());
    auto process = Process::start(
        ProcessOptions{.argv = {"python3", script, group, std::to_string(port), cluster_->dir() + "/pki/apiserver.crt",
                                cluster_->dir() + "/pki/apiserver.key"},
                       .output_file = cluster_->dir() + "/aggregated-api.log",
                       .kill_with_parent = true});
    ASSERT_TRUE(process.ok()) << process.error().describe();
    backend_ = std::move(process).value();
  }

  //! Waits until the APIService's Available condition has `status` ("True"/"False").
  bool availableIs(const std::string& group, const std::string& status) {
    return eventually(
        [&] {
          auto stored = kube_->get("apiregistration.k8s.io/v1", "APIService", "", "v1beta1." + group);
          const Json* conditions = stored.ok() ? stored->at({"status", "conditions"}) : nullptr;
          for (size_t i = 0; conditions != nullptr && conditions->isArray() && i < conditions->size(); ++i) {
            const Json& condition = conditions->asArray()[i];
            if (condition.getString("type") == "Available") {
              return condition.getString("status") == status;
            }
          }
          return false;
        },
        seconds(60));
  }

  Process backend_;
  std::vector<std::string> apiservices_;
  std::vector<std::string> crd_groups_;
  std::vector<std::string> namespaces_;
};

// An aggregated API created by someone else (not a bundle) is reported once it is Available: its group-version and
// kinds. When its backend goes away (Available=False) it is reported no more; back again, it is reported again;
// deleted, it is gone. An APIService that never becomes Available (a Service without endpoints) counts for nothing,
// as in Helm's .Capabilities (client-go drops discovery's stale versions). Each change re-registers once.
TEST_F(ApiServiceAgentTest, AggregatedApiAvailabilityAndDeletionReRegister) {
  startRegisteredAgent();
  ASSERT_FALSE(requests().empty());
  const std::string ns = testNamespace("apisvc");
  const std::string dead_group = randomHex(4) + ".dead.example.com";
  ASSERT_NO_FATAL_FAILURE(createService(ns, "no-endpoints", false));
  ASSERT_NO_FATAL_FAILURE(createApiService(dead_group, ns, "no-endpoints", 443));
  ASSERT_TRUE(availableIs(dead_group, "False"));

  auto port = harness::freeTcpPort();
  ASSERT_TRUE(port.ok());
  const std::string group = randomHex(4) + ".metrics.example.com";
  const std::string gv = group + "/v1beta1";
  ASSERT_NO_FATAL_FAILURE(startBackend(group, *port));
  ASSERT_NO_FATAL_FAILURE(createService(ns, "aggregated", true));
  ASSERT_NO_FATAL_FAILURE(createApiService(group, ns, "aggregated", *port));
  ASSERT_TRUE(latestRegistration([&](const auto& r) { return has(r, gv) && has(r, gv + "/Gauge"); }))
      << "the available APIService was not reported";
  EXPECT_FALSE(hasKindOf(requests().back(), dead_group + "/v1beta1") || has(requests().back(), dead_group + "/v1beta1"))
      << "an unavailable APIService counts for nothing";

  backend_.stop();
  ASSERT_TRUE(availableIs(group, "False"));
  ASSERT_TRUE(latestRegistration([&](const auto& r) { return !has(r, gv) && !has(r, gv + "/Gauge"); }))
      << "an APIService that became unavailable is still reported";

  ASSERT_NO_FATAL_FAILURE(startBackend(group, *port));
  ASSERT_TRUE(latestRegistration([&](const auto& r) { return has(r, gv + "/Gauge"); }))
      << "the APIService available again was not reported";

  ASSERT_TRUE(kube_->remove("apiregistration.k8s.io/v1", "APIService", "", "v1beta1." + group).ok());
  ASSERT_TRUE(latestRegistration([&](const auto& r) { return !has(r, gv) && !has(r, gv + "/Gauge"); }))
      << "the deleted APIService is still reported";
  // Counted when the hub's reply arrives, just after the responder recorded the request.
  EXPECT_TRUE(eventually(
      [&] {
        return metric("api_versions_reregistrations_total", {{"result", "accepted"}}) >= 4;
      },
      seconds(10)));
  EXPECT_EQ(metric("apiservice_watch_errors_total", {{"step", "list"}}), 0);
  EXPECT_EQ(metric("api_discovery_errors_total"), 0);
  const auto sent = requests();
  for (size_t i = 1; i < sent.size(); ++i) {
    EXPECT_NE(sent[i].api_versions, sent[i - 1].api_versions) << "an unchanged set must not re-register";
  }
}

// The agent's identity may read CRDs but not APIServices (a restricted RBAC): the APIService watch fails, is
// counted and logged and retried; the CRD watch still re-registers on a new CRD.
TEST_F(ApiServiceAgentTest, ForbiddenApiServiceWatchLeavesTheCrdWatchWorking) {
  const std::string ns = testNamespace("agentsa");
  const std::string role = unique("no-apiservices");
  auto rbac = Json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
    "metadata":{"name":")" +
                          role + R"("},
    "rules":[{"apiGroups":["","apiextensions.k8s.io"],"resources":["*"],"verbs":["*"]}]})");
  ASSERT_TRUE(rbac.ok() && kube_->apply(*rbac).ok());
  auto binding = Json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding",
    "metadata":{"name":")" + role +
                             R"("},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":")" +
                             role + R"("},
    "subjects":[{"kind":"ServiceAccount","namespace":")" +
                             ns + R"(","name":"agent"}]})");
  ASSERT_TRUE(binding.ok() && kube_->apply(*binding).ok());
  std::shared_ptr<kube::KubeClient> restricted =
      kube_->impersonating({.user = "system:serviceaccount:" + ns + ":agent"});
  startResponder();
  startAgent(restricted);

  ASSERT_TRUE(eventually(
      [&] {
        return metric("apiservice_watch_errors_total", {{"step", "list"}}) >= 1;
      },
      seconds(30)))
      << "the forbidden APIService list was not counted";
  const std::string group = randomHex(4) + ".apis.example.com";
  crd_groups_.push_back(group);
  auto crd = Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"gadgets.)" +
                         group + R"("},"spec":{"group":")" + group + R"(","scope":"Namespaced",
      "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},
      "versions":[{"name":"v1","served":true,"storage":true,
        "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})");
  ASSERT_TRUE(crd.ok() && kube_->apply(*crd, {.field_manager = "someone-else"}).ok());
  EXPECT_TRUE(latestRegistration([&](const auto& r) { return has(r, group + "/v1/Gadget"); }))
      << "the CRD watch stopped with the APIService watch";
  EXPECT_EQ(metric("crd_watch_errors_total", {{"step", "list"}}), 0);
  (void)kube_->remove("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", role);
  (void)kube_->remove("rbac.authorization.k8s.io/v1", "ClusterRole", "", role);
}

}  // namespace
}  // namespace flotilla::agent
