// The evaluation limits (flotilla/template/template.h Limits): a small hostile template is refused with an error
// naming the limit and the action's column, and the same evaluator keeps working for ordinary templates.
#include <string>

#include <gtest/gtest.h>

#include "flotilla/template/template.h"

namespace flotilla::templating {
namespace {

const Json& context() {
  static const Json value = *Json::parse(R"({"ClusterName": "prod-eu-1", "ClusterValues": {"replicas": 4}})");
  return value;
}

//! `depth` nested `replace "a" "aaaaaaaaaa"` calls around "a": 10^depth bytes in under 30 bytes per level.
std::string replaceBomb(int depth) {
  std::string text = "${ ";
  for (int i = 0; i < depth; ++i) {
    text += "replace \"a\" \"aaaaaaaaaa\" (";
  }
  text += "\"a\"";
  text += std::string(depth, ')');
  return text + " }";
}

TEST(TemplateLimitsTest, NestedReplaceBombIsRefusedBeforeBuildingIt) {
  const std::string bomb = replaceBomb(20);  // 10^20 bytes; about 600 bytes of template
  ASSERT_LT(bomb.size(), 700u);
  auto out = render(bomb, context());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(
      out.error().message.find("error calling replace: the result exceeds the template output limit of 1048576 bytes"),
      std::string::npos)
      << out.error().message;
  EXPECT_EQ(out.error().message.rfind("column ", 0), 0u) << out.error().message;
}

TEST(TemplateLimitsTest, ValueEvaluationHasTheSameLimits) {
  auto value = evaluateValue(replaceBomb(20), context());
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.error().message.find("template output limit"), std::string::npos) << value.error().message;
}

TEST(TemplateLimitsTest, GrowthJustUnderTheLimitIsAllowed) {
  Limits limits;
  limits.max_output_bytes = 1000;
  auto out = render(replaceBomb(3), context(), limits);  // 1000 bytes exactly
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->size(), 1000u);
  auto over = render(replaceBomb(4), context(), limits);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("limit of 1000 bytes"), std::string::npos) << over.error().message;
}

TEST(TemplateLimitsTest, ConcatenatedOutputIsBounded) {
  Limits limits;
  limits.max_output_bytes = 64;
  std::string text;
  for (int i = 0; i < 10; ++i) {
    text += "${ .ClusterName }";  // 9 bytes each, 90 in all
  }
  auto out = render(text, context(), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("template output exceeds the limit of 64 bytes"), std::string::npos)
      << out.error().message;
}

TEST(TemplateLimitsTest, StepLimitNamesTheLimitAndColumn) {
  Limits limits;
  limits.max_steps = 5;
  auto out = render("${ print 1 2 3 4 5 6 7 8 }", context(), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("template exceeds the limit of 5 evaluation steps"), std::string::npos)
      << out.error().message;
  EXPECT_EQ(out.error().message.rfind("column ", 0), 0u) << out.error().message;
}

TEST(TemplateLimitsTest, TimeLimitNamesTheLimit) {
  Limits limits;
  limits.max_time = std::chrono::milliseconds(-1);  // already past: no wait, no timing in the test
  auto out = render("${ .ClusterName }", context(), limits);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("template evaluation exceeds the time limit of -1 ms"), std::string::npos)
      << out.error().message;
}

TEST(TemplateLimitsTest, OrdinaryTemplatesPassTheDefaultLimits) {
  auto out = render("${ .ClusterName | upper }-${ replace \"-\" \"_\" .ClusterName }", context());
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "PROD-EU-1-prod_eu_1");
  auto value = evaluateValue("${ .ClusterValues.replicas }", context());
  ASSERT_TRUE(value.ok()) << value.error().message;
  EXPECT_EQ(*value, Json(4));
}

}  // namespace
}  // namespace flotilla::templating
