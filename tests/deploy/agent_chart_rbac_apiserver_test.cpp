// The agent chart's default RBAC on a real kube-apiserver with RBAC authorization (tests/harness/kube): the RBAC
// objects `helm template` renders are applied with kubectl, then checked twice — `kubectl auth can-i --as <agent
// SA>`, and real requests made with a token of the agent's ServiceAccount: it may create a Deployment, a
// ClusterRole and a CRD, but it may not impersonate an arbitrary user, group or service account; it may
// impersonate exactly the service accounts listed in impersonation.serviceAccounts, in the agent namespace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_suite.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::HasSubstr;

constexpr const char* kNamespace = "flotilla-system";
constexpr const char* kRelease = "rbacdefault";
constexpr const char* kAgent = "system:serviceaccount:flotilla-system:rbacdefault-flotilla-agent";

class AgentChartRbacOnApiserver : public ApiserverSuite {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(ApiserverSuite::SetUpTestSuite());
    for (const std::string ns : {kNamespace, "apps"}) {
      ASSERT_NO_FATAL_FAILURE(createNamespace(ns));
    }
    ASSERT_NO_FATAL_FAILURE(applyAgentRbac());
    auto token = admin({"-n", kNamespace, "create", "token", std::string(kRelease) + "-flotilla-agent"});
    ASSERT_EQ(token.exit_code, 0) << token.err;
    agent_token_ = token.out.substr(0, token.out.find('\n'));
    ASSERT_FALSE(agent_token_.empty());
  }

  static void TearDownTestSuite() {
    if (cluster_ != nullptr && !rendered_rbac_.empty()) {
      admin({"delete", "--ignore-not-found", "--wait=false", "-f", "-"}, rendered_rbac_);
    }
  }

  //! kubectl as the cluster admin (the suite's kubectl), as opposed to asAgent.
  static CommandResult admin(std::vector<std::string> args, const std::string& input = {}) {
    return kubectl(std::move(args), input);
  }

  //! kubectl as the agent's ServiceAccount itself (its token, no client certificate).
  static CommandResult asAgent(std::vector<std::string> args, const std::string& input = {}) {
    return asToken(agent_token_, std::move(args), input);
  }

  static CommandResult asToken(const std::string& token, std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig=/dev/null", "--server=" + cluster_->serverUrl(),
                               "--certificate-authority=" + cluster_->caFile(), "--token=" + token});
    return run(args, input);
  }

  //! `kubectl auth can-i <what> --as=<agent SA>`: "yes" or "no".
  static std::string canI(std::vector<std::string> what, const std::string& as = kAgent) {
    what.insert(what.begin(), {"auth", "can-i"});
    what.push_back("--as=" + as);
    auto result = admin(what);
    return result.out.substr(0, result.out.find('\n'));
  }

  //! Renders the chart with its defaults (rbac.mode=applyAll) and one listed service account, and applies only
  //! its ServiceAccount and RBAC objects (a List), plus the listed account itself.
  static void applyAgentRbac() {
    const std::vector<std::string> args{
        "--set", "clusterName=edge-1", "--set", "nats.url=nats://hub:4222",
        "--set", "nats.insecure=true", "--set", "impersonation.serviceAccounts={deployer}"};
    auto objects = renderChart("flotilla-agent", args, kRelease, kNamespace);
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    Json list = Json::obj({{"apiVersion", "v1"}, {"kind", "List"}, {"items", Json::array()}});
    for (const auto& object : *objects) {
      const std::string kind = object.getString("kind");
      if (kind == "ServiceAccount" || kind == "ClusterRole" || kind == "ClusterRoleBinding" || kind == "Role" ||
          kind == "RoleBinding") {
        Json copy = object;
        if (copy.at({"metadata", "namespace"}) == nullptr && kind != "ClusterRole" && kind != "ClusterRoleBinding") {
          copy["metadata"]["namespace"] = Json(kNamespace);
        }
        list.find("items")->push(copy);
      }
    }
    ASSERT_EQ(list.find("items")->size(), 5u) << "ServiceAccount, ClusterRole(+Binding), Role(+Binding)";
    rendered_rbac_ = list.dump();
    auto applied = admin({"apply", "-f", "-"}, rendered_rbac_);
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    auto deployer = admin({"-n", kNamespace, "create", "serviceaccount", "deployer"});
    ASSERT_TRUE(deployer.exit_code == 0 || deployer.err.find("AlreadyExists") != std::string::npos) << deployer.err;
  }

  static inline std::string agent_token_;
  static inline std::string rendered_rbac_;
};

// Without RBAC authorization every answer would be "yes": an identity nothing was granted to is refused.
TEST_F(AgentChartRbacOnApiserver, TheApiServerAuthorizesWithRbac) {
  EXPECT_EQ(canI({"get", "pods", "-n", "default"}, "system:serviceaccount:default:nobody"), "no");
  EXPECT_EQ(canI({"get", "pods", "-n", "default"}, cluster_->tokenUser().name), "no");
}

