// Per-cluster targeting, value pre-processing and renderForCluster on raw bundles.
#include "flotilla/render/cluster_render.h"

#include <gtest/gtest.h>

#include "flotilla/events/variants.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/variants.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::fleetYaml;

//! A GitRepo with `targets` (JSON list of GitTargets) and an optional targetNamespace.
model::GitRepo gitRepo(const std::string& targets = "[]", const std::string& target_namespace = "") {
  model::GitRepo repo;
  repo.metadata.name = "repo";
  repo.metadata.ns = "ws";
  repo.spec.repo = "https://example.com/r.git";
  repo.spec.target_namespace = target_namespace;
  const Json parsed = *Json::parse(targets);
  for (const auto& target : parsed.asArray()) {
    auto decoded = model::decodeGitTarget(target);
    EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
    if (decoded.ok()) {
      repo.spec.targets.push_back(*decoded);
    }
  }
  return repo;
}

ClusterFacts cluster(const std::string& name, model::Labels labels) {
  ClusterFacts facts;
  facts.name = name;
  facts.workspace = "ws";
  facts.labels = std::move(labels);
  return facts;
}

Json values(const model::BundleDeploymentOptions& options) {
  return options.helm && options.helm->values ? *options.helm->values : Json();
}

const char* kCustomized = R"(
helm:
  values:
    size: small
    common: true
targetCustomizations:
- name: prod
  clusterSelector: {matchLabels: {env: prod}}
  helm:
    values:
      size: large
      prod: true
- name: eu
  clusterSelector: {matchLabels: {region: eu}}
  helm:
    values:
      size: eu-size
      region: eu
- name: off
  clusterSelector: {matchLabels: {off: "true"}}
  doNotDeploy: true
)";

TEST(PlaceBundle, FirstMatchTakesTheFirstMatchingCustomization) {
  auto input = targetingInput(fleetYaml(kCustomized), gitRepo(), 0);
  auto placed = placeBundle(input, cluster("c1", {{"env", "prod"}, {"region", "eu"}}));
  EXPECT_EQ(placed.decision, ClusterBundle::Decision::kDeploy);
  EXPECT_EQ(placed.target, "default");
  EXPECT_EQ(placed.customizations, std::vector<std::string>{"prod"});
  EXPECT_EQ(values(placed.options), *Json::parse(R"({"size":"large","common":true,"prod":true})"));

  auto plain = placeBundle(input, cluster("c2", {{"env", "dev"}}));
  EXPECT_EQ(plain.decision, ClusterBundle::Decision::kDeploy);
  EXPECT_TRUE(plain.customizations.empty());
  EXPECT_EQ(values(plain.options), *Json::parse(R"({"size":"small","common":true})"));
}

TEST(PlaceBundle, AllMatchesMergesEveryMatchInOrder) {
  auto yaml = fleetYaml(std::string("targetCustomizationMode: AllMatches\n") + kCustomized);
  auto input = targetingInput(yaml, gitRepo(), 0);
  auto placed = placeBundle(input, cluster("c1", {{"env", "prod"}, {"region", "eu"}}));
  EXPECT_EQ(placed.decision, ClusterBundle::Decision::kDeploy);
  EXPECT_EQ(placed.customizations, (std::vector<std::string>{"prod", "eu"}));
  EXPECT_EQ(values(placed.options), *Json::parse(R"({"size":"eu-size","common":true,"prod":true,"region":"eu"})"));
}

TEST(PlaceBundle, DoNotDeploy) {
  // FirstMatch: only the first matching customization counts (Fleet).
  auto first = targetingInput(fleetYaml(kCustomized), gitRepo(), 0);
  EXPECT_EQ(placeBundle(first, cluster("c1", {{"off", "true"}})).decision, ClusterBundle::Decision::kDoNotDeploy);
  EXPECT_EQ(placeBundle(first, cluster("c2", {{"env", "prod"}, {"off", "true"}})).decision,
            ClusterBundle::Decision::kDeploy);
  // AllMatches: any matching doNotDeploy keeps the bundle off.
  auto all =
      targetingInput(fleetYaml(std::string("targetCustomizationMode: AllMatches\n") + kCustomized), gitRepo(), 0);
  EXPECT_EQ(placeBundle(all, cluster("c2", {{"env", "prod"}, {"off", "true"}})).decision,
            ClusterBundle::Decision::kDoNotDeploy);
}

