// Unit tests of the hub chart's Fleet CRDs (charts/flotilla-hub/crds/), read with flotilla's own YAML reader, and
// of the RBAC and admission objects `helm template` renders for them: one CRD per kind with Fleet's names, printer
// columns and category; every spec field the decoder accepts is in the schema at the same path with a matching
// type; spec is free-form only where the comments say; the aggregated roles and (gateway.enabled) the gateway's
// ServiceAccount, ClusterRole, binding and ValidatingAdmissionPolicy.
#include <algorithm>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "deploy_util.h"
#include "flotilla/core/util.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::HasSubstr;

struct Kind {
  std::string kind;
  std::string plural;
  std::vector<std::pair<std::string, std::string>> columns;  // name, jsonPath (Age last, on every kind)
};

const std::string kReady = R"(.status.conditions[?(@.type=="Ready")].message)";

const std::vector<Kind> kKinds = {
    {"GitRepo",
     "gitrepos",
     {{"Repo", ".spec.repo"},
      {"Commit", ".status.commit"},
      {"BundleDeployments-Ready", ".status.display.readyBundleDeployments"},
      {"Status", kReady}}},
    {"ClusterGroup",
     "clustergroups",
     {{"Clusters-Ready", ".status.display.readyClusters"},
      {"Bundles-Ready", ".status.display.readyBundles"},
      {"Status", kReady}}},
    {"Cluster",
     "clusters",
     {{"Bundles-Ready", ".status.display.readyBundles"}, {"Last-Seen", ".status.agent.lastSeen"}, {"Status", kReady}}},
    {"Bundle", "bundles", {{"BundleDeployments-Ready", ".status.display.readyClusters"}, {"Status", kReady}}},
    {"BundleDeployment",
     "bundledeployments",
     {{"Deployed", ".status.display.deployed"}, {"Monitored", ".status.display.monitored"}, {"Status", kReady}}},
};

//! The CRD of charts/flotilla-hub/crds/<plural>.fleet.cattle.io.yaml (the test fails when it does not parse).
Json loadCrd(const std::string& plural) {
  const std::string path = chartDir("flotilla-hub") + "/crds/" + plural + ".fleet.cattle.io.yaml";
  auto text = readFile(path);
  EXPECT_TRUE(text.ok()) << path;
  if (!text.ok()) {
    return {};
  }
  auto objects = parseObjects(*text, path);
  EXPECT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(objects.ok() ? objects->size() : 0u, 1u) << path;
  return objects.ok() && objects->size() == 1 ? objects->front() : Json();
}

const Json* specSchema(const Json& crd) {
  const Json* versions = crd.at({"spec", "versions"});
  if (versions == nullptr || !versions->isArray() || versions->asArray().empty()) {
    return nullptr;
  }
  return versions->asArray().front().at({"schema", "openAPIV3Schema", "properties", "spec"});
}

//! The schema at a dotted path below spec, "[]" after a name meaning its items: "targets[].clusterSelector".
const Json* schemaAt(const Json* schema, const std::string& path) {
  std::stringstream in(path);
  std::string step;
  while (schema != nullptr && std::getline(in, step, '.')) {
    const bool items = step.ends_with("[]");
    schema = schema->at({"properties", items ? step.substr(0, step.size() - 2) : step});
    if (items && schema != nullptr) {
      schema = schema->find("items");
    }
  }
  return schema;
}

TEST(HubCrds, OneFilePerKindWithFleetsNamesColumnsAndStatus) {
  for (const auto& kind : kKinds) {
    SCOPED_TRACE(kind.kind);
    const Json crd = loadCrd(kind.plural);
    EXPECT_EQ(crd.getString("kind"), "CustomResourceDefinition");
    EXPECT_EQ(crd.at({"metadata", "name"})->asString(), kind.plural + ".fleet.cattle.io");
    EXPECT_EQ(crd.at({"spec", "group"})->asString(), "fleet.cattle.io");
    EXPECT_EQ(crd.at({"spec", "scope"})->asString(), "Namespaced");
    EXPECT_EQ(crd.at({"spec", "names", "kind"})->asString(), kind.kind);
    EXPECT_EQ(crd.at({"spec", "names", "plural"})->asString(), kind.plural);
    EXPECT_EQ(crd.at({"spec", "names", "categories"})->dump(), R"(["fleet"])");
    const auto& versions = crd.at({"spec", "versions"})->asArray();
    ASSERT_EQ(versions.size(), 1u);
    const Json& version = versions.front();
    EXPECT_EQ(version.getString("name"), "v1alpha1");
    EXPECT_TRUE(version.getBool("served"));
    EXPECT_TRUE(version.getBool("storage"));
    EXPECT_EQ(version.at({"subresources", "status"})->dump(), "{}");
    std::vector<std::pair<std::string, std::string>> columns;
    for (const auto& column : version.find("additionalPrinterColumns")->asArray()) {
      columns.emplace_back(column.getString("name"), column.getString("jsonPath"));
    }
    auto expected = kind.columns;
    expected.emplace_back("Age", ".metadata.creationTimestamp");
    EXPECT_EQ(columns, expected);
    EXPECT_TRUE(version.at({"schema", "openAPIV3Schema", "properties", "status"})
                    ->getBool("x-kubernetes-preserve-unknown-fields"));
  }
}

