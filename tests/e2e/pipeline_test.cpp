// End-to-end: a commit reaches two real clusters, is updated and pruned, and its status is visible (issue 3).
// Real nats-server, git server and kube-apiservers; the four services run as separate processes.
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "e2e_util.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/identity/revocation.h"

namespace flotilla::e2e {
namespace {

class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // With the hub's identities: operator-mode NATS over TLS, each service and agent with its own credentials —
    // the first agent's issued with `auth issue`, the second's given by the registrar for a registration token;
    // mutual TLS: every one of them (and the CLI) presents its own client certificate from the hub's CA.
    auto hub = Hub::start({.secure = true, .enrolled_agents = 1, .mutual_tls = true});
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
  auto applied = hub_->apply(gitRepoYaml(name, repo->http, {"app"}));
  ASSERT_TRUE(applied.ok()) << applied.error().describe();

  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *first, clusters()); }, kLands))
      << "first commit not Ready on both clusters";
  // The second agent got there with the credentials the registrar gave it for the token, not issued ones.
  EXPECT_TRUE(readFile(hub_->dir() + "/agent-1-store.creds").ok());
  EXPECT_FALSE(readFile(hub_->authDir() + "/creds/agent-" + hub_->clusterName(1) + ".creds").ok());
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
      Hub::waitFor([&] { return configMapGone(*hub_, 0, ns, "b") && configMapGone(*hub_, 1, ns, "b"); }, kLands))
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

// Mutual TLS: valid credentials are not enough; the server refuses a client that presents no certificate from the
// hub's CA, while the same identity with its certificate reads the clusters (both agents got in with theirs).
TEST_F(PipelineTest, MutualTlsRefusesValidCredentialsWithoutACertificate) {
  std::vector<std::string> argv = {Binaries::fromBuild().cli, "--nats-url", hub_->nats().url()};
  for (const auto& flag : hub_->natsFlags("readonly")) {
    if (startsWith(flag, "--nats-cert") || startsWith(flag, "--nats-key")) {
      break;  // the certificate flags come last
    }
    argv.push_back(flag);
  }
  argv.insert(argv.end(), {"get", "clusters"});
  auto refused = runCommand({.argv = argv, .timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(refused.ok()) << refused.error().describe();
  EXPECT_NE(refused->exit_code, 0) << refused->out;
  EXPECT_NE(refused->err.find("without a client certificate"), std::string::npos) << refused->err;
  EXPECT_NE(hub_->nats().logText().find("TLS handshake error"), std::string::npos) << hub_->nats().logTail();

  // Both agents registered (run alone, this test may start before they have).
  std::string listed;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto with_cert = hub_->cli({"get", "clusters"});
        listed = with_cert.ok() ? with_cert->out + with_cert->err : with_cert.error().describe();
        return with_cert.ok() && with_cert->exit_code == 0 && listed.find(hub_->clusterName(0)) != std::string::npos &&
               listed.find(hub_->clusterName(1)) != std::string::npos;
      },
      kLands))
      << listed;
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
  auto applied = hub_->apply(gitRepoYaml(name, repo->http, {"app"}, targets));
  ASSERT_TRUE(applied.ok()) << applied.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *commit, {hub_->clusterName(0)}); }, kLands));
  EXPECT_TRUE(configMapExists(*hub_, 0, ns, "only"));
  EXPECT_TRUE(bundlesOn(*hub_, hub_->clusterName(1), name).empty()) << "cluster 2 must not be targeted";
  EXPECT_TRUE(configMapGone(*hub_, 1, ns, "only"));
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
  auto applied = hub_->apply(gitRepoYaml(name, repo->http, {"good", "bad"}));
  ASSERT_TRUE(applied.ok()) << applied.error().describe();

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

