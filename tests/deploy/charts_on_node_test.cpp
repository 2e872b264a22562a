// The charts installed as a user installs them (issue 18), on harness clusters whose pods really run: the images
// scripts/images builds here are imported into each node's containerd (no registry), the hub chart is installed with
// its secure defaults (operator-mode NATS with TLS, an identity per service) into a cluster with a node and a
// Service network (kube-proxy, CoreDNS), and two agents with the agent chart: one for the cluster it runs in, one
// for a second cluster (the chart's kubeconfig mode). A GitRepo on a real git server flows to both clusters, where
// a Deployment of the local test image becomes Ready through the real controllers and kubelets; failing pods make
// the agents report NotReady; `helm upgrade` keeps the state; `helm uninstall` leaves only what is documented.
//
// Why the second cluster's agent runs in the first: two nodes with a Service network cannot share this machine's
// network namespace (each kube-proxy owns the KUBE-* chains), and the second node needs none for what it runs.
// The cases run in order on one installation (ONE_PROCESS), each building on the one before.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "deploy_util.h"
#include "flotilla/core/json.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/git_server.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/log_tail.h"
#include "flotilla/harness/poll.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::deploy_test {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr const char* kTag = "e2e";  // the tag e2e_compose_test builds too: the second build is a no-op
constexpr const char* kHubNs = "flotilla-system";
constexpr const char* kRelease = "hub";
constexpr const char* kWorkspace = "fleet-default";
constexpr const char* kStorageClass = "harness-local";

// The agents: release and namespace "agent-<cluster>"; "local" manages the hub's own cluster.
const std::vector<std::string> kClusters = {"local", "edge"};

//! A command with a longer limit than run()'s (image builds, `helm --wait`).
CommandResult runLong(const std::vector<std::string>& argv, std::chrono::minutes limit) {
  auto result = runCommand({.argv = argv, .timeout = limit});
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().describe());
  return result.ok() ? *result : CommandResult{.exit_code = -1};
}

//! The string at `path`, or "" when it is missing or not a string.
std::string field(const Json& json, std::initializer_list<std::string_view> path) {
  const Json* value = json.at(path);
  return value != nullptr && value->isString() ? value->asString() : "";
}

//! The items of a `kubectl get -o json` list (empty when there are none or it could not be read).
Json::Array items(const Json& list) {
  const Json* found = list.find("items");
  return found != nullptr && found->isArray() ? found->asArray() : Json::Array{};
}

std::string appYaml(const std::string& args) {
  return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n"
         "  progressDeadlineSeconds: 600\n  selector:\n    matchLabels: {app: web}\n  template:\n"
         "    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: " +
         std::string(harness::KubeCluster::testAppImage()) + "\n        imagePullPolicy: Never\n        args: " + args +
         "\n        readinessProbe:\n          httpGet: {path: /, port: 8080}\n          periodSeconds: 1\n"
         "          failureThreshold: 1\n";
}

