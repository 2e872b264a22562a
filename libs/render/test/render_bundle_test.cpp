// renderBundle: one bundle directory -> BundleEvent fields and canonical manifests, or a RenderError.
#include "flotilla/render/render_bundle.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::configMap;
using testing::TempTree;

class RenderBundleTest : public ::testing::Test, protected testing::BundleRenderInputs {
 protected:
  RenderBundleTest() : BundleRenderInputs("simple") {
    commit.repo = "https://example.com/repo";
    commit.force_sync_generation = 3;
  }

  Result<RenderedBundle> render(const TempTree& tree, const BundleDir& dir) { return renderIn(tree.root(), dir); }
};

TEST_F(RenderBundleTest, RawBundleWithFleetYaml) {
  TempTree tree{{"apps/web/fleet.yaml",
                 "defaultNamespace: web\nlabels: {tier: front}\ndependsOn: [{name: simple-db}]\n"
                 "rolloutStrategy: {maxUnavailable: 25%}\npaused: true\n"},
                {"apps/web/cm.yaml", configMap("a") + "---\n" + configMap("b")}};
  auto rendered = render(tree, BundleDir{"apps/web", "apps/web/fleet.yaml"});
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_FALSE(rendered->error) << rendered->error->message;
  const auto& event = rendered->event;
  EXPECT_EQ(rendered->bundle, "simple-apps-web");
  EXPECT_EQ(event.bundle, "simple-apps-web");
  EXPECT_EQ(event.path, "apps/web");
  EXPECT_EQ(event.commit, commit.commit);
  EXPECT_EQ(event.manifest_id.size(), 64u);
  ASSERT_EQ(rendered->manifests.count(event.manifest_id), 1u);
  EXPECT_EQ(rendered->manifests.at(event.manifest_id).objects, 2u);
  EXPECT_EQ(event.options.getString("defaultNamespace"), "web");
  EXPECT_EQ(event.options.getInt("forceSyncGeneration"), 3);
  EXPECT_EQ(event.force_sync_generation, 3);
  EXPECT_EQ(event.depends_on.dump(), R"([{"name":"simple-db"}])");
  EXPECT_EQ(event.rollout_strategy.dump(), R"({"maxUnavailable":"25%"})");
  EXPECT_TRUE(event.paused);
  EXPECT_EQ(event.labels.at("tier"), "front");
  EXPECT_EQ(event.labels.at("fleet.cattle.io/repo-name"), "simple");
  EXPECT_EQ(event.targets.dump(), R"([{"clusterGroup":"default","name":"default"}])");
  EXPECT_FALSE(event.error);
}

TEST_F(RenderBundleTest, FleetYamlNameOverridesTheBundleID) {
  TempTree tree{{"x/fleet.yaml", "name: my-bundle\n"}, {"x/cm.yaml", configMap("a")}};
  auto rendered = render(tree, BundleDir{"x", "x/fleet.yaml"});
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(rendered->bundle, "my-bundle");
}

TEST_F(RenderBundleTest, RootBundleIsNamedAfterTheGitRepo) {
  TempTree tree{{"cm.yaml", configMap("a")}};
  auto rendered = render(tree, BundleDir{".", ""});
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(rendered->bundle, "simple");
  EXPECT_EQ(rendered->event.path, ".");
}

TEST_F(RenderBundleTest, UnknownFleetYamlFieldIsARenderErrorWithFileAndLine) {
  TempTree tree{{"x/fleet.yaml", "name: keep-me\ndefaultNamespace: web\nhelm:\n  releaseNme: x\n"},
                {"x/cm.yaml", configMap("a")}};
  auto rendered = render(tree, BundleDir{"x", "x/fleet.yaml"});
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_TRUE(rendered->error);
  EXPECT_EQ(rendered->error->file, "x/fleet.yaml");
  EXPECT_EQ(rendered->error->line, 4);
  EXPECT_NE(rendered->error->message.find("releaseNme"), std::string::npos) << rendered->error->message;
  // The name still comes from the (otherwise readable) fleet.yaml, so the bundle keeps its identity.
  EXPECT_EQ(rendered->bundle, "keep-me");
  EXPECT_EQ(rendered->event.error, rendered->error);
  EXPECT_TRUE(rendered->event.manifest_id.empty());
}

