#include "flotilla/template/template.h"

#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace flotilla::templating {
namespace {

Json context() {
  auto parsed = Json::parse(R"({
    "ClusterName": "prod-eu-1",
    "ClusterNamespace": "fleet-default",
    "ClusterLabels": {"env": "prod", "region": "eu", "app.kubernetes.io/tier": "gold", "replicas": "3"},
    "ClusterAnnotations": {"owner": "team-a"},
    "ClusterValues": {"replicas": 4, "ratio": 0.5, "enabled": true, "empty": "",
                      "nested": {"a": {"b": "deep"}}, "list": ["x", "y"]}
  })");
  return *parsed;
}

std::string ok(std::string_view text) {
  auto out = render(text, context());
  EXPECT_TRUE(out.ok()) << text << ": " << (out.ok() ? "" : out.error().message);
  return out.ok() ? *out : std::string();
}

std::string error(std::string_view text) {
  auto out = render(text, context());
  EXPECT_FALSE(out.ok()) << text << " rendered " << (out.ok() ? *out : "");
  return out.ok() ? std::string() : out.error().message;
}

Json value(std::string_view text) {
  auto out = evaluateValue(text, context());
  EXPECT_TRUE(out.ok()) << text << ": " << (out.ok() ? "" : out.error().message);
  return out.ok() ? *out : Json();
}

TEST(Template, PlainTextAndDetection) {
  EXPECT_FALSE(hasTemplate("plain {{ helm }} text"));
  EXPECT_TRUE(hasTemplate("a ${ .ClusterName }"));
  EXPECT_EQ(ok("no actions here"), "no actions here");
  EXPECT_EQ(ok("{{ .Values.x }} stays for helm"), "{{ .Values.x }} stays for helm");
}

TEST(Template, FieldsAndMapIndex) {
  EXPECT_EQ(ok("${ .ClusterName }"), "prod-eu-1");
  EXPECT_EQ(ok("ns=${.ClusterNamespace}"), "ns=fleet-default");
  EXPECT_EQ(ok("${ .ClusterLabels.env }-${ .ClusterValues.nested.a.b }"), "prod-deep");
  EXPECT_EQ(ok(R"(${ index .ClusterLabels "app.kubernetes.io/tier" })"), "gold");
  EXPECT_EQ(ok(R"(${ index .ClusterValues "nested" "a" "b" })"), "deep");
  EXPECT_EQ(ok(R"(${ index .ClusterValues.list 1 })"), "y");
  EXPECT_EQ(ok("${ $.ClusterName }"), "prod-eu-1");
  EXPECT_EQ(ok("${ .ClusterValues.list }"), "[x y]");
  EXPECT_EQ(ok("${ .ClusterValues.nested }"), "map[a:map[b:deep]]");
  EXPECT_EQ(ok("${ .ClusterValues.ratio }"), "0.5");
  // index of a missing key is the zero value, as in Go.
  EXPECT_EQ(ok(R"(${ index .ClusterLabels "missing" })"), "<no value>");
}

TEST(Template, MissingKeyIsAnError) {
  EXPECT_NE(error("${ .ClusterLabels.missing }").find("map has no entry for key \"missing\""), std::string::npos);
  EXPECT_NE(error("${ .ClusterName.x }").find("can't evaluate field x"), std::string::npos);
}

TEST(Template, PipelinesAndLiterals) {
  EXPECT_EQ(ok(R"(${ .ClusterLabels.env | upper })"), "PROD");
  EXPECT_EQ(ok(R"(${ "A-B" | lower | replace "-" "_" })"), "a_b");
  EXPECT_EQ(ok("${ `raw \\n` }"), "raw \\n");
  EXPECT_EQ(ok(R"(${ "tab\there" })"), "tab\there");
  EXPECT_EQ(ok("${ 42 } ${ -1.5 } ${ true } ${ nil }"), "42 -1.5 true <no value>");
  EXPECT_EQ(ok(R"(${ (index .ClusterLabels "env") | upper })"), "PROD");
}