TEST(PlaceBundle, GitRepoTargetsAreTheAllowList) {
  auto repo = gitRepo(R"([{"name":"prod-only","clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  auto input = targetingInput(fleetYaml(kCustomized), repo, 0);
  EXPECT_EQ(placeBundle(input, cluster("dev", {{"env", "dev"}, {"region", "eu"}})).decision,
            ClusterBundle::Decision::kNotTargeted);
  auto placed = placeBundle(input, cluster("prod", {{"env", "prod"}}));
  EXPECT_EQ(placed.decision, ClusterBundle::Decision::kDeploy);
  EXPECT_EQ(placed.target, "prod-only");
}

TEST(PlaceBundle, OverrideTargetsReplaceTheGitRepoTargets) {
  auto repo = gitRepo(R"([{"name":"prod-only","clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  auto yaml = fleetYaml("overrideTargets:\n- name: by-name\n  clusterName: dev\n");
  auto input = targetingInput(yaml, repo, 0);
  EXPECT_EQ(placeBundle(input, cluster("dev", {{"env", "dev"}})).decision, ClusterBundle::Decision::kDeploy);
  EXPECT_EQ(placeBundle(input, cluster("prod", {{"env", "prod"}})).decision, ClusterBundle::Decision::kNotTargeted);
}

TEST(PlaceBundle, GroupsAndTheImplicitDefaultGroup) {
  auto repo = gitRepo(R"([{"clusterGroup":"gold"}])");
  auto input = targetingInput(fleetYaml(""), repo, 0);
  auto member = cluster("c1", {});
  member.groups.push_back(model::GroupInfo{.name = "gold"});
  EXPECT_EQ(placeBundle(input, member).decision, ClusterBundle::Decision::kDeploy);
  EXPECT_EQ(placeBundle(input, cluster("c2", {})).decision, ClusterBundle::Decision::kNotTargeted);
  // No targets: Fleet's default {clusterGroup: default}; every cluster is in it unless the workspace defines one.
  auto defaults = targetingInput(fleetYaml(""), gitRepo(), 0);
  EXPECT_EQ(placeBundle(defaults, cluster("c3", {})).decision, ClusterBundle::Decision::kDeploy);
  auto outside = cluster("c4", {});
  outside.implicit_default_group = false;
  EXPECT_EQ(placeBundle(defaults, outside).decision, ClusterBundle::Decision::kNotTargeted);
}

TEST(PlaceBundle, GitRepoTargetNamespaceWinsOverCustomizations) {
  auto repo = gitRepo("[]", "forced");
  auto yaml = fleetYaml(
      "targetCustomizationMode: AllMatches\ntargetCustomizations:\n- clusterName: c1\n  namespace: mine\n"
      "- clusterName: c1\n  defaultNamespace: other\n");
  auto placed = placeBundle(targetingInput(yaml, repo, 0), cluster("c1", {}));
  EXPECT_EQ(placed.options.target_namespace, "forced");
  EXPECT_EQ(placed.options.default_namespace, "other");
  EXPECT_EQ(placed.customizations, (std::vector<std::string>{"target000", "target001"}));
}

model::BundleDeploymentOptions helmValues(const std::string& values_json) {
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->values = *Json::parse(values_json);
  return options;
}

ClusterFacts richCluster() {
  auto facts = cluster("prod-1", {{"env", "prod"}, {"replicas", "3"}});
  facts.annotations = {{"owner", "team-a"}};
  facts.template_values = *Json::parse(R"({"tier": "gold", "sizes": {"cpu": 2}})");
  return facts;
}

TEST(PreprocessValues, TemplatesLabelsAndTypes) {
  auto options = helmValues(R"({
    "name": "${ .ClusterName }-${ .ClusterNamespace }",
    "env": "${ .ClusterLabels.env | upper }",
    "replicas": "${ .ClusterLabels.replicas }",
    "cpu": "${ .ClusterValues.sizes.cpu }",
    "sizes": "${ .ClusterValues.sizes }",
    "owner": "${ index .ClusterAnnotations \"owner\" }",
    "fromLabel": "global.fleet.clusterLabels.env",
    "missingLabel": "global.fleet.clusterLabels.nope",
    "list": [{"x": "global.fleet.clusterLabels.env"}, "${ .ClusterValues.tier }"],
    "${ .ClusterValues.tier }Key": "v",
    "helmTemplate": "{{ .Values.keep }}"
  })");
  options.helm->template_values = model::Labels{{"extra", "${ .ClusterValues.sizes.cpu }"}};
  ASSERT_TRUE(valuesNeedCluster(options));
  auto status = preprocessValues(options, richCluster(), "app/fleet.yaml");
  ASSERT_TRUE(status.ok()) << status.error().describe();
  EXPECT_EQ(values(options), *Json::parse(R"({
    "name": "prod-1-ws", "env": "PROD", "replicas": 3, "cpu": 2, "sizes": {"cpu": 2}, "owner": "team-a",
    "fromLabel": "prod", "missingLabel": "", "list": [{"x": "prod"}, "gold"], "goldKey": "v",
    "helmTemplate": "{{ .Values.keep }}", "extra": 2
  })"));
}

TEST(PreprocessValues, DisablePreProcessKeepsTemplatesButReplacesLabels) {
  auto options = helmValues(R"({"a": "${ .ClusterName }", "b": "global.fleet.clusterLabels.env"})");
  options.helm->disable_pre_process = true;
  EXPECT_TRUE(valuesNeedCluster(options));  // the label reference still needs the cluster
  ASSERT_TRUE(preprocessValues(options, richCluster(), "fleet.yaml").ok());
  EXPECT_EQ(values(options), *Json::parse(R"({"a": "${ .ClusterName }", "b": "prod"})"));
  auto only_templates = helmValues(R"({"a": "${ .ClusterName }"})");
  only_templates.helm->disable_pre_process = true;
  EXPECT_FALSE(valuesNeedCluster(only_templates));
  EXPECT_FALSE(valuesNeedCluster(helmValues(R"({"a": "plain", "b": [1, "{{ helm }}"]})")));
}

TEST(PreprocessValues, ErrorsNameFilePathClusterAndFunction) {
  auto unsupported = helmValues(R"({"deep": {"replicas": "${ env \"HOME\" }"}})");
  auto status = preprocessValues(unsupported, richCluster(), "app/fleet.yaml");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(status.error().where, "app/fleet.yaml");
  EXPECT_NE(status.error().message.find("app/fleet.yaml: helm.values.deep.replicas"), std::string::npos)
      << status.error().message;
  EXPECT_NE(status.error().message.find("unsupported function \"env\""), std::string::npos);
  EXPECT_NE(status.error().message.find("\"prod-1\""), std::string::npos);

  auto missing = helmValues(R"({"list": ["ok", "${ .ClusterLabels.region }"]})");
  status = preprocessValues(missing, richCluster(), "fleet.yaml");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("helm.values.list[1]"), std::string::npos) << status.error().message;
  EXPECT_NE(status.error().message.find("no entry for key \"region\""), std::string::npos);

  auto syntax = helmValues(R"({"a.b": "${ if }"})");
  status = preprocessValues(syntax, richCluster(), "fleet.yaml");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find(R"(helm.values["a.b"])"), std::string::npos) << status.error().message;
}

