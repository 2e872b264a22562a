// The gateway (issue 16), end to end: the hub chart's CRDs on the hub cluster (cluster 0, which is also a
// downstream cluster, as Fleet's "local" one), the gateway mirroring the CRs into KV, the whole pipeline, and status
// read back with kubectl as a Fleet user would. Real nats-server, git server, kube-apiservers and kubectl.
#include <thread>

#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/process.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "handover_util.h"

namespace flotilla::e2e {
namespace {

using std::chrono::seconds;

class GatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A short release hold: a deleted bundle's objects go 5 s after its delete unless a bundle claims them first.
    auto started = Hub::start(
        {.clusters = 2, .share_clusters = false, .services = {{"agent", {.flags = {"--release-hold", "5s"}}}}});
    ASSERT_TRUE(started.ok()) << started.error().describe();
    hub_ = std::move(started).value().release();
    auto crds = kubectl({"apply", "-f", std::string(FLOTILLA_SOURCE_DIR) + "/charts/flotilla-hub/crds"});
    ASSERT_EQ(crds.exit_code, 0) << crds.err;
    auto established =
        kubectl({"wait", "--for=condition=Established", "--timeout=60s", "crd", "gitrepos.fleet.cattle.io",
                 "clustergroups.fleet.cattle.io", "clusters.fleet.cattle.io"});
    ASSERT_EQ(established.exit_code, 0) << established.err;
    auto ns = kubectl({"apply", "-f", "-"}, namespaceYaml("fleet-default"));
    ASSERT_EQ(ns.exit_code, 0) << ns.err;
    ASSERT_TRUE(hub_->startService("gateway").ok());
  }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
  }

  //! kubectl against the hub cluster.
  static CommandResult kubectl(std::vector<std::string> args, const std::string& input = "") {
    const std::string tools = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
    args.insert(args.begin(), {tools + "/kubectl", "--kubeconfig", hub_->cluster(0).kubeconfigPath()});
    auto ran = runCommand({.argv = args, .input = input, .timeout = std::chrono::seconds(90)});
    return ran.ok() ? *ran : CommandResult{.exit_code = -1, .err = ran.error().describe()};
  }

  //! The GitRepo CR as kubectl shows it (null when it cannot be read).
  static Json gitRepoCr(const std::string& name) {
    auto got = kubectl({"get", "gitrepo", "-n", "fleet-default", name, "-o", "json"});
    auto json = got.exit_code == 0 ? Json::parse(got.out) : Result<Json>(fail(ErrorKind::kNotFound, got.err));
    return json.ok() ? *json : Json();
  }

  static std::string condition(const Json& cr, const std::string& type, const std::string& field) {
    const Json* conditions = cr.at({"status", "conditions"});
    if (conditions == nullptr || !conditions->isArray()) {
      return {};
    }
    for (const auto& item : conditions->asArray()) {
      if (item.getString("type") == type) {
        return item.getString(field);
      }
    }
    return {};
  }

  //! The spec the hub's KV holds for GitRepo `name` (nullopt when none).
  static std::optional<model::GitRepo> storedSpec(const std::string& name) {
    auto kv = hub_->kv(std::string(events::kGitReposBucket));
    if (!kv.ok()) {
      return std::nullopt;
    }
    auto entry = (*kv)->find(events::gitRepoKey("fleet-default", name));
    if (!entry.ok() || !entry->has_value()) {
      return std::nullopt;
    }
    auto json = Json::parse((*entry)->value);
    auto decoded = json.ok() ? model::decodeGitRepo(*json) : Result<model::GitRepo>(fail(json.error()));
    return decoded.ok() ? std::optional(*decoded) : std::nullopt;
  }

  //! Repository `name` with bundle app/ (namespace ns-<name>, ConfigMap c); returns the commit.
  static std::string repoWithConfigMap(const std::string& name, std::string* url) {
    auto repo = hub_->git().createRepo(name);
    EXPECT_TRUE(repo.ok()) << repo.error().describe();
    *url = repo->http;
    auto sha = hub_->git().commitFiles(name, "main",
                                       {{"app/fleet.yaml", "defaultNamespace: ns-" + name + "\n"},
                                        {"app/ns.yaml", namespaceYaml("ns-" + name)},
                                        {"app/cm.yaml", configMap("c", "v1")}},
                                       "first");
    EXPECT_TRUE(sha.ok()) << sha.error().describe();
    return *sha;
  }

  static Hub* hub_;
};

