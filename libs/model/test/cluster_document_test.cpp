// A hub admin's Cluster document: the fields the hub acts on decode, every other Cluster spec field is rejected by
// name with its line, and the effective cluster overlays the document on the agent's registration.
#include "flotilla/model/cluster_document.h"

#include <gtest/gtest.h>

#include "decode_expect.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"

namespace flotilla::model {
namespace {

using test::expectRejected;

Result<Cluster> decodeYaml(const std::string& text) {
  auto documents = parseYamlDocuments(text, "cluster.yaml", YamlLimits{.record_lines = true});
  EXPECT_TRUE(documents.ok());
  EXPECT_EQ(documents->size(), 1u);
  return decodeClusterDocument(documents->front(), "cluster.yaml");
}

TEST(ClusterDocumentTest, DecodesWhatTheHubActsOn) {
  auto cluster = decodeYaml(R"(apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: prod-1
  namespace: prod
  labels: {env: prod, tier: gold}
  annotations: {owner: team-a}
spec:
  paused: true
  templateValues:
    replicas: 3
status:
  display: {readyBundles: "1/1"}
)");
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  EXPECT_EQ(cluster->metadata.name, "prod-1");
  EXPECT_EQ(cluster->metadata.ns, "prod");
  EXPECT_EQ(cluster->metadata.labels.at("tier"), "gold");
  EXPECT_EQ(cluster->metadata.annotations.at("owner"), "team-a");
  EXPECT_TRUE(cluster->spec.paused);
  ASSERT_TRUE(cluster->spec.template_values);
  EXPECT_EQ(cluster->spec.template_values->getInt("replicas"), 3);
  EXPECT_EQ(cluster->status, ClusterStatus{});

  // The stored form (flotilla.io, as `flotilla apply` writes it) decodes to the same document.
  auto stored = decodeClusterDocument(encode(*cluster), "clusters/spec.prod-1");
  ASSERT_TRUE(stored.ok()) << stored.error().describe();
  EXPECT_EQ(*stored, *cluster);
}

TEST(ClusterDocumentTest, NamespaceDefaultsToTheDefaultWorkspace) {
  auto cluster = decodeYaml("apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: c}\n");
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  EXPECT_EQ(cluster->metadata.ns, kDefaultNamespace);
  EXPECT_FALSE(cluster->spec.paused);
}

TEST(ClusterDocumentTest, RejectsFieldsItDoesNotImplementByNameAndLine) {
  auto cluster = decodeYaml(R"(apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: prod-1
spec:
  paused: false
  clientID: c-m-123
  agentEnvVars:
  - {name: HTTP_PROXY, value: "http://proxy:3128"}
  hostNetwork: null
)");
  ASSERT_FALSE(cluster.ok());
  const std::string& message = cluster.error().message;
  EXPECT_NE(message.find("cluster.yaml:7: spec.clientID: not implemented"), std::string::npos) << message;
  EXPECT_NE(message.find("cluster.yaml:8: spec.agentEnvVars: not implemented"), std::string::npos) << message;
  EXPECT_EQ(message.find("hostNetwork"), std::string::npos) << "null is the same as absent: " << message;
  EXPECT_EQ(cluster.error().kind, ErrorKind::kInvalid);
}

TEST(ClusterDocumentTest, RejectsUnknownFieldsOtherKindsAndNonLabelNames) {
  expectRejected(decodeYaml("apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata: {name: c}\n"
                            "spec: {pausd: true}\n"),
                 {"spec.pausd: unknown field"});

  expectRejected(decodeYaml("apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: g}\n"),
                 {"expected kind Cluster, got ClusterGroup"});

  expectRejected(decodeYaml("apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata: {name: prod.eu}\n"),
                 {"cluster.yaml:3: metadata.name: invalid cluster name \"prod.eu\""});

  expectRejected(decodeClusterDocument(
                     Json::parse(R"({"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster","metadata":{"name":"c"},
                      "spec":{"paused":"yes"}})")
                         .value()),
                 {"spec.paused: expected true or false"});
}

Cluster registration() {
  Cluster out;
  out.metadata.name = "prod-1";
  out.metadata.ns = "fleet-default";
  out.metadata.labels = {{"env", "dev"}, {"arch", "arm64"}};
  out.metadata.creation_timestamp = "2026-12-02T10:00:00.000Z";
  out.status.agent = AgentStatus{.last_seen = "2026-12-02T10:00:00.000Z", .version = "0.1.0"};
  return out;
}

TEST(ClusterDocumentTest, EffectiveClusterOverlaysTheDocument) {
  EXPECT_EQ(effectiveCluster(registration(), nullptr), registration());

  Cluster document;
  document.metadata.name = "prod-1";
  document.metadata.ns = "prod";
  document.metadata.labels = {{"env", "prod"}, {"tier", "gold"}};
  document.metadata.annotations = {{"owner", "team-a"}};
  document.spec.paused = true;
  document.spec.template_values = Json::obj({{"replicas", 3}});
  document.metadata.creation_timestamp = "2030-01-01T00:00:00.000Z";

  Cluster effective = effectiveCluster(registration(), &document);
  EXPECT_EQ(effective.metadata.labels, (Labels{{"env", "prod"}, {"arch", "arm64"}, {"tier", "gold"}}));
  EXPECT_EQ(effective.metadata.annotations, (Labels{{"owner", "team-a"}}));
  EXPECT_EQ(effective.metadata.ns, "prod");
  EXPECT_TRUE(effective.spec.paused);
  EXPECT_EQ(effective.spec.template_values, document.spec.template_values);
  EXPECT_EQ(effective.metadata.creation_timestamp, registration().metadata.creation_timestamp);
  EXPECT_EQ(effective.status, registration().status);
}

}  // namespace
}  // namespace flotilla::model
