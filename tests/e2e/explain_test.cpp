// End-to-end (issue 17): `flotilla explain`, `flotilla wait` and `flotilla get -w` against a real hub, run with the
// read-only identity (they only read KV). One case per stuck kind, each produced the way a user meets it: git
// credentials that cannot be found, a fleet.yaml the bundler refuses, targets no cluster matches, a bundle waiting
// on its dependsOn, an object one cluster's API server refuses, an agent killed, a rollout halted by a failing
// cluster. Each checks explain's blocked.stage, a key phrase of its next action, and that the JSON is within 1 KB.
#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class ExplainTest : public SharedHubTest<ExplainTest> {
 public:
  // Heartbeats every 2 s, so a killed agent's cluster is Offline after 6 s.
  static HubOptions hubOptions() {
    return {.services = {{"scheduler", {.flags = {"--agent-heartbeat-interval", "2"}}},
                         {"agent", {.flags = {"--heartbeat-interval", "2s"}}}},
            .secure = true};
  }

 protected:
  //! The CLI with the read-only identity.
  static Result<CommandResult> readonly(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {Binaries::fromBuild().cli, "--nats-url", hub().natsUrl()};
    for (auto& flag : hub().natsFlags("readonly")) {
      argv.push_back(std::move(flag));
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand({.argv = argv, .timeout = std::chrono::seconds(150)});
  }

  //! `explain <subject>`'s JSON (null when it failed); its size in bytes goes to `bytes`.
  static Json explained(const std::string& subject, size_t* bytes = nullptr) {
    auto ran = readonly({"explain", subject});
    if (!ran.ok() || ran->exit_code != 0) {
      return Json();
    }
    if (bytes != nullptr) {
      *bytes = trim(ran->out).size();
    }
    auto json = Json::parse(ran->out);
    return json.ok() ? *json : Json();
  }

  static std::string blockedStage(const Json& json) {
    const Json* stage = json.at({"blocked", "stage"});
    return stage != nullptr && stage->isString() ? stage->asString() : std::string();
  }

  //! Waits until explain says `subject` blocks at `stage` with a next action starting with `next` (a stage passes
  //! through other states on its way: an apply is WaitApplied before it is ErrApplied); then checks the size.
  static Json explainedAt(const std::string& subject, const std::string& stage, const std::string& next) {
    Json json;
    size_t bytes = 0;
    const bool reached = Hub::waitFor(
        [&] {
          json = explained(subject, &bytes);
          return blockedStage(json) == stage && json.getString("next").rfind(next, 0) == 0;
        },
        kLands);
    EXPECT_TRUE(reached) << subject << " never blocked at " << stage << " with next \"" << next
                         << "...\"; last: " << json.dump();
    EXPECT_LE(bytes, 1024u) << json.dump();
    return json;
  }

  static std::string repoWithApp(const std::string& name, const std::map<std::string, std::string>& files) {
    PushedRepo pushed = pushRepo(hub(), name, files);
    return pushed.url;
  }
};

std::string nextOf(const Json& json) {
  return json.getString("next");
}