class ChartsOnNode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    helm_ = toolPath("helm");
    kubectl_ = toolPath("kubectl");
    ASSERT_FALSE(helm_.empty() || kubectl_.empty()) << "helm or kubectl missing: run scripts/setup --no-run";
    temp_ = new flotilla::testing::TempDir("flotilla-charts-node");
    auto images =
        runLong({sourceDir() + "/scripts/images", "--version", kTag, "--build-dir", FLOTILLA_BUILD_DIR}, minutes(25));
    ASSERT_EQ(images.exit_code, 0) << images.out << images.err;
    // The git server listens on every address: the poller's pod reaches it at the hub node's bridge address.
    auto git = harness::GitServer::start(
        {.https = false, .git_daemon = false, .ssh = false, .http_listen_address = "0.0.0.0"});
    ASSERT_TRUE(git.ok()) << git.error().describe();
    git_ = std::move(git).value().release();
    // The edge's API server listens on every address too: its agent's pod (on the hub's node) reaches it there.
    auto clusters = harness::KubeCluster::startMany(
        {{.name = "hub", .with_service_network = true},
         {.name = "edge", .extra_apiserver_args = {"--bind-address=0.0.0.0"}, .with_node = true}});
    ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
    hub_ = (*clusters)[0].release();
    edge_ = (*clusters)[1].release();
    for (const std::string& image : {"flotilla/runtime:" + std::string(kTag), natsImage()}) {
      auto imported = hub_->importImage(image);
      ASSERT_TRUE(imported.ok()) << imported.error().describe();
    }
    ASSERT_NO_FATAL_FAILURE(installHub());
    for (const auto& cluster : kClusters) {
      ASSERT_NO_FATAL_FAILURE(installAgent(cluster));
    }
  }

  static void TearDownTestSuite() {
    if (HasFailure() && hub_ != nullptr) {
      std::cerr << kubectl(hub_, {"get", "pods", "-A", "-o", "wide"}).out << podLogs();
    }
    delete edge_;
    delete hub_;
    delete git_;
    delete temp_;
  }

  static std::string natsImage() {
    auto versions = readFile(sourceDir() + "/tools/versions.env").valueOr("");
    auto at = versions.find("NATS_SERVER_VERSION=v");
    return "flotilla/nats:" + versions.substr(at + 21, versions.find_first_of(" \n", at) - at - 21);
  }

  static CommandResult kubectl(harness::KubeCluster* cluster, std::vector<std::string> args,
                               const std::string& input = {}) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig", cluster->kubeconfigPath()});
    return run(args, input);
  }

  static CommandResult helm(std::vector<std::string> args) {
    args.insert(args.begin(), helm_);
    args.insert(args.end(), {"--kubeconfig", hub_->kubeconfigPath()});
    return runLong(args, minutes(10));
  }

  static CommandResult flotilla(std::vector<std::string> args) {
    args.insert(args.begin(), FLOTILLA_CLI_BINARY);
    return run(args);
  }

  static std::string authDir() { return temp_->path() + "/hub-auth"; }

  //! The containers' logs from the hub node's pod log dir (the kubelet of the harness serves no `kubectl logs`).
  static std::string podLogs() {
    std::string out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(hub_->dir() + "/node/pod-logs", ec)) {
      if (entry.is_regular_file() && entry.path().string().find("flotilla") != std::string::npos) {
        out +=
            "== " + entry.path().string() + " ==\n" + harness::lastLines(readFile(entry.path()).valueOr(""), 30, 400);
      }
    }
    return out;
  }

  static void apply(harness::KubeCluster* cluster, const std::string& yaml) {
    auto applied = kubectl(cluster, {"apply", "-f", "-"}, yaml);
    ASSERT_EQ(applied.exit_code, 0) << applied.err << "\n" << yaml;
  }

  //! The chart's images from the node's containerd, never pulled.
  static std::vector<std::string> imageValues() {
    return {"--set", "image.repository=flotilla/runtime",
            "--set", std::string("image.tag=") + kTag,
            "--set", "image.pullPolicy=Never"};
  }

  // The user's steps from charts/README.md: the NATS material, its Secrets, then the chart. JetStream's volume is
  // a hostPath PersistentVolume of a StorageClass that only this test uses (the harness has no provisioner).
  static void installHub() {
    auto init = flotilla({"auth", "init", "--dir", authDir(), "--tls"});
    ASSERT_EQ(init.exit_code, 0) << init.err;
    auto secrets = flotilla({"auth", "secrets", "--dir", authDir(), "--kube-namespace", kHubNs, "--release", kRelease});
    ASSERT_EQ(secrets.exit_code, 0) << secrets.err;
    for (const char* ns : {kHubNs, kWorkspace}) {
      ASSERT_EQ(kubectl(hub_, {"create", "namespace", ns}).exit_code, 0);
    }
    ASSERT_NO_FATAL_FAILURE(apply(hub_, secrets.out));
    const std::string data = temp_->path() + "/nats-data";
    std::filesystem::create_directories(data);
    std::filesystem::permissions(data, std::filesystem::perms::all);
    ASSERT_NO_FATAL_FAILURE(apply(
        hub_, std::string("apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: hub-nats-data\nspec:\n") +
                  "  capacity: {storage: 10Gi}\n  accessModes: [ReadWriteOnce]\n  storageClassName: " + kStorageClass +
                  "\n  persistentVolumeReclaimPolicy: Retain\n  hostPath: {path: " + data + ", type: Directory}\n"));
    std::vector<std::string> install = {"install",
                                        kRelease,
                                        chartDir("flotilla-hub"),
                                        "-n",
                                        kHubNs,
                                        "--wait",
                                        "--timeout",
                                        "5m",
                                        "--set",
                                        std::string("nats.embedded.persistence.storageClass=") + kStorageClass,
                                        "--set",
                                        "nats.embedded.image.pullPolicy=Never"};
    auto images = imageValues();
    install.insert(install.end(), images.begin(), images.end());
    auto installed = helm(install);
    ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err << podLogs();
  }

  // The agent's identity from the hub's auth dir (`auth issue` + `auth secrets --agent`), then the chart. The edge's
  // agent gets a kubeconfig Secret for the edge's API server at the address the hub's pods reach it on.
  static void installAgent(const std::string& cluster) {
    const std::string ns = "agent-" + cluster;
    auto issued = flotilla({"auth", "issue", "--dir", authDir(), "--role", "agent", "--cluster", cluster});
    ASSERT_EQ(issued.exit_code, 0) << issued.err;
    auto secret = flotilla({"auth", "secrets", "--dir", authDir(), "--agent", cluster, "--kube-namespace", ns});
    ASSERT_EQ(secret.exit_code, 0) << secret.err;
    ASSERT_EQ(kubectl(hub_, {"create", "namespace", ns}).exit_code, 0);
    ASSERT_NO_FATAL_FAILURE(apply(hub_, secret.out));
    std::vector<std::string> install = {"install",
                                        ns,
                                        chartDir("flotilla-agent"),
                                        "-n",
                                        ns,
                                        "--wait",
                                        "--timeout",
                                        "3m",
                                        "--set",
                                        "clusterName=" + cluster,
                                        "--set",
                                        std::string("nats.url=tls://hub-flotilla-hub-nats.") + kHubNs + ".svc:4222",
                                        "--set",
                                        "nats.credentials.secretName=flotilla-agent-nats",
                                        "--set",
                                        "nats.tls.secretName=flotilla-agent-nats"};
    if (cluster == "edge") {
      ASSERT_NO_FATAL_FAILURE(apply(hub_, edgeKubeconfigSecret(ns)));
      install.insert(install.end(), {"--set", "kubeconfig.secretName=edge-kubeconfig"});
    }
    auto images = imageValues();
    install.insert(install.end(), images.begin(), images.end());
    auto installed = helm(install);
    ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err << podLogs();
  }

  // The edge's admin identity, its API server at the hub node's bridge address; the serving certificate names
  // localhost, which tls-server-name checks instead of the address.
  static std::string edgeKubeconfigSecret(const std::string& ns) {
    auto ca = readFile(edge_->caFile()).valueOr("");
    auto cert = readFile(edge_->adminCertFile()).valueOr("");
    auto key = readFile(edge_->adminKeyFile()).valueOr("");
    std::string kubeconfig =
        "apiVersion: v1\nkind: Config\nclusters:\n- name: edge\n  cluster:\n    server: https://" +
        hub_->podReachableHost() + ":" + std::to_string(edge_->port()) +
        "\n    tls-server-name: localhost\n    certificate-authority-data: " + base64Encode(ca) +
        "\nusers:\n- name: admin\n  user:\n    client-certificate-data: " + base64Encode(cert) +
        "\n    client-key-data: " + base64Encode(key) +
        "\ncontexts:\n- name: edge\n  context: {cluster: edge, user: admin}\ncurrent-context: edge\n";
    return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: edge-kubeconfig\n  namespace: " + ns +
           "\ndata:\n  kubeconfig: " + base64Encode(kubeconfig) + "\n";
  }

  //! `kubectl get -o json` of one object (null when it cannot be read).
  static Json getJson(harness::KubeCluster* cluster, const std::vector<std::string>& what) {
    std::vector<std::string> args = {"get"};
    args.insert(args.end(), what.begin(), what.end());
    args.insert(args.end(), {"-o", "json"});
    auto got = kubectl(cluster, args);
    auto json = got.exit_code == 0 ? Json::parse(got.out) : Result<Json>(fail(ErrorKind::kNotFound, got.err));
    return json.ok() ? *json : Json();
  }

  static std::string readyCondition(const Json& object) {
    const Json* conditions = object.at({"status", "conditions"});
    if (conditions != nullptr && conditions->isArray()) {
      for (const auto& c : conditions->asArray()) {
        if (c.getString("type") == "Ready") {
          return c.getString("status");
        }
      }
    }
    return "";
  }

  //! The GitRepo is Ready=`ready` at `commit`.
  static bool gitRepoIs(const std::string& ready, const std::string& commit) {
    Json repo = getJson(hub_, {"gitrepo", "-n", kWorkspace, "app"});
    return readyCondition(repo) == ready && field(repo, {"status", "commit"}) == commit;
  }

  //! Deployment web of `cluster` has `available` available replicas.
  static bool webAvailable(harness::KubeCluster* cluster, int available) {
    Json web = getJson(cluster, {"deployment", "-n", "charts-app", "web"});
    const Json* count = web.at({"status", "availableReplicas"});
    return web.isObject() && (count != nullptr && count->isInt() ? count->asInt() : 0) == available;
  }

  static std::string commitApp(const std::string& args, const std::string& message) {
    auto sha = git_->commitFiles(
        "app", "main", {{"app/fleet.yaml", "defaultNamespace: charts-app\n"}, {"app/web.yaml", appYaml(args)}},
        message);
    EXPECT_TRUE(sha.ok()) << sha.error().describe();
    return sha.ok() ? *sha : "";
  }

  static inline std::string helm_;
  static inline std::string kubectl_;
  static inline flotilla::testing::TempDir* temp_ = nullptr;
  static inline harness::GitServer* git_ = nullptr;
  static inline harness::KubeCluster* hub_ = nullptr;
  static inline harness::KubeCluster* edge_ = nullptr;
  static inline std::string commit_;
};

