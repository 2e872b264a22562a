#include "flotilla/model/labels.h"

#include <gtest/gtest.h>

#include "decode_expect.h"
#include "flotilla/model/codec.h"

namespace flotilla::model {
namespace {

using test::expectRejected;

TEST(LabelsTest, SelectorMatchingFollowsKubernetes) {
  Labels labels{{"env", "prod"}, {"region", "eu"}};
  EXPECT_TRUE(LabelSelector{}.matches(labels));
  EXPECT_TRUE(LabelSelector{}.matches({}));
  EXPECT_TRUE((LabelSelector{{{"env", "prod"}}, {}}.matches(labels)));
  EXPECT_FALSE((LabelSelector{{{"env", "dev"}}, {}}.matches(labels)));
  auto expr = [](SelectorOperator op, std::vector<std::string> values, std::string key = "region") {
    return LabelSelector{{}, {{std::move(key), op, std::move(values)}}};
  };
  EXPECT_TRUE(expr(SelectorOperator::kIn, {"us", "eu"}).matches(labels));
  EXPECT_FALSE(expr(SelectorOperator::kIn, {"us"}).matches(labels));
  EXPECT_FALSE(expr(SelectorOperator::kIn, {"x"}, "missing").matches(labels));
  EXPECT_TRUE(expr(SelectorOperator::kNotIn, {"us"}).matches(labels));
  EXPECT_FALSE(expr(SelectorOperator::kNotIn, {"eu"}).matches(labels));
  EXPECT_TRUE(expr(SelectorOperator::kNotIn, {"eu"}, "missing").matches(labels));  // absent label passes NotIn
  EXPECT_TRUE(expr(SelectorOperator::kExists, {}).matches(labels));
  EXPECT_FALSE(expr(SelectorOperator::kExists, {}, "missing").matches(labels));
  EXPECT_TRUE(expr(SelectorOperator::kDoesNotExist, {}, "missing").matches(labels));
  EXPECT_FALSE(expr(SelectorOperator::kDoesNotExist, {}).matches(labels));
}

TEST(LabelsTest, ParsesTheStringForm) {
  auto s = parseSelector("env=prod, tier!=web,region in (a, b),!legacy,gpu,zone notin (z1),app==shop");
  ASSERT_TRUE(s.ok()) << s.error().describe();
  EXPECT_EQ(s->match_labels, (Labels{{"app", "shop"}, {"env", "prod"}}));
  ASSERT_EQ(s->match_expressions.size(), 5u);
  EXPECT_EQ(s->match_expressions[0], (SelectorRequirement{"tier", SelectorOperator::kNotIn, {"web"}}));
  EXPECT_EQ(s->match_expressions[1], (SelectorRequirement{"region", SelectorOperator::kIn, {"a", "b"}}));
  EXPECT_EQ(s->match_expressions[2], (SelectorRequirement{"legacy", SelectorOperator::kDoesNotExist, {}}));
  EXPECT_EQ(s->match_expressions[3], (SelectorRequirement{"gpu", SelectorOperator::kExists, {}}));
  EXPECT_EQ(s->match_expressions[4], (SelectorRequirement{"zone", SelectorOperator::kNotIn, {"z1"}}));
  EXPECT_TRUE(s->matches({{"env", "prod"}, {"app", "shop"}, {"region", "a"}, {"gpu", ""}}));
  EXPECT_FALSE(s->matches({{"env", "prod"}, {"app", "shop"}, {"region", "a"}, {"gpu", ""}, {"legacy", "1"}}));

  auto empty = parseSelector("  ");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  auto prefixed = parseSelector("app.kubernetes.io/name=web");
  ASSERT_TRUE(prefixed.ok());
  EXPECT_EQ(prefixed->match_labels.at("app.kubernetes.io/name"), "web");
  auto repeated = parseSelector("env=prod,env=dev");
  ASSERT_TRUE(repeated.ok());
  EXPECT_FALSE(repeated->matches({{"env", "prod"}}));  // both must hold, like Kubernetes
}

TEST(LabelsTest, StringFormRoundTrips) {
  for (const char* text : {"env=prod", "!legacy", "a in (x,y),b notin (z),c", "", "k.io/x=1,env=prod,gpu"}) {
    auto s = parseSelector(text);
    ASSERT_TRUE(s.ok()) << text;
    auto again = parseSelector(formatSelector(*s));
    ASSERT_TRUE(again.ok()) << formatSelector(*s);
    EXPECT_EQ(*again, *s) << text;
  }
  EXPECT_EQ(formatSelector(*parseSelector("region in (a,b),env=prod,!x")), "env=prod,region in (a,b),!x");
}

// Found by fuzz/selector_fuzzer: "n!=" printed as "n notin ()", which does not parse, and an empty first value of a
// list lost its comma ("a in (,b)" printed as "a in (b)").
TEST(LabelsTest, EmptyValuesRoundTripThroughTheStringForm) {
  for (const char* text : {"n!=", "a in (,b)", "a notin (b,,c)", "env=prod,env=", "a in (,)"}) {
    auto s = parseSelector(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.error().describe();
    auto again = parseSelector(formatSelector(*s));
    ASSERT_TRUE(again.ok()) << text << " printed as " << formatSelector(*s) << ": " << again.error().describe();
    EXPECT_EQ(*again, *s) << text << " printed as " << formatSelector(*s);
  }
  EXPECT_EQ(formatSelector(*parseSelector("n!=")), "n!=");
  EXPECT_EQ(formatSelector(*parseSelector("a in (,b)")), "a in (,b)");
}

TEST(LabelsTest, RejectsMalformedStrings) {
  for (const char* text : {"env=prod,", "=x", "env in a", "env in ()", "env in (a", "env >= 3", "env=pr od",
                           "Bad Key=x", "env=-bad-", "a,,b", "!"}) {
    auto s = parseSelector(text);
    EXPECT_FALSE(s.ok()) << text;
    if (!s.ok()) {
      EXPECT_EQ(s.error().kind, ErrorKind::kInvalid);
      EXPECT_NE(s.error().message.find("invalid selector"), std::string::npos) << s.error().message;
    }
  }
}

TEST(LabelsTest, ValidatesStructuredSelectors) {
  EXPECT_TRUE(validateSelector({{{"env", "prod"}}, {{"k", SelectorOperator::kExists, {}}}}).ok());
  auto in = validateSelector({{}, {{"k", SelectorOperator::kIn, {}}}}, "spec.selector");
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.error().message, "spec.selector.matchExpressions[0]: operator In needs at least one value");
  auto exists = validateSelector({{}, {{"k", SelectorOperator::kDoesNotExist, {"v"}}}});
  ASSERT_FALSE(exists.ok());
  EXPECT_EQ(exists.error().message, "matchExpressions[0]: operator DoesNotExist must not have values");
  EXPECT_FALSE(validateSelector({{{"bad key", "v"}}, {}}).ok());

  auto decoded = decodeSelector(
      Json::obj({{"matchLabels", Json::obj({{"env", "prod"}})},
                 {"matchExpressions", Json(Json::Array{Json::obj({{"key", "tier"}, {"operator", "Exists"}})})}}));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(encodeSelector(*decoded).dump(),
            R"({"matchExpressions":[{"key":"tier","operator":"Exists"}],"matchLabels":{"env":"prod"}})");
  auto unknown = decodeSelector(Json::obj({{"matchLabel", Json::object()}}), "sel");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "sel.matchLabel: unknown field (did you mean \"matchLabels\"?)");
}

TEST(LabelsTest, NameAndLabelSyntax) {
  EXPECT_TRUE(isDns1123Subdomain("a.b-c.d"));
  EXPECT_FALSE(isDns1123Subdomain("A"));
  EXPECT_FALSE(isDns1123Subdomain("-a"));
  EXPECT_FALSE(isDns1123Subdomain(std::string(254, 'a')));
  EXPECT_TRUE(isDns1123Label("fleet-default"));
  EXPECT_FALSE(isDns1123Label("a.b"));
  EXPECT_FALSE(isDns1123Label(std::string(64, 'a')));
  EXPECT_TRUE(validateLabelKey("app.kubernetes.io/name").ok());
  EXPECT_TRUE(validateLabelKey("Env_1").ok());
  EXPECT_FALSE(validateLabelKey("UPPER.io/x").ok());
  EXPECT_FALSE(validateLabelKey("a/").ok());
  EXPECT_FALSE(validateLabelKey(std::string(64, 'a')).ok());
  EXPECT_TRUE(validateLabelValue("").ok());
  EXPECT_TRUE(validateLabelValue("v1.2_3-x").ok());
  EXPECT_FALSE(validateLabelValue("has space").ok());
  expectRejected(validateLabels({{"ok", "fine"}, {"k", "bad value"}}, "metadata.labels"),
                 {"metadata.labels: invalid label value \"bad value\""});
}

}  // namespace
}  // namespace flotilla::model