// An option Flotilla does not implement is a render error naming fleet.yaml and the field (model::
// unsupportedOptionFields), in the defaults and in a target customization alike.
TEST_F(RenderBundleTest, UnsupportedOptionIsARenderErrorNamingTheField) {
  TempTree tree{{"x/fleet.yaml", "helm:\n  valuesFrom:\n  - configMapKeyRef: {name: v, key: values.yaml}\n"},
                {"x/cm.yaml", configMap("a")},
                {"y/fleet.yaml",
                 "targetCustomizations:\n- name: edge\n  clusterName: c1\n  downstreamResources:\n"
                 "  - {kind: Secret, name: db}\n"},
                {"y/cm.yaml", configMap("a")}};
  auto rendered = render(tree, BundleDir{"x", "x/fleet.yaml"});
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_TRUE(rendered->error);
  EXPECT_EQ(rendered->error->file, "x/fleet.yaml");
  EXPECT_NE(rendered->error->message.find("x/fleet.yaml: helm.valuesFrom: not supported"), std::string::npos)
      << rendered->error->message;
  EXPECT_TRUE(rendered->manifests.empty());
  auto customized = render(tree, BundleDir{"y", "y/fleet.yaml"});
  ASSERT_TRUE(customized.ok()) << customized.error().describe();
  ASSERT_TRUE(customized->error);
  EXPECT_NE(customized->error->message.find("targetCustomizations[0].downstreamResources"), std::string::npos)
      << customized->error->message;
}

TEST_F(RenderBundleTest, UnparsableFleetYamlKeepsTheRecordedIdentity) {
  TempTree tree{{"x/fleet.yaml", "name: [broken\n"}, {"x/cm.yaml", configMap("a")}};
  previous_ids["x"] = "recorded-name";
  auto rendered = render(tree, BundleDir{"x", "x/fleet.yaml"});
  ASSERT_TRUE(rendered.ok());
  ASSERT_TRUE(rendered->error);
  EXPECT_EQ(rendered->bundle, "recorded-name");
  EXPECT_EQ(rendered->error->file, "x/fleet.yaml");
}

TEST_F(RenderBundleTest, NotAnObjectNamesFileAndLine) {
  TempTree tree{{"x/cm.yaml", configMap("a") + "---\n- not\n- an object\n"}};
  auto rendered = render(tree, BundleDir{"x", ""});
  ASSERT_TRUE(rendered.ok());
  ASSERT_TRUE(rendered->error);
  EXPECT_EQ(rendered->error->file, "x/cm.yaml");
  EXPECT_GT(rendered->error->line, 6);
  EXPECT_NE(rendered->error->message.find("got a list"), std::string::npos);
}

TEST_F(RenderBundleTest, CustomizationsShareOrSplitManifests) {
  TempTree tree{{"x/fleet.yaml",
                 "targetCustomizations:\n"
                 "- name: same\n  clusterSelector: {matchLabels: {env: dev}}\n  defaultNamespace: dev\n"
                 "- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  yaml: {overlays: [prod]}\n"
                 "- name: never\n  clusterName: c9\n  doNotDeploy: true\n"},
                {"x/cm.yaml", configMap("cm")},
                {"x/overlays/prod/cm_patch.yaml", "data:\n  key: prod\n"}};
  auto rendered = render(tree, BundleDir{"x", "x/fleet.yaml"});
  ASSERT_TRUE(rendered.ok());
  ASSERT_FALSE(rendered->error) << rendered->error->message;
  const auto& c = rendered->event.customizations;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].manifest_id, rendered->event.manifest_id);  // only options differ: one render
  EXPECT_EQ(c[0].options.getString("defaultNamespace"), "dev");
  EXPECT_NE(c[1].manifest_id, rendered->event.manifest_id);  // an overlay changes the content
  EXPECT_EQ(c[2].manifest_id, "");
  EXPECT_EQ(rendered->manifests.size(), 2u);
  auto prod = Json::parse(rendered->manifests.at(c[1].manifest_id).text).value();
  EXPECT_EQ(prod.asArray()[0].at({"data", "key"})->asString(), "prod");
}

TEST_F(RenderBundleTest, ChartDirectoryWithoutHelmIsARenderError) {
  TempTree tree{{"c/Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n"}, {"c/templates/x.yaml", "{{ bad }}"}};
  auto rendered = render(tree, BundleDir{"c", ""});
  ASSERT_TRUE(rendered.ok());
  ASSERT_TRUE(rendered->error);
  EXPECT_NE(rendered->error->message.find("Helm"), std::string::npos);
}

TEST(RenderErrorOf, AddsTheLocationToTheMessage) {
  auto error = renderErrorOf(makeError(ErrorKind::kInvalid, "too big"), "dir");
  EXPECT_EQ(error.file, "dir");
  EXPECT_EQ(error.line, 0);
  EXPECT_EQ(error.message, "dir: too big");
  auto located = renderErrorOf(makeError(ErrorKind::kInvalid, "a.yaml:3: bad", "a.yaml:3"), "dir");
  EXPECT_EQ(located.file, "a.yaml");
  EXPECT_EQ(located.line, 3);
  EXPECT_EQ(located.message, "a.yaml:3: bad");
}

}  // namespace
}  // namespace flotilla::render