// Every pod of both releases is Running and Ready (their probes pass), and each answers /metrics with the build info.
TEST_F(ChartsOnNode, EveryPodIsReadyAndServesMetrics) {
  for (const std::string& ns : {std::string(kHubNs), std::string("agent-local"), std::string("agent-edge")}) {
    auto pods = items(getJson(hub_, {"pods", "-n", ns}));
    ASSERT_FALSE(pods.empty()) << ns;
    for (const auto& pod : pods) {
      const std::string name = field(pod, {"metadata", "name"});
      EXPECT_EQ(field(pod, {"status", "phase"}), "Running") << name;
      EXPECT_EQ(readyCondition(pod), "True") << name;
      const std::string ip = field(pod, {"status", "podIP"});
      const bool nats = name.find("-nats-") != std::string::npos;
      auto metrics =
          run({"curl", "-sf", "--max-time", "5", "http://" + ip + (nats ? ":8222/healthz" : ":8080/metrics")});
      EXPECT_EQ(metrics.exit_code, 0) << name << " " << metrics.err;
      if (!nats) {
        EXPECT_THAT(metrics.out, HasSubstr("flotilla_build_info")) << name;
      }
    }
  }
}

// A GitRepo applied as a user applies it reaches both clusters: the Deployment runs on each node and the agents
// report Ready, so the GitRepo is Ready at the commit.
TEST_F(ChartsOnNode, ACommitReachesBothClustersAndItsDeploymentBecomesReady) {
  ASSERT_TRUE(git_->createRepo("app").ok());
  commit_ = commitApp("[]", "web");
  ASSERT_NO_FATAL_FAILURE(apply(
      hub_, std::string("apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: app\n  namespace: ") +
                kWorkspace + "\nspec:\n  repo: " + git_->httpUrl("app", hub_->podReachableHost()) +
                "\n  branch: main\n  paths: [app]\n  pollingInterval: 5s\n"));
  EXPECT_TRUE(
      harness::waitUntil([] { return webAvailable(hub_, 1) && webAvailable(edge_, 1); }, minutes(4), seconds(1)))
      << kubectl(hub_, {"get", "gitrepo,bundles,bundledeployments,clusters", "-A"}).out << podLogs();
  EXPECT_TRUE(harness::waitUntil([] { return gitRepoIs("True", commit_); }, minutes(2), seconds(1)))
      << getJson(hub_, {"gitrepo", "-n", kWorkspace, "app"}).dump();
}

