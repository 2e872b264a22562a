// The gateway against a real kube-apiserver with the hub chart's CRDs and a real nats-server, without the rest of
// the pipeline (the records the scheduler would write are written by the test):
// - a hub leaving KV mode adopts its specs (a CR made for each) and removes nothing, also while one cannot be
//   adopted yet (its namespace is missing), and marks Kubernetes mode only once all are adopted;
// - a registered cluster gets a Cluster CR; a ClusterGroup's status counts its clusters; deleting the CR
//   deregisters the cluster and no CR is made for it again; a CR that cannot be made yet is retried after a backoff;
// - views whose records went while no gateway ran are deleted at start.
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/gateway/gateway.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/harness/poll.h"
#include "flotilla/kube/kubeconfig.h"
#include "flotilla/model/codec.h"
#include "flotilla/specs/store.h"

namespace flotilla::gateway {
namespace {

using std::chrono::seconds;

class GatewayApiserverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto clusters = harness::sharedKubeClusters(1);
    ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
    cluster_ = clusters->front();
    const std::string crds = envOr("FLOTILLA_SOURCE_DIR", ".") + "/charts/flotilla-hub/crds";
    auto applied = kubectl({"apply", "-f", crds});
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    auto established = kubectl({"wait", "--for=condition=Established", "--timeout=60s", "-f", crds});
    ASSERT_EQ(established.exit_code, 0) << established.err;
    kubectl({"create", "namespace", "fleet-default"});
  }

  // Each test has its own hub (nats-server) and starts with no Fleet CRs on the cluster.
  void SetUp() override {
    auto server = harness::NatsServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    nats_ = std::move(server).value();
    auto hub = service::connectHub({.servers = {nats_->url()}, .name = "gateway-test"}, service::HubAccess::kProvision,
                                   nullptr, seconds(20));
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    hub_ = std::move(hub).value();
  }

  void TearDown() override {
    if (gateway_) {
      gateway_->stop();
    }
    kubectl({"delete", "gitrepos,clustergroups,clusters,bundles,bundledeployments", "--all", "-A", "--wait=false"});
  }

  void startGateway() {
    auto kubeconfig = kube::Kubeconfig::load(cluster_->kubeconfigPath(), "");
    ASSERT_TRUE(kubeconfig.ok()) << kubeconfig.error().describe();
    auto client = kube::KubeClient::create(*kubeconfig);
    ASSERT_TRUE(client.ok()) << client.error().describe();
    auto created = Gateway::create({.status_rate = 50,
                                    .status_burst = 50,
                                    .retry_base = std::chrono::milliseconds(200),
                                    .retry_max = std::chrono::milliseconds(2000),
                                    .poll_interval = std::chrono::milliseconds(200)},
                                   hub_, std::move(client).value(), metrics_);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    gateway_ = std::move(created).value();
    ASSERT_TRUE(gateway_->start().ok());
  }

  static CommandResult kubectl(std::vector<std::string> args, const std::string& input = "") {
    const std::string tools = envOr("FLOTILLA_TOOLS_DIR", envOr("FLOTILLA_SOURCE_DIR", ".") + "/.tools/bin");
    args.insert(args.begin(), {tools + "/kubectl", "--kubeconfig", cluster_->kubeconfigPath()});
    auto ran = runCommand({.argv = args, .input = input, .timeout = seconds(60)});
    return ran.ok() ? *ran : CommandResult{.exit_code = -1, .err = ran.error().describe()};
  }

  //! The object as JSON; null when kubectl cannot read it (absent).
  static Json object(const std::string& kind, const std::string& ns, const std::string& name) {
    auto got = kubectl({"get", kind, "-n", ns, name, "-o", "json"});
    auto json = got.exit_code == 0 ? Json::parse(got.out) : Result<Json>(fail(ErrorKind::kNotFound, got.err));
    return json.ok() ? *json : Json();
  }

  static bool waitFor(const std::function<bool()>& condition, seconds timeout = seconds(30)) {
    // kubectl takes ~100 ms a call: poll every 250 ms.
    return harness::waitUntil(condition, timeout, std::chrono::milliseconds(250));
  }

