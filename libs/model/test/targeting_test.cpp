// Unit tests for Fleet's targeting rules: matchers, cluster groups (including the implicit "default" group),
// workspaces, and FirstMatch / AllMatches customizations with doNotDeploy.
#include "flotilla/model/targeting.h"

#include <gtest/gtest.h>

#include "flotilla/model/codec.h"
#include "flotilla/model/labels.h"

namespace flotilla::model {
namespace {

LabelSelector selector(std::string_view text) {
  return parseSelector(text).value();
}

ClusterFacts cluster(std::string name, Labels labels, const std::vector<GroupInfo>& groups = {},
                     std::string workspace = "fleet-default") {
  ClusterFacts facts{.name = std::move(name), .workspace = std::move(workspace), .labels = std::move(labels)};
  resolveGroups(facts, groups);
  return facts;
}

//! Rules from GitRepo targets in their JSON form (none: Fleet's default target).
TargetRules rules(std::string_view targets_json) {
  TargetRules out{.workspace = "fleet-default"};
  const Json targets = Json::parse(targets_json).value();
  for (const auto& target : targets.asArray()) {
    out.targets.push_back(matcherOf(decodeGitTarget(target, "targets").value()));
  }
  if (out.targets.empty()) {
    out.targets.push_back(defaultTarget());
  }
  return out;
}

Matcher customization(std::string name, std::string_view matcher_json) {
  Matcher out = matcherOf(decodeBundleTarget(Json::parse(matcher_json).value(), "customization").value());
  out.name = std::move(name);
  return out;
}

bool deploys(const TargetRules& r, const ClusterFacts& c) {
  return place(r, c).kind == TargetDecision::Kind::kDeploy;
}

// A target with only a clusterSelector matches by cluster labels (matchLabels and matchExpressions).
TEST(TargetingTest, ClusterSelectorMatchesLabels) {
  auto r = rules(R"([{"name":"prod","clusterSelector":{"matchLabels":{"env":"prod"},
      "matchExpressions":[{"key":"region","operator":"In","values":["eu","us"]}]}}])");
  EXPECT_TRUE(deploys(r, cluster("a", {{"env", "prod"}, {"region", "eu"}})));
  EXPECT_FALSE(deploys(r, cluster("b", {{"env", "prod"}, {"region", "ap"}})));
  EXPECT_FALSE(deploys(r, cluster("c", {{"env", "dev"}, {"region", "eu"}})));
  EXPECT_EQ(place(r, cluster("a", {{"env", "prod"}, {"region", "eu"}})).target, 0u);
}

