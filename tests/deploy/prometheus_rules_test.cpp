// Flotilla's alert rules (charts/flotilla-hub/files/flotilla-rules.yaml, docs/metrics.md "Alerts"): Debian's
// `promtool check rules` passes on the plain file, `promtool test rules` passes the unit tests of every alert
// (flotilla-rules.test.yaml: each fires on its fault's series and stays quiet without it), and the hub chart's
// PrometheusRule carries exactly its groups. tests/e2e/prometheus_test.cpp evaluates the same rules against a
// running hub.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "deploy_util.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::HasSubstr;

std::string rulesFile() {
  return chartDir("flotilla-hub") + "/files/flotilla-rules.yaml";
}

//! promtool from PATH (Debian's prometheus package, installed by scripts/setup); empty when absent.
std::string promtool() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/promtool";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PrometheusRules, PromtoolCheckRulesPasses) {
  const std::string tool = promtool();
  if (tool.empty()) {
    GTEST_SKIP() << "promtool missing: install Debian's prometheus package (scripts/setup)";
  }
  auto result = run({tool, "check", "rules", rulesFile()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("SUCCESS: 8 rules found"));
}

//! The promtool unit tests of the rules (tests/deploy).
std::string ruleTestsFile() {
  return sourceDir() + "/tests/deploy/flotilla-rules.test.yaml";
}

//! The alert names of the shipped rules file.
std::set<std::string> shippedAlerts() {
  std::set<std::string> alerts;
  auto rules = parseYaml(readFile(rulesFile()), rulesFile());
  if (!rules.ok()) {
    ADD_FAILURE() << rules.error().describe();
    return alerts;
  }
  for (const auto& group : rules->find("groups")->asArray()) {
    for (const auto& rule : group.find("rules")->asArray()) {
      alerts.insert(rule.getString("alert"));
    }
  }
  return alerts;
}