Hub* GatewayTest::hub_ = nullptr;

TEST_F(GatewayTest, KubectlApplyOfAFleetGitRepoDeploysAndItsStatusReadsLikeFleets) {
  std::string url;
  const std::string sha = repoWithConfigMap("gw-web", &url);
  auto applied = kubectl({"apply", "-f", "-"}, gitRepoYaml("gw-web", url, {"app"}));
  ASSERT_EQ(applied.exit_code, 0) << applied.err;

  const std::vector<std::string> both = {hub_->clusterName(0), hub_->clusterName(1)};
  EXPECT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, "gw-web", sha, both); }, seconds(90)))
      << hub_->allLogs();
  EXPECT_TRUE(configMapExists(*hub_, 1, "ns-gw-web", "c"));
  Json cr;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        cr = gitRepoCr("gw-web");
        const Json* ready = cr.at({"status", "display", "readyBundleDeployments"});
        return ready != nullptr && ready->isString() && ready->asString() == "2/2" &&
               condition(cr, "Ready", "status") == "True";
      },
      seconds(60)))
      << cr.pretty() << hub_->logTail("gateway");
  EXPECT_EQ(cr.at({"status", "commit"}) ? cr.at({"status", "commit"})->asString() : "", sha);
  EXPECT_EQ(condition(cr, "Accepted", "status"), "True");
  EXPECT_EQ(cr.at({"status", "readyClusters"}) ? cr.at({"status", "readyClusters"})->asInt() : -1, 2);

  // The read-only views: gitrepo -> bundle -> bundledeployment, by Fleet's labels.
  Json views;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto listed = kubectl({"get", "bundledeployments", "-n", "fleet-default", "-l",
                               "fleet.cattle.io/repo-name=gw-web,fleet.cattle.io/commit=" + sha, "-o", "json"});
        auto json = listed.exit_code == 0 ? Json::parse(listed.out) : Result<Json>(fail(ErrorKind::kTransient, ""));
        if (!json.ok() || json->find("items")->size() != 2) {
          return false;
        }
        views = *json;
        for (const auto& item : json->find("items")->asArray()) {
          const Json* deployed = item.at({"status", "display", "deployed"});
          if (deployed == nullptr || deployed->asString() != "Yes" || condition(item, "Ready", "status") != "True") {
            return false;
          }
        }
        return true;
      },
      seconds(60)))
      << views.pretty() << hub_->logTail("gateway");
  auto bundle = kubectl({"get", "bundles", "-n", "fleet-default", "-l", "fleet.cattle.io/repo-name=gw-web", "-o",
                         "jsonpath={.items[*].status.display.readyClusters}"});
  EXPECT_EQ(bundle.out, "2/2") << bundle.err;

  // The printer columns: what `kubectl get gitrepos -A` shows a Fleet user.
  auto table = kubectl({"get", "gitrepos", "-A"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("gw-web"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2/2"), std::string::npos) << table.out;
}

//! kubectl against the hub cluster with only `token` (no client certificate, no kubeconfig).
CommandResult asToken(harness::KubeCluster& cluster, const std::string& token, std::vector<std::string> args) {
  const std::string tools = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
  args.insert(args.begin(), {tools + "/kubectl", "--kubeconfig=/dev/null", "--server=" + cluster.serverUrl(),
                             "--certificate-authority=" + cluster.caFile(), "--token=" + token, "-n", "fleet-default"});
  auto ran = runCommand({.argv = args, .timeout = std::chrono::seconds(60)});
  return ran.ok() ? *ran : CommandResult{.exit_code = -1, .err = ran.error().describe()};
}

// Runs after the first case, whose GitRepo gw-web is Ready on both clusters.
TEST_F(GatewayTest, RegisteredClustersGroupsAndAViewOnlyTokenWalkingTheChain) {
  // Like Fleet, every registered cluster has a Cluster CR, made by the hub, which `kubectl get clusters` lists.
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto names = kubectl({"get", "clusters", "-n", "fleet-default", "-o", "jsonpath={.items[*].metadata.name}"});
        return names.out.find(hub_->clusterName(0)) != std::string::npos &&
               names.out.find(hub_->clusterName(1)) != std::string::npos;
      },
      seconds(60)))
      << hub_->logTail("gateway");
  // A ClusterGroup's status counts its clusters and their bundles.
  ASSERT_EQ(kubectl({"apply", "-f", "-"},
                    "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata:\n  "
                    "name: everyone\n  namespace: fleet-default\nspec:\n  selector: {}\n")
                .exit_code,
            0);
  Json group;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto got = kubectl({"get", "clustergroup", "-n", "fleet-default", "everyone", "-o", "json"});
        auto json = got.exit_code == 0 ? Json::parse(got.out) : Result<Json>(fail(ErrorKind::kTransient, ""));
        group = json.ok() ? *json : Json();
        const Json* ready = group.at({"status", "display", "readyClusters"});
        return ready != nullptr && ready->asString() == "2/2" && condition(group, "Ready", "status") == "True";
      },
      seconds(60)))
      << group.pretty() << hub_->logTail("gateway");

  // A client holding only the chart's read-only role (what `view` aggregates) walks gitrepo -> bundle ->
  // bundledeployment with a real ServiceAccount token, and can write nothing.
  const std::string tools = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
  auto rbac = runCommand(
      {.argv = {tools + "/helm", "template", "hub", std::string(FLOTILLA_SOURCE_DIR) + "/charts/flotilla-hub",
                "--show-only", "templates/rbac.yaml", "--set", "nats.auth.lookupSecrets=false"}});
  ASSERT_TRUE(rbac.ok() && rbac->exit_code == 0) << (rbac.ok() ? rbac->err : rbac.error().describe());
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, rbac->out).exit_code, 0);
  ASSERT_EQ(kubectl({"apply", "-f", "-"},
                    "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: walker, namespace: fleet-default}\n---\n"
                    "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: walker, namespace: "
                    "fleet-default}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "
                    "hub-flotilla-hub-fleet-view}\nsubjects: [{kind: ServiceAccount, name: walker, namespace: "
                    "fleet-default}]\n")
                .exit_code,
            0);
  auto token = kubectl({"create", "token", "walker", "-n", "fleet-default"});
  ASSERT_EQ(token.exit_code, 0) << token.err;
  const std::string bearer = token.out.substr(0, token.out.find('\n'));
  harness::KubeCluster& hub_cluster = hub_->cluster(0);

  auto commit = asToken(hub_cluster, bearer, {"get", "gitrepo", "gw-web", "-o", "jsonpath={.status.commit}"});
  ASSERT_EQ(commit.exit_code, 0) << commit.err;
  EXPECT_EQ(commit.out.size(), 40U) << commit.out;
  auto bundles =
      asToken(hub_cluster, bearer,
              {"get", "bundles", "-l", "fleet.cattle.io/repo-name=gw-web,fleet.cattle.io/commit=" + commit.out, "-o",
               "jsonpath={.items[*].metadata.name}"});
  ASSERT_EQ(bundles.exit_code, 0) << bundles.err;
  ASSERT_FALSE(bundles.out.empty()) << "no Bundle of gw-web at its commit";
  const std::string bundle = bundles.out.substr(0, bundles.out.find(' '));
  auto deployments = asToken(hub_cluster, bearer,
                             {"get", "bundledeployments", "-l", "fleet.cattle.io/bundle-name=" + bundle, "-o",
                              "jsonpath={range .items[*]}{.metadata.labels.fleet\\.cattle\\.io/cluster}="
                              "{.status.display.state};{end}"});
  ASSERT_EQ(deployments.exit_code, 0) << deployments.err;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(deployments.out.find(hub_->clusterName(i) + "=Ready;"), std::string::npos) << deployments.out;
  }
  auto cluster_row = asToken(hub_cluster, bearer, {"get", "cluster", hub_->clusterName(1)});
  EXPECT_EQ(cluster_row.exit_code, 0) << cluster_row.err;

  for (const auto& write : std::vector<std::vector<std::string>>{
           {"patch", "gitrepo", "gw-web", "--type", "merge", "-p", R"({"spec":{"paused":true}})"},
           {"label", "cluster", hub_->clusterName(1), "tier=gold"},
           {"delete", "bundle", bundle},
           {"patch", "clustergroup", "everyone", "--subresource=status", "--type", "merge", "-p",
            R"({"status":{"clusterCount":9}})"}}) {
    auto refused = asToken(hub_cluster, bearer, write);
    EXPECT_NE(refused.exit_code, 0) << write.front() << " " << write.at(1);
    EXPECT_NE(refused.err.find("forbidden"), std::string::npos) << refused.err;
  }
  ASSERT_EQ(kubectl({"delete", "clustergroup", "-n", "fleet-default", "everyone"}).exit_code, 0);
}