// The pods of a new commit never become ready: both agents report NotReady and the GitRepo says so; the next
// commit makes it Ready again.
TEST_F(ChartsOnNode, PodsThatFailMakeTheAgentsReportNotReady) {
  ASSERT_FALSE(commit_.empty()) << "needs the case before";
  const std::string unready = commitApp("[\"--unready\"]", "web never ready");
  EXPECT_TRUE(harness::waitUntil([&] { return gitRepoIs("False", unready); }, minutes(4), seconds(1)))
      << getJson(hub_, {"gitrepo", "-n", kWorkspace, "app"}).dump();
  auto deployments = items(getJson(hub_, {"bundledeployments", "-A"}));
  EXPECT_EQ(deployments.size(), kClusters.size());
  for (const auto& bd : deployments) {
    EXPECT_EQ(field(bd, {"status", "display", "state"}), "NotReady") << bd.dump();
  }
  commit_ = commitApp("[]", "web ready again");
  EXPECT_TRUE(harness::waitUntil([] { return gitRepoIs("True", commit_); }, minutes(4), seconds(1)))
      << getJson(hub_, {"gitrepo", "-n", kWorkspace, "app"}).dump();
}

// An upgrade that restarts every hub pod, NATS included, keeps the state: JetStream's volume survives, the clusters
// stay registered, nothing is redeployed, and the next commit flows.
TEST_F(ChartsOnNode, HelmUpgradeKeepsTheState) {
  ASSERT_FALSE(commit_.empty()) << "needs the cases before";
  const std::string web_uid = field(getJson(edge_, {"deployment", "-n", "charts-app", "web"}), {"metadata", "uid"});
  auto before = items(getJson(hub_, {"pods", "-n", kHubNs}));
  std::vector<std::string> upgrade = {
      "upgrade", kRelease, chartDir("flotilla-hub"),     "-n", kHubNs, "--reuse-values", "--wait", "--timeout",
      "5m",      "--set",  "podAnnotations.upgraded=yes"};
  auto upgraded = helm(upgrade);
  ASSERT_EQ(upgraded.exit_code, 0) << upgraded.out << upgraded.err << podLogs();
  // `--wait` returns once the new pods are Ready; the old ones may still be terminating then.
  std::set<std::string> old_uids;
  for (const auto& pod : before) {
    old_uids.insert(field(pod, {"metadata", "uid"}));
  }
  EXPECT_TRUE(harness::waitUntil(
      [&] {
        auto pods = items(getJson(hub_, {"pods", "-n", kHubNs}));
        return pods.size() == before.size() && std::none_of(pods.begin(), pods.end(), [&](const Json& pod) {
                 return old_uids.contains(field(pod, {"metadata", "uid"})) || readyCondition(pod) != "True";
               });
      },
      minutes(2), seconds(1)))
      << kubectl(hub_, {"get", "pods", "-n", kHubNs}).out;
  EXPECT_TRUE(harness::waitUntil([] { return gitRepoIs("True", commit_); }, minutes(2), seconds(1)));
  EXPECT_EQ(items(getJson(hub_, {"clusters", "-n", kWorkspace})).size(), kClusters.size());
  commit_ = commitApp("[]", "after the upgrade");
  EXPECT_TRUE(harness::waitUntil([] { return gitRepoIs("True", commit_); }, minutes(3), seconds(1)))
      << getJson(hub_, {"gitrepo", "-n", kWorkspace, "app"}).dump() << podLogs();
  EXPECT_EQ(field(getJson(edge_, {"deployment", "-n", "charts-app", "web"}), {"metadata", "uid"}), web_uid);
}

