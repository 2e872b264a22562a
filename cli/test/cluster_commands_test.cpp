// Integration tests of the `flotilla` binary's cluster records against a real nats-server -js (topology created
// as the services create it): `apply` of Cluster documents, `delete cluster` (the tombstone), and what `get` and
// `describe` show for hub labels, paused and deregistering clusters and for GitRepos being deleted.
#include <gtest/gtest.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"

namespace flotilla::cli {
namespace {

using namespace std::chrono_literals;

const char* kClusterDocument = R"(apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: prod-1
  labels:
    env: prod
    tier: gold
spec:
  paused: true
  templateValues:
    replicas: 3
)";

class ClusterCommandsTest : public harness::HubTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(startHub("cli-cluster-test")); }
  void TearDown() override { stopHub(); }

  CommandResult cli(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {FLOTILLA_CLI_BINARY, "--nats-url", nats_->url()});
    auto result = runCommand({.argv = args, .input = input, .timeout = 60s});
    EXPECT_TRUE(result.ok());
    return result.ok() ? *result : CommandResult{};
  }

  void put(bus::KeyValue& kv, const std::string& key, const Json& value) {
    ASSERT_TRUE(kv.put(key, value.dump()).ok());
  }

  bool exists(bus::KeyValue& kv, const std::string& key) {
    auto entry = kv.get(key);
    EXPECT_TRUE(entry.ok() || entry.error().kind == ErrorKind::kNotFound) << entry.error().describe();
    return entry.ok();
  }

  //! A registration as the scheduler writes it.
  void registerCluster(const std::string& name, model::Labels labels) {
    model::Cluster cluster;
    cluster.metadata.name = name;
    cluster.metadata.ns = "fleet-default";
    cluster.metadata.labels = std::move(labels);
    cluster.metadata.creation_timestamp = "2026-12-02T10:00:00.000Z";
    cluster.status.agent = model::AgentStatus{
        .last_seen = "2026-12-02T10:00:00.000Z", .version = "0.1.0", .kubernetes_version = "v1.31.2"};
    put(*hub_.clusters, events::clusterKey(name), model::encode(cluster));
  }

  void putDeployment(const std::string& cluster) {
    events::DeploymentRecord record{.cluster = cluster,
                                    .workspace = "fleet-default",
                                    .bundle = "simple-simple",
                                    .gitrepo = "simple",
                                    .deployment_id = "m:o",
                                    .manifest_id = "m",
                                    .generation = 3};
    put(*hub_.deployments, events::deploymentKey(cluster, "fleet-default", "simple-simple"), events::encode(record));
  }

  static Json item(const CommandResult& result, const std::string& name) {
    auto list = Json::parse(result.out);
    EXPECT_TRUE(list.ok()) << result.out;
    for (const auto& view : list->find("items")->asArray()) {
      if (view.at({"metadata", "name"})->asString() == name) {
        return view;
      }
    }
    ADD_FAILURE() << name << " not listed: " << result.out;
    return Json::object();
  }
};

// A Cluster document is stored under clusters/spec.<name> (generation, uid); applying it again changes nothing;
// fields the hub does not implement fail with their line and nothing is written; a List may carry Clusters; applying
// a Cluster withdraws its tombstone.
TEST_F(ClusterCommandsTest, ApplyStoresClusterDocuments) {
  auto applied = cli({"apply", "-f", "-"}, kClusterDocument);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_EQ(applied.out, "cluster.fleet.cattle.io/prod-1 created\n");
  auto stored = hub_.clusters->get(events::clusterSpecKey("prod-1"));
  ASSERT_TRUE(stored.ok());
  auto document = model::decodeClusterDocument(Json::parse(stored->value).value());
  ASSERT_TRUE(document.ok()) << document.error().describe();
  EXPECT_EQ(document->metadata.labels.at("tier"), "gold");
  EXPECT_TRUE(document->spec.paused);
  EXPECT_EQ(document->metadata.generation, 1);
  EXPECT_FALSE(document->metadata.uid.empty());
  EXPECT_EQ(cli({"apply", "-f", "-"}, kClusterDocument).out, "cluster.fleet.cattle.io/prod-1 unchanged\n");

  auto unimplemented = cli({"apply", "-f", "-"}, std::string(kClusterDocument) + "  clientID: c-m-123\n");
  EXPECT_EQ(unimplemented.exit_code, 1);
  EXPECT_NE(unimplemented.err.find("<stdin>:12: spec.clientID: not implemented"), std::string::npos)
      << unimplemented.err;

  auto list = cli({"apply", "-f", "-"}, R"(apiVersion: v1
kind: List
items:
- apiVersion: flotilla.io/v1alpha1
  kind: Cluster
  metadata: {name: prod-2, namespace: prod}
- apiVersion: flotilla.io/v1alpha1
  kind: Cluster
  metadata: {name: prod-3}
  spec: {kubeConfigSecret: s}
)");
  EXPECT_EQ(list.exit_code, 1);
  EXPECT_NE(list.err.find("items[1]: <stdin>:10: spec.kubeConfigSecret: not implemented"), std::string::npos)
      << list.err;
  EXPECT_FALSE(exists(*hub_.clusters, events::clusterSpecKey("prod-2"))) << "one bad document stores nothing";

  put(*hub_.clusters, events::clusterDeregisteredKey("prod-1"),
      events::encode(events::ClusterDeregistration{.cluster = "prod-1", .time = "2026-12-02T10:00:00.000Z"}));
  auto withdrawn = cli({"apply", "-f", "-"}, kClusterDocument);
  ASSERT_EQ(withdrawn.exit_code, 0) << withdrawn.err;
  EXPECT_NE(withdrawn.out.find("unchanged (deregistration withdrawn"), std::string::npos) << withdrawn.out;
  EXPECT_FALSE(exists(*hub_.clusters, events::clusterDeregisteredKey("prod-1")));
}