// The spec field paths the strict decoder accepts (libs/model/src/resource_fields.h and option_fields.h: the
// fields() of GitRepoSpec, GitTarget, LabelSelector, CorrectDrift, ClusterSpec, ClusterGroupSpec), with the JSON
// type each decodes from. The decoder exposes no list of its own: this one must follow it when a field is added.
struct DecodedField {
  std::string path;
  std::string type;  // the schema's "type"
};

std::vector<DecodedField> selectorFields(const std::string& at) {
  return {{at, "object"},
          {at + ".matchLabels", "object"},
          {at + ".matchExpressions", "array"},
          {at + ".matchExpressions[].key", "string"},
          {at + ".matchExpressions[].operator", "string"},
          {at + ".matchExpressions[].values", "array"}};
}

std::vector<DecodedField> gitRepoFields() {
  std::vector<DecodedField> fields = {
      {"repo", "string"},
      {"branch", "string"},
      {"revision", "string"},
      {"paths", "array"},
      {"bundles", "array"},
      {"bundles[].base", "string"},
      {"bundles[].options", "string"},
      {"targetNamespace", "string"},
      {"targets", "array"},
      {"targets[].name", "string"},
      {"targets[].clusterName", "string"},
      {"targets[].clusterGroup", "string"},
      {"clientSecretName", "string"},
      {"helmSecretName", "string"},
      {"helmSecretNameForPaths", "string"},
      {"helmRepoURLRegex", "string"},
      {"caBundle", "string"},
      {"insecureSkipTLSVerify", "boolean"},
      {"insecureAllowHTTP", "boolean"},
      {"serviceAccount", "string"},
      {"paused", "boolean"},
      {"forceSyncGeneration", "integer"},
      {"keepResources", "boolean"},
      {"deleteNamespace", "boolean"},
      {"correctDrift", "object"},
      {"correctDrift.enabled", "boolean"},
      {"correctDrift.force", "boolean"},
      {"correctDrift.keepFailHistory", "boolean"},
      {"ociRegistrySecret", "string"},
      {"pollingInterval", "string"},
      {"disablePolling", "boolean"},
      {"webhookSecret", "string"},
      {"imageScanInterval", "string"},
      {"imageScanCommit", "object"},
      {"imageScanCommit.authorName", "string"},
      {"imageScanCommit.authorEmail", "string"},
      {"imageScanCommit.messageTemplate", "string"},
  };
  for (const char* selector : {"targets[].clusterSelector", "targets[].clusterGroupSelector"}) {
    auto more = selectorFields(selector);
    fields.insert(fields.end(), more.begin(), more.end());
  }
  return fields;
}

const std::vector<DecodedField> kClusterFields = {
    {"paused", "boolean"},
    {"clientID", "string"},
    {"kubeConfigSecret", "string"},
    {"kubeConfigSecretNamespace", "string"},
    {"redeployAgentGeneration", "integer"},
    {"agentNamespace", "string"},
    {"privateRepoURL", "string"},
    {"templateValues", "object"},
    {"agentEnvVars", "array"},
    {"agentTolerations", "array"},
    {"agentAffinity", "object"},
    {"agentResources", "object"},
    {"agentSchedulingCustomization", "object"},
    {"hostNetwork", "boolean"},
};

