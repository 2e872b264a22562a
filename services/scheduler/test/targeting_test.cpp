// Unit tests for targeting: Fleet's matcher rules, cluster groups (including the implicit "default" group),
// customizations and doNotDeploy, workspaces, and how options shape the deploymentID.
#include "flotilla/scheduler/targeting.h"

#include <gtest/gtest.h>

#include "flotilla/model/identity.h"
#include "flotilla/model/labels.h"

namespace flotilla::scheduler {
namespace {

const std::string kManifest(64, 'a');
const std::string kProdManifest(64, 'b');

model::LabelSelector selector(std::string_view text) {
  return model::parseSelector(text).value();
}

ClusterInfo cluster(std::string name, model::Labels labels, std::string workspace = "fleet-default") {
  return ClusterInfo{.name = std::move(name), .workspace = std::move(workspace), .labels = std::move(labels)};
}

events::BundleEvent bundleEvent(Json targets) {
  events::BundleEvent event;
  event.workspace = "fleet-default";
  event.gitrepo = "repo";
  event.bundle = "repo-app";
  event.commit = std::string(40, 'c');
  event.manifest_id = kManifest;
  event.options = Json::obj({{"defaultNamespace", "app"}});
  event.targets = std::move(targets);
  return event;
}

BundleTargeting targeting(Json targets) {
  return targetingFrom(bundleEvent(std::move(targets))).value();
}

// A target with only a clusterSelector matches by cluster labels (matchLabels and matchExpressions).
TEST(TargetingTest, ClusterSelectorMatchesLabels) {
  auto bundle = targeting(Json::parse(R"([{"name":"prod","clusterSelector":{"matchLabels":{"env":"prod"},
      "matchExpressions":[{"key":"region","operator":"In","values":["eu","us"]}]}}])")
                              .value());
  EXPECT_TRUE(place(bundle, cluster("a", {{"env", "prod"}, {"region", "eu"}}), {}).has_value());
  EXPECT_FALSE(place(bundle, cluster("b", {{"env", "prod"}, {"region", "ap"}}), {}).has_value());
  EXPECT_FALSE(place(bundle, cluster("c", {{"env", "dev"}, {"region", "eu"}}), {}).has_value());
}

// clusterName picks one cluster; combined criteria must all hold.
TEST(TargetingTest, ClusterNameAndCombinedCriteria) {
  auto by_name = targeting(Json::parse(R"([{"clusterName":"b"}])").value());
  EXPECT_FALSE(place(by_name, cluster("a", {}), {}).has_value());
  EXPECT_TRUE(place(by_name, cluster("b", {}), {}).has_value());

  auto both =
      targeting(Json::parse(R"([{"clusterName":"b","clusterSelector":{"matchLabels":{"env":"prod"}}}])").value());
  EXPECT_FALSE(place(both, cluster("b", {{"env", "dev"}}), {}).has_value());
  EXPECT_TRUE(place(both, cluster("b", {{"env", "prod"}}), {}).has_value());
}

// A target with no criteria matches nothing (Fleet's ClusterMatcher); an empty selector matches everything.
TEST(TargetingTest, EmptyTargetMatchesNothingButEmptySelectorMatchesAll) {
  EXPECT_FALSE(matches(Matcher{.name = "x"}, cluster("a", {}), {}));
  EXPECT_TRUE(matches(Matcher{.cluster_selector = model::LabelSelector{}}, cluster("a", {}), {}));
}

// Without targets the bundle goes to Fleet's default target, the implicit "default" group: every cluster of the
// workspace. Defining a ClusterGroup "default" narrows it.
TEST(TargetingTest, DefaultTargetUsesImplicitDefaultGroup) {
  auto bundle = targeting(Json::array());
  ASSERT_EQ(bundle.targets.size(), 1u);
  EXPECT_EQ(bundle.targets[0], defaultTarget());
  EXPECT_TRUE(place(bundle, cluster("a", {{"env", "dev"}}), {}).has_value());
  EXPECT_FALSE(place(bundle, cluster("x", {}, "other-workspace"), {}).has_value());

  std::vector<GroupInfo> groups = {
      GroupInfo{.workspace = "fleet-default", .name = "default", .selector = selector("env=prod")}};
  EXPECT_FALSE(place(bundle, cluster("a", {{"env", "dev"}}), groups).has_value());
  EXPECT_TRUE(place(bundle, cluster("b", {{"env", "prod"}}), groups).has_value());
}