// `delete cluster` writes the tombstone (with --keep-resources) and removes the document; a second delete, an unknown
// name, -n and --keep-resources for another kind are refused.
TEST_F(ClusterCommandsTest, DeleteClusterWritesTheTombstone) {
  registerCluster("prod-1", {{"env", "prod"}});
  ASSERT_EQ(cli({"apply", "-f", "-"}, kClusterDocument).exit_code, 0);
  auto deleted = cli({"delete", "cluster", "prod-1", "--keep-resources"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_NE(deleted.out.find("cluster.fleet.cattle.io/prod-1 deleted"), std::string::npos) << deleted.out;
  auto tombstone = hub_.clusters->get(events::clusterDeregisteredKey("prod-1"));
  ASSERT_TRUE(tombstone.ok());
  auto record = events::parseRecord<events::ClusterDeregistration>(tombstone->value);
  ASSERT_TRUE(record.ok()) << record.error().describe();
  EXPECT_EQ(record->cluster, "prod-1");
  EXPECT_TRUE(record->keep_resources);
  EXPECT_FALSE(record->time.empty());
  EXPECT_FALSE(exists(*hub_.clusters, events::clusterSpecKey("prod-1")));
  EXPECT_TRUE(exists(*hub_.clusters, events::clusterKey("prod-1"))) << "the registration is the scheduler's";

  auto again = cli({"delete", "cluster", "prod-1"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already deregistered"), std::string::npos) << again.err;
  auto unknown = cli({"delete", "clusters", "nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("Cluster \"nope\" not found"), std::string::npos) << unknown.err;
  EXPECT_EQ(cli({"delete", "cluster", "prod-1", "-n", "fleet-default"}).exit_code, 2);
  auto keep = cli({"delete", "gitrepo", "simple", "--keep-resources"});
  EXPECT_EQ(keep.exit_code, 2);
  EXPECT_NE(keep.err.find("--keep-resources applies to clusters only"), std::string::npos) << keep.err;

  // A document alone (no agent registered yet) can be deleted too; without a registration nothing else is left.
  ASSERT_EQ(cli({"apply", "-f", "-"}, "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: edge-1}\n")
                .exit_code,
            0);
  EXPECT_EQ(cli({"delete", "cluster", "edge-1"}).exit_code, 0);
  EXPECT_TRUE(exists(*hub_.clusters, events::clusterDeregisteredKey("edge-1")));
}

// get/describe clusters: the hub's labels over the agent's, paused, a document without an agent (WaitCheckIn),
// Deregistering with the deployments left while a tombstone exists, and Offline as the scheduler's summary says.
TEST_F(ClusterCommandsTest, GetAndDescribeShowHubLabelsPausedAndDeregistering) {
  registerCluster("prod-1", {{"env", "dev"}, {"arch", "arm64"}});
  registerCluster("prod-2", {{"env", "prod"}});
  ASSERT_EQ(cli({"apply", "-f", "-"}, kClusterDocument).exit_code, 0);
  ASSERT_EQ(cli({"apply", "-f", "-"}, "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: edge-1}\n")
                .exit_code,
            0);
  registerCluster("prod-3", {{"env", "prod"}});
  put(*hub_.status, events::clusterSummaryKey("prod-3"),
      events::encode(
          events::ClusterSummary{.cluster = "prod-3",
                                 .state = std::string(events::kOfflineState),
                                 .message = "the agent has given no sign of life since 2026-12-02T10:00:00.000Z",
                                 .ready_bundles = "1/1",
                                 .registered = true,
                                 .offline = true,
                                 .last_seen = "2026-12-02T10:00:00.000Z"}));
  putDeployment("prod-2");
  put(*hub_.clusters, events::clusterDeregisteredKey("prod-2"),
      events::encode(events::ClusterDeregistration{.cluster = "prod-2", .time = "2026-12-02T11:00:00.000Z"}));

  auto listed = cli({"get", "clusters", "-o", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  Json prod1 = item(listed, "prod-1");
  EXPECT_EQ(*prod1.at({"metadata", "labels"}), Json::obj({{"env", "prod"}, {"arch", "arm64"}, {"tier", "gold"}}));
  EXPECT_TRUE(prod1.at({"spec", "paused"})->asBool());
  EXPECT_NE(prod1.at({"status", "display", "message"})->asString().find("paused"), std::string::npos);
  Json prod2 = item(listed, "prod-2");
  EXPECT_EQ(prod2.at({"status", "display", "state"})->asString(), "Deregistering");
  EXPECT_NE(prod2.at({"status", "display", "message"})->asString().find("1 deployments left"), std::string::npos);
  Json edge = item(listed, "edge-1");
  EXPECT_EQ(edge.at({"status", "display", "state"})->asString(), "WaitCheckIn");
  EXPECT_FALSE(edge.at({"status", "registered"})->asBool());
  Json prod3 = item(listed, "prod-3");
  EXPECT_EQ(prod3.at({"status", "display", "state"})->asString(), "Offline");
  EXPECT_TRUE(prod3.at({"status", "offline"})->asBool());
  EXPECT_FALSE(prod1.at({"status", "offline"}) != nullptr && prod1.at({"status", "offline"})->asBool());

  auto table = cli({"get", "clusters"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("arch=arm64,env=prod,tier=gold"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Deregistering: deregistered at 2026-12-02T11:00:00.000Z"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Offline: the agent has given no sign of life since 2026-12-02T10:00:00.000Z"),
            std::string::npos)
      << table.out;

  auto described = cli({"describe", "cluster", "prod-1"});
  ASSERT_EQ(described.exit_code, 0) << described.err;
  EXPECT_NE(described.out.find("Paused:               true"), std::string::npos) << described.out;
  EXPECT_NE(described.out.find("replicas: 3"), std::string::npos) << described.out;
  auto leaving = cli({"describe", "cluster", "prod-2"});
  ASSERT_EQ(leaving.exit_code, 0) << leaving.err;
  EXPECT_NE(leaving.out.find("Deregistered:         2026-12-02T11:00:00.000Z"), std::string::npos) << leaving.out;
  EXPECT_NE(leaving.out.find("State:              Deregistering"), std::string::npos) << leaving.out;
}

// A GitRepo whose spec is gone while the scheduler still keeps its summary is listed as Deleting with the summary's
// message (the cascade's progress), and goes away with the summary.
TEST_F(ClusterCommandsTest, GetShowsAGitRepoBeingDeleted) {
  const std::string key = events::gitRepoSummaryKey("fleet-default", "simple");
  put(*hub_.status, key,
      events::encode(events::GitRepoSummary{.workspace = "fleet-default",
                                            .gitrepo = "simple",
                                            .state = "WaitApplied",
                                            .message = "deleting: 2 deployments left",
                                            .ready_bundle_deployments = "0/2"}));
  auto table = cli({"get", "gitrepos"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Deleting: deleting: 2 deployments left"), std::string::npos) << table.out;
  auto json = cli({"get", "gitrepo", "simple", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto view = Json::parse(json.out).value();
  EXPECT_EQ(view.at({"status", "display", "state"})->asString(), "Deleting");
  EXPECT_EQ(view.at({"status", "display", "readyBundleDeployments"})->asString(), "0/2");
  auto described = cli({"describe", "gitrepo", "simple"});
  ASSERT_EQ(described.exit_code, 0) << described.err;
  EXPECT_NE(described.out.find("Deleting"), std::string::npos) << described.out;
  EXPECT_NE(described.out.find("2 deployments left"), std::string::npos) << described.out;

  ASSERT_TRUE(hub_.status->remove(key).ok());
  EXPECT_EQ(cli({"get", "gitrepo", "simple"}).exit_code, 1);
}

}  // namespace
}  // namespace flotilla::cli