void expectFieldsInSchema(const std::string& plural, const std::vector<DecodedField>& fields) {
  const Json crd = loadCrd(plural);
  const Json* spec = specSchema(crd);
  ASSERT_NE(spec, nullptr) << plural;
  for (const auto& field : fields) {
    const Json* schema = schemaAt(spec, field.path);
    ASSERT_NE(schema, nullptr) << plural << ": spec." << field.path << " is not in the CRD schema";
    EXPECT_EQ(schema->getString("type"), field.type) << plural << ": spec." << field.path;
  }
  // Nothing in the schema the decoder does not know at the top of spec (a stale field would be a silent no-op).
  for (const auto& property : spec->find("properties")->asObject()) {
    const std::string& name = property.first;  // a named copy: clang 14 cannot capture a structured binding
    const bool decoded = std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.path == name; });
    EXPECT_TRUE(decoded || (plural == "gitrepos" && name == "ociRegistry"))
        << plural << ": spec." << name << " is in the CRD but not decoded";
  }
}

TEST(HubCrds, EveryFieldTheDecoderAcceptsIsInTheSchema) {
  expectFieldsInSchema("gitrepos", gitRepoFields());
  expectFieldsInSchema("clusters", kClusterFields);
  expectFieldsInSchema("clustergroups", selectorFields("selector"));
  const Json crd = loadCrd("gitrepos");
  const Json* repo = specSchema(crd);
  ASSERT_NE(repo, nullptr);
  EXPECT_EQ(repo->find("required")->dump(), R"(["repo"])");
  EXPECT_EQ(schemaAt(repo, "paths")->at({"items", "type"})->asString(), "string");
  EXPECT_EQ(schemaAt(repo, "targets[].clusterSelector.matchExpressions[].operator")->find("enum")->dump(),
            R"(["In","NotIn","Exists","DoesNotExist"])");
}

//! Every path below `schema` with x-kubernetes-preserve-unknown-fields (the free-form parts).
void freeFormPaths(const Json& schema, const std::string& at, std::vector<std::string>& out) {
  if (schema.getBool("x-kubernetes-preserve-unknown-fields")) {
    out.push_back(at);
  }
  if (const Json* properties = schema.find("properties"); properties != nullptr) {
    for (const auto& [name, sub] : properties->asObject()) {
      freeFormPaths(sub, at + "." + name, out);
    }
  }
  if (const Json* items = schema.find("items"); items != nullptr) {
    freeFormPaths(*items, at + "[]", out);
  }
}

// Spec is structural: free-form only where Fleet's field is (Cluster's templateValues, a core/v1 Affinity and
// EnvVarSource), and wholly for the read-only Bundle and BundleDeployment the gateway writes.
TEST(HubCrds, SpecIsFreeFormOnlyWhereDocumented) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"gitrepos", {}},
      {"clustergroups", {}},
      {"clusters", {"spec.agentAffinity", "spec.agentEnvVars[].valueFrom", "spec.templateValues"}},
      {"bundles", {"spec"}},
      {"bundledeployments", {"spec"}},
  };
  for (const auto& [plural, paths] : expected) {
    std::vector<std::string> found;
    const Json crd = loadCrd(plural);
    const Json* spec = specSchema(crd);
    ASSERT_NE(spec, nullptr) << plural;
    freeFormPaths(*spec, "spec", found);
    std::sort(found.begin(), found.end());
    EXPECT_EQ(found, paths) << plural;
  }
}

const std::vector<std::string> kOffline{"--set", "nats.auth.lookupSecrets=false"};

std::vector<std::string> offline(const std::vector<std::string>& more) {
  std::vector<std::string> all = kOffline;
  all.insert(all.end(), more.begin(), more.end());
  return all;
}