TEST_F(GatewayTest, ASpecTheDecoderRefusesGetsAConditionNamingTheFieldAndTheLastGoodSpecStays) {
  std::string url;
  const std::string sha = repoWithConfigMap("gw-strict", &url);
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, gitRepoYaml("gw-strict", url, {"app"})).exit_code, 0);
  ASSERT_TRUE(Hub::waitFor([&] { return storedSpec("gw-strict").has_value(); }, seconds(30)))
      << hub_->logTail("gateway");
  const model::GitRepo good = *storedSpec("gw-strict");

  // A string the CRD's schema lets through (pollingInterval is a string) but that is no duration.
  auto bad = kubectl({"apply", "-f", "-"}, gitRepoYaml("gw-strict", url, {"app"},
                                                       "  targets:\n  - clusterSelector: {}\n", "every-now-and-then"));
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  Json cr;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        cr = gitRepoCr("gw-strict");
        return condition(cr, "Accepted", "status") == "False";
      },
      seconds(30)))
      << cr.pretty() << hub_->logTail("gateway");
  EXPECT_NE(condition(cr, "Accepted", "message").find("spec.pollingInterval"), std::string::npos) << cr.pretty();
  EXPECT_EQ(condition(cr, "Ready", "reason"), "InvalidSpec");
  // KV still holds the last good spec, and what it deployed keeps running.
  auto stored = storedSpec("gw-strict");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->spec, good.spec);
  EXPECT_TRUE(
      Hub::waitFor([&] { return readyEverywhere(*hub_, "gw-strict", sha, {hub_->clusterName(1)}); }, seconds(60)));
}

