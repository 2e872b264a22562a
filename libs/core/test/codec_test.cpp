#include "flotilla/core/codec.h"

#include <gtest/gtest.h>

#include "flotilla/testing/expect.h"

namespace flotilla::codec {
namespace {

using testing::expectMentionsAll;

struct Item {
  std::string name;
  int64_t count = 0;
  bool operator==(const Item&) const = default;
};

struct Doc {
  std::string title;
  bool enabled = false;
  std::optional<bool> strict;
  std::vector<std::string> tags;
  StringMap labels;
  std::optional<Item> main;
  Item inline_item;
  std::vector<Item> items;
  bool operator==(const Doc&) const = default;
};

constexpr auto kItem = [](auto& v, auto& s) {
  v.str("name", s.name, true);
  v.count("count", s.count);
};

constexpr auto kDoc = [](auto& v, auto& s) {
  v.str("title", s.title);
  v.boolean("enabled", s.enabled);
  v.optBoolean("strict", s.strict);
  v.strings("tags", s.tags);
  v.stringMap("labels", s.labels);
  v.object("main", s.main, kItem);
  v.plain("inline", s.inline_item, kItem);
  v.objects("items", s.items, kItem);
  v.validate([&](Reader& in) {
    if (s.title == "forbidden") {
      in.fail(in.pathOf("title"), "is forbidden");
    }
  });
};

Doc sample() {
  return Doc{.title = "t",
             .enabled = true,
             .strict = false,
             .tags = {"a", "b"},
             .labels = {{"env", "prod"}},
             .main = Item{"m", 2},
             .inline_item = Item{"i", 0},
             .items = {Item{"x", 1}}};
}

TEST(CodecTest, OneFieldListEncodesAndDecodes) {
  Json json = encode(sample(), kDoc);
  EXPECT_EQ(json.dump(),
            R"({"enabled":true,"inline":{"name":"i"},"items":[{"count":1,"name":"x"}],"labels":{"env":"prod"},)"
            R"("main":{"count":2,"name":"m"},"strict":false,"tags":["a","b"],"title":"t"})");
  auto back = decode<Doc>(json, "doc", kDoc);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, sample());
}

TEST(CodecTest, WriterOmitsZeroValuesUnlessAskedForAll) {
  EXPECT_EQ(encode(Doc{}, kDoc).dump(), "{}");
  EXPECT_EQ(encode(Doc{}, kDoc, /*omit_empty=*/false).dump(),
            R"({"enabled":false,"inline":{"count":0,"name":""},"items":[],"labels":{},"tags":[],"title":""})");
}

TEST(CodecTest, DecodingIsStrictWithPathsAndHints) {
  Json json = encode(sample(), kDoc);
  json["titel"] = "x";
  json["enabled"] = "yes";
  json["items"].asArray()[0]["count"] = -1;
  json["main"]["name"] = "";
  json["inline"] = Json::array();
  auto r = decode<Doc>(json, "doc", kDoc);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalid);
  const std::string& m = r.error().message;
  expectMentionsAll(
      m, {"doc.titel: unknown field (did you mean \"title\"?)", "doc.enabled: expected true or false, got a string",
          "doc.items[0].count: must be at least 0, got -1", "doc.main.name: must not be empty",
          "doc.inline: expected a map, got a list"});
}

TEST(CodecTest, ValidationRunsOnlyWhenDecoding) {
  Doc doc = sample();
  doc.title = "forbidden";
  Json json = encode(doc, kDoc);
  EXPECT_EQ(json.getString("title"), "forbidden");
  auto r = decode<Doc>(json, "doc", kDoc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("doc.title: is forbidden"), std::string::npos);
}

TEST(CodecTest, NullIsAbsentAndProblemsAreCapped) {
  auto empty = decode<Doc>(Json(), "doc", kDoc);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, Doc{});
  Json many = Json::object();
  for (int i = 0; i < 12; ++i) {
    many["unknown" + std::to_string(i)] = i;
  }
  auto r = decode<Doc>(many, "doc", kDoc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("; and 2 more"), std::string::npos) << r.error().message;
}

TEST(CodecTest, ExternalProblemListReadsNullRootAsAnError) {
  std::vector<std::string> problems;
  Reader in(Json(), "Event", problems);
  EXPECT_FALSE(in.ok());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "Event: expected a map, got null");
}

}  // namespace
}  // namespace flotilla::codec