  bool kvHas(bus::KeyValue& kv, const std::string& key) {
    auto entry = kv.find(key);
    return entry.ok() && entry->has_value();
  }

  void put(bus::KeyValue& kv, const std::string& key, const Json& value) {
    auto written = kv.put(key, value.dump());
    ASSERT_TRUE(written.ok()) << written.error().describe();
  }

  void registerCluster(const std::string& name, model::Labels labels, const std::string& workspace = "fleet-default") {
    model::Cluster registration;
    registration.metadata.name = name;
    registration.metadata.ns = workspace;
    registration.metadata.labels = std::move(labels);
    put(*hub_.clusters, events::clusterKey(name), model::encode(registration));
  }

  void clusterRollUp(const std::string& name, const std::string& state) {
    events::ClusterSummary summary;
    summary.cluster = name;
    summary.state = state;
    summary.registered = true;
    summary.workspace = "fleet-default";
    summary.summary = Json::obj({{"ready", Json(state == "Ready" ? 1 : 0)}, {"desiredReady", Json(1)}});
    put(*hub_.status, events::clusterSummaryKey(name), events::encode(summary));
  }

  double counter(const std::string& name, const std::map<std::string, std::string>& labels) {
    return metrics_.counter(name, "", labels).Value();
  }

  static inline harness::KubeCluster* cluster_ = nullptr;
  std::unique_ptr<harness::NatsServer> nats_;
  service::Hub hub_;
  Metrics metrics_{"gateway"};
  std::unique_ptr<Gateway> gateway_;
};

model::GitRepo gitRepo(const std::string& ns, const std::string& name) {
  auto decoded = model::decodeGitRepo(*Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo",
      "metadata":{"name":")" + name + R"(","namespace":")" +
                                                   ns + R"(","labels":{"team":"web"}},
      "spec":{"repo":"https://git.example/web","branch":"main","paths":["app"]}})"));
  EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
  return *decoded;
}