// Uninstalling the three releases leaves no pod, workload, Service, RBAC object or webhook of theirs. What stays
// is what charts/README.md says stays: the CRDs (Helm never deletes crds/), with the objects in them, and the NATS
// volume's claim (a StatefulSet's claims outlive it, so a reinstall finds its state).
TEST_F(ChartsOnNode, HelmUninstallLeavesOnlyWhatIsDocumented) {
  // Every object each release made, from its manifest, to look for afterwards.
  std::vector<std::pair<std::string, Json>> made;
  for (const char* release : {"agent-local", "agent-edge", kRelease}) {
    const std::string ns = std::string(release) == kRelease ? kHubNs : release;
    auto manifest = helm({"get", "manifest", release, "-n", ns});
    auto objects = parseObjects(manifest.out, std::string("helm get manifest ") + release);
    ASSERT_TRUE(objects.ok()) << manifest.err;
    for (auto& object : *objects) {
      made.emplace_back(ns, std::move(object));
    }
  }
  ASSERT_GT(made.size(), 20U);
  for (const char* release : {"agent-local", "agent-edge"}) {
    auto removed = helm({"uninstall", release, "-n", release, "--wait", "--timeout", "3m"});
    EXPECT_EQ(removed.exit_code, 0) << removed.err;
  }
  auto removed = helm({"uninstall", kRelease, "-n", kHubNs, "--wait", "--timeout", "3m"});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  // The releases' pods go; what the local agent deployed (charts-app) stays, as documented.
  for (const char* ns : {kHubNs, "agent-local", "agent-edge"}) {
    EXPECT_TRUE(harness::waitUntil(
        [&] {
          return trim(kubectl(hub_, {"get", "pods", "-n", ns, "-o", "name"}).out).empty();
        },
        minutes(2), seconds(1)))
        << kubectl(hub_, {"get", "pods", "-n", ns}).out;
  }
  EXPECT_TRUE(webAvailable(hub_, 1) && webAvailable(edge_, 1)) << "uninstalling the agents undeployed the app";
  for (const auto& [ns, object] : made) {
    const std::string kind = field(object, {"kind"});
    const std::string name = field(object, {"metadata", "name"});
    // kind.group: a kind alone could name another group's resource (a core kind's apiVersion has no group).
    const std::string api_version = field(object, {"apiVersion"});
    const auto slash = api_version.find('/');
    const std::string resource = slash == std::string::npos ? kind : kind + "." + api_version.substr(0, slash);
    auto left = kubectl(hub_, {"get", resource, name, "-n", ns, "--ignore-not-found", "-o", "name"});
    EXPECT_EQ(left.exit_code, 0) << resource << ": " << left.err;
    EXPECT_EQ(trim(left.out), "") << kind << " " << ns << "/" << name << " is left";
  }
  auto claims = kubectl(hub_, {"get", "pvc", "-n", kHubNs, "-o", "name"});
  EXPECT_EQ(trim(claims.out), "persistentvolumeclaim/data-hub-flotilla-hub-nats-0") << claims.err;
}

}  // namespace
}  // namespace flotilla::deploy_test