// clusterGroup matches clusters the group selects; a group without a selector has no members; groups of another
// workspace do not count.
TEST(TargetingTest, ClusterGroupMembership) {
  std::vector<GroupInfo> groups = {
      GroupInfo{
          .workspace = "fleet-default", .name = "eu", .labels = {{"tier", "gold"}}, .selector = selector("region=eu")},
      GroupInfo{.workspace = "fleet-default", .name = "empty"},
      GroupInfo{.workspace = "other", .name = "eu", .selector = model::LabelSelector{}},
  };
  auto bundle = targeting(Json::parse(R"([{"clusterGroup":"eu"}])").value());
  EXPECT_TRUE(place(bundle, cluster("a", {{"region", "eu"}}), groups).has_value());
  EXPECT_FALSE(place(bundle, cluster("b", {{"region", "us"}}), groups).has_value());

  auto empty = targeting(Json::parse(R"([{"clusterGroup":"empty"}])").value());
  EXPECT_FALSE(place(empty, cluster("a", {{"region", "eu"}}), groups).has_value());

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
  auto bundle = targeting(Json::parse(R"([{"clusterGroupSelector":{"matchLabels":{"tier":"gold"}},
      "clusterSelector":{"matchLabels":{"env":"prod"}}}])")
                              .value());
  EXPECT_TRUE(place(bundle, cluster("a", {{"region", "eu"}, {"env", "prod"}}), groups).has_value());
  EXPECT_FALSE(place(bundle, cluster("b", {{"region", "eu"}, {"env", "dev"}}), groups).has_value());
  EXPECT_FALSE(place(bundle, cluster("c", {{"region", "us"}, {"env", "prod"}}), groups).has_value());
}

// The GitRepo targets are the allow-list; customizations choose manifest and options (first match), and a
// matching doNotDeploy keeps the bundle away.
TEST(TargetingTest, CustomizationsChooseManifestAndDoNotDeployExcludes) {
  auto event = bundleEvent(
      Json::parse(R"([{"clusterSelector":{"matchExpressions":[{"key":"env","operator":"Exists"}]}}])").value());
  event.customizations.push_back(events::TargetManifest{
      .name = "prod",
      .target = Json::parse(R"({"clusterSelector":{"matchLabels":{"env":"prod"}}})").value(),
      .manifest_id = kProdManifest,
      .options =
          Json::obj({{"defaultNamespace", "app"}, {"helm", Json::obj({{"values", Json::obj({{"replicas", 3}})}})}})});
  event.customizations.push_back(events::TargetManifest{
      .name = "skip-legacy",
      .target = Json::parse(R"({"clusterSelector":{"matchLabels":{"legacy":"true"}},"doNotDeploy":true})").value()});
  auto bundle = targetingFrom(event).value();

  auto prod = place(bundle, cluster("p", {{"env", "prod"}}), {});
  ASSERT_TRUE(prod.has_value());
  EXPECT_EQ(prod->manifest_id, kProdManifest);
  EXPECT_EQ(prod->customization, "prod");
  EXPECT_EQ(prod->deployment_id, model::deploymentID(kProdManifest, prod->options));

  auto dev = place(bundle, cluster("d", {{"env", "dev"}}), {});
  ASSERT_TRUE(dev.has_value());
  EXPECT_EQ(dev->manifest_id, kManifest);
  EXPECT_EQ(dev->customization, "");
  EXPECT_EQ(dev->deployment_id, model::deploymentID(kManifest, event.options));

  EXPECT_FALSE(place(bundle, cluster("l", {{"legacy", "true"}, {"env", "dev"}}), {}).has_value());
  // FirstMatch (Fleet): only the first matching customization counts, so a later doNotDeploy does not.
  auto both = place(bundle, cluster("l", {{"env", "prod"}, {"legacy", "true"}}), {});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->customization, "prod");
  // AllMatches: any matching doNotDeploy keeps the bundle off.
  bundle.customization_mode = "AllMatches";
  EXPECT_FALSE(place(bundle, cluster("l", {{"env", "prod"}, {"legacy", "true"}}), {}).has_value());
  // A customization alone does not admit a cluster the GitRepo targets exclude.
  EXPECT_FALSE(place(bundle, cluster("n", {{"tier", "x"}}), {}).has_value());
}