// The per-cluster render key's .Capabilities part: equal versions and API-version sets (in any order) share it.
TEST(CapabilitiesKey, VersionAndApiVersionSetMakeTheKey) {
  ClusterFacts none;
  EXPECT_EQ(capabilitiesKey(none), "") << "nothing reported: renders as without a cluster";
  ClusterFacts a;
  a.kubernetes_version = "v1.31.2";
  a.api_versions = {"apps/v1", "example.com/v1", "example.com/v1/Widget", "v1"};
  ClusterFacts b = a;
  b.name = "other";
  b.api_versions = {"v1", "example.com/v1/Widget", "apps/v1", "example.com/v1", "v1"};
  EXPECT_EQ(capabilitiesKey(a), capabilitiesKey(b)) << "order and duplicates do not matter";
  EXPECT_TRUE(capabilitiesKey(a).starts_with("kube=v1.31.2;apis=")) << capabilitiesKey(a);
  ClusterFacts fewer = a;
  fewer.api_versions = {"apps/v1", "v1"};
  EXPECT_NE(capabilitiesKey(a), capabilitiesKey(fewer));
  ClusterFacts unreported = a;
  unreported.api_versions.clear();
  EXPECT_EQ(capabilitiesKey(unreported), "kube=v1.31.2;apis=");
  ClusterFacts newer = a;
  newer.kubernetes_version = "v1.32.0";
  EXPECT_NE(capabilitiesKey(a), capabilitiesKey(newer));
  ClusterFacts only_apis;
  only_apis.api_versions = {"v1"};
  EXPECT_NE(capabilitiesKey(only_apis), "") << "a set without a version still keys the render";
}

TEST(BundleVariants, CodecRoundTripAndStrictness) {
  events::BundleVariants table{.workspace = "ws", .bundle = "b", .commit = "c"};
  table.variants.push_back(
      events::Variant{.manifest_id = "m1", .options = Json::obj({{"x", 1}}), .customizations = {"a", "b"}});
  table.clusters = {{"c1", 0}, {"c2", 0}};
  const std::string text = events::encode(table).dump();
  auto decoded = events::decodeBundleVariants(*Json::parse(text));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, table);
  EXPECT_EQ(events::variantsObjectName(text).rfind("variants-", 0), 0u);
  EXPECT_EQ(events::variantsObjectName(text), events::variantsObjectName(text));
  auto bad = *Json::parse(text);
  bad["clusters"]["c3"] = 5;
  EXPECT_FALSE(events::decodeBundleVariants(bad).ok());
  bad = *Json::parse(text);
  bad["surprise"] = true;
  EXPECT_FALSE(events::decodeBundleVariants(bad).ok());
}