TEST_F(GatewayTest, DeletingTheCrCascadesToTheDeployedObjects) {
  std::string url;
  const std::string sha = repoWithConfigMap("gw-gone", &url);
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, gitRepoYaml("gw-gone", url, {"app"})).exit_code, 0);
  ASSERT_TRUE(Hub::waitFor([&] { return configMapExists(*hub_, 1, "ns-gw-gone", "c"); }, seconds(90)))
      << hub_->allLogs();
  auto deleted = kubectl({"delete", "gitrepo", "-n", "fleet-default", "gw-gone"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_TRUE(Hub::waitFor([&] { return !storedSpec("gw-gone").has_value(); }, seconds(30)));
  EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(*hub_, 1, "ns-gw-gone", "c"); }, seconds(90))) << hub_->allLogs();
}

TEST_F(GatewayTest, RelabellingAClusterCrRetargets) {
  std::string url;
  const std::string sha = repoWithConfigMap("gw-target", &url);
  ASSERT_EQ(kubectl({"apply", "-f", "-"},
                    gitRepoYaml("gw-target", url, {"app"},
                                "  targets:\n  - clusterSelector:\n      matchLabels:\n        tier: gold\n"))
                .exit_code,
            0);
  const std::string cluster = hub_->clusterName(1);
  auto labelled = kubectl({"apply", "-f", "-"},
                          "apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + cluster +
                              "\n  namespace: fleet-default\n  labels:\n    tier: gold\nspec: {}\n");
  ASSERT_EQ(labelled.exit_code, 0) << labelled.err;
  EXPECT_TRUE(Hub::waitFor([&] { return configMapExists(*hub_, 1, "ns-gw-target", "c"); }, seconds(90)))
      << hub_->allLogs();
  EXPECT_FALSE(configMapExists(*hub_, 0, "ns-gw-target", "c"));
  // The Cluster CR's status: the roll-up of its bundles and its agent's last sign of life.
  Json cr;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto got = kubectl({"get", "cluster", "-n", "fleet-default", cluster, "-o", "json"});
        auto json = got.exit_code == 0 ? Json::parse(got.out) : Result<Json>(fail(ErrorKind::kTransient, ""));
        cr = json.ok() ? *json : Json();
        const Json* last_seen = cr.at({"status", "agent", "lastSeen"});
        return condition(cr, "Accepted", "status") == "True" && last_seen != nullptr &&
               !last_seen->asString().empty() && cr.at({"status", "display", "readyBundles"}) != nullptr;
      },
      seconds(60)))
      << cr.pretty() << hub_->logTail("gateway");
  // A Cluster field Flotilla does not implement: refused on the CR, naming it; the labels stay as they were.
  auto refused = kubectl(
      {"patch", "cluster", "-n", "fleet-default", cluster, "--type", "merge", "-p", R"({"spec":{"clientID":"abc"}})"});
  ASSERT_EQ(refused.exit_code, 0) << refused.err;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto got = kubectl({"get", "cluster", "-n", "fleet-default", cluster, "-o", "json"});
        auto json = got.exit_code == 0 ? Json::parse(got.out) : Result<Json>(fail(ErrorKind::kTransient, ""));
        cr = json.ok() ? *json : Json();
        return condition(cr, "Accepted", "status") == "False";
      },
      seconds(30)))
      << cr.pretty() << hub_->logTail("gateway");
  EXPECT_NE(condition(cr, "Accepted", "message").find("clientID"), std::string::npos) << cr.pretty();
  ASSERT_EQ(kubectl({"patch", "cluster", "-n", "fleet-default", cluster, "--type", "json", "-p",
                     R"([{"op":"remove","path":"/spec/clientID"}])"})
                .exit_code,
            0);
  EXPECT_TRUE(configMapExists(*hub_, 1, "ns-gw-target", "c"));

  // The label goes: the cluster is no longer targeted and the objects are removed.
  auto relabelled = kubectl({"label", "cluster", "-n", "fleet-default", cluster, "tier-"});
  ASSERT_EQ(relabelled.exit_code, 0) << relabelled.err;
  EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(*hub_, 1, "ns-gw-target", "c"); }, seconds(90)))
      << hub_->allLogs();
}

