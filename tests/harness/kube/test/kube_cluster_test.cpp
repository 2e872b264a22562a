// Tests of the Kubernetes test harness itself: clusters start, answer, are independent, and failures carry
// the servers' log tails.
#include "flotilla/harness/kube_cluster.h"

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"

namespace flotilla::harness {
namespace {

// GET through curl with the admin certificate; returns "<http code> <body>".
std::string adminGet(const KubeCluster& cluster, const std::string& path) {
  auto r = runCommand({.argv = {"curl", "-s", "--cacert", cluster.caFile(), "--cert", cluster.adminCertFile(), "--key",
                                cluster.adminKeyFile(), "-w", " %{http_code}", cluster.serverUrl() + path}});
  return r.ok() ? r->out : r.error().message;
}

TEST(KubeClusterTest, SharedClustersAnswerReadyzAndAreDistinct) {
  auto clusters = sharedKubeClusters(2);
  ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
  ASSERT_EQ(clusters->size(), 2u);
  for (auto* c : *clusters) {
    std::fprintf(stderr, "kube-apiserver %s started in %.1fs\n", c->name().c_str(), c->startSeconds());
    EXPECT_TRUE(c->healthy().ok());
    EXPECT_EQ(adminGet(*c, "/readyz"), "ok 200");
    EXPECT_TRUE(std::filesystem::exists(c->kubeconfigPath()));
    EXPECT_TRUE(std::filesystem::exists(c->tokenKubeconfigPath()));
    EXPECT_GT(c->startSeconds(), 0.0);
  }
  EXPECT_NE((*clusters)[0]->port(), (*clusters)[1]->port());
  EXPECT_NE((*clusters)[0]->dir(), (*clusters)[1]->dir());
  // Each cluster has its own CA: cluster 0's CA does not verify cluster 1's server.
  auto cross = runCommand(
      {.argv = {"curl", "-s", "--cacert", (*clusters)[0]->caFile(), (*clusters)[1]->serverUrl() + "/readyz"}});
  ASSERT_TRUE(cross.ok());
  EXPECT_NE(cross->exit_code, 0);
  // A second call returns the same clusters without starting new ones.
  auto again = sharedKubeClusters(1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->front(), clusters->front());
}

TEST(KubeClusterTest, TokenUserIsAuthenticatedButNotAuthorized) {
  auto clusters = sharedKubeClusters(1);
  ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
  auto* c = clusters->front();
  auto r = runCommand({.argv = {"curl", "-s", "--cacert", c->caFile(), "-H", "Authorization: Bearer " + c->token(),
                                "-w", " %{http_code}", c->serverUrl() + "/api/v1/namespaces/default/configmaps"}});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->out.find("User \\\"flotilla-agent\\\" cannot list"), std::string::npos) << r->out;
  EXPECT_TRUE(r->out.ends_with(" 403")) << r->out;
}

TEST(KubeClusterTest, StartFailureCarriesTheApiserverLogTail) {
  auto cluster = KubeCluster::start({.name = "broken", .extra_apiserver_args = {"--no-such-flag"}});
  ASSERT_FALSE(cluster.ok());
  EXPECT_NE(cluster.error().message.find("kube-apiserver exited during start"), std::string::npos);
  EXPECT_NE(cluster.error().message.find("== kube-apiserver.log"), std::string::npos);
  EXPECT_NE(cluster.error().message.find("unknown flag: --no-such-flag"), std::string::npos) << cluster.error().message;
}

TEST(KubeClusterTest, DeadEtcdIsReportedWithLogsAndStopCleansUp) {
  auto started = KubeCluster::start({.name = "dies"});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  auto cluster = std::move(*started);
  std::string dir = cluster->dir();
  ASSERT_TRUE(cluster->healthy().ok());
  // Find etcd by its data dir, which only this cluster uses, and kill it.
  auto pids = runCommand({.argv = {"pgrep", "-f", "--", dir + "/etcd-data"}});
  ASSERT_TRUE(pids.ok());
  ASSERT_FALSE(pids->out.empty());
  for (const auto& pid : split(pids->out, '\n')) {
    if (!pid.empty()) {
      ::kill(std::stoi(pid), SIGKILL);
    }
  }
  Status health = okStatus();
  for (int i = 0; i < 100 && health.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health = cluster->healthy();
  }
  ASSERT_FALSE(health.ok());
  EXPECT_NE(health.error().message.find("etcd is not running"), std::string::npos);
  EXPECT_NE(health.error().message.find("== etcd.log"), std::string::npos);
  auto begin = std::chrono::steady_clock::now();
  cluster.reset();
  std::fprintf(stderr, "stopping a cluster whose etcd died took %.1fs\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace flotilla::harness