// A helm wrapper for the bundler that, while the file `gate` exists, writes the id of the process that ran it
// (the bundler) to `inside` and waits: a render that the test holds open, so it can kill the bundler inside it.
Result<std::string> gatedHelm(const std::string& dir, const std::string& real_helm) {
  const std::string wrapper = dir + "/helm";
  FLOTILLA_TRY(writeFile(wrapper, "#!/bin/sh\nif [ -e '" + dir + "/gate' ]; then\n  echo $PPID > '" + dir +
                                      "/inside.tmp' && mv '" + dir + "/inside.tmp' '" + dir + "/inside'\n" +
                                      "  while [ -e '" + dir + "/gate' ]; do sleep 0.05; done\nfi\nexec '" + real_helm +
                                      "' \"$@\"\n"));
  if (::chmod(wrapper.c_str(), 0755) != 0) {
    return fail(ErrorKind::kInternal, "chmod " + wrapper);
  }
  return wrapper;
}

// Declared as the last PipelineTest, since it removes cluster 1 (which enrolled with a registration token):
// `flotilla auth revoke` refuses a registered cluster, and after `flotilla delete cluster` (with --wait for the
// cascade) revokes the credentials the registrar gave its agent at the server, which closes the agent's connection
// (docs/pipeline.md "Registration tokens", "Revocation"); the other cluster's agent and the hub keep working.
TEST_F(PipelineTest, ADeregisteredEnrolledClusterIsRevokedAtTheServer) {
  const std::string gone = hub_->clusterName(1);
  auto revoke = [&] {
    return runCommand({.argv = {Binaries::fromBuild().cli, "auth", "revoke", "--dir", hub_->authDir(), "--cluster",
                                gone, "--wait", "90s", "--nats-url", hub_->nats().url()},
                       .timeout = std::chrono::seconds(120)});
  };
  auto registered = runCommand({.argv = {Binaries::fromBuild().cli, "auth", "revoke", "--dir", hub_->authDir(),
                                         "--cluster", gone, "--nats-url", hub_->nats().url()}});
  ASSERT_TRUE(registered.ok());
  EXPECT_EQ(registered->exit_code, 1);
  EXPECT_NE(registered->err.find("is not deregistered"), std::string::npos) << registered->err;

  ASSERT_TRUE(Hub::waitFor(
      [&] {
        auto listed = hub_->cli({"get", "clusters"});
        return listed.ok() && listed->out.find(gone) != std::string::npos;
      },
      kLands))
      << "the enrolled agent must have registered";
  auto deleted = hub_->cli({"delete", "cluster", gone});
  ASSERT_TRUE(deleted.ok() && deleted->exit_code == 0) << (deleted.ok() ? deleted->err : deleted.error().describe());
  auto revoked = revoke();
  ASSERT_TRUE(revoked.ok());
  ASSERT_EQ(revoked->exit_code, 0) << revoked->err << hub_->allLogs();
  auto store = readFile(hub_->dir() + "/agent-1-store.creds");
  ASSERT_TRUE(store.ok());
  auto key = identity::credsUserKey(*store);
  ASSERT_TRUE(key.ok());
  EXPECT_NE(revoked->out.find(*key), std::string::npos) << "the agent's current key: " << revoked->out;
  EXPECT_TRUE(Hub::waitFor(
      [&] { return hub_->logTail("agent-1", 200).find("User Authentication Revoked") != std::string::npos; },
      std::chrono::seconds(30)))
      << hub_->logTail("agent-1");
  EXPECT_EQ(hub_->logTail("agent-0", 400).find("User Authentication Revoked"), std::string::npos);
  auto listed = hub_->cli({"get", "clusters"});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->exit_code, 0) << listed->err;
  EXPECT_NE(listed->out.find(hub_->clusterName(0)), std::string::npos) << listed->out;
}

