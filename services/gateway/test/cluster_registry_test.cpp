// ClusterGroup membership and the clusters that need a CR, from the clusters bucket's records (cluster_registry.h).
#include "flotilla/gateway/cluster_registry.h"

#include <gtest/gtest.h>

namespace flotilla::gateway {
namespace {

model::Cluster cluster(const std::string& ns, model::Labels labels) {
  model::Cluster out;
  out.metadata.ns = ns;
  out.metadata.labels = std::move(labels);
  out.status.agent.api_versions = {"v1", "apps/v1"};  // not kept
  return out;
}

model::ClusterGroup group(const std::string& ns, const std::string& name, std::optional<model::LabelSelector> sel) {
  model::ClusterGroup out;
  out.metadata.ns = ns;
  out.metadata.name = name;
  out.spec.selector = std::move(sel);
  return out;
}

model::LabelSelector envIs(const std::string& env) {
  model::LabelSelector selector;
  selector.match_labels = {{"env", env}};
  return selector;
}

TEST(ClusterRegistry, AGroupHoldsTheRegisteredClustersOfItsWorkspaceItsSelectorMatches) {
  ClusterRegistry registry;
  registry.setRegistration("a", cluster("fleet-default", {{"env", "prod"}}));
  registry.setRegistration("b", cluster("fleet-default", {{"env", "dev"}}));
  registry.setRegistration("c", cluster("other", {{"env", "prod"}}));
  registry.setGroup("fleet-default", "prod", group("fleet-default", "prod", envIs("prod")));
  registry.setGroup("fleet-default", "none", group("fleet-default", "none", std::nullopt));
  EXPECT_EQ(registry.members("fleet-default", "prod"), std::vector<std::string>{"a"});
  EXPECT_EQ(registry.members("fleet-default", "none"), std::vector<std::string>{});
  EXPECT_FALSE(registry.members("fleet-default", "missing").has_value());
  EXPECT_EQ(registry.groupsOf("fleet-default"), (std::vector<std::string>{"fleet-default/none", "fleet-default/prod"}));
  EXPECT_TRUE(registry.groupsOf("other").empty());
}

TEST(ClusterRegistry, TheAdminsDocumentRelabelsAndMovesAClusterLikeTargeting) {
  ClusterRegistry registry;
  registry.setRegistration("b", cluster("", {{"env", "dev"}}));  // no namespace: fleet-default
  registry.setGroup("fleet-default", "prod", group("fleet-default", "prod", envIs("prod")));
  registry.setGroup("team", "prod", group("team", "prod", envIs("prod")));
  EXPECT_EQ(registry.workspaceOf("b"), "fleet-default");
  registry.setDocument("b", cluster("fleet-default", {{"env", "prod"}}));
  EXPECT_EQ(registry.members("fleet-default", "prod"), std::vector<std::string>{"b"});
  registry.setDocument("b", cluster("team", {{"env", "prod"}}));
  EXPECT_EQ(registry.workspaceOf("b"), "team");
  EXPECT_EQ(registry.members("fleet-default", "prod"), std::vector<std::string>{});
  EXPECT_EQ(registry.members("team", "prod"), std::vector<std::string>{"b"});
  registry.setDocument("b", std::nullopt);
  EXPECT_EQ(registry.members("team", "prod"), std::vector<std::string>{});
}

TEST(ClusterRegistry, ARegisteredClusterWantsACrUntilItIsDeregistered) {
  ClusterRegistry registry;
  EXPECT_FALSE(registry.wantsCr("a"));
  registry.setRegistration("a", cluster("fleet-default", {}));
  EXPECT_TRUE(registry.wantsCr("a"));
  EXPECT_EQ(registry.registered(), std::vector<std::string>{"a"});
  registry.setDeregistered("a", true);
  EXPECT_FALSE(registry.wantsCr("a"));
  registry.setRegistration("a", std::nullopt);
  registry.setDeregistered("a", false);
  EXPECT_FALSE(registry.wantsCr("a"));
  EXPECT_TRUE(registry.registered().empty());
  EXPECT_EQ(registry.workspaceOf("a"), "");
}

}  // namespace
}  // namespace flotilla::gateway