// clusterName picks one cluster; combined criteria must all hold.
TEST(TargetingTest, ClusterNameAndCombinedCriteria) {
  auto by_name = rules(R"([{"clusterName":"b"}])");
  EXPECT_FALSE(deploys(by_name, cluster("a", {})));
  EXPECT_TRUE(deploys(by_name, cluster("b", {})));

  auto both = rules(R"([{"clusterName":"b","clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  EXPECT_FALSE(deploys(both, cluster("b", {{"env", "dev"}})));
  EXPECT_TRUE(deploys(both, cluster("b", {{"env", "prod"}})));
}

// A target with no criteria matches nothing (Fleet's ClusterMatcher); an empty selector matches everything.
TEST(TargetingTest, EmptyTargetMatchesNothingButEmptySelectorMatchesAll) {
  EXPECT_FALSE(matches(matcherOf(GitTarget{.name = "x"}), cluster("a", {})));
  EXPECT_TRUE(matches(matcherOf(GitTarget{.cluster_selector = LabelSelector{}}), cluster("a", {})));
}

// Without targets the bundle goes to Fleet's default target, the implicit "default" group: every cluster of the
// workspace. Defining a ClusterGroup "default" narrows it.
TEST(TargetingTest, DefaultTargetUsesImplicitDefaultGroup) {
  auto r = rules("[]");
  ASSERT_EQ(r.targets.size(), 1u);
  EXPECT_EQ(r.targets[0], defaultTarget());
  EXPECT_TRUE(deploys(r, cluster("a", {{"env", "dev"}})));
  EXPECT_FALSE(deploys(r, cluster("x", {}, {}, "other-workspace")));

  std::vector<GroupInfo> groups = {
      GroupInfo{.workspace = "fleet-default", .name = "default", .selector = selector("env=prod")}};
  EXPECT_FALSE(deploys(r, cluster("a", {{"env", "dev"}}, groups)));
  EXPECT_TRUE(deploys(r, cluster("b", {{"env", "prod"}}, groups)));
  // Without resolved groups (`flotilla render --no-default-group`), the implicit group is off too.
  ClusterFacts outside{.name = "c", .workspace = "fleet-default", .implicit_default_group = false};
  EXPECT_FALSE(deploys(r, outside));
}

// clusterGroup matches clusters the group selects; a group without a selector has no members; groups of another
// workspace do not count.
TEST(TargetingTest, ClusterGroupMembership) {
  std::vector<GroupInfo> groups = {
      GroupInfo{
          .workspace = "fleet-default", .name = "eu", .labels = {{"tier", "gold"}}, .selector = selector("region=eu")},
      GroupInfo{.workspace = "fleet-default", .name = "empty"},
      GroupInfo{.workspace = "other", .name = "eu", .selector = LabelSelector{}},
  };
  auto r = rules(R"([{"clusterGroup":"eu"}])");
  EXPECT_TRUE(deploys(r, cluster("a", {{"region", "eu"}}, groups)));
  EXPECT_FALSE(deploys(r, cluster("b", {{"region", "us"}}, groups)));

  auto empty = rules(R"([{"clusterGroup":"empty"}])");
  EXPECT_FALSE(deploys(empty, cluster("a", {{"region", "eu"}}, groups)));

  auto names = groupsOf(cluster("a", {{"region", "eu"}}), groups);
  ASSERT_EQ(names.size(), 2u);  // eu + the implicit default
  EXPECT_EQ(names[0].name, "eu");
  EXPECT_EQ(names[1].name, "default");
}

// clusterGroupSelector selects groups by the group's own labels; clusterSelector then refines within the group.
TEST(TargetingTest, ClusterGroupSelectorAndRefiningClusterSelector) {
  std::vector<GroupInfo> groups = {
      GroupInfo{
          .workspace = "fleet-default", .name = "eu", .labels = {{"tier", "gold"}}, .selector = selector("region=eu")},
  };
  auto r = rules(R"([{"clusterGroupSelector":{"matchLabels":{"tier":"gold"}},
      "clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  EXPECT_TRUE(deploys(r, cluster("a", {{"region", "eu"}, {"env", "prod"}}, groups)));
  EXPECT_FALSE(deploys(r, cluster("b", {{"region", "eu"}, {"env", "dev"}}, groups)));
  EXPECT_FALSE(deploys(r, cluster("c", {{"region", "us"}, {"env", "prod"}}, groups)));
}

// FirstMatch takes the first matching customization (a doNotDeploy first match keeps the bundle off, a later one
// does not count); AllMatches takes every match in order and any matching doNotDeploy keeps the bundle off. A
// customization never admits a cluster the allow-list excludes.
TEST(TargetingTest, CustomizationsFirstMatchAndAllMatches) {
  auto r = rules(R"([{"clusterSelector":{"matchExpressions":[{"key":"env","operator":"Exists"}]}}])");
  r.customizations = {customization("prod", R"({"clusterSelector":{"matchLabels":{"env":"prod"}}})"),
                      customization("eu", R"({"clusterSelector":{"matchLabels":{"region":"eu"}}})"),
                      customization("legacy", R"({"clusterSelector":{"matchLabels":{"legacy":"true"}},
                                                  "doNotDeploy":true})")};
  auto first = place(r, cluster("p", {{"env", "prod"}, {"region", "eu"}, {"legacy", "true"}}));
  EXPECT_EQ(first.kind, TargetDecision::Kind::kDeploy);
  EXPECT_EQ(first.customizations, std::vector<size_t>{0});
  EXPECT_EQ(place(r, cluster("d", {{"env", "dev"}})).customizations, std::vector<size_t>{});
  EXPECT_EQ(place(r, cluster("l", {{"env", "dev"}, {"legacy", "true"}})).kind, TargetDecision::Kind::kDoNotDeploy);

  r.mode = "AllMatches";
  auto all = place(r, cluster("p", {{"env", "prod"}, {"region", "eu"}}));
  EXPECT_EQ(all.kind, TargetDecision::Kind::kDeploy);
  EXPECT_EQ(all.customizations, (std::vector<size_t>{0, 1}));
  auto off = place(r, cluster("p", {{"env", "prod"}, {"region", "eu"}, {"legacy", "true"}}));
  EXPECT_EQ(off.kind, TargetDecision::Kind::kDoNotDeploy);
  EXPECT_EQ(off.customizations, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(place(r, cluster("n", {{"region", "eu"}})).kind, TargetDecision::Kind::kNotTargeted);
}

// A cluster record's facts and a group record's targeting view.
TEST(TargetingTest, FactsOfRecords) {
  Cluster record;
  record.metadata.name = "c1";
  record.metadata.ns = "fleet-default";
  record.metadata.labels = {{"env", "prod"}};
  record.spec.template_values = Json::obj({{"x", 1}});
  record.status.agent.kubernetes_version = "v1.30.2";
  auto facts = clusterFactsOf(record);
  EXPECT_EQ(facts.name, "c1");
  EXPECT_EQ(facts.template_values.getInt("x"), 1);
  EXPECT_EQ(facts.kubernetes_version, "v1.30.2");
  ClusterGroup group;
  group.metadata.name = "prod";
  group.metadata.ns = "fleet-default";
  group.spec.selector = selector("env=prod");
  resolveGroups(facts, {groupInfoOf(group)});
  ASSERT_EQ(facts.groups.size(), 1u);
  EXPECT_EQ(facts.groups[0].name, "prod");
  EXPECT_TRUE(facts.implicit_default_group);
}

// The rules a rendered bundle carries, from their JSON: Fleet's default target when there are none, each
// customization's matcher named after it unless it names itself, and every problem named by its path (doNotDeploy
// only in customizations).
TEST(TargetingTest, RulesFromTheJsonOfARenderedBundle) {
  std::vector<std::string> problems;
  auto none = targetRulesOf("fleet-default", Json(), {}, "", problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(none.targets, std::vector<Matcher>{defaultTarget()});
  EXPECT_EQ(targetRulesOf("fleet-default", Json::array(), {}, "", problems).targets,
            std::vector<Matcher>{defaultTarget()});

  auto rules = targetRulesOf(
      "fleet-default", Json::parse(R"([{"name":"prod","clusterSelector":{"matchLabels":{"env":"prod"}}}])").value(),
      {{.name = "skip-eu", .target = Json::parse(R"({"clusterName":"eu-1","doNotDeploy":true})").value()},
       {.name = "big", .target = Json::parse(R"({"name":"own","clusterSelector":{}})").value()}},
      "AllMatches", problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(rules.workspace, "fleet-default");
  EXPECT_EQ(rules.mode, "AllMatches");
  ASSERT_EQ(rules.targets.size(), 1u);
  EXPECT_EQ(rules.targets[0].name, "prod");
  ASSERT_EQ(rules.customizations.size(), 2u);
  EXPECT_EQ(rules.customizations[0].name, "skip-eu");
  EXPECT_TRUE(rules.customizations[0].do_not_deploy);
  EXPECT_EQ(rules.customizations[1].name, "own");
  EXPECT_EQ(place(rules, cluster("eu-1", {{"env", "prod"}})).kind, TargetDecision::Kind::kDoNotDeploy);
  EXPECT_TRUE(deploys(rules, cluster("us-1", {{"env", "prod"}})));
  EXPECT_FALSE(deploys(rules, cluster("dev-1", {{"env", "dev"}})));

  auto bad = targetRulesOf("fleet-default", Json::parse(R"([{"doNotDeploy":true}])").value(),
                           {{.name = "x", .target = Json::parse(R"({"clusterSelector":5})").value()}}, "", problems);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("targets[0]"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("customizations[0].target"), std::string::npos) << problems[1];
  EXPECT_TRUE(bad.targets.empty()) << "no default target in place of a broken list";
  EXPECT_TRUE(bad.customizations.empty());

  problems.clear();
  targetRulesOf("fleet-default", Json::obj({{"a", 1}}), {}, "", problems);
  EXPECT_EQ(problems, std::vector<std::string>{"targets: expected a list"});
}

}  // namespace
}  // namespace flotilla::model
