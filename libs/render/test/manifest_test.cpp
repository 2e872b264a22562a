#include "flotilla/render/manifest.h"

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/identity.h"

namespace flotilla::render {
namespace {

std::vector<RenderedObject> parse(const std::string& text, const std::string& file) {
  auto objects = parseManifestText(text, file, 1 << 20);
  EXPECT_TRUE(objects.ok()) << objects.error().describe();
  return objects.ok() ? *objects : std::vector<RenderedObject>{};
}

std::vector<RenderedObject> concat(std::vector<RenderedObject> a, const std::vector<RenderedObject>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Canonicalize, SameObjectsInAnotherOrderAndFormatGiveTheSameManifestID) {
  auto yaml = parse(
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: x\ndata: {k: v, a: '1'}\n"
      "---\n"
      "kind: Service\napiVersion: v1\nmetadata: {name: svc}\nspec:\n  ports:\n  - port: 80\n",
      "a.yaml");
  auto json = concat(parse(R"({"metadata":{"name":"svc"},"spec":{"ports":[{"port":80}]},"kind":"Service",)"
                           R"("apiVersion":"v1"})",
                           "svc.json"),
                     parse("# reordered\n---\nmetadata:\n    namespace: x\n    name: b\ndata:\n    a: \"1\"\n"
                           "    k: v\nkind: ConfigMap\napiVersion: v1\n",
                           "sub/cm.yaml"));
  auto first = canonicalize(yaml, 1 << 20);
  auto second = canonicalize(json, 1 << 20);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_TRUE(second.ok()) << second.error().describe();
  EXPECT_EQ(first->text, second->text);
  EXPECT_EQ(first->manifest_id, second->manifest_id);
  EXPECT_EQ(first->manifest_id, model::manifestID(first->text));
  EXPECT_EQ(first->manifest_id.size(), 64u);
  EXPECT_EQ(first->objects, 2u);
}

TEST(Canonicalize, SortsByApiVersionKindNamespaceName) {
  auto objects = parse(
      "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z, namespace: b}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y, namespace: a}\n---\n"
      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
      "all.yaml");
  auto manifest = canonicalize(objects, 1 << 20);
  ASSERT_TRUE(manifest.ok());
  auto array = Json::parse(manifest->text).value();
  std::vector<std::string> order;
  for (const auto& o : array.asArray()) {
    order.push_back(keyOf(o).describe());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"apps/v1/Deployment d", "v1/ConfigMap x", "v1/ConfigMap a/y",
                                             "v1/ConfigMap b/z", "v1/Service a"}));
}

TEST(Canonicalize, ContentChangesChangeTheID) {
  auto a = canonicalize(parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: '1'}\n", "a"), 1 << 20);
  auto b = canonicalize(parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: '2'}\n", "a"), 1 << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->manifest_id, b->manifest_id);
}

TEST(Canonicalize, EmptyBundleIsAnEmptyArray) {
  auto manifest = canonicalize({}, 1 << 20);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->text, "[]");
}

TEST(Canonicalize, DuplicateObjectsNameBothOrigins) {
  auto objects = concat(parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "one.yaml"),
                        parse("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "two.yaml"));
  auto manifest = canonicalize(objects, 1 << 20);
  ASSERT_FALSE(manifest.ok());
  EXPECT_EQ(manifest.error().kind, ErrorKind::kInvalid);
  EXPECT_TRUE(startsWith(manifest.error().where, "two.yaml")) << manifest.error().where;
  EXPECT_NE(manifest.error().message.find("one.yaml:1"), std::string::npos) << manifest.error().message;
}

TEST(Canonicalize, SizeLimit) {
  auto manifest = canonicalize(parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "a"), 10);
  ASSERT_FALSE(manifest.ok());
  EXPECT_NE(manifest.error().message.find("limit of 10 bytes"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::render

namespace flotilla::render {
namespace {

// docs/manifests.md shows a manifest; it must be exactly what canonicalize() writes for those objects.
TEST(Canonicalize, TheDocsExampleIsCanonical) {
  auto text = readFile(std::string(FLOTILLA_SOURCE_DIR) + "/docs/manifests.md");
  ASSERT_TRUE(text.ok()) << text.error().describe();
  auto start = text->find("```json\n");
  ASSERT_NE(start, std::string::npos);
  start += 8;
  auto end = text->find("\n```", start);
  const std::string example = text->substr(start, end - start);
  auto array = Json::parse(example);
  ASSERT_TRUE(array.ok() && array->isArray());
  std::vector<RenderedObject> objects;
  // Feed them in reverse, as YAML, to show order and format do not matter.
  for (auto it = array->asArray().rbegin(); it != array->asArray().rend(); ++it) {
    objects.push_back(parse(toYaml(*it), "doc.yaml").at(0));
  }
  auto manifest = canonicalize(objects, 1 << 20);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->text, example);
}

}  // namespace
}  // namespace flotilla::render