TEST(RenderForCluster, TargetingDecisionsPerBundle) {
  testing::TempTree tree({
      {"a/fleet.yaml",
       "targetCustomizations:\n- name: off\n  clusterSelector: {matchLabels: {env: dev}}\n"
       "  doNotDeploy: true\n"},
      {"a/cm.yaml", testing::configMap("a")},
      {"b/fleet.yaml", "overrideTargets:\n- clusterSelector: {matchLabels: {env: prod}}\n"},
      {"b/cm.yaml", testing::configMap("b")},
      {"c/fleet.yaml", "helm:\n  values:\n    x: ${ nope }\n"},
      {"c/cm.yaml", testing::configMap("c")},
  });
  RenderTools tools{.helm_binary = "none", .kustomize_binary = "none"};
  auto dev = renderForCluster(tree.root(), cluster("dev-1", {{"env", "dev"}}), tools);
  ASSERT_TRUE(dev.ok()) << dev.error().describe();
  ASSERT_EQ(dev->size(), 3u);
  std::map<std::string, ClusterBundle> by_path;
  for (auto& bundle : *dev) {
    by_path[bundle.path] = bundle;
  }
  EXPECT_EQ(by_path["a"].decision, ClusterBundle::Decision::kDoNotDeploy);
  EXPECT_EQ(by_path["b"].decision, ClusterBundle::Decision::kNotTargeted);
  EXPECT_EQ(by_path["c"].decision, ClusterBundle::Decision::kError);
  ASSERT_TRUE(by_path["c"].error.has_value());
  EXPECT_EQ(by_path["c"].error->file, "c/fleet.yaml");
  EXPECT_NE(by_path["c"].error->message.find("unsupported function \"nope\""), std::string::npos)
      << by_path["c"].error->message;

  auto prod = renderForCluster(tree.root(), cluster("prod-1", {{"env", "prod"}}), tools);
  ASSERT_TRUE(prod.ok());
  for (const auto& bundle : *prod) {
    if (bundle.path == "a" || bundle.path == "b") {
      EXPECT_EQ(bundle.decision, ClusterBundle::Decision::kDeploy) << bundle.path;
      ASSERT_TRUE(bundle.manifest.has_value());
      EXPECT_EQ(bundle.manifest->objects, 1u);
      EXPECT_NE(bundle.manifest->text.find("\"name\":\"" + bundle.path + "\""), std::string::npos);
      EXPECT_EQ(bundle.renderer, "raw");
    }
  }
  EXPECT_FALSE(renderForCluster(tree.root() + "/missing", cluster("x", {}), tools).ok());
}

// The apply-time options (diff.comparePatches, correctDrift, keepResources, ignore, namespaces) travel with every
// per-cluster variant, merged with the customization's.
TEST(RenderForCluster, ApplyOptionsAreCarried) {
  testing::TempTree tree({
      {"fleet.yaml", R"(defaultNamespace: web
keepResources: true
correctDrift: {enabled: true, force: true}
diff:
  comparePatches:
  - {apiVersion: apps/v1, kind: Deployment, name: web, jsonPointers: [/spec/replicas]}
ignore:
  conditions:
  - {type: Active, status: "False"}
targetCustomizations:
- clusterName: c1
  namespace: forced
)"},
      {"cm.yaml", testing::configMap("a")},
  });
  RenderTools tools{.helm_binary = "none", .kustomize_binary = "none"};
  auto rendered = renderForCluster(tree.root(), cluster("c1", {}), tools);
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_EQ(rendered->size(), 1u);
  const auto& options = rendered->front().options;
  EXPECT_EQ(rendered->front().customizations, std::vector<std::string>{"target000"});
  EXPECT_TRUE(options.keep_resources);
  ASSERT_TRUE(options.correct_drift.has_value());
  EXPECT_TRUE(options.correct_drift->force);
  ASSERT_TRUE(options.diff.has_value());
  ASSERT_EQ(options.diff->compare_patches.size(), 1u);
  EXPECT_EQ(options.diff->compare_patches[0].json_pointers, std::vector<std::string>{"/spec/replicas"});
  ASSERT_TRUE(options.ignore.has_value());
  ASSERT_EQ(options.ignore->conditions.size(), 1u);
  EXPECT_EQ(options.default_namespace, "web");
  EXPECT_EQ(options.target_namespace, "forced");
}

}  // namespace
}  // namespace flotilla::render
