// A harness cluster with a real node (KubeClusterOptions::with_node): Deployments of the locally built test app run
// as real pods through kube-controller-manager, kube-scheduler, kubelet, containerd and runc, on a CNI bridge.
// No timing assertions: every wait is generous and only bounds a hang.
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/kube_cluster.h"

namespace flotilla::harness {
namespace {

std::string kubectlBinary() {
  std::string source = envOr("FLOTILLA_SOURCE_DIR", FLOTILLA_SOURCE_DIR);
  return envOr("FLOTILLA_TOOLS_DIR", source + "/.tools/bin") + "/kubectl";
}

// The one cluster with a node of this process, started by the first test and stopped at exit.
KubeCluster* nodeCluster() {
  static std::unique_ptr<KubeCluster> cluster;
  static std::string error;
  if (!cluster && error.empty()) {
    auto started = KubeCluster::start({.name = "node", .with_node = true});
    if (started.ok()) {
      cluster = std::move(*started);
      std::fprintf(stderr, "cluster with node ready: apiserver %.1fs, node %.1fs more\n", cluster->startSeconds(),
                   cluster->nodeStartSeconds());
    } else {
      error = started.error().describe();
    }
  }
  if (!error.empty()) {
    ADD_FAILURE() << "the cluster with a node did not start (this test does not skip: what the sandbox refused is "
                     "in the node's logs below)\n"
                  << error;
  }
  return cluster.get();
}

CommandResult kubectl(KubeCluster& cluster, std::vector<std::string> args, const std::string& input = "",
                      std::chrono::seconds timeout = std::chrono::seconds(60)) {
  std::vector<std::string> argv = {kubectlBinary(), "--kubeconfig", cluster.kubeconfigPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = runCommand({.argv = argv, .input = input, .timeout = timeout});
  if (!r.ok()) {
    return CommandResult{.exit_code = -1, .err = r.error().message};
  }
  return *r;
}

// A Deployment of the test app (or `image`) with a readiness probe on :8080; `args` chooses how it behaves.
std::string deployment(const std::string& name, const std::string& args,
                       const std::string& image = KubeCluster::testAppImage()) {
  std::string yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: default}\n";
  yaml += "spec:\n  replicas: 1\n  selector: {matchLabels: {app: " + name + "}}\n";
  yaml += "  template:\n    metadata: {labels: {app: " + name + "}}\n";
  yaml += "    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: app\n";
  yaml += "        image: " + image + "\n        imagePullPolicy: Never\n        args: [" + args + "]\n";
  yaml += "        ports: [{containerPort: 8080}]\n";
  yaml += "        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1, failureThreshold: 1}\n";
  return yaml;
}

// Polls `jsonpath` of `resource` until `done` says yes (or 300 s pass, which fails the test with the node's logs).
template <class Done>
std::string waitFor(KubeCluster& cluster, const std::string& resource, const std::string& jsonpath, Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> args = {"get"};
    for (const auto& word : split(resource, ' ')) {
      args.push_back(word);
    }
    args.push_back("-o");
    args.push_back("jsonpath=" + jsonpath);
    auto r = kubectl(cluster, args);
    last = r.out + r.err;
    if (r.exit_code == 0 && done(r.out)) {
      return r.out;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  ADD_FAILURE() << "waited 300s for " << resource << " " << jsonpath << "; last: " << last << "\n"
                << kubectl(cluster, {"describe", "pods"}).out << "\n"
                << cluster.logTail(40);
  return last;
}

TEST(KubeNodeTest, DeploymentOfTheLocalImageBecomesAvailableAndServes) {
  auto* cluster = nodeCluster();
  ASSERT_NE(cluster, nullptr);
  ASSERT_TRUE(cluster->healthy().ok()) << cluster->healthy().error().describe();
  auto applied = kubectl(*cluster, {"apply", "-f", "-"}, deployment("web", ""));
  ASSERT_EQ(applied.exit_code, 0) << applied.err;

  waitFor(*cluster, "deployment/web", "{.status.conditions[?(@.type==\"Available\")].status}",
          [](const std::string& s) { return s == "True"; });
  auto pod_ip = waitFor(*cluster, "pods", "{.items[0].status.podIP}", [](const std::string& s) { return !s.empty(); });
  auto node = kubectl(*cluster, {"get", "pods", "-o", "jsonpath={.items[0].spec.nodeName}"});
  EXPECT_EQ(node.out, cluster->nodeName());
  // The pod answers on its own address through the node's bridge: a real container on a real network.
  auto answer = runCommand({.argv = {"curl", "-s", "--max-time", "10", "http://" + pod_ip + ":8080/"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->out, "ok\n") << answer->err;
  auto deleted = kubectl(*cluster, {"delete", "deployment", "web", "--wait=true"}, "", std::chrono::seconds(120));
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
}

// A local Docker image (here the test app under another name) imported with importImage runs: the way the
// project's own images (flotilla/runtime) get onto the node without a registry.
TEST(KubeNodeTest, ImportedDockerImageRuns) {
  auto* cluster = nodeCluster();
  ASSERT_NE(cluster, nullptr);
  const std::string image = "flotilla.local/imported:1";
  auto tagged = runCommand({.argv = {"docker", "tag", KubeCluster::testAppImage(), image}});
  ASSERT_TRUE(tagged.ok());
  ASSERT_EQ(tagged->exit_code, 0) << tagged->err;
  auto imported = cluster->importImage(image);
  ASSERT_TRUE(imported.ok()) << imported.error().describe();
  ASSERT_EQ(kubectl(*cluster, {"apply", "-f", "-"}, deployment("imported", "", image)).exit_code, 0);
  waitFor(*cluster, "deployment/imported", "{.status.conditions[?(@.type==\"Available\")].status}",
          [](const std::string& s) { return s == "True"; });
  EXPECT_EQ(kubectl(*cluster, {"delete", "deployment", "imported"}).exit_code, 0);
}

TEST(KubeNodeTest, CrashingAndUnreadyContainersKeepTheDeploymentUnavailable) {
  auto* cluster = nodeCluster();
  ASSERT_NE(cluster, nullptr);
  ASSERT_EQ(kubectl(*cluster, {"apply", "-f", "-"}, deployment("crash", "\"--exit\", \"3\"")).exit_code, 0);
  ASSERT_EQ(kubectl(*cluster, {"apply", "-f", "-"}, deployment("unready", "\"--unready\"")).exit_code, 0);

  // The kubelet ran the crashing container (it exited with 3) and restarts it.
  waitFor(*cluster, "pods -l app=crash", "{.items[0].status.containerStatuses[0].lastState.terminated.exitCode}",
          [](const std::string& s) { return s == "3"; });
  // The unready one runs, and the kubelet's probe got its 503.
  waitFor(*cluster, "pods -l app=unready", "{.items[0].status.containerStatuses[0].state.running.startedAt}",
          [](const std::string& s) { return !s.empty(); });
  waitFor(*cluster, "events", "{.items[?(@.reason==\"Unhealthy\")].message}",
          [](const std::string& s) { return s.find("503") != std::string::npos; });

  for (const char* name : {"crash", "unready"}) {
    auto available = kubectl(*cluster, {"get", std::string("deployment/") + name, "-o",
                                        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}"});
    EXPECT_EQ(available.out, "False") << name;
    auto ready =
        kubectl(*cluster, {"get", std::string("deployment/") + name, "-o", "jsonpath={.status.readyReplicas}"});
    EXPECT_EQ(ready.out, "") << name << " has ready replicas";
  }
}

// Two more clusters with nodes next to the first one: each node has its own bridge, pod CIDR, cgroup root and
// containerd, and each runs its own pods.
TEST(KubeNodeTest, TwoMoreClustersWithNodesDoNotCollide) {
  ASSERT_NE(nodeCluster(), nullptr);
  auto more = KubeCluster::startMany({{.name = "node-a", .with_node = true}, {.name = "node-b", .with_node = true}});
  ASSERT_TRUE(more.ok()) << more.error().describe();
  std::vector<std::string> ips;
  for (auto& cluster : *more) {
    ASSERT_EQ(kubectl(*cluster, {"apply", "-f", "-"}, deployment("web", "")).exit_code, 0);
  }
  for (auto& cluster : *more) {
    waitFor(*cluster, "deployment/web", "{.status.conditions[?(@.type==\"Available\")].status}",
            [](const std::string& s) { return s == "True"; });
    ips.push_back(
        waitFor(*cluster, "pods", "{.items[0].status.podIP}", [](const std::string& s) { return !s.empty(); }));
    auto answer = runCommand({.argv = {"curl", "-s", "--max-time", "10", "http://" + ips.back() + ":8080/"}});
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->out, "ok\n") << cluster->name() << " " << answer->err;
  }
  EXPECT_NE(ips[0], ips[1]);
  EXPECT_NE((*more)[0]->nodeName(), (*more)[1]->nodeName());
}

// A cluster with a Service network: a ClusterIP reaches its pod, the `kubernetes` Service reaches the API server (what
// every in-cluster client uses), and stopping removes kube-proxy's rules. CoreDNS answering for the `kubernetes`
// Service is part of start() itself.
TEST(KubeNodeTest, AServiceNetworkRoutesClusterIpsAndStopsClean) {
  auto started = KubeCluster::start({.name = "svc", .with_service_network = true});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  KubeCluster& cluster = **started;
  EXPECT_FALSE(cluster.podReachableHost().empty());
  ASSERT_EQ(
      kubectl(cluster, {"apply", "-f", "-"},
              deployment("web", "") + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\n"
                                      "spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}\n")
          .exit_code,
      0);
  waitFor(cluster, "deployment/web", "{.status.conditions[?(@.type==\"Available\")].status}",
          [](const std::string& s) { return s == "True"; });
  auto ip = kubectl(cluster, {"get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"});
  ASSERT_FALSE(ip.out.empty()) << ip.err;
  std::string answer;
  for (int attempt = 0; attempt < 30 && answer != "ok\n"; ++attempt) {  // kube-proxy syncs the endpoint within ~1s
    auto got = runCommand({.argv = {"curl", "-s", "--max-time", "5", "http://" + ip.out + "/"}});
    answer = got.ok() ? got->out : "";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(answer, "ok\n") << cluster.logTail(40);
  auto api =
      runCommand({.argv = {"curl", "-s", "--max-time", "5", "--cacert", cluster.caFile(), "--cert",
                           cluster.adminCertFile(), "--key", cluster.adminKeyFile(), "https://10.96.0.1/readyz"}});
  ASSERT_TRUE(api.ok());
  EXPECT_EQ(api->out, "ok") << api->err;
  cluster.stop();
  auto rules = runCommand({.argv = {"iptables-save", "-t", "nat"}});
  ASSERT_TRUE(rules.ok());
  EXPECT_EQ(rules->out.find("default/web"), std::string::npos) << "kube-proxy's rules for default/web are left";
}

// Stopping a node leaves nothing on the host: no mounts under its dir, no bridge, no shim.
TEST(KubeNodeTest, StoppingTheClusterLeavesNoMountsOrBridge) {
  auto* cluster = nodeCluster();
  ASSERT_NE(cluster, nullptr);
  std::string dir = cluster->dir();
  // This node's bridge, by its address: other tests of the machine may have nodes (and flb bridges) of their own.
  const std::string gateway = cluster->podReachableHost();
  ASSERT_FALSE(gateway.empty());
  cluster->stop();
  auto mounts = readFile("/proc/self/mountinfo");
  ASSERT_TRUE(mounts.ok());
  EXPECT_EQ(mounts->find(dir), std::string::npos) << "mounts left under " << dir;
  auto addresses_after = runCommand({.argv = {"ip", "-o", "addr", "show"}});
  ASSERT_TRUE(addresses_after.ok());
  EXPECT_EQ(addresses_after->out.find(" " + gateway + "/"), std::string::npos) << addresses_after->out;
  auto shims = runCommand({.argv = {"pgrep", "-f", dir + "/node/containerd.sock"}});
  ASSERT_TRUE(shims.ok());
  EXPECT_NE(shims->exit_code, 0) << "processes left: " << shims->out;
}

}  // namespace
}  // namespace flotilla::harness
