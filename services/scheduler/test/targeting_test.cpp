// Unit tests for what a BundleEvent deploys: the default target, customizations and doNotDeploy, variants tables,
// and how options shape the deploymentID.
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

// The allow-list and group rules themselves are tested in libs/model (targeting_test.cpp); these tests cover what
// a BundleEvent deploys.

// Without targets the bundle goes to Fleet's default target, the implicit "default" group.
TEST(TargetingTest, EventWithoutTargetsUsesDefaultTarget) {
  auto bundle = targeting(Json::array());
  ASSERT_EQ(bundle.rules.targets.size(), 1u);
  EXPECT_EQ(bundle.rules.targets[0], defaultTarget());
  EXPECT_TRUE(place(bundle, cluster("a", {{"env", "dev"}}), {}).has_value());
  EXPECT_FALSE(place(bundle, cluster("x", {}, "other-workspace"), {}).has_value());
  std::vector<GroupInfo> groups = {
      GroupInfo{.workspace = "fleet-default", .name = "default", .selector = selector("env=prod")}};
  EXPECT_FALSE(place(bundle, cluster("a", {{"env", "dev"}}), groups).has_value());
  EXPECT_TRUE(place(bundle, cluster("b", {{"env", "prod"}}), groups).has_value());
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
  bundle.rules.mode = "AllMatches";
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
