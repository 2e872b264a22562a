// End-to-end: a commit reaches two real clusters, is updated and pruned, and its status is visible (issue 3).
// Real nats-server, git server and kube-apiservers; the four services run as separate processes.
#include <thread>

#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"

namespace flotilla::e2e {
namespace {

constexpr auto kLands = std::chrono::seconds(90);

class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto hub = Hub::start();
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    hub_ = std::move(hub).value().release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(hub_, nullptr); }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << hub_->allLogs(40);
    }
  }
  std::vector<std::string> clusters() const { return {hub_->clusterName(0), hub_->clusterName(1)}; }

  static Hub* hub_;
};
Hub* PipelineTest::hub_ = nullptr;

TEST_F(PipelineTest, CommitReachesBothClustersIsUpdatedAndPruned) {
  std::string name = "app-" + randomHex(3);
  std::string ns = "ns-" + name;
  auto& git = hub_->git();
  auto repo = git.createRepo(name);
  ASSERT_TRUE(repo.ok()) << repo.error().describe();
  auto first = git.commitFiles(name, "main",
                               {{"app/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                {"app/namespace.yaml", namespaceYaml(ns)},
                                {"app/a.yaml", configMap("a", "one")},
                                {"app/b.yaml", configMap("b", "bee")}},
                               "first");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(hub_->apply(gitRepoYaml(name, repo->http, {"app"})).ok());

  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *first, clusters()); }, kLands))
      << "first commit not Ready on both clusters";
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(*hub_, c, ns, "a", "value"), "one") << "cluster " << c;
    EXPECT_TRUE(configMapExists(*hub_, c, ns, "b")) << "cluster " << c;
  }

  auto second = git.commitFiles(name, "main", {{"app/a.yaml", configMap("a", "two")}}, "change a");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(Hub::waitFor(
      [&] {
        return configMapValue(*hub_, 0, ns, "a", "value") == "two" &&
               configMapValue(*hub_, 1, ns, "a", "value") == "two";
      },
      kLands))
      << "update did not reach both clusters";
  EXPECT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *second, clusters()); }, kLands));

  auto third = git.deleteFiles(name, "main", {"app/b.yaml"}, "remove b");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(
      Hub::waitFor([&] { return !configMapExists(*hub_, 0, ns, "b") && !configMapExists(*hub_, 1, ns, "b"); }, kLands))
      << "b was not pruned on both clusters";
  EXPECT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *third, clusters()); }, kLands));
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(*hub_, c, ns, "a", "value"), "two") << "a must survive the prune on cluster " << c;
  }

  // The CLI shows the same state to a person and, as JSON, to an automation.
  auto table = hub_->cli({"get", "gitrepos"});
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->exit_code, 0) << table->err;
  EXPECT_NE(table->out.find(name), std::string::npos) << table->out;
  auto json = hub_->cli({"get", "bundledeployments", "-o", "json"});
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->exit_code, 0) << json->err;
  EXPECT_TRUE(Json::parse(json->out).ok()) << json->out;
  auto describe = hub_->cli({"describe", "gitrepo", name});
  ASSERT_TRUE(describe.ok());
  EXPECT_EQ(describe->exit_code, 0) << describe->err;
  EXPECT_NE(describe->out.find(hub_->clusterName(0)), std::string::npos) << describe->out;
}

TEST_F(PipelineTest, ClusterSelectorMatchingOneClusterDeploysOnlyThere) {
  std::string name = "sel-" + randomHex(3);
  std::string ns = "ns-" + name;
  auto repo = hub_->git().createRepo(name);
  ASSERT_TRUE(repo.ok());
  auto commit = hub_->git().commitFiles(name, "main",
                                        {{"app/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                         {"app/ns.yaml", namespaceYaml(ns)},
                                         {"app/cm.yaml", configMap("only", "here")}},
                                        "first");
  ASSERT_TRUE(commit.ok());
  std::string targets =
      "  targets:\n  - name: first\n    clusterSelector:\n      matchLabels:\n        env: cluster1\n";
  ASSERT_TRUE(hub_->apply(gitRepoYaml(name, repo->http, {"app"}, targets)).ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *commit, {hub_->clusterName(0)}); }, kLands));
  EXPECT_TRUE(configMapExists(*hub_, 0, ns, "only"));
  EXPECT_TRUE(bundlesOn(*hub_, hub_->clusterName(1), name).empty()) << "cluster 2 must not be targeted";
  EXPECT_FALSE(configMapExists(*hub_, 1, ns, "only"));
}

