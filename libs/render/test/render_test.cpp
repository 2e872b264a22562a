#include "flotilla/render/render.h"

#include <gtest/gtest.h>

#include "flotilla/render/patch.h"
#include "flotilla/testing/yaml_bomb.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::configMap;
using testing::TempTree;

RenderRequest requestFor(const TempTree& tree, const std::string& path, model::BundleDeploymentOptions options = {}) {
  return RenderRequest{tree.root(), path, "bundle", std::move(options), RenderLimits{}};
}

TEST(ParseManifestText, MultiDocumentWithEmptyAndCommentOnlyDocuments) {
  const std::string text =
      "---\n"
      "# only a comment\n"
      "---\n" +
      configMap("a") +
      "---\n"
      "---\n" +
      configMap("b") + "...\n";
  auto objects = parseManifestText(text, "dir/cms.yaml", 1 << 20);
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 2u);
  EXPECT_EQ((*objects)[0].object.at({"metadata", "name"})->asString(), "a");
  EXPECT_EQ((*objects)[0].file, "dir/cms.yaml");
  EXPECT_EQ((*objects)[0].line, 4);
  EXPECT_EQ((*objects)[1].object.at({"metadata", "name"})->asString(), "b");
}

TEST(ParseManifestText, JsonFilesAreManifestsToo) {
  auto objects =
      parseManifestText(R"({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})", "ns.json", 1 << 20);
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 1u);
  EXPECT_EQ((*objects)[0].object.getString("kind"), "Namespace");
}

TEST(ParseManifestText, ADocumentWithoutKindIsAnErrorNamingFileAndLine) {
  const std::string text = configMap("a") + "---\napiVersion: v1\nmetadata:\n  name: b\n";
  auto objects = parseManifestText(text, "apps/web/bad.yaml", 1 << 20);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
  // The document starts on the line after its "---".
  EXPECT_EQ(objects.error().where, "apps/web/bad.yaml:8");
  EXPECT_EQ(objects.error().message, "apps/web/bad.yaml:8: not a Kubernetes object: kind is missing");
}

TEST(ParseManifestText, AScalarOrListDocumentIsNotAnObject) {
  auto scalar = parseManifestText("just a string\n", "s.yaml", 1 << 20);
  ASSERT_FALSE(scalar.ok());
  EXPECT_EQ(scalar.error().where, "s.yaml:1");
  EXPECT_NE(scalar.error().message.find("got a string"), std::string::npos);
  auto list = parseManifestText("- a\n- b\n", "l.yaml", 1 << 20);
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().message.find("got a list"), std::string::npos);
}

TEST(ParseManifestText, MissingNameIsAnError) {
  auto objects = parseManifestText("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "n.yaml", 1 << 20);
  ASSERT_FALSE(objects.ok());
  EXPECT_NE(objects.error().message.find("metadata.name is missing"), std::string::npos);
}

TEST(ParseManifestText, InvalidYamlNamesTheLine) {
  auto objects = parseManifestText("apiVersion: v1\nkind: [unclosed\n", "broken.yaml", 1 << 20);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
  EXPECT_TRUE(startsWith(objects.error().where, "broken.yaml:")) << objects.error().where;
  EXPECT_TRUE(startsWith(objects.error().message, "broken.yaml:")) << objects.error().message;
}

TEST(ParseManifestText, ListKindsAreExpanded) {
  const std::string text =
      "apiVersion: v1\nkind: List\nitems:\n"
      "- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
      "- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n";
  auto objects = parseManifestText(text, "list.yaml", 1 << 20);
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(objects->size(), 2u);
}

TEST(ParseManifestText, YamlBombsAreBounded) {
  const std::string bomb = ::flotilla::testing::yamlAliasBomb('k', ",");
  auto objects = parseManifestText(bomb, "bomb.yaml", 1 << 20);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
}

TEST(RawRenderer, RendersEveryManifestOfTheBundle) {
  TempTree tree{{"b/fleet.yaml", "{}"},
                {"b/one.yaml", configMap("one") + "---\n" + configMap("two")},
                {"b/sub/three.json", R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"three"}})"},
                {"b/nested/fleet.yaml", "{}"},
                {"b/nested/four.yaml", configMap("four")}};
  auto objects = RawRenderer().render(requestFor(tree, "b"));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(objects->size(), 3u);
}

TEST(RawRenderer, FileSizeLimit) {
  TempTree tree{{"b/big.yaml", configMap("big") + "  pad: \"" + std::string(2000, 'x') + "\"\n"}};
  auto request = requestFor(tree, "b");
  request.limits.max_file_bytes = 1000;
  auto objects = RawRenderer().render(request);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(objects.error().where, "b/big.yaml");
  EXPECT_NE(objects.error().message.find("more than the limit of 1000 bytes"), std::string::npos);
}

TEST(RawRenderer, TotalSizeLimit) {
  TempTree tree{{"b/a.yaml", configMap("a")}, {"b/b.yaml", configMap("b")}};
  auto request = requestFor(tree, "b");
  request.limits.max_output_bytes = 100;
  auto objects = RawRenderer().render(request);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
}