TEST_F(GatewayApiserverTest, AHubLeavingKvModeAdoptsItsSpecsAndRemovesNothing) {
  ASSERT_TRUE(specs::storeGitRepo(*hub_.gitrepos, gitRepo("fleet-default", "web")).ok());
  ASSERT_TRUE(specs::storeGitRepo(*hub_.gitrepos, gitRepo("adopt-later", "api")).ok());
  model::ClusterGroup group;
  group.metadata.name = "prod";
  group.metadata.ns = "fleet-default";
  group.spec.selector = model::LabelSelector{.match_labels = {{"env", "prod"}}, .match_expressions = {}};
  ASSERT_TRUE(specs::storeClusterGroup(*hub_.clusters, group).ok());
  model::Cluster document;
  document.metadata.name = "edge-1";
  document.metadata.ns = "fleet-default";
  document.metadata.labels = {{"env", "prod"}};
  ASSERT_TRUE(specs::storeClusterDocument(*hub_.clusters, document).ok());
  auto uid = hub_.gitrepos->get(events::gitRepoKey("fleet-default", "web"));
  ASSERT_TRUE(uid.ok());
  ASSERT_NO_FATAL_FAILURE(startGateway());

  // Every spec whose namespace exists gets its CR, with its labels and spec.
  EXPECT_TRUE(waitFor([&] {
    return object("gitrepo", "fleet-default", "web").isObject() &&
           object("clustergroup", "fleet-default", "prod").isObject() &&
           object("cluster", "fleet-default", "edge-1").isObject();
  }));
  const Json web = object("gitrepo", "fleet-default", "web");
  ASSERT_NE(web.at({"metadata", "labels", "team"}), nullptr) << web.pretty();
  EXPECT_EQ(web.at({"spec", "repo"})->asString(), "https://git.example/web");
  EXPECT_EQ(web.at({"metadata", "labels", "team"})->asString(), "web");
  const Json edge = object("cluster", "fleet-default", "edge-1");
  ASSERT_NE(edge.at({"metadata", "labels", "env"}), nullptr) << edge.pretty();
  EXPECT_EQ(edge.at({"metadata", "labels", "env"})->asString(), "prod");

  // The GitRepo in a namespace the hub cluster lacks cannot be adopted: it stays in KV, the hub stays in KV mode
  // (so nothing is removed), the gateway is not ready, and the failure is counted while it retries.
  EXPECT_TRUE(waitFor([&] { return counter("specs_total", {{"kind", "GitRepo"}, {"result", "failed"}}) >= 2; }));
  EXPECT_TRUE(kvHas(*hub_.gitrepos, events::gitRepoKey("adopt-later", "api")));
  auto mode = specs::hubMode(*hub_.clusters);
  ASSERT_TRUE(mode.ok());
  EXPECT_EQ(*mode, specs::HubMode::kKv);
  std::string why;
  EXPECT_FALSE(gateway_->ready(why));

  ASSERT_EQ(kubectl({"create", "namespace", "adopt-later"}).exit_code, 0);
  EXPECT_TRUE(waitFor([&] {
    auto now = specs::hubMode(*hub_.clusters);
    return now.ok() && *now == specs::HubMode::kKubernetes;
  }));
  EXPECT_TRUE(object("gitrepo", "adopt-later", "api").isObject());
  EXPECT_TRUE(waitFor([&] { return gateway_->ready(why); })) << why;
  // Nothing was removed, and the stored spec is the one it was (same uid, so nothing cascaded).
  EXPECT_TRUE(kvHas(*hub_.gitrepos, events::gitRepoKey("fleet-default", "web")));
  EXPECT_TRUE(kvHas(*hub_.gitrepos, events::gitRepoKey("adopt-later", "api")));
  EXPECT_TRUE(kvHas(*hub_.clusters, events::clusterGroupKey("fleet-default", "prod")));
  EXPECT_TRUE(kvHas(*hub_.clusters, events::clusterSpecKey("edge-1")));
  auto after = hub_.gitrepos->get(events::gitRepoKey("fleet-default", "web"));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Json::parse(after->value)->at({"metadata", "uid"})->asString(),
            Json::parse(uid->value)->at({"metadata", "uid"})->asString());
  EXPECT_EQ(counter("specs_total", {{"kind", "GitRepo"}, {"result", "removed"}}), 0);
  kubectl({"delete", "namespace", "adopt-later", "--wait=false"});
}

TEST_F(GatewayApiserverTest, ARegisteredClusterGetsACrItsGroupCountsItAndDeletingTheCrDeregistersIt) {
  registerCluster("edge-2", {{"env", "prod"}});
  clusterRollUp("edge-2", "Ready");
  ASSERT_EQ(kubectl({"apply", "-f", "-"},
                    "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata:\n  name: prod\n  namespace: "
                    "fleet-default\nspec:\n  selector:\n    matchLabels:\n      env: prod\n")
                .exit_code,
            0);
  ASSERT_NO_FATAL_FAILURE(startGateway());
  const auto group_shows = [&](const std::string& ready_clusters) {
    Json cr;
    const bool shown = waitFor([&] {
      cr = object("clustergroup", "fleet-default", "prod");
      const Json* shown_ready = cr.at({"status", "display", "readyClusters"});
      return shown_ready != nullptr && shown_ready->asString() == ready_clusters;
    });
    EXPECT_TRUE(shown) << "wanted " << ready_clusters << ": " << cr.pretty();
    return cr;
  };

  // Like Fleet, a registered cluster gets a Cluster CR in its workspace; its status follows.
  EXPECT_TRUE(waitFor([&] { return object("cluster", "fleet-default", "edge-2").isObject(); }));
  EXPECT_TRUE(waitFor([&] {
    const Json cr = object("cluster", "fleet-default", "edge-2");
    const Json* state = cr.at({"status", "display", "state"});
    return state != nullptr && state->asString() == "Ready";
  }));
  Json group = group_shows("1/1");
  EXPECT_EQ(group.at({"status", "clusterCount"})->asInt(), 1);
  EXPECT_EQ(group.at({"status", "display", "readyBundles"})->asString(), "1/1");

  clusterRollUp("edge-2", "NotReady");
  group = group_shows("0/1");
  EXPECT_EQ(group.at({"status", "nonReadyClusters"})->dump(), R"(["edge-2"])");

  // The admin relabels the cluster on its CR: the CR's labels win over the agent's, so it leaves the group.
  ASSERT_EQ(kubectl({"label", "cluster", "-n", "fleet-default", "edge-2", "env=dev", "--overwrite"}).exit_code, 0);
  group_shows("0/0");

  // Deleting the CR deregisters the cluster (tombstone, document removed) and no CR is made for it again, although
  // its registration is still there until the scheduler finishes the deregistration.
  ASSERT_EQ(kubectl({"delete", "cluster", "-n", "fleet-default", "edge-2"}).exit_code, 0);
  EXPECT_TRUE(waitFor([&] { return kvHas(*hub_.clusters, events::clusterDeregisteredKey("edge-2")); }));
  // Its labels are the agent's again (env=prod): back in the group. A roll-up change queues the cluster's write
  // before the group's, so once the group shows it, the cluster's turn has passed without a CR being made.
  clusterRollUp("edge-2", "Ready");
  group_shows("1/1");
  EXPECT_FALSE(object("cluster", "fleet-default", "edge-2").isObject());
  EXPECT_EQ(counter("cluster_crs_total", {{"result", "created"}}), 1);
}

