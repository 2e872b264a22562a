// Unit tests of charts/flotilla-agent's RBAC modes and values.schema.json: the default ClusterRole lets the agent
// apply anything a bundle may contain but never grants `impersonate` (only impersonation.yaml does, on the listed
// service accounts); namespaced mode grants the same in the listed namespaces only; cluster-admin is an explicit
// opt-in; bad values fail at `helm template` naming the value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "deploy_util.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> agentArgs(const std::vector<std::string>& more = {}) {
  std::vector<std::string> args{"--set", "clusterName=edge-1", "--set", "nats.url=nats://hub:4222",
                                "--set", "nats.insecure=true"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

constexpr const char* kRoleName = "t-flotilla-agent-flotilla-system";

TEST(AgentChartRbac, DefaultClusterRoleAppliesAnythingButNeverImpersonates) {
  auto objects = renderChart("flotilla-agent", agentArgs());
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  for (const auto& object : *objects) {
    EXPECT_THAT(object.dump(), Not(HasSubstr("impersonate"))) << object.dump();
    EXPECT_THAT(object.dump(), Not(HasSubstr("cluster-admin"))) << object.dump();
  }
  const Json* role = findObject(*objects, "ClusterRole", kRoleName);
  ASSERT_NE(role, nullptr);
  const auto& rules = role->find("rules")->asArray();
  ASSERT_EQ(rules.size(), 3u) << role->dump();
  // Every group and resource with the verbs applying, reading, watching and pruning need; no "*" verb (it would
  // include impersonate).
  EXPECT_EQ(stringList(rules[0].find("apiGroups")), std::vector<std::string>{"*"});
  EXPECT_EQ(stringList(rules[0].find("resources")), std::vector<std::string>{"*"});
  EXPECT_EQ(stringList(rules[0].find("verbs")), (std::vector<std::string>{"get", "list", "watch", "create", "update",
                                                                          "patch", "delete", "deletecollection"}));
  // Bundles may ship RBAC.
  EXPECT_EQ(stringList(rules[1].find("apiGroups")), std::vector<std::string>{"rbac.authorization.k8s.io"});
  EXPECT_EQ(stringList(rules[1].find("resources")), (std::vector<std::string>{"roles", "clusterroles"}));
  EXPECT_EQ(stringList(rules[1].find("verbs")), (std::vector<std::string>{"escalate", "bind"}));
  // Discovery.
  EXPECT_EQ(stringList(rules[2].find("nonResourceURLs")),
            (std::vector<std::string>{"/api", "/api/*", "/apis", "/apis/*", "/version"}));
  EXPECT_EQ(stringList(rules[2].find("verbs")), std::vector<std::string>{"get"});
  // No inventory Role: the ClusterRole covers ConfigMaps everywhere.
  EXPECT_EQ(findObject(*objects, "Role", "t-flotilla-agent-inventory"), nullptr);
}

TEST(AgentChartRbac, ClusterAdminIsAnExplicitOptIn) {
  auto objects = renderChart("flotilla-agent", agentArgs({"--set", "rbac.mode=clusterAdmin"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* binding = findObject(*objects, "ClusterRoleBinding", kRoleName);
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ(binding->at({"roleRef", "name"})->asString(), "cluster-admin");
  EXPECT_EQ(kindCounts(*objects).count("ClusterRole"), 0u);
}

TEST(AgentChartRbac, RbacCreateFalseRendersNoRbacEvenWithImpersonation) {
  auto objects = renderChart(
      "flotilla-agent", agentArgs({"--set", "rbac.create=false", "--set", "impersonation.serviceAccounts={deployer}"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const auto counts = kindCounts(*objects);
  for (const char* kind : {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}) {
    EXPECT_EQ(counts.count(kind), 0u) << kind;
  }
}

struct BadValue {
  std::vector<std::string> args;
  std::string names;  //!< what helm's message must contain
};

// values.schema.json: a wrong type, a value out of range or an unknown key fails at `helm template` (and so at
// install/upgrade), with a message naming the value, instead of reaching the agent.
TEST(AgentChartSchema, BadValuesFailAtTemplateTime) {
  const std::vector<BadValue> bad = {
      {{"--set", "parallelBundles=65"}, "parallelBundles"},
      {{"--set", "parallelBundles=-1"}, "parallelBundles"},
      {{"--set", "parallelBundles=2.5"}, "parallelBundles"},
      {{"--set-string", "parallelBundles=8"}, "parallelBundles"},
      {{"--set", "impersonation.serviceAccounts=deployer"}, "serviceAccounts"},
      {{"--set", "impersonation.serviceAccounts={Not_A_Name}"}, "serviceAccounts"},
      {{"--set", "impersonation.serviceAccounts={a,a}"}, "serviceAccounts"},
      {{"--set", "rbac.mode=everything"}, "mode"},
      {{"--set", "rbac.clusterAdmin=true"}, "clusterAdmin"},
      {{"--set", "logLevel=verbose"}, "logLevel"},
      {{"--set", "heartbeatInterval=soon"}, "heartbeatInterval"},
      {{"--set", "resyncInterval=0"}, "resyncInterval"},
      {{"--set", "httpPort=70000"}, "httpPort"},
      {{"--set", "nats.tls.clientCert=maybe"}, "clientCert"},
      {{"--set", "parallelBundle=4"}, "parallelBundle"},
      {{"--set", "rbac.namespaces={Not_A_Namespace}"}, "namespaces"},
      {{"--set", "rbac.mode=namespaced", "--set", "rbac.namespaces={app,app}"}, "namespaces"},
  };
  for (const auto& value : bad) {
    auto objects = renderChart("flotilla-agent", agentArgs(value.args));
    ASSERT_FALSE(objects.ok()) << ::testing::PrintToString(value.args);
    EXPECT_THAT(objects.error().message, HasSubstr("values don't meet the specifications of the schema"))
        << objects.error().message;
    EXPECT_THAT(objects.error().message, HasSubstr(value.names)) << objects.error().message;
  }
}

// The least-privilege option: a Role with what applyAll grants (no impersonate; escalate and bind on Roles only) in
// each listed namespace and nothing writable cluster-wide — only get/list/watch on CRDs and APIServices and the
// discovery URLs (the agent's API-version watches), plus the inventory Role; the agent gets --namespaces so that it
// refuses everything else and watches per namespace.
TEST(AgentChartRbac, NamespacedModeRendersRolesInTheListedNamespacesOnly) {
  auto objects =
      renderChart("flotilla-agent", agentArgs({"--set", "rbac.mode=namespaced", "--set", "rbac.namespaces={app,web}"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  std::vector<std::string> role_namespaces;
  std::vector<std::string> binding_namespaces;
  for (const auto& object : *objects) {
    EXPECT_THAT(object.dump(), Not(HasSubstr("impersonate"))) << object.dump();
    EXPECT_THAT(object.dump(), Not(HasSubstr("cluster-admin"))) << object.dump();
    const std::string kind = object.getString("kind");
    const Json* ns = object.at({"metadata", "namespace"});
    const std::string name = object.at({"metadata", "name"})->asString();
    if (kind == "Role" && name == kRoleName) {
      role_namespaces.push_back(ns->asString());
      const auto& rules = object.find("rules")->asArray();
      ASSERT_EQ(rules.size(), 2u) << object.dump();
      EXPECT_EQ(stringList(rules[0].find("apiGroups")), std::vector<std::string>{"*"});
      EXPECT_EQ(stringList(rules[0].find("resources")), std::vector<std::string>{"*"});
      EXPECT_EQ(stringList(rules[0].find("verbs")),
                (std::vector<std::string>{"get", "list", "watch", "create", "update", "patch", "delete",
                                          "deletecollection"}));
      EXPECT_EQ(stringList(rules[1].find("resources")), std::vector<std::string>{"roles"});
      EXPECT_EQ(stringList(rules[1].find("verbs")), (std::vector<std::string>{"escalate", "bind"}));
    }
    if (kind == "RoleBinding" && name == kRoleName) {
      binding_namespaces.push_back(ns->asString());
      EXPECT_EQ(object.at({"roleRef", "kind"})->asString(), "Role");
      EXPECT_EQ(object.at({"roleRef", "name"})->asString(), kRoleName);
      EXPECT_EQ(object.find("subjects")->asArray()[0].getString("namespace"), "flotilla-system");
    }
  }
  EXPECT_EQ(role_namespaces, (std::vector<std::string>{"app", "web"}));
  EXPECT_EQ(binding_namespaces, (std::vector<std::string>{"app", "web"}));
  // Cluster-wide: read-only CRDs and APIServices, and discovery.
  const Json* cluster_role = findObject(*objects, "ClusterRole", kRoleName);
  ASSERT_NE(cluster_role, nullptr);
  const auto& rules = cluster_role->find("rules")->asArray();
  ASSERT_EQ(rules.size(), 3u) << cluster_role->dump();
  EXPECT_EQ(stringList(rules[0].find("resources")), std::vector<std::string>{"customresourcedefinitions"});
  EXPECT_EQ(stringList(rules[1].find("resources")), std::vector<std::string>{"apiservices"});
  for (size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(stringList(rules[i].find("verbs")),
              (i < 2 ? std::vector<std::string>{"get", "list", "watch"} : std::vector<std::string>{"get"}));
  }
  EXPECT_EQ(stringList(rules[2].find("nonResourceURLs")),
            (std::vector<std::string>{"/api", "/api/*", "/apis", "/apis/*", "/version"}));
  const Json* binding = findObject(*objects, "ClusterRoleBinding", kRoleName);
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ(binding->at({"roleRef", "name"})->asString(), kRoleName);
  // The inventories.
  const Json* inventory = findObject(*objects, "Role", "t-flotilla-agent-inventory");
  ASSERT_NE(inventory, nullptr);
  EXPECT_EQ(inventory->at({"metadata", "namespace"})->asString(), "flotilla-system");
  // The agent is told.
  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  expectArgs(containerArgs(*deployment), {"--namespaces=app,web"});
  auto defaults = renderChart("flotilla-agent", agentArgs());
  ASSERT_TRUE(defaults.ok());
  for (const auto& arg : containerArgs(*findObject(*defaults, "Deployment", "t-flotilla-agent"))) {
    EXPECT_THAT(arg, Not(HasSubstr("--namespaces")));
  }
  // rbac.create=false: no RBAC, yet the agent keeps to the namespaces.
  auto unbound = renderChart("flotilla-agent", agentArgs({"--set", "rbac.mode=namespaced", "--set",
                                                          "rbac.namespaces={app}", "--set", "rbac.create=false"}));
  ASSERT_TRUE(unbound.ok()) << unbound.error().describe();
  EXPECT_EQ(kindCounts(*unbound).count("Role"), 0u);
  expectArgs(containerArgs(*findObject(*unbound, "Deployment", "t-flotilla-agent")), {"--namespaces=app"});
}

// rbac.mode=namespaced without namespaces (also with rbac.create=false: the list is the agent's --namespaces), and
// rbac.namespaces with another mode, fail at `helm template` naming the value.
TEST(AgentChartRbac, NamespacedModeNeedsTheNamespaces) {
  for (const std::vector<std::string>& more : std::vector<std::vector<std::string>>{
           {"--set", "rbac.mode=namespaced"},
           {"--set", "rbac.mode=namespaced", "--set-json", "rbac.namespaces=[]"},
           {"--set", "rbac.mode=namespaced", "--set", "rbac.create=false"},
       }) {
    auto objects = renderChart("flotilla-agent", agentArgs(more));
    ASSERT_FALSE(objects.ok()) << ::testing::PrintToString(more);
    EXPECT_THAT(objects.error().message,
                HasSubstr("rbac.namespaces must list at least one namespace with rbac.mode=namespaced"));
  }
  auto stray = renderChart("flotilla-agent", agentArgs({"--set", "rbac.namespaces={app}"}));
  ASSERT_FALSE(stray.ok());
  EXPECT_THAT(stray.error().message, HasSubstr("rbac.namespaces is used only with rbac.mode=namespaced"));
}

TEST(AgentChartSchema, GoodValuesPass) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--set", "parallelBundles=0"},
           {"--set", "parallelBundles=1"},
           {"--set", "parallelBundles=64"},
           {"--set", "heartbeatInterval=1m30s", "--set", "resyncInterval=45", "--set", "crdTimeout=500ms"},
           {"--set", "impersonation.serviceAccounts={deployer,app.viewer}", "--set", "rbac.mode=rules"},
           {"--set", "clusterLabels.tier=1", "--set", "clusterLabels.gpu=true"},
       }) {
    auto objects = renderChart("flotilla-agent", agentArgs(args));
    EXPECT_TRUE(objects.ok()) << ::testing::PrintToString(args) << ": " << objects.error().describe();
  }
}

}  // namespace
}  // namespace flotilla::deploy_test