TEST(Template, TrimMarkersAndComments) {
  EXPECT_EQ(ok("a  ${- .ClusterLabels.env -}  b"), "aprodb");
  EXPECT_EQ(ok("a${/* a comment */}b"), "ab");
}

TEST(Template, SprigStrings) {
  EXPECT_EQ(ok(R"(${ .ClusterLabels.env | quote })"), "\"prod\"");
  EXPECT_EQ(ok(R"(${ .ClusterLabels.env | squote })"), "'prod'");
  EXPECT_EQ(ok(R"(${ "  x  " | trim })"), "x");
  EXPECT_EQ(ok(R"(${ "Prod" | upper }/${ "Prod" | lower })"), "PROD/prod");
  EXPECT_EQ(ok(R"(${ trimPrefix "prod-" .ClusterName })"), "eu-1");
  EXPECT_EQ(ok(R"(${ trimSuffix "-1" .ClusterName })"), "prod-eu");
  EXPECT_EQ(ok(R"(${ replace "-" "." .ClusterName })"), "prod.eu.1");
  EXPECT_EQ(ok(R"(${ contains "eu" .ClusterName } ${ hasPrefix "prod" .ClusterName } ${ hasSuffix "x" .ClusterName })"),
            "true true false");
  EXPECT_EQ(ok(R"(${ .ClusterName | b64enc })"), "cHJvZC1ldS0x");
  EXPECT_EQ(ok(R"(${ "cHJvZC1ldS0x" | b64dec })"), "prod-eu-1");
  EXPECT_EQ(ok(R"(${ .ClusterValues.replicas | toString })"), "4");
}

TEST(Template, Printf) {
  EXPECT_EQ(ok(R"(${ printf "%s-%d-%v-%q-%t" .ClusterName .ClusterValues.replicas .ClusterValues.ratio "x" true })"),
            "prod-eu-1-4-0.5-\"x\"-true");
  EXPECT_EQ(ok(R"(${ printf "%05.1f|%x|%%" 3.14159 255 })"), "003.1|ff|%");
  EXPECT_EQ(ok(R"(${ printf "%d" "text" })"), "%!d(a string=text)");
  EXPECT_NE(error(R"(${ printf "%c" 65 })").find("unsupported verb %c"), std::string::npos);
}

TEST(Template, DefaultEmptyTernaryHasKey) {
  EXPECT_EQ(ok(R"(${ .ClusterValues.empty | default "fallback" })"), "fallback");
  EXPECT_EQ(ok(R"(${ index .ClusterLabels "nope" | default "dflt" })"), "dflt");
  EXPECT_EQ(ok(R"(${ .ClusterLabels.env | default "dflt" })"), "prod");
  EXPECT_EQ(ok(R"(${ empty .ClusterValues.empty } ${ empty .ClusterLabels })"), "true false");
  EXPECT_EQ(ok(R"(${ ternary "big" "small" (gt .ClusterValues.replicas 3) })"), "big");
  EXPECT_EQ(ok(R"(${ .ClusterValues.enabled | ternary "on" "off" })"), "on");
  EXPECT_EQ(ok(R"(${ hasKey .ClusterLabels "env" } ${ hasKey .ClusterLabels "x" })"), "true false");
  EXPECT_EQ(ok(R"(${ coalesce .ClusterValues.empty "" "third" })"), "third");
}

TEST(Template, ComparisonsAndLogic) {
  EXPECT_EQ(ok(R"(${ eq .ClusterLabels.env "prod" } ${ ne .ClusterLabels.env "prod" })"), "true false");
  EXPECT_EQ(ok(R"(${ eq .ClusterLabels.env "dev" "prod" })"), "true");
  EXPECT_EQ(ok("${ lt 1 2 } ${ le 2 2 } ${ gt 1.5 2 } ${ ge 3 2 }"), "true true false true");
  EXPECT_EQ(ok("${ and true 0 } ${ or 0 \"x\" } ${ not false }"), "0 x true");
  EXPECT_EQ(ok("${ len .ClusterLabels } ${ len .ClusterName }"), "4 9");
  EXPECT_NE(error(R"(${ eq 1 "1" })").find("incompatible types"), std::string::npos);
  // and/or short-circuit: the failing operand is never evaluated.
  EXPECT_EQ(ok("${ or true .ClusterLabels.missing }"), "true");
}