// A healthy GitRepo: `wait --for=ready` returns 0 once it is Ready on both clusters; explain by name, by bundle
// and by a 7-character commit prefix says Ready; `get gitrepos -w` printed its rows as it progressed.
TEST_F(ExplainTest, AHealthyGitRepoIsReadyAndWaitReturnsWhenItIs) {
  const std::string name = "ok-" + randomHex(3);
  const std::string log = hub().dir() + "/get-watch-" + name + ".log";
  std::vector<std::string> argv = {Binaries::fromBuild().cli, "--nats-url", hub().natsUrl()};
  for (auto& flag : hub().natsFlags("readonly")) {
    argv.push_back(std::move(flag));
  }
  argv.insert(argv.end(), {"get", "gitrepos", "-w", "-n", "fleet-default"});
  auto watching = Process::start({.argv = argv, .output_file = log});
  ASSERT_TRUE(watching.ok()) << watching.error().describe();

  // The suite's first test: both clusters registered with the scheduler before the GitRepo comes (a cluster whose
  // agent has not registered yet is not known to the hub, so explain and wait do not count it).
  for (const auto& cluster : clusters()) {
    auto registered = readonly({"wait", "cluster", cluster, "--timeout", "60s"});
    ASSERT_TRUE(registered.ok());
    ASSERT_EQ(registered->exit_code, 0) << registered->err;
  }
  auto commit = applyConfigMapRepo(hub(), name);
  ASSERT_TRUE(commit.ok()) << commit.error().describe();
  auto waited = readonly({"wait", "gitrepo", name, "--for=ready", "--timeout", "90s"});
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->exit_code, 0) << waited->out << waited->err;
  EXPECT_NE(waited->out.find("condition met"), std::string::npos) << waited->out;
  EXPECT_TRUE(readyEverywhere(hub(), name, *commit, clusters())) << "wait returned before the GitRepo was Ready";

  size_t bytes = 0;
  Json json = explained(name, &bytes);
  EXPECT_TRUE(json.getBool("ready")) << json.dump();
  EXPECT_EQ(json.getString("commit"), *commit);
  EXPECT_LE(bytes, 1024u);
  EXPECT_TRUE(explained("bundle/" + name + "-app").getBool("ready"));
  Json by_commit = explained(commit->substr(0, 7));
  EXPECT_EQ(by_commit.getString("subject"), "gitrepo fleet-default/" + name) << by_commit.dump();
  auto human = readonly({"explain", name, "-o", "human"});
  ASSERT_TRUE(human.ok());
  EXPECT_NE(human->out.find(": Ready\n"), std::string::npos) << human->out;

  // The watch printed a row for the GitRepo once both deployments were Ready.
  auto rowReady = [&] {
    auto text = readFile(log);
    if (!text.ok()) {
      return false;
    }
    for (const auto& line : split(*text, '\n')) {
      if (line.find(name) != std::string::npos && line.find("2/2") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(Hub::waitFor(rowReady, std::chrono::seconds(30))) << (readFile(log).ok() ? *readFile(log) : "");
  watching->stop(std::chrono::seconds(5));
}

TEST_F(ExplainTest, GitCredentialsThatCannotBeReadBlockThePoll) {
  const std::string name = "auth-" + randomHex(3);
  const std::string url = repoWithApp(name, {{"app/cm.yaml", configMap("c", "v1")}});
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(
      hub().apply(gitRepoYaml(name, url, {"app"}) + "  clientSecretName: git-creds\n  insecureAllowHTTP: true\n").ok());
  explainedAt(name, "poll", "check the credentials in secret \"git-creds\" for workspace fleet-default");
  // Nothing but a change of the credentials helps: wait says so (exit 4, after 3 s) instead of running out its time.
  auto waited = readonly({"wait", "gitrepo", name, "--timeout", "60s"});
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->exit_code, 4) << waited->err;
  EXPECT_NE(waited->err.find("poll: poll failed"), std::string::npos) << waited->err;
}

TEST_F(ExplainTest, ARenderErrorBlocksTheRenderAndNamesTheFile) {
  const std::string name = "render-" + randomHex(3);
  const std::string url = repoWithApp(name, {{"app/fleet.yaml", "defaultNamespace: ns-" + name + "\nbogusField: 1\n"},
                                             {"app/cm.yaml", configMap("c", "v1")}});
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, url, {"app"})).ok());
  Json json = explainedAt(name, "render", "fix app/fleet.yaml:");
  EXPECT_NE(nextOf(json).find("bogusField"), std::string::npos) << json.dump();
}

TEST_F(ExplainTest, TargetsNoClusterMatchesBlockTheTarget) {
  const std::string name = "nowhere-" + randomHex(3);
  const std::string url = repoWithApp(name, {{"app/cm.yaml", configMap("c", "v1")}});
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(hub()
                  .apply(gitRepoYaml(name, url, {"app"},
                                     "  targets:\n  - clusterSelector:\n      matchLabels:\n        env: nowhere\n"))
                  .ok());
  explainedAt(name, "target", "no cluster matches targets");
}