// kill -9 of the bundler and of one agent while a commit is in flight: after restart the commit lands exactly
// once on both clusters — one bundle event per bundle and one deploy event per cluster and bundle for it
// (JetStream drops a republished message whose Nats-Msg-Id it already stored), and the objects carry the new
// content. The kill provably happens inside the commit: the bundler is stopped while it renders the commit's Helm
// bundle (a gated helm wrapper reports the bundler's pid and holds the render open), not before it received the commit
// or after it finished.
TEST(PipelineCrashTest, KillNineOfBundlerAndAgentMidCommitLandsExactlyOnce) {
  auto gate_dir = makeTempDir("e2e-gate");
  ASSERT_TRUE(gate_dir.ok());
  std::string tools = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
  auto helm = gatedHelm(*gate_dir, tools + "/helm");
  ASSERT_TRUE(helm.ok()) << helm.error().describe();
  auto started = Hub::start({.helm_binary = *helm});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  std::string name = "crash-" + randomHex(3);
  std::string ns = "ns-" + name;
  auto repo = hub.git().createRepo(name);
  ASSERT_TRUE(repo.ok());
  const std::string chart_cm =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-chart\ndata:\n  value: "
      "{{ .Values.value | quote }}\n";
  auto first = hub.git().commitFiles(name, "main",
                                     {{"app/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                      {"app/ns.yaml", namespaceYaml(ns)},
                                      {"app/cm.yaml", configMap("c", "v1")},
                                      {"chart/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                      {"chart/Chart.yaml", "apiVersion: v2\nname: crash-chart\nversion: 0.1.0\n"},
                                      {"chart/values.yaml", "value: v1\n"},
                                      {"chart/templates/cm.yaml", chart_cm}},
                                     "first");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(hub.apply(gitRepoYaml(name, repo->http, {"app", "chart"})).ok());
  // Both bundles (the raw one and the Helm one): the events are counted per bundle below.
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, both, 2); }, kLands)) << hub.allLogs();

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
  std::vector<std::string> bundle_subjects = {"flotilla.bundle.fleet-default." + name + "-app",
                                              "flotilla.bundle.fleet-default." + name + "-chart"};
  std::vector<uint64_t> bundles_before;
  for (const auto& subject : bundle_subjects) {
    bundles_before.push_back(count("FLOTILLA_BUNDLES", subject));
  }
  std::vector<uint64_t> deploys_before;
  for (const auto& cluster : both) {
    deploys_before.push_back(count("FLOTILLA_DEPLOY", "flotilla.deploy." + cluster));
  }

  // Close the gate, commit, and wait until the bundler is inside the render of this commit's Helm bundle.
  ASSERT_TRUE(writeFile(*gate_dir + "/gate", "closed\n").ok());
  auto second = hub.git().commitFiles(
      name, "main", {{"app/cm.yaml", configMap("c", "v2")}, {"chart/values.yaml", "value: v2\n"}}, "second");
  ASSERT_TRUE(second.ok());
  const int bundler_pid = hub.pid("bundler");
  ASSERT_TRUE(Hub::waitFor([&] { return readFile(*gate_dir + "/inside").ok(); }, std::chrono::seconds(60)))
      << "the bundler never started rendering the second commit\n"
      << hub.allLogs();
  auto inside = readFile(*gate_dir + "/inside");
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(std::atoi(inside->c_str()), bundler_pid) << "helm must have been started by the running bundler";
  EXPECT_EQ(count("FLOTILLA_BUNDLES", bundle_subjects[1]), bundles_before[1])
      << "the Helm bundle's event must not exist yet: the commit is still being rendered";
  hub.kill9("bundler");
  hub.kill9("agent-0");
  EXPECT_FALSE(hub.running("bundler"));
  removeAll(*gate_dir + "/gate");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(hub.startService("bundler").ok());
  ASSERT_TRUE(hub.startService("agent-0").ok());

  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, both); }, kLands)) << hub.allLogs();
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(hub, c, ns, "c", "value"), "v2") << "cluster " << c;
    EXPECT_EQ(configMapValue(hub, c, ns, "from-chart", "value"), "v2") << "cluster " << c;
  }
  for (size_t b = 0; b < bundle_subjects.size(); ++b) {
    EXPECT_EQ(count("FLOTILLA_BUNDLES", bundle_subjects[b]), bundles_before[b] + 1)
        << bundle_subjects[b] << ": the bundle event must exist exactly once";
  }
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(count("FLOTILLA_DEPLOY", "flotilla.deploy." + both[c]), deploys_before[c] + 2)
        << "one deploy event per bundle for " << both[c] << ", exactly once";
  }
  removeAll(*gate_dir);
}

}  // namespace
}  // namespace flotilla::e2e