TEST(HubChartFleetRbac, AggregatedRolesByDefaultGatewayOnlyWhenEnabled) {
  auto objects = renderChart("flotilla-hub", offline({"--set", "gateway.enabled=false"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* view = findObject(*objects, "ClusterRole", "t-flotilla-hub-fleet-view");
  const Json* edit = findObject(*objects, "ClusterRole", "t-flotilla-hub-fleet-edit");
  ASSERT_NE(view, nullptr);
  ASSERT_NE(edit, nullptr);
  const std::string aggregate = "rbac.authorization.k8s.io/aggregate-to-";
  for (const char* role : {"view", "edit", "admin"}) {
    EXPECT_EQ(view->at({"metadata", "labels"})->getString(aggregate + role), "true") << role;
  }
  EXPECT_EQ(edit->at({"metadata", "labels"})->getString(aggregate + "edit"), "true");
  EXPECT_EQ(edit->at({"metadata", "labels"})->getString(aggregate + "admin"), "true");
  EXPECT_EQ(edit->at({"metadata", "labels"})->find(aggregate + "view"), nullptr);
  EXPECT_EQ(view->find("rules")->asArray().front().find("verbs")->dump(), R"(["get","list","watch"])");
  const std::string edited = edit->find("rules")->asArray().front().find("resources")->dump();
  EXPECT_EQ(edited, R"(["gitrepos","clustergroups","clusters"])");
  for (const char* kind : {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRoleBinding"}) {
    EXPECT_EQ(kindCounts(*objects).count(kind), 0u) << kind;
  }

  auto none = renderChart("flotilla-hub",
                          offline({"--set", "rbac.aggregateToDefaultRoles=false", "--set", "gateway.enabled=false"}));
  ASSERT_TRUE(none.ok()) << none.error().describe();
  EXPECT_EQ(kindCounts(*none).count("ClusterRole"), 0u);
}

TEST(HubChartFleetRbac, GatewayIdentityAndAdmissionPolicy) {
  auto objects = renderChart("flotilla-hub", offline({"--set", "gateway.enabled=true"}), "prod", "hub");
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const std::string name = "prod-flotilla-hub-gateway";
  ASSERT_NE(findObject(*objects, "ServiceAccount", name), nullptr);
  const Json* role = findObject(*objects, "ClusterRole", name);
  ASSERT_NE(role, nullptr);
  const std::string rules = role->find("rules")->dump();
  EXPECT_THAT(rules, HasSubstr(R"("resources":["gitrepos/status","clustergroups/status","clusters/status"],)"
                               R"("verbs":["get","update","patch"])"));
  // It creates CRs (a registered cluster's, an adopted spec's) but never changes or deletes a user's spec.
  EXPECT_THAT(rules, HasSubstr(R"("resources":["gitrepos","clustergroups","clusters"],)"
                               R"("verbs":["get","list","watch","create"])"));
  EXPECT_THAT(rules, Not(HasSubstr("namespaces"))) << "the gateway reads no namespaces";
  EXPECT_THAT(rules, Not(HasSubstr("events"))) << "the gateway records no Events";
  const Json* binding = findObject(*objects, "ClusterRoleBinding", name);
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ(binding->find("subjects")->dump(),
            R"([{"kind":"ServiceAccount","name":")" + name + R"(","namespace":"hub"}])");
  const Json* policy = findObject(*objects, "ValidatingAdmissionPolicy", name + "-writes-bundles");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->at({"spec", "matchConstraints", "resourceRules"})->asArray().front().find("resources")->dump(),
            R"(["bundles","bundles/status","bundledeployments","bundledeployments/status"])");
  EXPECT_EQ(policy->at({"spec", "variables"})->asArray().front().getString("expression"),
            "\"system:serviceaccount:hub:" + name + "\"");
  const Json* policy_binding = findObject(*objects, "ValidatingAdmissionPolicyBinding", name + "-writes-bundles");
  ASSERT_NE(policy_binding, nullptr);
  EXPECT_EQ(policy_binding->at({"spec", "validationActions"})->dump(), R"(["Deny"])");
}

TEST(HubChartFleetRbac, LintIsCleanAndSchemaRejectsUnknownKeys) {
  const std::string helm = toolPath("helm");
  ASSERT_FALSE(helm.empty()) << "helm missing: run scripts/setup --no-run";
  auto lint = run({helm, "lint", "--strict", chartDir("flotilla-hub"), "--set", "nats.auth.lookupSecrets=false",
                   "--set", "gateway.enabled=true"});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_THAT(lint.out + lint.err, ::testing::Not(HasSubstr("[WARNING]")));
  for (const std::string bad : {"gateway.enable=true", "gateway.enabled=yes", "rbac.create=true"}) {
    auto rendered = renderChart("flotilla-hub", offline({"--set", bad}));
    ASSERT_FALSE(rendered.ok()) << bad;
    const std::string key = bad.substr(0, bad.find('='));
    EXPECT_THAT(rendered.error().message, HasSubstr("at '/" + key.substr(0, key.find('.')))) << bad;
  }
}

}  // namespace
}  // namespace flotilla::deploy_test