// app dependsOn db, a LoadBalancer Service that stays NotReady (no load balancer controller gives it an address).
TEST_F(ExplainTest, ABundleWaitingOnItsDependencyNamesItAndWaitTimesOut) {
  const std::string name = "dep-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string db = bundleId(name, "db");
  const std::string lb =
      "apiVersion: v1\nkind: Service\nmetadata:\n  name: db\nspec:\n  type: LoadBalancer\n"
      "  selector:\n    app: db\n  ports:\n  - port: 5432\n";
  const std::string url = repoWithApp(
      name, merged(bundleFiles("db", ns, {{"svc", lb}}),
                   bundleFiles("app", ns, {{"cm", configMap("app", "1")}}, "dependsOn:\n- name: " + db + "\n")));
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, url, {"db", "app"})).ok());
  Json json = explainedAt("bundle/" + bundleId(name, "app"), "apply", "waiting on bundle " + db + " (dependsOn)");
  EXPECT_FALSE(json.at({"blocked", "needsChange"})->asBool());

  auto waited = readonly({"wait", "bundle", bundleId(name, "app"), "--for=ready", "--timeout", "5s"});
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->exit_code, 3) << waited->err;
  EXPECT_NE(waited->err.find("timed out after 5s"), std::string::npos) << waited->err;
  EXPECT_NE(waited->err.find("(dependsOn)"), std::string::npos) << waited->err;
}

// A targetCustomization for cluster 0 overlays the ConfigMap with one its API server refuses.
TEST_F(ExplainTest, ErrAppliedOnOneClusterNamesThatCluster) {
  const std::string name = "err-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string c0 = hub().clusterName(0);
  const std::string fleet = "defaultNamespace: " + ns +
                            "\ntargetCustomizations:\n- name: broken\n  clusterName: " + c0 +
                            "\n  yaml:\n    overlays: [broken]\n";
  const std::string url = repoWithApp(
      name, {{"app/fleet.yaml", fleet},
             {"app/cm.yaml", configMap("c", "v1")},
             {"app/overlays/broken/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: 5\n"}});
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, url, {"app"})).ok());
  Json json = explainedAt(name, "apply", "cluster " + c0 + ": ");
  const Json* listed = json.at({"blocked", "clusters"});
  ASSERT_TRUE(listed != nullptr && listed->isArray()) << json.dump();
  ASSERT_EQ(listed->asArray().size(), 1u) << json.dump();
  EXPECT_EQ(listed->asArray()[0].asString(), c0);
}

// maxUnavailable 1: one cluster at a time. The second commit fails on the first cluster it reaches; the other is
// held and the rollout halts.
TEST_F(ExplainTest, ARolloutHaltedByAFailingClusterBlocksTheDeploy) {
  const std::string name = "roll-" + randomHex(3);
  const std::string ns = "ns-" + name;
  auto files = bundleFiles("app", ns, {{"cm", configMap("c", "v1")}}, "rolloutStrategy:\n  maxUnavailable: 1\n");
  deployGitRepo(hub(), name, files, {"app"});
  ASSERT_FALSE(HasFailure());
  auto broken = hub().git().commitFiles(
      name, "main", {{"app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: 5\n"}}, "broken");
  ASSERT_TRUE(broken.ok());
  Json json = explainedAt(name, "deploy", "rollout halted at partition");
  EXPECT_TRUE(json.at({"blocked", "needsChange"})->asBool()) << json.dump();
}

// Last: it kills agent 0. A commit while it is away cannot reach cluster 0; explain names the agent and when it was
// last seen, `wait cluster` times out; back, the GitRepo is Ready again.
TEST_F(ExplainTest, AnOfflineClusterNamesItsAgent) {
  const std::string name = "off-" + randomHex(3);
  auto first = applyConfigMapRepo(hub(), name);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, *first, clusters()); }, kLands));
  const std::string c0 = hub().clusterName(0);
  hub().kill9("agent-0");
  auto second = hub().git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  explainedAt(name, "apply", "agent of " + c0 + " offline since");
  auto waited = readonly({"wait", "cluster", c0, "--timeout", "3s"});
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->exit_code, 3) << waited->err;
  EXPECT_NE(waited->err.find("is Offline: the agent has given no sign of life since"), std::string::npos)
      << waited->err;

  ASSERT_TRUE(hub().startService("agent-0").ok());
  auto back = readonly({"wait", "gitrepo", name, "--timeout", "90s"});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->exit_code, 0) << back->err;
}

}  // namespace
}  // namespace flotilla::e2e