TEST(RawRenderer, OverlaysReplaceAndPatchFiles) {
  TempTree tree{
      {"b/deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n"},
      {"b/cm.yaml", configMap("cm")},
      {"b/overlays/prod/deploy_patch.yaml", "spec:\n  replicas: 3\n"},
      {"b/overlays/prod/cm.yaml", configMap("cm-prod")},
      // A list is a JSON patch; the target keeps the patch's extension (Fleet's rule).
      {"b/overlays/json/deploy_patch.yaml", "- {op: add, path: /metadata/labels, value: {tier: web}}\n"}};
  model::BundleDeploymentOptions options;
  options.yaml = model::YamlOptions{{"prod", "json"}};
  auto objects = RawRenderer().render(requestFor(tree, "b", options));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 2u);
  bool saw_deploy = false;
  for (const auto& o : *objects) {
    if (o.object.getString("kind") == "Deployment") {
      saw_deploy = true;
      EXPECT_EQ(o.object.at({"spec", "replicas"})->asInt(), 3);
      EXPECT_EQ(o.object.at({"metadata", "labels", "tier"})->asString(), "web");
    } else {
      EXPECT_EQ(o.object.at({"metadata", "name"})->asString(), "cm-prod");
    }
  }
  EXPECT_TRUE(saw_deploy);
}

TEST(RawRenderer, OverlayPatchWithoutBaseIsAnError) {
  TempTree tree{{"b/cm.yaml", configMap("cm")}, {"b/overlays/prod/missing_patch.yaml", "a: 1\n"}};
  model::BundleDeploymentOptions options;
  options.yaml = model::YamlOptions{{"prod"}};
  auto objects = RawRenderer().render(requestFor(tree, "b", options));
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().where, "b/overlays/prod/missing_patch.yaml");
}

TEST(RawRenderer, UnknownOverlayIsAnError) {
  TempTree tree{{"b/cm.yaml", configMap("cm")}};
  model::BundleDeploymentOptions options;
  options.yaml = model::YamlOptions{{"nope"}};
  EXPECT_FALSE(RawRenderer().render(requestFor(tree, "b", options)).ok());
  options.yaml = model::YamlOptions{{"../../etc"}};
  EXPECT_FALSE(RawRenderer().render(requestFor(tree, "b", options)).ok());
}

TEST(RendererSet, PicksByDirectoryContents) {
  TempTree tree{{"raw/a.yaml", configMap("a")},
                {"chart/Chart.yaml", "name: x\nversion: 0.1.0\n"},
                {"kust/kustomization.yaml", "resources: []\n"}};
  RendererSet set;
  auto raw = set.choose(tree.root(), "raw", {});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ((*raw)->name(), "raw");
  auto chart = set.choose(tree.root(), "chart", {});
  ASSERT_FALSE(chart.ok());
  EXPECT_NE(chart.error().message.find("Helm"), std::string::npos);
  EXPECT_EQ(chart.error().where, "chart/fleet.yaml");
  auto kust = set.choose(tree.root(), "kust", {});
  ASSERT_FALSE(kust.ok());
  EXPECT_NE(kust.error().message.find("kustomize"), std::string::npos);
}

TEST(RendererSet, NamedLocalChartMustExist) {
  TempTree tree{{"b/a.yaml", configMap("a")}};
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->chart = "./missing";
  auto chosen = RendererSet().choose(tree.root(), "b", options);
  ASSERT_FALSE(chosen.ok());
  EXPECT_NE(chosen.error().message.find("no chart"), std::string::npos);
}

TEST(SplitWhere, FileAndLine) {
  EXPECT_EQ(splitWhere("a/b.yaml:12"), (std::pair<std::string, int64_t>{"a/b.yaml", 12}));
  EXPECT_EQ(splitWhere("a/b.yaml"), (std::pair<std::string, int64_t>{"a/b.yaml", 0}));
  EXPECT_EQ(splitWhere(""), (std::pair<std::string, int64_t>{"", 0}));
}

TEST(JsonPatch, Operations) {
  auto doc = Json::parse(R"({"a":{"b":[1,2,3]},"c":"x"})").value();
  auto patch = Json::parse(R"([
    {"op":"add","path":"/a/b/1","value":9},
    {"op":"remove","path":"/a/b/0"},
    {"op":"replace","path":"/c","value":"y"},
    {"op":"copy","from":"/c","path":"/d"},
    {"op":"move","from":"/d","path":"/e~1f"},
    {"op":"test","path":"/c","value":"y"}
  ])")
                   .value();
  ASSERT_TRUE(applyJsonPatch(doc, patch).ok());
  EXPECT_EQ(doc.dump(), R"({"a":{"b":[9,2,3]},"c":"y","e/f":"y"})");
}

TEST(JsonPatch, FailureLeavesTheTargetUnchanged) {
  auto doc = Json::parse(R"({"a":1})").value();
  auto patch = Json::parse(R"([{"op":"replace","path":"/a","value":2},{"op":"remove","path":"/missing"}])").value();
  auto status = applyJsonPatch(doc, patch);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("operation 1"), std::string::npos);
  EXPECT_EQ(doc.dump(), R"({"a":1})");
}

}  // namespace
}  // namespace flotilla::render