TEST_F(GatewayTest, InKubernetesModeTheCliAppliesCrsAndRefusesToWriteKv) {
  std::string url;
  repoWithConfigMap("gw-cli", &url);
  const std::string file = hub_->dir() + "/gw-cli.yaml";
  ASSERT_TRUE(writeFile(file, gitRepoYaml("gw-cli", url, {"app"})).ok());

  // KV mode's apply would be undone by the gateway: refused, saying what to do instead.
  auto refused = hub_->cli({"apply", "-f", file});
  ASSERT_TRUE(refused.ok()) << refused.error().describe();
  EXPECT_NE(refused->exit_code, 0);
  EXPECT_NE(refused->err.find("Kubernetes mode"), std::string::npos) << refused->err;
  EXPECT_FALSE(storedSpec("gw-cli").has_value());
  auto delete_refused = hub_->cli({"delete", "gitrepo", "gw-web", "-n", "fleet-default"});
  ASSERT_TRUE(delete_refused.ok());
  EXPECT_NE(delete_refused->exit_code, 0);
  EXPECT_NE(delete_refused->err.find("Kubernetes mode"), std::string::npos) << delete_refused->err;

  // --kubeconfig: the document becomes a CR, which the gateway mirrors.
  auto applied = hub_->cli({"apply", "-f", file, "--kubeconfig", hub_->cluster(0).kubeconfigPath()});
  ASSERT_TRUE(applied.ok()) << applied.error().describe();
  EXPECT_EQ(applied->exit_code, 0) << applied->err;
  EXPECT_NE(applied->out.find("applied to the hub cluster"), std::string::npos) << applied->out;
  EXPECT_EQ(kubectl({"get", "gitrepo", "-n", "fleet-default", "gw-cli"}).exit_code, 0);
  EXPECT_TRUE(Hub::waitFor([&] { return storedSpec("gw-cli").has_value(); }, seconds(30))) << hub_->logTail("gateway");
}

//! A GitRepo CR as a file in the hub's own configuration repository: targets cluster 1 (env=cluster2).
std::string childGitRepo(const std::string& name, const std::string& url) {
  return gitRepoYaml(name, url, {"app"},
                     "  targets:\n  - clusterSelector:\n      matchLabels:\n        env: cluster2\n");
}

std::string uidOf(const Json& object) {
  const Json* uid = object.at({"metadata", "uid"});
  return uid != nullptr && uid->isString() ? uid->asString() : "";
}