TEST_F(AgentChartRbacOnApiserver, DefaultRoleAppliesAnyKind) {
  EXPECT_EQ(canI({"create", "deployments.apps", "-n", "apps"}), "yes");
  EXPECT_EQ(canI({"patch", "deployments.apps", "-n", "apps"}), "yes");
  EXPECT_EQ(canI({"create", "clusterroles.rbac.authorization.k8s.io"}), "yes");
  EXPECT_EQ(canI({"escalate", "clusterroles.rbac.authorization.k8s.io"}), "yes");
  EXPECT_EQ(canI({"bind", "clusterroles.rbac.authorization.k8s.io"}), "yes");
  EXPECT_EQ(canI({"create", "customresourcedefinitions.apiextensions.k8s.io"}), "yes");
  EXPECT_EQ(canI({"deletecollection", "configmaps", "-n", kNamespace}), "yes");
  EXPECT_EQ(canI({"watch", "customresourcedefinitions.apiextensions.k8s.io"}), "yes");
  EXPECT_EQ(canI({"get", "/apis"}), "yes");

  // The same with the agent's own token: real objects, created for real.
  auto deployment = asAgent({"-n", "apps", "create", "deployment", "rbac-probe", "--image=registry.invalid/x:1"});
  EXPECT_EQ(deployment.exit_code, 0) << deployment.err;
  auto role = asAgent({"create", "clusterrole", "rbac-probe-reader", "--verb=get", "--resource=secrets"});
  EXPECT_EQ(role.exit_code, 0) << role.err;
  const std::string crd =
      R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
          "metadata":{"name":"probes.rbac.example.com"},
          "spec":{"group":"rbac.example.com","scope":"Namespaced",
            "names":{"plural":"probes","singular":"probe","kind":"Probe","listKind":"ProbeList"},
            "versions":[{"name":"v1","served":true,"storage":true,
              "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})";
  auto crd_applied = asAgent({"apply", "-f", "-"}, crd);
  EXPECT_EQ(crd_applied.exit_code, 0) << crd_applied.err;
  admin({"-n", "apps", "delete", "--ignore-not-found", "--wait=false", "deployment", "rbac-probe"});
  admin({"delete", "--ignore-not-found", "--wait=false", "clusterrole", "rbac-probe-reader"});
  admin({"delete", "--ignore-not-found", "--wait=false", "crd", "probes.rbac.example.com"});
}

TEST_F(AgentChartRbacOnApiserver, ImpersonatesOnlyTheListedServiceAccount) {
  // can-i: the listed account in the agent namespace, nothing else.
  EXPECT_EQ(canI({"impersonate", "serviceaccounts/deployer", "-n", kNamespace}), "yes");
  EXPECT_EQ(canI({"impersonate", "serviceaccounts/other", "-n", kNamespace}), "no");
  EXPECT_EQ(canI({"impersonate", "serviceaccounts/deployer", "-n", "apps"}), "no");
  EXPECT_EQ(canI({"impersonate", "users/alice"}), "no");
  EXPECT_EQ(canI({"impersonate", "users/system:admin"}), "no");
  EXPECT_EQ(canI({"impersonate", "groups/system:masters"}), "no");

  // Real requests with the agent's token and Impersonate-User: allowed for the listed account (its own RBAC then
  // decides: no grants, so the list itself is Forbidden for the impersonated user, not for the agent) ...
  auto listed = asAgent({"--as=system:serviceaccount:flotilla-system:deployer", "-n", kNamespace, "get", "configmaps"});
  EXPECT_NE(listed.exit_code, 0);
  EXPECT_THAT(listed.err, HasSubstr("User \"system:serviceaccount:flotilla-system:deployer\" cannot list"))
      << listed.err;
  // ... refused for anyone else, by the impersonation check itself.
  for (const std::string as : {"alice", "system:serviceaccount:flotilla-system:other",
                               "system:serviceaccount:apps:deployer", "system:admin"}) {
    auto refused = asAgent({"--as=" + as, "-n", kNamespace, "get", "configmaps"});
    EXPECT_NE(refused.exit_code, 0) << as;
    EXPECT_THAT(refused.err, HasSubstr("cannot impersonate")) << as << ": " << refused.err;
  }
  auto group = asAgent({"--as=system:serviceaccount:flotilla-system:deployer", "--as-group=system:masters", "-n",
                        kNamespace, "get", "configmaps"});
  EXPECT_NE(group.exit_code, 0);
  EXPECT_THAT(group.err, HasSubstr("cannot impersonate")) << group.err;
}

// The NOTES (rendered by `helm install --dry-run=client`, which asks the API server for its version) say which mode
// is in force and which service accounts may be impersonated.
TEST_F(AgentChartRbacOnApiserver, NotesNameTheModeAndTheImpersonatedAccounts) {
  const std::string helm = toolPath("helm");
  ASSERT_FALSE(helm.empty()) << "helm missing: run scripts/setup --no-run";
  auto notes = [&](const std::vector<std::string>& more) {
    std::vector<std::string> argv{helm,
                                  "install",
                                  "notes",
                                  chartDir("flotilla-agent"),
                                  "-n",
                                  kNamespace,
                                  "--dry-run=client",
                                  "--kubeconfig",
                                  cluster_->kubeconfigPath(),
                                  "--set",
                                  "clusterName=edge-1",
                                  "--set",
                                  "nats.url=nats://hub:4222",
                                  "--set",
                                  "nats.insecure=true"};
    argv.insert(argv.end(), more.begin(), more.end());
    return run(argv);
  };
  auto defaults = notes({"--set", "impersonation.serviceAccounts={deployer,viewer}"});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err;
  EXPECT_THAT(defaults.out, HasSubstr("rbac.mode=applyAll), but not impersonate anyone except the listed"));
  EXPECT_THAT(defaults.out, HasSubstr("serviceAccount deployer, viewer"));
  auto admin_notes = notes({"--set", "rbac.mode=clusterAdmin"});
  ASSERT_EQ(admin_notes.exit_code, 0) << admin_notes.err;
  EXPECT_THAT(admin_notes.out, HasSubstr("includes\n  impersonating any user, group or service account"));
}

// rbac.mode=rules with a registration token: the agent's ServiceAccount can keep its credentials in the one Secret
// the chart names, the way the agent writes it (get, then server-side apply that creates it and later updates it),
// and reads no other Secret.
TEST_F(AgentChartRbacOnApiserver, RulesModeLetsTheAgentKeepItsCredentialsSecretOnly) {
  const std::string release = "rbacreg";
  auto objects = renderChart(
      "flotilla-agent",
      {"--set", "clusterName=edge-2", "--set", "nats.url=tls://hub:4222", "--set", "nats.registration.secretName=token",
       "--set", "nats.tls.secretName=token", "--set", "rbac.mode=rules"},
      release, kNamespace);
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  Json list = Json::obj({{"apiVersion", "v1"}, {"kind", "List"}, {"items", Json::array()}});
  for (const char* kind : {"ServiceAccount", "Role", "RoleBinding"}) {
    for (const auto& object : *objects) {
      if (object.getString("kind") == kind) {
        Json copy = object;
        copy["metadata"]["namespace"] = Json(kNamespace);
        list.find("items")->push(copy);
      }
    }
  }
  auto applied = admin({"apply", "-f", "-"}, list.dump());
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto token = admin({"-n", kNamespace, "create", "token", release + "-flotilla-agent"});
  ASSERT_EQ(token.exit_code, 0) << token.err;
  const std::string agent = token.out.substr(0, token.out.find('\n'));
  auto secret = [](const std::string& name, const std::string& creds) {
    return Json::obj({{"apiVersion", "v1"},
                      {"kind", "Secret"},
                      {"metadata", Json::obj({{"name", name}, {"namespace", kNamespace}})},
                      {"stringData", Json::obj({{"creds", creds}})}})
        .dump();
  };
  const std::string mine = release + "-flotilla-agent-credentials";
  const std::vector<std::string> apply = {"apply", "--server-side", "--field-manager=flotilla-agent-credentials", "-f",
                                          "-"};
  auto created = asToken(agent, apply, secret(mine, "first"));
  EXPECT_EQ(created.exit_code, 0) << created.err;
  auto renewed = asToken(agent, apply, secret(mine, "second"));
  EXPECT_EQ(renewed.exit_code, 0) << renewed.err;
  auto read = asToken(agent, {"-n", kNamespace, "get", "secret", mine, "-o", "jsonpath={.data.creds}"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "c2Vjb25k");  // "second"
  auto other = admin({"-n", kNamespace, "create", "secret", "generic", "someone-else", "--from-literal=k=v"});
  ASSERT_TRUE(other.exit_code == 0 || other.err.find("AlreadyExists") != std::string::npos) << other.err;
  auto foreign = asToken(agent, {"-n", kNamespace, "get", "secret", "someone-else"});
  EXPECT_NE(foreign.exit_code, 0);
  EXPECT_THAT(foreign.err, HasSubstr("forbidden"));
  admin({"delete", "--ignore-not-found", "--wait=false", "-f", "-"}, list.dump());
  admin({"-n", kNamespace, "delete", "--ignore-not-found", "secret", mine, "someone-else"});
}

}  // namespace
}  // namespace flotilla::deploy_test
