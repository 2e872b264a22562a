#include "flotilla/core/json.h"

#include <limits>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"

namespace flotilla {
namespace {

TEST(JsonTest, DumpIsCanonicalWithSortedKeys) {
  auto parsed = Json::parse(R"({"b":1,"a":{"y":true,"x":null},"c":[1.5,"s"]})");
  ASSERT_TRUE(parsed.ok()) << parsed.error().describe();
  EXPECT_EQ(parsed->dump(), R"({"a":{"x":null,"y":true},"b":1,"c":[1.5,"s"]})");
}

TEST(JsonTest, RoundTripsEscapesAndLargeIntegers) {
  Json value = Json::obj({{"s", "line\n\"quoted\"\t\x01"}, {"n", int64_t{9007199254740993}}});
  auto back = Json::parse(value.dump());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, value);
}

// A double read as an integer: truncated in range, clamped outside it, 0 for NaN (never the undefined cast).
TEST(JsonTest, ADoubleOutsideInt64IsClampedWhenReadAsAnInteger) {
  EXPECT_EQ(Json(42.9).asInt(), 42);
  EXPECT_EQ(Json(-42.9).asInt(), -42);
  EXPECT_EQ(Json(5.5e27).asInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Json(-5.5e27).asInt(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Json(9223372036854775808.0).asInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Json(std::numeric_limits<double>::quiet_NaN()).asInt(), 0);
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).asInt(), std::numeric_limits<int64_t>::max());
}

TEST(JsonTest, InvalidJsonIsAnInvalidError) {
  auto parsed = Json::parse("{\"a\":");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().kind, ErrorKind::kInvalid);
}

TEST(JsonTest, PathLookupAndMutation) {
  Json value;
  value["metadata"]["name"] = "x";
  value["items"].push(1);
  ASSERT_NE(value.at({"metadata", "name"}), nullptr);
  EXPECT_EQ(value.at({"metadata", "name"})->asString(), "x");
  EXPECT_EQ(value.at({"metadata", "missing"}), nullptr);
  EXPECT_EQ(value.getString("nope", "fallback"), "fallback");
  EXPECT_EQ(value["items"].size(), 1u);
}

TEST(JsonTest, MergePatchFollowsRfc7386) {
  auto target = Json::parse(R"({"a":"b","c":{"d":"e","f":"g"}})");
  auto patch = Json::parse(R"({"a":"z","c":{"f":null}})");
  Json result = *target;
  jsonMergePatch(result, *patch);
  EXPECT_EQ(result.dump(), R"({"a":"z","c":{"d":"e"}})");
}

TEST(UtilTest, Sha256AndBase64) {
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(base64UrlEncode(sha256Raw("abc")), "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0=");
  EXPECT_EQ(*base64Decode(base64Encode("hello world")), "hello world");
}

}  // namespace
}  // namespace flotilla