// The self-managed hub (the seeds' bootstrap): one GitRepo, applied once with kubectl, deploys a repository of
// GitRepo CRs to the hub's own cluster (cluster 0, through its agent); the gateway mirrors them. A second GitRepo
// is then added by a commit, and the bootstrap GitRepo itself is renamed (the new one applied, the old one deleted):
// the GitRepos it deployed are handed over, not deleted and re-created, so their apps never go away.
TEST_F(GatewayTest, SelfManagedHubAddsAGitRepoByCommitAndSurvivesTheRenameOfItsOwnGitRepo) {
  std::string app1_url, app2_url;
  repoWithConfigMap("gw-app1", &app1_url);
  repoWithConfigMap("gw-app2", &app2_url);
  auto config = hub_->git().createRepo("gw-hub-config");
  ASSERT_TRUE(config.ok()) << config.error().describe();
  ASSERT_TRUE(hub_->git()
                  .commitFiles("gw-hub-config", "main",
                               {{"gitrepos/fleet.yaml", "defaultNamespace: fleet-default\n"},
                                {"gitrepos/app1.yaml", childGitRepo("gw-app1", app1_url)}},
                               "the hub's GitRepos")
                  .ok());
  const std::string hub_targets = "  targets:\n  - clusterSelector:\n      matchLabels:\n        env: cluster1\n";
  ASSERT_EQ(
      kubectl({"apply", "-f", "-"}, gitRepoYaml("gw-hub-config", config->http, {"gitrepos"}, hub_targets)).exit_code,
      0);
  EXPECT_TRUE(Hub::waitFor([&] { return configMapExists(*hub_, 1, "ns-gw-app1", "c"); }, seconds(120)))
      << hub_->allLogs();

  // A commit adds a GitRepo: no kubectl.
  ASSERT_TRUE(
      hub_->git()
          .commitFiles("gw-hub-config", "main", {{"gitrepos/app2.yaml", childGitRepo("gw-app2", app2_url)}}, "add app2")
          .ok());
  EXPECT_TRUE(Hub::waitFor([&] { return configMapExists(*hub_, 1, "ns-gw-app2", "c"); }, seconds(120)))
      << hub_->allLogs();

  // The chicken-and-egg case: the GitRepo that deploys the GitRepos is renamed.
  const std::string app1_uid = uidOf(gitRepoCr("gw-app1"));
  auto app1_object = hub_->kube(1).get("v1", "ConfigMap", "ns-gw-app1", "c");
  ASSERT_TRUE(app1_object.ok());
  ASSERT_FALSE(app1_uid.empty());
  ASSERT_EQ(
      kubectl({"apply", "-f", "-"}, gitRepoYaml("gw-hub-config-v2", config->http, {"gitrepos"}, hub_targets)).exit_code,
      0);
  ASSERT_EQ(kubectl({"delete", "gitrepo", "-n", "fleet-default", "gw-hub-config"}).exit_code, 0);
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        const Json cr = gitRepoCr("gw-hub-config-v2");
        return condition(cr, "Ready", "status") == "True";
      },
      seconds(120)))
      << gitRepoCr("gw-hub-config-v2").pretty() << hub_->allLogs();
  // The old GitRepo's cascade has finished (its roll-up is gone) and the release hold has passed: whatever was not
  // handed over would be deleted (and re-created by the new bundle) by now.
  EXPECT_TRUE(Hub::waitFor([&] { return !gitRepoSummary(*hub_, "gw-hub-config").has_value(); }, seconds(120)))
      << hub_->allLogs();
  std::this_thread::sleep_for(seconds(8));
  EXPECT_EQ(uidOf(gitRepoCr("gw-app1")), app1_uid) << "the GitRepo CR was re-created, not handed over";
  auto after = hub_->kube(1).get("v1", "ConfigMap", "ns-gw-app1", "c");
  ASSERT_TRUE(after.ok()) << after.error().describe();
  EXPECT_EQ(uidOf(*after), uidOf(*app1_object)) << "the app's objects were deleted and re-created";
  EXPECT_TRUE(storedSpec("gw-app1").has_value());
  EXPECT_TRUE(storedSpec("gw-app2").has_value());
}