// Per-cluster variants: each admitted cluster gets its entry of the table; a cluster missing from it (or a table
// not loaded yet) is held; the allow-list and doNotDeploy still apply.
TEST(TargetingTest, VariantsTableChoosesPerCluster) {
  auto event = bundleEvent(
      Json::parse(R"([{"clusterSelector":{"matchExpressions":[{"key":"env","operator":"Exists"}]}}])").value());
  event.manifest_id.clear();
  event.variants_object = "variants-" + std::string(64, 'f');
  event.force_sync_generation = 2;
  event.customizations.push_back(events::TargetManifest{
      .name = "off", .target = Json::parse(R"({"clusterName":"x","doNotDeploy":true})").value()});
  auto bundle = targetingFrom(event);
  ASSERT_TRUE(bundle.ok()) << bundle.error().describe();
  auto held = place(*bundle, cluster("a", {{"env", "prod"}}), {});
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->hold);

  events::BundleVariants table{.workspace = "fleet-default", .bundle = "repo-app"};
  table.variants.push_back(
      events::Variant{.manifest_id = kProdManifest,
                      .options = Json::obj({{"helm", Json::obj({{"values", Json::obj({{"env", "prod"}})}})}}),
                      .customizations = {"c1", "c2"}});
  table.clusters = {{"a", 0}, {"x", 0}};
  bundle->variants = table;
  auto a = place(*bundle, cluster("a", {{"env", "prod"}}), {});
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->hold);
  EXPECT_EQ(a->manifest_id, kProdManifest);
  EXPECT_EQ(a->customization, "c1+c2");
  EXPECT_EQ(a->options.getInt("forceSyncGeneration"), 2);
  EXPECT_EQ(a->deployment_id, model::deploymentID(kProdManifest, a->options));
  auto b = place(*bundle, cluster("b", {{"env", "dev"}}), {});
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->hold);
  EXPECT_FALSE(place(*bundle, cluster("x", {{"env", "dev"}}), {}).has_value());  // doNotDeploy
  EXPECT_FALSE(place(*bundle, cluster("a", {}), {}).has_value());                // not admitted
}

// forceSyncGeneration joins the options, so a force-sync changes the deploymentID (Fleet's "Force Update").
TEST(TargetingTest, ForceSyncGenerationChangesDeploymentId) {
  auto event = bundleEvent(Json::array());
  auto plain = place(targetingFrom(event).value(), cluster("a", {}), {}).value();
  event.force_sync_generation = 2;
  auto forced = place(targetingFrom(event).value(), cluster("a", {}), {}).value();
  EXPECT_NE(plain.deployment_id, forced.deployment_id);
  EXPECT_EQ(forced.options.getInt("forceSyncGeneration"), 2);
}

// Invalid targets are reported with their path; an event without a manifest is not a rendered bundle.
TEST(TargetingTest, InvalidTargetsAreReported) {
  auto bad = targetingFrom(bundleEvent(Json::parse(R"([{"clusterSelectr":{}}])").value()));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("targets[0]"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("clusterSelectr"), std::string::npos) << bad.error().message;

  auto event = bundleEvent(Json::array());
  event.manifest_id.clear();
  EXPECT_FALSE(targetingFrom(event).ok());
}

}  // namespace
}  // namespace flotilla::scheduler
