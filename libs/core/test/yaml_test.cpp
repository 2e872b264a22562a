#include "flotilla/core/yaml.h"

#include <gtest/gtest.h>

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
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'j'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) {
      bomb += std::string(i ? ", *" : "*") + prev;
    }
    bomb += "]\n";
    prev = c;
  }
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

}  // namespace
}  // namespace flotilla
