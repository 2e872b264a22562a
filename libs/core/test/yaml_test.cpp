#include "flotilla/core/yaml.h"

#include <gtest/gtest.h>

#include "flotilla/testing/yaml_bomb.h"

namespace flotilla {
namespace {

TEST(YamlTest, ResolvesPlainScalarsWithTheCoreSchema) {
  auto doc = parseYaml("a: 1\nb: true\nc: ~\nd: 1.5\ne: \"1\"\nf: hello\ng: '0x10'\nh: 0x10\n", "t.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().describe();
  EXPECT_EQ(doc->dump(), R"({"a":1,"b":true,"c":null,"d":1.5,"e":"1","f":"hello","g":"0x10","h":16})");
}

TEST(YamlTest, MultiDocumentSkipsEmptyDocumentsAndKeepsLines) {
  auto docs = parseYamlDocuments("---\n# only a comment\n---\nkind: A\n---\nkind: B\n", "m.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error().describe();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0].value.getString("kind"), "A");
  EXPECT_EQ((*docs)[0].line, 4);
  EXPECT_EQ((*docs)[1].line, 6);
}

TEST(YamlTest, SyntaxErrorNamesFileAndLine) {
  auto doc = parseYaml("a: 1\nb: [unclosed\n", "bad.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(doc.error().where.find("bad.yaml:"), std::string::npos) << doc.error().describe();
}

TEST(YamlTest, DuplicateKeyIsAnError) {
  auto doc = parseYaml("a: 1\na: 2\n", "dup.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error().where, "dup.yaml:2");
}

TEST(YamlTest, AliasBombIsRejected) {
  const std::string bomb = testing::yamlAliasBomb('j', ", ");
  auto doc = parseYaml(bomb, "bomb.yaml");
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.error().message.find("expands to more than"), std::string::npos);
}

TEST(YamlTest, EmitsCanonicalYamlThatParsesBack) {
  auto doc = parseYaml("z: [1, 2]\na: {s: \"true\", m: \"x\\ny\"}\n", "t.yaml");
  ASSERT_TRUE(doc.ok());
  std::string text = toYaml(*doc);
  auto back = parseYaml(text, "round.yaml");
  ASSERT_TRUE(back.ok()) << text;
  EXPECT_EQ(*back, *doc);
  EXPECT_LT(text.find("a:"), text.find("z:"));
}

TEST(YamlTest, EmitsEmptyCollectionsInFlowStyle) {
  auto doc = parseYaml("rules: []\nlabels: {}\nnested: {list: []}\n", "t.yaml");
  ASSERT_TRUE(doc.ok());
  std::string text = toYaml(*doc);
  EXPECT_EQ(text, "labels: {}\nnested:\n  list: []\nrules: []\n");
  auto back = parseYaml(text, "round.yaml");
  ASSERT_TRUE(back.ok()) << text;
  EXPECT_EQ(*back, *doc);
}

TEST(YamlTest, RecordsFieldLinesWhenAsked) {
  const char* text =
      R"(kind: GitRepo
metadata:
  labels:
    app.kubernetes.io/name: x
spec:
  targets:
  - name: a
    clusterSelector:
      matchLabels: {env: prod}
)";
  auto docs = parseYamlDocuments(text, "g.yaml", YamlLimits{.record_lines = true});
  ASSERT_TRUE(docs.ok()) << docs.error().describe();
  const YamlDocument& doc = docs->front();
  EXPECT_EQ(doc.lines.at("kind"), 1);
  EXPECT_EQ(doc.lines.at("metadata.labels[\"app.kubernetes.io/name\"]"), 4);
  EXPECT_EQ(doc.lines.at("spec.targets[0]"), 7);
  EXPECT_EQ(doc.lines.at("spec.targets[0].name"), 7);
  EXPECT_EQ(doc.lines.at("spec.targets[0].clusterSelector.matchLabels.env"), 9);
  // Unknown paths fall back to the nearest recorded ancestor, then to the document line.
  EXPECT_EQ(doc.lineOf("spec.targets[0].clusterSelector.nope"), 8);
  EXPECT_EQ(doc.lineOf("nothing.here"), 1);
}

TEST(YamlTest, MergeKeysCanBeOverriddenOnEitherSide) {
  const char* text =
      R"(base: &b {x: 1, y: 2}
before:
  y: 3
  <<: *b
after:
  <<: *b
  y: 4
)";
  auto docs = parseYamlDocuments(text, "m.yaml", YamlLimits{.record_lines = true});
  ASSERT_TRUE(docs.ok()) << docs.error().describe();
  const YamlDocument& doc = docs->front();
  EXPECT_EQ(doc.value.dump(), R"({"after":{"x":1,"y":4},"base":{"x":1,"y":2},"before":{"x":1,"y":3}})");
  EXPECT_EQ(doc.lines.at("before.y"), 3);
  EXPECT_EQ(doc.lines.at("after.y"), 7);
  EXPECT_EQ(doc.lines.at("after.x"), 1);
  EXPECT_FALSE(parseYaml("a:\n  k: 1\n  k: 2\n", "d.yaml").ok());
}

TEST(YamlTest, LinesAreNotRecordedByDefault) {
  auto docs = parseYamlDocuments("a: 1\n", "a.yaml");
  ASSERT_TRUE(docs.ok());
  EXPECT_TRUE(docs->front().lines.empty());
}

TEST(YamlTest, FieldPathHelpersQuoteAmbiguousKeys) {
  EXPECT_EQ(yamlKeyPath("", "spec"), "spec");
  EXPECT_EQ(yamlKeyPath("spec", "helm"), "spec.helm");
  EXPECT_EQ(yamlKeyPath("metadata.labels", "a.b/c"), "metadata.labels[\"a.b/c\"]");
  EXPECT_EQ(yamlIndexPath("spec.paths", 2), "spec.paths[2]");
  EXPECT_EQ(yamlParentPath("spec.targets[0].name"), "spec.targets[0]");
  EXPECT_EQ(yamlParentPath("spec.targets[0]"), "spec.targets");
  EXPECT_EQ(yamlParentPath("metadata.labels[\"a.b[1]\"]"), "metadata.labels");
  EXPECT_EQ(yamlParentPath("spec"), "");
}

TEST(YamlTest, DescribeDoesNotRepeatALocationPrefix) {
  Error e = makeError(ErrorKind::kInvalid, "f.yaml:3: spec.x: unknown field", "f.yaml:3");
  EXPECT_EQ(e.describe(), "f.yaml:3: spec.x: unknown field");
  EXPECT_EQ(makeError(ErrorKind::kInvalid, "bad", "f.yaml:3").describe(), "bad (f.yaml:3)");
}

// Found by fuzz/yaml_fuzzer: a byte that is not UTF-8 (0x8e) became part of a JSON string that no JSON parser reads.
TEST(YamlTest, InvalidUtf8IsRefusedNamingTheLine) {
  auto value = parseYaml("image:\n  name: web\n  tag: \"1\x8e\"\n", "values.yaml");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().describe(), "YAML text is not valid UTF-8 (values.yaml:3)");
  auto key = parseYaml(
      "{name: web, \x8e"
      "ag: 1}",
      "values.yaml");
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error().where, "values.yaml:1");
  auto text = parseYaml("name: caf\xc3\xa9 \xe2\x9c\x93\n", "values.yaml");
  ASSERT_TRUE(text.ok()) << text.error().describe();
  EXPECT_EQ(text->getString("name"), "caf\xc3\xa9 \xe2\x9c\x93");
}

// Found by fuzz/yaml_fuzzer: yaml-cpp 0.7 loops forever, adding null documents, on a document that starts with ','.
TEST(YamlTest, DocumentStartingWithACommaIsRefusedNotLoopedOn) {
  for (const char* text : {",", "--- ,", "a: 1\n--- ,\n", "!!str ,", "&a ,"}) {
    auto documents = parseYamlDocuments(text, "fleet.yaml");
    ASSERT_FALSE(documents.ok()) << text;
    EXPECT_EQ(documents.error().kind, ErrorKind::kInvalid);
    EXPECT_EQ(documents.error().where.rfind("fleet.yaml:", 0), 0u) << documents.error().describe();
  }
  auto error = parseYaml("--- ,", "fleet.yaml");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.error().describe(),
            "invalid YAML: unexpected token at the start of a document (a ',' outside [ ] or { }?) (fleet.yaml:1)");
  EXPECT_TRUE(parseYaml("[a, b]", "fleet.yaml").ok());
  EXPECT_TRUE(parseYamlDocuments("---\n---\na: 1\n...\n", "fleet.yaml").ok());
}

}  // namespace
}  // namespace flotilla
