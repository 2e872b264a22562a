// Integration tests of the charts against a real kube-apiserver (tests/harness/kube): every rendered object is
// accepted by server-side dry run (schema, defaulting, admission), and the agent's RBAC, applied for real, grants
// what values.yaml says — cluster-admin only on request, only the listed rules plus CRDs and inventories with
// rbac.mode=rules (the default mode and impersonation: agent_chart_rbac_apiserver_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_suite.h"

namespace flotilla::deploy_test {
namespace {

class ChartsOnApiserver : public ApiserverSuite {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(ApiserverSuite::SetUpTestSuite());
    // Namespaced objects can only be dry-run into a namespace that exists.
    createNamespace("flotilla-system");
  }

  // Renders the chart and sends it with `kubectl apply --dry-run=server`; every object must be accepted.
  static void expectDryRunAccepts(const std::string& chart, const std::vector<std::string>& args,
                                  const std::string& release) {
    auto text = renderChartText(chart, args, release);
    ASSERT_TRUE(text.ok()) << text.error().describe();
    auto objects = renderChart(chart, args, release);
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    auto applied = kubectl({"apply", "--dry-run=server", "-f", "-"}, *text);
    ASSERT_EQ(applied.exit_code, 0) << applied.err << "\n" << *text;
    size_t accepted = 0;
    for (size_t at = applied.out.find("(server dry run)"); at != std::string::npos;
         at = applied.out.find("(server dry run)", at + 1)) {
      ++accepted;
    }
    EXPECT_EQ(accepted, objects->size()) << applied.out;
  }

  static std::string canI(const std::string& as, std::vector<std::string> what) {
    what.insert(what.begin(), {"auth", "can-i"});
    what.push_back("--as=" + as);
    auto result = kubectl(what);
    return result.out.substr(0, result.out.find('\n'));
  }
};

TEST_F(ChartsOnApiserver, HubDefaultsPassServerDryRun) {
  expectDryRunAccepts("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false"}, "hub");
  expectDryRunAccepts("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false", "--set", "nats.auth.mutualTls=true"},
                      "hub-mtls");
}

TEST_F(ChartsOnApiserver, HubWithExternalNatsAndEveryOptionPassesServerDryRun) {
  expectDryRunAccepts("flotilla-hub", {"--set", "nats.embedded.enabled=false",
                                       "--set", "nats.url=tls://nats.example:4222",
                                       "--set", "nats.tls.secretName=nats-tls",
                                       "--set", "nats.tls.clientCert=true",
                                       "--set", "nats.userPassword.secretName=hub-user",
                                       "--set", "poller.persistence.enabled=true",
                                       "--set", "poller.gitCredentials.secrets[0].workspace=fleet-default",
                                       "--set", "poller.gitCredentials.secrets[0].name=github-token",
                                       "--set", "bundler.replicas=2",
                                       "--set", "gateway.enabled=true",
                                       "--set", "poller.webhook.enabled=true",
                                       "--set", "poller.webhook.ingress.enabled=true",
                                       "--set", "poller.webhook.ingress.host=flotilla.example.com",
                                       "--set", "poller.webhook.ingress.tls[0].secretName=webhook-tls",
                                       "--set", "global.imageRegistry=registry.example.com"},
                      "hub-ext");
}

TEST_F(ChartsOnApiserver, AgentVariantsPassServerDryRun) {
  const std::vector<std::string> required{"--set", "clusterName=edge-1", "--set", "nats.url=nats://hub:4222",
                                          "--set", "nats.insecure=true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), required.begin(), required.end());
    return more;
  };
  expectDryRunAccepts("flotilla-agent", with({"--set-string", "nats.credentials.content=creds"}), "agent-a");
  expectDryRunAccepts("flotilla-agent", with({"--set", "rbac.mode=rules"}), "agent-b");
  expectDryRunAccepts("flotilla-agent",
                      with({"--set", "rbac.mode=clusterAdmin", "--set", "impersonation.serviceAccounts={deployer}"}),
                      "agent-d");
  expectDryRunAccepts("flotilla-agent",
                      with({"--set", "kubeconfig.secretName=edge", "--set", "metrics.service.enabled=false"}),
                      "agent-c");
}

TEST_F(ChartsOnApiserver, AgentRbacGrantsWhatValuesSay) {
  const std::vector<std::string> required{"--set", "clusterName=edge-1", "--set", "nats.url=nats://hub:4222",
                                          "--set", "nats.insecure=true"};
  for (const auto& [release, extra] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"admin", {"--set", "rbac.mode=clusterAdmin"}}, {"restricted", {"--set", "rbac.mode=rules"}}}) {
    auto args = required;
    args.insert(args.end(), extra.begin(), extra.end());
    auto text = renderChartText("flotilla-agent", args, release);
    ASSERT_TRUE(text.ok()) << text.error().describe();
    auto applied = kubectl({"apply", "-f", "-"}, *text);
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
  }
  const std::string admin = "system:serviceaccount:flotilla-system:admin-flotilla-agent";
  EXPECT_EQ(canI(admin, {"*", "*"}), "yes");
  EXPECT_EQ(canI(admin, {"create", "clusterroles"}), "yes");
  EXPECT_EQ(canI(admin, {"impersonate", "users/alice"}), "yes") << "cluster-admin includes impersonate";

  const std::string restricted = "system:serviceaccount:flotilla-system:restricted-flotilla-agent";
  EXPECT_EQ(canI(restricted, {"create", "deployments.apps", "-n", "default"}), "yes");
  EXPECT_EQ(canI(restricted, {"watch", "customresourcedefinitions.apiextensions.k8s.io"}), "yes");
  EXPECT_EQ(canI(restricted, {"watch", "apiservices.apiregistration.k8s.io"}), "yes");
  EXPECT_EQ(canI(restricted, {"impersonate", "serviceaccounts/deployer", "-n", "flotilla-system"}), "no");
  EXPECT_EQ(canI(restricted, {"create", "configmaps", "-n", "flotilla-system"}), "yes");
  EXPECT_EQ(canI(restricted, {"create", "customresourcedefinitions.apiextensions.k8s.io"}), "no");
  EXPECT_EQ(canI(restricted, {"create", "clusterroles.rbac.authorization.k8s.io"}), "no");

  // Clean up for reruns against the same shared cluster.
  for (const auto& [release, mode] : std::vector<std::pair<std::string, std::string>>{
           {"admin", "rbac.mode=clusterAdmin"}, {"restricted", "rbac.mode=rules"}}) {
    auto args = required;
    args.insert(args.end(), {"--set", mode});
    auto text = renderChartText("flotilla-agent", args, release);
    ASSERT_TRUE(text.ok());
    kubectl({"delete", "--ignore-not-found", "--wait=false", "-f", "-"}, *text);
  }
}

}  // namespace
}  // namespace flotilla::deploy_test
