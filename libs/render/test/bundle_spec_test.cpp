#include "flotilla/render/bundle_spec.h"

#include <gtest/gtest.h>

#include "flotilla/model/codec.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::fleetYaml;

model::GitRepo gitRepo() {
  model::GitRepo repo;
  repo.metadata.name = "simple";
  repo.metadata.ns = "fleet-default";
  repo.metadata.labels = {{"team", "web"}, {"env", "dev"}};
  return repo;
}

TEST(MergeOptions, FleetRules) {
  model::BundleDeploymentOptions base;
  base.default_namespace = "web";
  base.service_account = "sa";
  base.helm = model::HelmOptions{};
  base.helm->values = Json::parse(R"({"a":{"b":1,"c":2},"list":[1]})").value();
  base.helm->release_name = "rel";
  base.yaml = model::YamlOptions{{"base"}};
  model::BundleDeploymentOptions custom;
  custom.default_namespace = "prod";
  custom.service_account = "-";
  custom.helm = model::HelmOptions{};
  custom.helm->values = Json::parse(R"({"a":{"c":3},"list":[2]})").value();
  custom.helm->force = true;
  custom.yaml = model::YamlOptions{{"prod"}};
  custom.keep_resources = true;
  auto merged = mergeOptions(base, custom);
  EXPECT_EQ(merged.default_namespace, "prod");
  EXPECT_EQ(merged.service_account, "");
  EXPECT_EQ(merged.helm->values->dump(), R"({"a":{"b":1,"c":3},"list":[2]})");
  EXPECT_EQ(merged.helm->release_name, "rel");
  EXPECT_TRUE(merged.helm->force);
  EXPECT_EQ(merged.yaml->overlays, (std::vector<std::string>{"base", "prod"}));
  EXPECT_TRUE(merged.keep_resources);
  // The base is untouched.
  EXPECT_EQ(base.helm->values->dump(), R"({"a":{"b":1,"c":2},"list":[1]})");
}

TEST(MergeOptions, ComparePatchesMergeByKey) {
  model::BundleDeploymentOptions base;
  base.diff = model::DiffOptions{{model::ComparePatch{"Deployment", "apps/v1", "ns", "a", {}, {"/spec/replicas"}}}};
  model::BundleDeploymentOptions custom;
  custom.diff = model::DiffOptions{{model::ComparePatch{"Deployment", "apps/v1", "ns", "a", {}, {"/spec"}},
                                    model::ComparePatch{"Service", "v1", "ns", "b", {}, {"/spec"}}}};
  auto merged = mergeOptions(base, custom);
  ASSERT_EQ(merged.diff->compare_patches.size(), 2u);
  EXPECT_EQ(merged.diff->compare_patches[0].json_pointers, (std::vector<std::string>{"/spec"}));
}

TEST(DefaultOptions, GitRepoOverrides) {
  auto fy = fleetYaml("defaultNamespace: web\nnamespace: fromfile\nserviceAccount: file-sa\n");
  auto repo = gitRepo();
  repo.spec.target_namespace = "forced";
  repo.spec.service_account = "repo-sa";
  repo.spec.keep_resources = true;
  repo.spec.correct_drift = model::CorrectDrift{true, false, false};
  auto options = defaultOptions(fy, repo, 7);
  EXPECT_EQ(options.default_namespace, "web");
  EXPECT_EQ(options.target_namespace, "forced");
  EXPECT_EQ(options.service_account, "repo-sa");
  EXPECT_TRUE(options.keep_resources);
  EXPECT_TRUE(options.correct_drift && options.correct_drift->enabled);
  EXPECT_EQ(options.force_sync_generation, 7);
}

TEST(DefaultOptions, NamespaceOptionsAreCarriedNotApplied) {
  auto options = defaultOptions(fleetYaml("defaultNamespace: web\nnamespace: only\n"), gitRepo(), 0);
  auto encoded = model::encodeOptions(options);
  EXPECT_EQ(encoded.getString("defaultNamespace"), "web");
  EXPECT_EQ(encoded.getString("namespace"), "only");
}

TEST(Customizations, NamesMatchersAndMergedOptions) {
  auto fy = fleetYaml(
      "defaultNamespace: web\n"
      "targetCustomizations:\n"
      "- clusterSelector: {matchLabels: {env: prod}}\n"
      "  defaultNamespace: web-prod\n"
      "- name: skip\n"
      "  clusterName: local\n"
      "  doNotDeploy: true\n");
  auto repo = gitRepo();
  auto defaults = defaultOptions(fy, repo, 0);
  auto list = customizations(fy, defaults, repo);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "target000");
  EXPECT_EQ(list[0].options.default_namespace, "web-prod");
  EXPECT_EQ(targetMatcher(list[0].target).dump(), R"({"clusterSelector":{"matchLabels":{"env":"prod"}}})");
  EXPECT_EQ(list[1].name, "skip");
  EXPECT_EQ(targetMatcher(list[1].target).dump(), R"({"clusterName":"local","doNotDeploy":true})");
}

TEST(Customizations, GitRepoTargetNamespaceWins) {
  auto fy = fleetYaml("targetCustomizations:\n- clusterName: a\n  namespace: mine\n");
  auto repo = gitRepo();
  repo.spec.target_namespace = "forced";
  auto list = customizations(fy, defaultOptions(fy, repo, 0), repo);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].options.target_namespace, "forced");
}

TEST(BundleLabels, GitRepoThenRepoNameThenFleetYaml) {
  auto labels = bundleLabels(fleetYaml("labels: {env: prod, app: x}\n"), gitRepo());
  EXPECT_EQ(labels,
            (model::Labels{{"app", "x"}, {"env", "prod"}, {"fleet.cattle.io/repo-name", "simple"}, {"team", "web"}}));
}

TEST(BundleTargets, DefaultGitRepoAndOverride) {
  auto repo = gitRepo();
  EXPECT_EQ(bundleTargets(model::FleetYaml{}, repo).dump(), R"([{"clusterGroup":"default","name":"default"}])");
  repo.spec.targets.push_back(model::GitTarget{"prod", "", model::LabelSelector{{{"env", "prod"}}, {}}, "", {}});
  EXPECT_EQ(bundleTargets(model::FleetYaml{}, repo).dump(),
            R"([{"clusterSelector":{"matchLabels":{"env":"prod"}},"name":"prod"}])");
  auto fy = fleetYaml("overrideTargets:\n- clusterName: only\n");
  EXPECT_EQ(bundleTargets(fy, repo).dump(), R"([{"clusterName":"only"}])");
}

TEST(RenderKey, OnlyRenderRelevantOptionsCount) {
  model::BundleDeploymentOptions a;
  a.service_account = "x";
  a.keep_resources = true;
  model::BundleDeploymentOptions b;
  EXPECT_EQ(renderKey(a), renderKey(b));
  b.yaml = model::YamlOptions{};
  EXPECT_EQ(renderKey(a), renderKey(b));
  b.yaml->overlays = {"prod"};
  EXPECT_NE(renderKey(a), renderKey(b));
}

}  // namespace
}  // namespace flotilla::render
