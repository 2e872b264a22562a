// YamlLimits: alias expansion is bounded by bytes as well as nodes, nesting is bounded, and each refusal names the
// file and line. Documents that use anchors normally, and large documents without aliases, still parse.
#include <string>

#include <gtest/gtest.h>

#include "flotilla/core/yaml.h"

namespace flotilla {
namespace {

//! One anchored scalar of `scalar_bytes` and `aliases` aliases of it: a ~(scalar_bytes + 4 * aliases) byte text
//! that expands to scalar_bytes * aliases.
std::string longScalarBomb(size_t scalar_bytes, int aliases) {
  std::string text = "big: &big \"" + std::string(scalar_bytes, 'x') + "\"\ncopies:\n";
  for (int i = 0; i < aliases; ++i) {
    text += "- *big\n";
  }
  return text;
}

TEST(YamlLimitsTest, LongScalarAliasBombIsRefusedNamingFileAndLine) {
  // ~1 MB of text that would expand to 10 GB: few nodes, so only the byte count catches it.
  const std::string bomb = longScalarBomb(100'000, 100'000);
  auto doc = parseYaml(bomb, "charts/app/values.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(doc.error().message.find("expands to more than 16777216 bytes"), std::string::npos)
      << doc.error().describe();
  EXPECT_EQ(doc.error().where.rfind("charts/app/values.yaml:", 0), 0u) << doc.error().describe();
}

TEST(YamlLimitsTest, ByteLimitIsConfigurable) {
  const std::string text = longScalarBomb(1000, 20);  // 20 kB expanded
  EXPECT_TRUE(parseYaml(text, "a.yaml").ok());
  auto doc = parseYaml(text, "a.yaml", YamlLimits{.max_expanded_bytes = 10'000});
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.error().message.find("expands to more than"), std::string::npos) << doc.error().describe();
}

TEST(YamlLimitsTest, SelfReferencingAnchorIsRefused) {
  auto doc = parseYaml("a: &a [x, *a]\n", "loop.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(doc.error().where.rfind("loop.yaml:", 0), 0u) << doc.error().describe();
}

TEST(YamlLimitsTest, DeepNestingIsRefusedNamingTheLimit) {
  const std::string deep = std::string(300, '[') + std::string(300, ']') + "\n";
  auto doc = parseYaml(deep, "deep.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.error().message.find("nests deeper than 256 levels"), std::string::npos) << doc.error().describe();
  EXPECT_EQ(doc.error().where, "deep.yaml:1");
}

TEST(YamlLimitsTest, NestingUpToTheLimitParses) {
  const std::string deep = std::string(200, '[') + std::string(200, ']') + "\n";
  EXPECT_TRUE(parseYaml(deep, "deep.yaml").ok());
}

TEST(YamlLimitsTest, AnchorsUsedNormallyParse) {
  auto doc = parseYaml(
      "defaults: &defaults {replicas: 2, image: nginx}\n"
      "prod: {<<: *defaults, replicas: 5}\n"
      "dev: *defaults\n",
      "values.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().describe();
  EXPECT_EQ(doc->at({"prod", "replicas"})->asInt(), 5);
  EXPECT_EQ(doc->at({"dev", "image"})->asString(), "nginx");
}

TEST(YamlLimitsTest, LargeDocumentWithoutAliasesIsNotHeldToTheExpansionLimit) {
  // 20 MB of plain text is over max_expanded_bytes, but a text without aliases builds no more than it holds.
  std::string text = "data: \"" + std::string(20u << 20, 'y') + "\"\n";
  auto doc = parseYaml(text, "big.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().describe();
  EXPECT_EQ(doc->getString("data").size(), 20u << 20);
}

}  // namespace
}  // namespace flotilla