TEST(PrometheusRules, PromtoolTestRulesPasses) {
  const std::string tool = promtool();
  if (tool.empty()) {
    GTEST_SKIP() << "promtool missing: install Debian's prometheus package (scripts/setup)";
  }
  auto result = run({tool, "test", "rules", ruleTestsFile()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("SUCCESS"));
}

// Each alert of the rules file has a case where it fires (non-empty exp_alerts) and one where it stays quiet.
TEST(PrometheusRules, EveryAlertHasAFiringAndAQuietUnitTest) {
  auto tests = parseYaml(readFile(ruleTestsFile()), ruleTestsFile());
  ASSERT_TRUE(tests.ok()) << tests.error().describe();
  std::set<std::string> fires;
  std::set<std::string> quiet;
  for (const auto& test : tests->find("tests")->asArray()) {
    for (const auto& check : test.find("alert_rule_test")->asArray()) {
      const Json* expected = check.find("exp_alerts");
      ASSERT_NE(expected, nullptr) << check.getString("alertname") << ": exp_alerts is required";
      (expected->asArray().empty() ? quiet : fires).insert(check.getString("alertname"));
    }
  }
  const auto alerts = shippedAlerts();
  EXPECT_EQ(alerts.size(), 8u);
  EXPECT_EQ(fires, alerts) << "every alert fires in some case, and no case names an alert that does not exist";
  EXPECT_EQ(quiet, alerts) << "every alert stays quiet in some case";
}

// The unit tests are not vacuous: with every threshold moved out of reach (a copy of the rules file), each alert's
// firing case fails.
TEST(PrometheusRules, PromtoolTestRulesFailsForEveryAlertWhenItsThresholdMoves) {
  const std::string tool = promtool();
  if (tool.empty()) {
    GTEST_SKIP() << "promtool missing: install Debian's prometheus package (scripts/setup)";
  }
  auto dir = makeTempDir("rules-test");
  ASSERT_TRUE(dir.ok()) << dir.error().describe();
  const std::string moved =
      std::regex_replace(readFile(rulesFile()), std::regex(R"((expr: .*) (>|==) [0-9.]+\n)"), "$1 $2 1e12\n");
  ASSERT_NE(moved, readFile(rulesFile()));
  ASSERT_TRUE(writeFile(*dir + "/rules.yaml", moved).ok());
  const std::string tests = std::regex_replace(
      readFile(ruleTestsFile()), std::regex(R"(\.\./\.\./charts/flotilla-hub/files/flotilla-rules\.yaml)"),
      *dir + "/rules.yaml");
  ASSERT_TRUE(writeFile(*dir + "/rules.test.yaml", tests).ok());
  auto result = run({tool, "test", "rules", *dir + "/rules.test.yaml"});
  EXPECT_NE(result.exit_code, 0) << result.out << result.err;
  for (const auto& alert : shippedAlerts()) {
    EXPECT_THAT(result.out + result.err, HasSubstr("alertname: " + alert + ",")) << alert << " was not caught";
  }
  removeAll(*dir);
}

TEST(PrometheusRules, EveryAlertTheIssueAsksForIsThere) {
  auto rules = parseYaml(readFile(rulesFile()), rulesFile());
  ASSERT_TRUE(rules.ok()) << rules.error().describe();
  std::set<std::string> alerts;
  for (const auto& group : rules->find("groups")->asArray()) {
    for (const auto& rule : group.find("rules")->asArray()) {
      alerts.insert(rule.getString("alert"));
      EXPECT_FALSE(rule.getString("expr").empty()) << rule.getString("alert");
    }
  }
  EXPECT_EQ(alerts, (std::set<std::string>{"FlotillaClusterOffline", "FlotillaGitRepoNotReady", "FlotillaPollErrors",
                                           "FlotillaRenderErrors", "FlotillaApplyErrors", "FlotillaConsumerLag",
                                           "FlotillaStoreFilling", "FlotillaStoreFull"}));
}

TEST(HubChart, PrometheusRuleCarriesThePlainRulesFile) {
  auto rules = parseYaml(readFile(rulesFile()), rulesFile());
  ASSERT_TRUE(rules.ok()) << rules.error().describe();
  auto objects = renderChart("flotilla-hub",
                             {"--set", "nats.auth.lookupSecrets=false", "--set", "metrics.prometheusRule.enabled=true",
                              "--set", "metrics.prometheusRule.labels.release=kube-prometheus"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* rule = findObject(*objects, "PrometheusRule", "t-flotilla-hub");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->at({"metadata", "labels", "release"})->asString(), "kube-prometheus");
  ASSERT_NE(rule->at({"spec", "groups"}), nullptr);
  EXPECT_EQ(*rule->at({"spec", "groups"}), *rules->find("groups"));

  auto defaults = renderChart("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false"});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(kindCounts(*defaults)["PrometheusRule"], 0);
  EXPECT_FALSE(renderChart("flotilla-hub",
                           {"--set", "nats.auth.lookupSecrets=false", "--set", "metrics.prometheusRule.interval=1m"})
                   .ok())
      << "values.schema.json knows every key";
}

TEST(HubChart, DashboardsAreConfigMapsForGrafanasSidecar) {
  auto objects =
      renderChart("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false", "--set", "metrics.dashboards.enabled=true",
                                   "--set", "metrics.dashboards.labels.team=platform"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  for (const std::string name : {"overview", "gitrepo", "cluster", "hub"}) {
    const Json* map = findObject(*objects, "ConfigMap", "t-flotilla-hub-dashboard-" + name);
    ASSERT_NE(map, nullptr) << name;
    EXPECT_EQ(map->at({"metadata", "labels", "grafana_dashboard"})->asString(), "1");
    EXPECT_EQ(map->at({"metadata", "labels", "team"})->asString(), "platform");
    const std::string file = "flotilla-" + name + ".json";
    const Json* text = map->at({"data", file});
    ASSERT_NE(text, nullptr) << name;
    auto dashboard = Json::parse(text->asString());
    ASSERT_TRUE(dashboard.ok()) << name << ": " << dashboard.error().describe();
    EXPECT_EQ(*dashboard, Json::parse(readFile(chartDir("flotilla-hub") + "/files/dashboards/" + file)).value());
    EXPECT_FALSE(dashboard->find("panels")->asArray().empty()) << name;
  }
  auto defaults = renderChart("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false"});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(findObject(*defaults, "ConfigMap", "t-flotilla-hub-dashboard-overview"), nullptr);
}

TEST(HubChart, PerClusterMetricsReachTheScheduler) {
  for (bool on : {false, true}) {
    auto objects = renderChart("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false", "--set",
                                                std::string("scheduler.perClusterMetrics=") + (on ? "true" : "false")});
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    const Json* scheduler = findObject(*objects, "Deployment", "t-flotilla-hub-scheduler");
    ASSERT_NE(scheduler, nullptr);
    const Json* args = firstContainer(*scheduler)->find("args");
    ASSERT_NE(args, nullptr);
    bool has = false;
    for (const auto& arg : args->asArray()) {
      has = has || arg.asString() == "--per-cluster-metrics=true";
    }
    EXPECT_EQ(has, on);
  }
}

}  // namespace
}  // namespace flotilla::deploy_test
