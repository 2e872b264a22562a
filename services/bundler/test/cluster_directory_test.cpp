// The cluster directory: the scheduler's cluster and group records turned into cluster facts, and what changed.
#include "flotilla/bundler/cluster_directory.h"

#include <gtest/gtest.h>

namespace flotilla::bundler {
namespace {

bus::KvEntry put(const std::string& key, const std::string& value) {
  return bus::KvEntry{.key = key, .value = value, .revision = 1, .operation = bus::KvOperation::kPut};
}

TEST(ClusterDirectory, FactsGroupsAndChanges) {
  ClusterDirectory directory;
  auto change = directory.apply(put("cluster.c1", R"({"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster",
    "metadata":{"name":"c1","namespace":"ws","labels":{"env":"prod"},"annotations":{"owner":"a"}},
    "spec":{"templateValues":{"tier":"gold"}},"status":{"agent":{"kubernetesVersion":"v1.30.1"}}})"));
  EXPECT_FALSE(change.invalid) << change.problem;
  EXPECT_EQ(change.clusters, std::set<std::string>{"c1"});
  EXPECT_EQ(change.workspaces, std::set<std::string>{"ws"});
  auto facts = directory.snapshot("ws");
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].annotations.at("owner"), "a");
  EXPECT_EQ(facts[0].template_values, *Json::parse(R"({"tier":"gold"})"));
  EXPECT_EQ(facts[0].kubernetes_version, "v1.30.1");
  EXPECT_TRUE(facts[0].implicit_default_group);
  // A heartbeat changes nothing; the same record again changes nothing.
  EXPECT_TRUE(directory.apply(put("heartbeat.c1", "{}")).clusters.empty());
  // A group whose selector matches: the cluster's facts change.
  change = directory.apply(put("group.ws.gold", R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"ClusterGroup",
    "metadata":{"name":"gold","namespace":"ws","labels":{"tier":"1"}},"spec":{"selector":{"matchLabels":{"env":"prod"}}}})"));
  EXPECT_EQ(change.clusters, std::set<std::string>{"c1"});
  facts = directory.snapshot("ws");
  ASSERT_EQ(facts[0].groups.size(), 1u);
  EXPECT_EQ(facts[0].groups[0].name, "gold");
  EXPECT_EQ(facts[0].groups[0].labels.at("tier"), "1");
  // Unreadable records are reported, not applied.
  EXPECT_TRUE(directory.apply(put("cluster.c2", "not json")).invalid);
  // Removal.
  change = directory.apply(bus::KvEntry{.key = "cluster.c1", .operation = bus::KvOperation::kDelete});
  EXPECT_EQ(change.clusters, std::set<std::string>{"c1"});
  EXPECT_TRUE(directory.snapshot("ws").empty());
}

// The hub admin's Cluster document (spec.<name>) is overlaid on the registration, so `${ }` templating sees the hub
// labels and templateValues; a document alone makes no cluster; a deregistered cluster is left out.
TEST(ClusterDirectory, DocumentsOverlayRegistrationsAndTombstonesRemoveClusters) {
  ClusterDirectory directory;
  const std::string document = R"({"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster",
    "metadata":{"name":"c1","namespace":"ws","labels":{"env":"prod","tier":"gold"},"annotations":{"owner":"hub"}},
    "spec":{"templateValues":{"replicas":3}}})";
  auto change = directory.apply(put("spec.c1", document));
  EXPECT_FALSE(change.invalid) << change.problem;
  EXPECT_TRUE(change.clusters.empty()) << "a document without a registration is no cluster";

  change = directory.apply(put("cluster.c1", R"({"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster",
    "metadata":{"name":"c1","namespace":"ws","labels":{"env":"dev","arch":"arm64"}},
    "status":{"agent":{"kubernetesVersion":"v1.30.1"}}})"));
  EXPECT_EQ(change.clusters, std::set<std::string>{"c1"});
  auto facts = directory.snapshot("ws");
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].labels, (model::Labels{{"env", "prod"}, {"tier", "gold"}, {"arch", "arm64"}}));
  EXPECT_EQ(facts[0].annotations.at("owner"), "hub");
  EXPECT_EQ(facts[0].template_values, *Json::parse(R"({"replicas":3})"));
  EXPECT_EQ(facts[0].kubernetes_version, "v1.30.1");

  // A document with a field the hub does not implement is reported, not applied.
  EXPECT_TRUE(directory
                  .apply(put("spec.c1", R"({"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster",
    "metadata":{"name":"c1"},"spec":{"clientID":"x"}})"))
                  .invalid);

  change = directory.apply(put("deregistered.c1", R"({"cluster":"c1","time":"","keepResources":false})"));
  EXPECT_EQ(change.clusters, std::set<std::string>{"c1"});
  EXPECT_TRUE(directory.snapshot("ws").empty());
  change = directory.apply(bus::KvEntry{.key = "deregistered.c1", .operation = bus::KvOperation::kDelete});
  EXPECT_EQ(change.clusters, std::set<std::string>{"c1"});

  // Without the document the registration's own labels apply again.
  directory.apply(bus::KvEntry{.key = "spec.c1", .operation = bus::KvOperation::kDelete});
  facts = directory.snapshot("ws");
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].labels.at("env"), "dev");
  EXPECT_TRUE(facts[0].template_values.asObject().empty());
}

std::string registration(const std::string& name, const std::string& env) {
  return R"({"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster","metadata":{"name":")" + name +
         R"(","namespace":"ws","labels":{"env":")" + env + R"("}}})";
}

std::string group(const std::string& env) {
  return R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"ClusterGroup","metadata":{"name":"g","namespace":"ws"},
    "spec":{"selector":{"matchLabels":{"env":")" +
         env + R"("}}}})";
}

// A registration changes its own cluster's facts only, with the groups resolved for it; a group changes everyone's.
TEST(ClusterDirectory, ARegistrationChangesOnlyItsClusterAndAGroupChangesAll) {
  ClusterDirectory directory;
  ASSERT_FALSE(directory.apply(put("group.ws.g", group("prod"))).invalid);
  for (int i = 0; i < 100; ++i) {
    const std::string name = "c" + std::to_string(i);
    auto change = directory.apply(put("cluster." + name, registration(name, "prod")));
    ASSERT_FALSE(change.invalid) << change.problem;
    EXPECT_EQ(change.clusters, std::set<std::string>{name});
  }
  auto facts = directory.snapshot("ws");
  ASSERT_EQ(facts.size(), 100u);
  for (const auto& cluster : facts) {
    ASSERT_EQ(cluster.groups.size(), 1u) << cluster.name;
    EXPECT_EQ(cluster.groups[0].name, "g");
  }
  auto change = directory.apply(put("cluster.c5", registration("c5", "dev")));
  EXPECT_EQ(change.clusters, std::set<std::string>{"c5"});
  EXPECT_TRUE(directory.apply(put("cluster.c5", registration("c5", "dev"))).clusters.empty()) << "unchanged facts";
  facts = directory.snapshot("ws");
  for (const auto& cluster : facts) {
    EXPECT_EQ(cluster.groups.size(), cluster.name == "c5" ? 0u : 1u) << cluster.name;
  }
  change = directory.apply(put("group.ws.g", group("dev")));
  EXPECT_EQ(change.clusters.size(), 100u);
  facts = directory.snapshot("ws");
  for (const auto& cluster : facts) {
    EXPECT_EQ(cluster.groups.size(), cluster.name == "c5" ? 1u : 0u) << cluster.name;
  }
}

}  // namespace
}  // namespace flotilla::bundler