TEST_F(PipelineTest, InvalidObjectIsErrAppliedWhileAnotherBundleStaysReadyAndAFixRecovers) {
  std::string name = "bad-" + randomHex(3);
  std::string ns = "ns-" + name;
  auto repo = hub_->git().createRepo(name);
  ASSERT_TRUE(repo.ok());
  const std::string invalid = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata: 5\n";
  auto first = hub_->git().commitFiles(name, "main",
                                       {{"good/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                        {"good/ns.yaml", namespaceYaml(ns)},
                                        {"good/cm.yaml", configMap("fine", "ok")},
                                        {"bad/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                        {"bad/cm.yaml", invalid}},
                                       "one good, one bad");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(hub_->apply(gitRepoYaml(name, repo->http, {"good", "bad"})).ok());

  std::string good_bundle = name + "-good";
  std::string bad_bundle = name + "-bad";
  for (size_t c = 0; c < 2; ++c) {
    std::string cluster = hub_->clusterName(c);
    ASSERT_TRUE(
        Hub::waitFor([&] { return bundleState(*hub_, cluster, name, bad_bundle, "ErrApplied", *first); }, kLands))
        << "bad bundle not ErrApplied on " << cluster;
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(*hub_, cluster, name, good_bundle, "Ready", *first); }, kLands))
        << "good bundle not Ready on " << cluster;
    for (const auto& item : bundlesOn(*hub_, cluster, name)) {
      if (item.bundle == bad_bundle) {
        EXPECT_NE(item.message.find("broken"), std::string::npos) << "message must name the object: " << item.message;
        EXPECT_NE(item.message.find("ConfigMap"), std::string::npos) << item.message;
      }
    }
    EXPECT_TRUE(configMapExists(*hub_, c, ns, "fine"));
  }

  auto fixed = hub_->git().commitFiles(name, "main", {{"bad/cm.yaml", configMap("broken", "fixed")}}, "fix");
  ASSERT_TRUE(fixed.ok());
  // The fixed bundle is redeployed at the new commit; the good bundle's content did not change, so it is not
  // redeployed (same deploymentID) and stays Ready at the commit it was deployed from.
  for (const auto& cluster : clusters()) {
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(*hub_, cluster, name, bad_bundle, "Ready", *fixed); }, kLands))
        << "the fix did not make the bad bundle Ready on " << cluster;
    EXPECT_TRUE(bundleState(*hub_, cluster, name, good_bundle, "Ready")) << "good bundle on " << cluster;
  }
  EXPECT_EQ(configMapValue(*hub_, 0, ns, "broken", "value"), "fixed");
}

// kill -9 of the bundler and of one agent while a commit is in flight: after restart the commit lands exactly
// once on both clusters — one bundle event and one deploy event per cluster for it (JetStream de-duplicates
// republished messages by Nats-Msg-Id), and the objects carry the new content.
TEST(PipelineCrashTest, KillNineOfBundlerAndAgentMidCommitLandsExactlyOnce) {
  auto started = Hub::start();
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  std::string name = "crash-" + randomHex(3);
  std::string ns = "ns-" + name;
  auto repo = hub.git().createRepo(name);
  ASSERT_TRUE(repo.ok());
  auto first = hub.git().commitFiles(name, "main",
                                     {{"app/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                      {"app/ns.yaml", namespaceYaml(ns)},
                                      {"app/cm.yaml", configMap("c", "v1")}},
                                     "first");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(hub.apply(gitRepoYaml(name, repo->http, {"app"})).ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, both); }, kLands)) << hub.allLogs();

  auto js = hub.js();
  ASSERT_TRUE(js.ok());
  auto count = [&](const char* stream, const std::string& subject) -> uint64_t {
    auto info = (*js)->streamInfo(stream, subject);
    if (!info.ok()) {
      return 0;
    }
    auto it = info->subjects.find(subject);
    return it == info->subjects.end() ? 0 : it->second;
  };
  std::string bundle = name + "-app";
  std::string bundle_subject = "flotilla.bundle.fleet-default." + bundle;
  uint64_t bundles_before = count("FLOTILLA_BUNDLES", bundle_subject);
  std::vector<uint64_t> deploys_before;
  for (const auto& cluster : both) {
    deploys_before.push_back(count("FLOTILLA_DEPLOY", "flotilla.deploy." + cluster));
  }
  uint64_t commits_before = count("FLOTILLA_COMMITS", "flotilla.commit.fleet-default." + name);

  auto second = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  // The moment the poller has published the commit, kill the bundler and agent 1 hard.
  ASSERT_TRUE(
      Hub::waitFor([&] { return count("FLOTILLA_COMMITS", "flotilla.commit.fleet-default." + name) > commits_before; },
                   std::chrono::seconds(30)));
  hub.kill9("bundler");
  hub.kill9("agent-0");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(hub.startService("bundler").ok());
  ASSERT_TRUE(hub.startService("agent-0").ok());

  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, both); }, kLands)) << hub.allLogs();
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(hub, c, ns, "c", "value"), "v2") << "cluster " << c;
  }
  EXPECT_EQ(count("FLOTILLA_BUNDLES", bundle_subject), bundles_before + 1) << "bundle event must exist exactly once";
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(count("FLOTILLA_DEPLOY", "flotilla.deploy." + both[c]), deploys_before[c] + 1)
        << "deploy event for " << both[c] << " must exist exactly once";
  }
}

}  // namespace
}  // namespace flotilla::e2e