TEST(Template, IfElse) {
  EXPECT_EQ(ok(R"(${ if eq .ClusterLabels.env "prod" }big${ else }small${ end })"), "big");
  EXPECT_EQ(ok(R"(${ if eq .ClusterLabels.env "dev" }a${ else if eq .ClusterLabels.region "eu" }b${ else }c${ end })"),
            "b");
  EXPECT_EQ(ok(R"(${ if .ClusterValues.empty }x${ end }y)"), "y");
  EXPECT_EQ(ok(R"(${ if .ClusterValues.enabled }${ if false }n${ else }yes${ end }${ end })"), "yes");
}

TEST(Template, ToJsonAndToYaml) {
  EXPECT_EQ(ok("${ toJson .ClusterValues.nested }"), R"({"a":{"b":"deep"}})");
  EXPECT_EQ(ok("${ toYaml .ClusterValues.nested }"), "a:\n  b: deep");
}

TEST(Template, SyntaxErrorsNameTheColumn) {
  const std::pair<std::string, std::string> cases[] = {
      {"abc ${ .ClusterName", "column 5: unclosed action"},
      {"${ env \"HOME\" }", "unsupported function \"env\""},
      {"${ expandenv \"$HOME\" }", "unsupported function \"expandenv\""},
      {"${ range .ClusterLabels }x${ end }", "unsupported action \"range\""},
      {"${ if true }x", "if without end"},
      {"${ end }", "unexpected"},
      {"${ $x := 1 }", "variables are not supported"},
      {"${ \"abc }", "unterminated string"},
      {"${ .ClusterName | }", "missing command"},
      {"${ upper }", "wrong number of arguments"},
      {"${ .ClusterName \"x\" }", "non-function"},
      {"${ }", "empty action"},
      {"${ (upper \"x\" }", "unclosed '('"},
  };
  for (const auto& [text, message] : cases) {
    EXPECT_NE(error(text).find(message), std::string::npos) << text;
  }
}

TEST(Template, DeepNestingIsRefused) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "${ if true }";
  }
  EXPECT_NE(error(text).find("too deeply nested"), std::string::npos);
}

TEST(Template, ValuesKeepTheirType) {
  EXPECT_EQ(value("${ .ClusterValues.replicas }"), Json(4));
  EXPECT_EQ(value(" ${ .ClusterLabels.replicas } "), Json(3));  // "3" read back as YAML, as in Fleet
  EXPECT_EQ(value("${ .ClusterValues.enabled }"), Json(true));
  EXPECT_EQ(value("${ .ClusterValues.ratio }"), Json(0.5));
  EXPECT_EQ(value("${ .ClusterName }"), Json("prod-eu-1"));
  EXPECT_EQ(value("${ .ClusterValues.nested }"), *Json::parse(R"({"a":{"b":"deep"}})"));
  EXPECT_EQ(value("${ .ClusterValues.list }"), *Json::parse(R"(["x","y"])"));
  EXPECT_EQ(value("${ toJson .ClusterLabels }"), context()["ClusterLabels"]);
  EXPECT_EQ(value("${ toYaml .ClusterValues.nested }"), *Json::parse(R"({"a":{"b":"deep"}})"));
  EXPECT_EQ(value("${ .ClusterValues.empty }"), Json(""));
  // Text around the action: a string.
  EXPECT_EQ(value("replicas-${ .ClusterValues.replicas }"), Json("replicas-4"));
  EXPECT_EQ(value("${ .ClusterValues.replicas }${ .ClusterValues.replicas }"), Json("44"));
  EXPECT_FALSE(evaluateValue("${ nope }", context()).ok());
}

TEST(Template, SupportedFunctionsAreListed) {
  auto names = supportedFunctions();
  for (const char* name : {"default", "quote", "upper", "lower", "trim", "replace", "printf", "toJson", "toYaml",
                           "b64enc", "ternary", "hasKey", "empty", "eq", "ne", "index"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

}  // namespace
}  // namespace flotilla::templating
