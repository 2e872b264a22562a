// The hand-written scanners and the bounded URL pattern that replaced std::regex over repository text: the old
// regex overflowed the stack on a long helm.chart and backtracked without bound on a hostile helmRepoURLRegex.
#include "text_scan.h"

#include <string>

#include <gtest/gtest.h>

#include "url_pattern.h"

namespace flotilla::render::detail {
namespace {

TEST(ChartNameScan, AcceptsWhatTheOldPatternAccepted) {
  for (const char* name : {"nginx", "_x", "Chart-1.2_b", "9lives"}) {
    EXPECT_TRUE(isChartName(name)) << name;
  }
  for (const char* name : {"", "-x", ".x", "a/b", "a b", "oci://x", "x:1"}) {
    EXPECT_FALSE(isChartName(name)) << name;
  }
}

TEST(ChartNameScan, MegabyteLongChartNameIsScannedWithoutRecursion) {
  // std::regex_match over this overflowed the stack (one recursion per character).
  std::string name(4u << 20, 'a');
  EXPECT_TRUE(isChartName(name));
  name.back() = '/';
  EXPECT_FALSE(isChartName(name));
}

TEST(SourceLocationScan, FindsHelmsFileAndLine) {
  auto location = findSourceLocation(
      "Error: template: mychart/templates/deploy.yaml:12:3: executing \"x\" at <.Values.y>: nil pointer");
  ASSERT_TRUE(location.has_value());
  EXPECT_EQ(location->path, "mychart/templates/deploy.yaml");
  EXPECT_EQ(location->line, "12");
}

TEST(SourceLocationScan, SkipsColonsThatAreNoLocation) {
  auto location = findSourceLocation("Error: parse error: x.yaml:3 no dir; at a/b/_helpers.tpl:40: bad");
  ASSERT_TRUE(location.has_value());
  EXPECT_EQ(location->path, "a/b/_helpers.tpl");
  EXPECT_EQ(location->line, "40");
  EXPECT_FALSE(findSourceLocation("Error: no file here: 12").has_value());
  EXPECT_FALSE(findSourceLocation("a/b.go:12").has_value());
}

TEST(SourceLocationScan, AbsoluteAndDoubledSlashesAreCut) {
  auto location = findSourceLocation("open /tmp/x//chart/values.yaml:7: denied");
  ASSERT_TRUE(location.has_value());
  EXPECT_EQ(location->path, "chart/values.yaml");
}

TEST(SourceLocationScan, HugeStderrIsScannedLinearly) {
  std::string text(2u << 20, ':');
  text += "c/templates/a.yaml:5";
  auto location = findSourceLocation(text);
  ASSERT_TRUE(location.has_value());
  EXPECT_EQ(location->line, "5");
}

TEST(UrlPatternTest, MatchesLikeGoMatchString) {
  EXPECT_TRUE(*urlPatternMatches("^https://charts\\.example\\.com/", "https://charts.example.com/stable"));
  EXPECT_TRUE(*urlPatternMatches("example", "https://charts.example.com/"));  // unanchored search
  EXPECT_FALSE(*urlPatternMatches("^http://", "https://charts.example.com/"));
  EXPECT_TRUE(*urlPatternMatches("(?i)^HTTPS://[a-z]+\\.EXAMPLE", "https://charts.example.com/"));
}

TEST(UrlPatternTest, InvalidPatternNamesTheField) {
  auto matches = urlPatternMatches("^https://(unclosed", "https://x/");
  ASSERT_FALSE(matches.ok());
  EXPECT_EQ(matches.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(matches.error().message.find("helmRepoURLRegex is not a valid regular expression"), std::string::npos)
      << matches.error().message;
}

TEST(UrlPatternTest, CatastrophicBacktrackingIsRefusedNotRun) {
  // (x+x+)+y over a long run of x's that is not followed by y is exponential for a backtracking engine (the y
  // later in the URL defeats PCRE2's "required character" shortcut); the match limit stops it.
  auto matches = urlPatternMatches("(x+x+)+y", "https://x/" + std::string(3000, 'x') + "!y");
  ASSERT_FALSE(matches.ok());
  EXPECT_NE(matches.error().message.find("needs more work than allowed"), std::string::npos) << matches.error().message;
}

TEST(UrlPatternTest, PatternAndUrlLengthsAreBounded) {
  auto long_pattern = urlPatternMatches(std::string(kMaxUrlPatternBytes + 1, 'a'), "https://x/");
  ASSERT_FALSE(long_pattern.ok());
  EXPECT_NE(long_pattern.error().message.find("over the limit of 1024"), std::string::npos);
  auto long_url = urlPatternMatches("x", "https://x/" + std::string(kMaxMatchedUrlBytes, 'a'));
  ASSERT_FALSE(long_url.ok());
  EXPECT_NE(long_url.error().message.find("the limit is 4096"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::render::detail