// Deleting a Cluster CR deregisters the cluster, as `flotilla delete cluster` does: the tombstone is written, the
// Cluster document goes, and the objects the hub deployed there are removed (its agent is connected). Runs after the
// self-managed test, whose apps are on cluster 1.
TEST_F(GatewayTest, DeletingAClusterCrDeregistersTheClusterAndRemovesWhatItDeployed) {
  const std::string cluster = hub_->clusterName(1);
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, "apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: " +
                                              cluster + "\n  namespace: fleet-default\nspec: {}\n")
                .exit_code,
            0);
  ASSERT_TRUE(Hub::waitFor([&] { return configMapExists(*hub_, 1, "ns-gw-app1", "c"); }, seconds(60)));
  auto deleted = kubectl({"delete", "cluster", "-n", "fleet-default", cluster});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  auto kv = hub_->kv(std::string(events::kClustersBucket));
  ASSERT_TRUE(kv.ok()) << kv.error().describe();
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto tombstone = (*kv)->find(events::clusterDeregisteredKey(cluster));
        auto document = (*kv)->find(events::clusterSpecKey(cluster));
        return tombstone.ok() && tombstone->has_value() && document.ok() && !document->has_value();
      },
      seconds(30)))
      << hub_->logTail("gateway");
  EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(*hub_, 1, "ns-gw-app1", "c"); }, seconds(90))) << hub_->allLogs();
}

//! The API server's count of status PATCHes on GitRepos (its own apiserver_request_total), -1 when unreadable.
int64_t gitRepoStatusPatches(const CommandResult& metrics) {
  if (metrics.exit_code != 0) {
    return -1;
  }
  int64_t total = 0;
  for (const auto& line : split(metrics.out, '\n')) {
    if (line.starts_with("apiserver_request_total{") && line.find("resource=\"gitrepos\"") != std::string::npos &&
        line.find("subresource=\"status\"") != std::string::npos && line.find("verb=\"PATCH\"") != std::string::npos) {
      total += static_cast<int64_t>(std::stod(line.substr(line.rfind(' ') + 1)));
    }
  }
  return total;
}

// 1,000 GitRepos at once: every one gets its status, and the API server (its own request counter) never sees more
// status writes than the configured rate allows: rate x elapsed + burst. Run last: it leaves the hub busy.
TEST_F(GatewayTest, ThousandGitRepoStatusesStayWithinTheWriteRate) {
  constexpr int kCount = 1000;
  constexpr double kRate = 20;  // the gateway's defaults (--status-rate, --status-burst)
  constexpr double kBurst = 20;
  std::string url;
  repoWithConfigMap("gw-bulk", &url);
  std::string yaml;
  for (int i = 0; i < kCount; ++i) {
    // Targets no cluster: the statuses still change (accepted, polled, rolled up) without 1,000 deployments.
    yaml += gitRepoYaml("gw-bulk-" + std::to_string(i), url, {"app"},
                        "  targets:\n  - clusterSelector:\n      matchLabels:\n        nowhere: \"true\"\n", "1h") +
            "---\n";
  }
  const int64_t before = gitRepoStatusPatches(kubectl({"get", "--raw", "/metrics"}));
  ASSERT_GE(before, 0);
  const auto started = std::chrono::steady_clock::now();
  auto applied = kubectl({"apply", "-f", "-"}, yaml);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;

  // Every GitRepo gets a status (Accepted=True: the gateway's own part; the roll-up follows as the pipeline gets to
  // it, and is written through the same bound).
  int with_status = 0;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto listed = kubectl({"get", "gitrepos", "-n", "fleet-default", "-o", "json"});
        auto json = listed.exit_code == 0 ? Json::parse(listed.out) : Result<Json>(fail(ErrorKind::kTransient, ""));
        if (!json.ok()) {
          return false;
        }
        with_status = 0;
        for (const auto& item : json->find("items")->asArray()) {
          if (item.at({"metadata", "name"})->asString().rfind("gw-bulk-", 0) != 0) {
            continue;
          }
          with_status += condition(item, "Accepted", "status") == "True" ? 1 : 0;
        }
        return with_status == kCount;
      },
      seconds(300)))
      << with_status << " of " << kCount << " have a status\n"
      << hub_->logTail("gateway");
  const int64_t after = gitRepoStatusPatches(kubectl({"get", "--raw", "/metrics"}));
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int64_t writes = after - before;
  std::printf("[gateway] %d GitRepos: %lld status writes in %.1f s (rate %.0f/s, burst %.0f: at most %.0f)\n", kCount,
              static_cast<long long>(writes), elapsed, kRate, kBurst, kRate * elapsed + kBurst);
  EXPECT_GE(writes, kCount);
  EXPECT_LE(static_cast<double>(writes), kRate * elapsed + kBurst);

  auto deleted = kubectl({"delete", "gitrepos", "-n", "fleet-default", "--wait=false", "--all"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
}

}  // namespace
}  // namespace flotilla::e2e