TEST_F(GatewayApiserverTest, ACrThatCannotBeMadeYetIsTriedAgainAfterABackoff) {
  // A cluster registered in a workspace whose namespace the hub cluster lacks: its CR cannot be made. The failure is
  // counted and retried with a backoff (the other writes go on), and the CR appears once the namespace exists.
  registerCluster("edge-4", {}, "late-workspace");
  registerCluster("edge-5", {});
  ASSERT_NO_FATAL_FAILURE(startGateway());
  EXPECT_TRUE(waitFor([&] { return counter("cluster_crs_total", {{"result", "failed"}}) >= 2; }));
  EXPECT_GE(metrics_.gauge("write_retries", "").Value(), 1);
  EXPECT_TRUE(waitFor([&] { return object("cluster", "fleet-default", "edge-5").isObject(); }));
  ASSERT_EQ(kubectl({"create", "namespace", "late-workspace"}).exit_code, 0);
  EXPECT_TRUE(waitFor([&] { return object("cluster", "late-workspace", "edge-4").isObject(); }));
  kubectl({"delete", "namespace", "late-workspace", "--wait=false"});
}

TEST_F(GatewayApiserverTest, ViewsWhoseRecordsWentWhileNoGatewayRanAreDeletedAtStart) {
  const std::string labels =
      "  labels:\n    fleet.cattle.io/bundle-name: gone\n    fleet.cattle.io/bundle-namespace: "
      "fleet-default\n    fleet.cattle.io/cluster: edge-3\n";
  ASSERT_EQ(kubectl({"apply", "-f", "-"},
                    "apiVersion: fleet.cattle.io/v1alpha1\nkind: Bundle\nmetadata:\n  name: gone\n  namespace: "
                    "fleet-default\nspec: {}\n---\napiVersion: fleet.cattle.io/v1alpha1\nkind: BundleDeployment\n"
                    "metadata:\n  name: gone.edge-3\n  namespace: fleet-default\n" +
                        labels + "spec: {}\n")
                .exit_code,
            0);
  events::BundleSummary kept;
  kept.workspace = "fleet-default";
  kept.bundle = "kept";
  kept.state = "Ready";
  put(*hub_.status, events::bundleSummaryKey("fleet-default", "kept"), events::encode(kept));
  ASSERT_NO_FATAL_FAILURE(startGateway());
  EXPECT_TRUE(waitFor([&] {
    return !object("bundle", "fleet-default", "gone").isObject() &&
           !object("bundledeployment", "fleet-default", "gone.edge-3").isObject();
  }));
  EXPECT_TRUE(waitFor([&] { return object("bundle", "fleet-default", "kept").isObject(); }));
  EXPECT_EQ(counter("view_sweeps_total", {{"result", "done"}}), 1);
}

}  // namespace
}  // namespace flotilla::gateway
