// Unit tests of `flotilla explain`'s reasoning over hand-built records (explain.h: a snapshot in, an explanation
// out): one case per stuck kind, the 1 KB cap, naming the subject, a cluster's readiness for `wait`, and the usage
// errors of explain, wait and get -w (no NATS needed).
#include "flotilla/cli/explain.h"

#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "run_captured.h"

namespace flotilla::cli {
namespace {

constexpr const char* kWs = "fleet-default";
constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kBundle = "demo-app";

model::GitRepo gitRepo(const std::string& name, const std::string& extra_spec = "") {
  return model::decodeGitRepo(Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo",
      "metadata":{"name":")" + name + R"(","namespace":"fleet-default"},
      "spec":{"repo":"https://git.example/demo","paths":["app"])" +
                                          extra_spec + "}}")
                                  .value())
      .value();
}

model::Cluster registration(const std::string& name) {
  model::Cluster cluster;
  cluster.metadata.name = name;
  cluster.metadata.ns = kWs;
  return cluster;
}

events::BundleEvent lastGood() {
  events::BundleEvent event;
  event.workspace = kWs;
  event.gitrepo = "demo";
  event.bundle = kBundle;
  event.commit = kCommit;
  event.manifest_id = "aaaa";
  return event;
}

//! GitRepo demo at kCommit, bundle demo-app rendered and Ready on c1 and c2.
Snapshot healthy() {
  Snapshot snap;
  snap.gitrepos.push_back(gitRepo("demo"));
  snap.poll_statuses[events::gitRepoStatusKey(kWs, "demo")] =
      events::PollStatus{.workspace = kWs,
                         .gitrepo = "demo",
                         .commit = kCommit,
                         .polling_commit = kCommit,
                         .last_poll_time = "2026-12-06T08:00:00.000Z"};
  snap.bundles[events::bundleKey(kWs, kBundle)] = events::BundleRecord{.workspace = kWs,
                                                                       .gitrepo = "demo",
                                                                       .bundle = kBundle,
                                                                       .path = "app",
                                                                       .commit = kCommit,
                                                                       .last_good = lastGood()};
  snap.bundle_summaries[events::bundleSummaryKey(kWs, kBundle)] = events::BundleSummary{
      .workspace = kWs, .bundle = kBundle, .state = "Ready", .gitrepo = "demo", .commit = kCommit};
  for (const char* cluster : {"c1", "c2"}) {
    snap.clusters.push_back(registration(cluster));
    snap.cluster_summaries[events::clusterSummaryKey(cluster)] =
        events::ClusterSummary{.cluster = cluster, .state = "Ready", .registered = true};
    snap.deployments.push_back(events::DeploymentRecord{.cluster = cluster,
                                                        .workspace = kWs,
                                                        .bundle = kBundle,
                                                        .gitrepo = "demo",
                                                        .commit = kCommit,
                                                        .deployment_id = "aaaa:oooo",
                                                        .generation = 1});
    snap.bd_statuses[events::deploymentKey(cluster, kWs, kBundle)] = events::BdStatus{.cluster = cluster,
                                                                                      .workspace = kWs,
                                                                                      .bundle = kBundle,
                                                                                      .deployment_id = "aaaa:oooo",
                                                                                      .generation = 1,
                                                                                      .state = "Ready"};
  }
  return snap;
}

ExplainSubject demo() {
  return {.kind = ExplainSubject::Kind::kGitRepo, .workspace = kWs, .name = "demo", .gitrepo = "demo"};
}

events::BdStatus& reportOf(Snapshot& snap, const std::string& cluster) {
  return snap.bd_statuses[events::deploymentKey(cluster, kWs, kBundle)];
}

//! The explanation as JSON, checked to be within 1 KB.
Json explainedJson(const Snapshot& snap, const ExplainSubject& subject) {
  std::string text = explanationJson(explain(snap, subject));
  EXPECT_LE(text.size(), 1024u) << text;
  auto json = Json::parse(text);
  EXPECT_TRUE(json.ok()) << text;
  return json.ok() ? *json : Json();
}

TEST(ExplainTest, AHealthyGitRepoIsReadyAtEveryStage) {
  Explanation e = explain(healthy(), demo());
  EXPECT_FALSE(e.blocked);
  EXPECT_EQ(e.commit, kCommit);
  ASSERT_EQ(e.stages.size(), 5u);
  for (const auto& stage : e.stages) {
    EXPECT_EQ(stage.state, "Ready") << stage.stage << ": " << stage.detail;
  }
  EXPECT_EQ(e.stages[4].detail, "Ready on 2 clusters (2 deployments)");
  Json json = explainedJson(healthy(), demo());
  EXPECT_TRUE(json.getBool("ready"));
  EXPECT_TRUE(json.find("blocked")->isNull());
  EXPECT_EQ(json.getString("subject"), "gitrepo fleet-default/demo");
}

TEST(ExplainTest, GitAuthenticationFailureBlocksThePollAndNamesTheSecret) {
  Snapshot snap = healthy();
  snap.gitrepos.front() = gitRepo("demo", R"(,"clientSecretName":"git-creds")");
  auto& poll = snap.poll_statuses[events::gitRepoStatusKey(kWs, "demo")];
  poll.last_error =
      "GitRepo fleet-default/demo (clientSecretName \"git-creds\"): authentication failed for "
      "https://git.example/demo";
  poll.last_error_kind = "permanent";
  Json json = explainedJson(snap, demo());
  EXPECT_EQ(json.at({"blocked", "stage"})->asString(), "poll");
  EXPECT_TRUE(json.at({"blocked", "needsChange"})->asBool());
  EXPECT_EQ(
      json.getString("next").rfind("check the credentials in secret \"git-creds\" for workspace fleet-default", 0), 0u)
      << json.getString("next");
}

TEST(ExplainTest, AnUnreachableGitHostIsWaitedFor) {
  Snapshot snap = healthy();
  auto& poll = snap.poll_statuses[events::gitRepoStatusKey(kWs, "demo")];
  poll.last_error = "cannot connect to git.example: connection refused";
  poll.last_error_kind = "transient";
  poll.next_poll_time = "2026-12-06T08:01:00.000Z";
  Explanation e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "poll");
  EXPECT_FALSE(e.blocked->needs_change);
  EXPECT_NE(e.next.find("retries at 2026-12-06T08:01:00.000Z"), std::string::npos) << e.next;
}

TEST(ExplainTest, ARenderErrorBlocksTheRenderWithFileAndLine) {
  Snapshot snap = healthy();
  snap.bundles.begin()->second.error = events::RenderError{
      .file = "app/fleet.yaml", .line = 3, .message = "app/fleet.yaml:3: helm.chart: expected a string"};
  Json json = explainedJson(snap, demo());
  EXPECT_EQ(json.at({"blocked", "stage"})->asString(), "render");
  EXPECT_EQ(json.getString("next"), "fix app/fleet.yaml: helm.chart: expected a string");
  EXPECT_NE(json.at({"blocked", "reason"})->asString().find("app/fleet.yaml:3:"), std::string::npos);
  EXPECT_TRUE(json.at({"blocked", "needsChange"})->asBool());
}

//! The bundle's last good render targets `targets_json` (a list of GitTargets) and has `customizations`.
void retarget(Snapshot& snap, const std::string& targets_json,
              std::vector<events::TargetManifest> customizations = {}) {
  auto& event = *snap.bundles.begin()->second.last_good;
  event.targets = Json::parse(targets_json).value();
  event.customizations = std::move(customizations);
}

TEST(ExplainTest, NoClusterTargetedBlocksTheTarget) {
  Snapshot snap = healthy();
  snap.deployments.clear();
  snap.bd_statuses.clear();
  retarget(snap, R"([{"clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  Explanation e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "target");
  EXPECT_TRUE(e.blocked->needs_change);
  EXPECT_EQ(e.next.rfind("no cluster matches targets: label a cluster or change spec.targets", 0), 0u) << e.next;
  EXPECT_EQ(e.stages[2].detail, "0 of 2 registered clusters targeted");

  // Before the scheduler has looked at the bundle, it is only pending.
  snap.bundle_summaries.clear();
  e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "target");
  EXPECT_FALSE(e.blocked->needs_change);
}

// A registered cluster the bundle targets (Fleet's default target: every cluster of the workspace) but which the
// scheduler has not placed it on yet keeps the GitRepo and the bundle from being Ready, though every deployment
// there is Ready: `wait` must not return before it has its deployment.
TEST(ExplainTest, ATargetedClusterWithoutADeploymentIsPending) {
  Snapshot snap = healthy();
  snap.clusters.push_back(registration("c3"));
  for (const auto& subject :
       {demo(),
        ExplainSubject{.kind = ExplainSubject::Kind::kBundle, .workspace = kWs, .name = kBundle, .gitrepo = "demo"}}) {
    Explanation e = explain(snap, subject);
    ASSERT_TRUE(e.blocked) << e.subject;
    EXPECT_EQ(e.blocked->stage, "target");
    EXPECT_FALSE(e.blocked->needs_change);
    EXPECT_EQ(e.blocked->clusters, std::vector<std::string>{"c3"});
    EXPECT_EQ(e.blocked->reason, "bundle demo-app targets cluster c3 but is not placed there yet");
    EXPECT_EQ(e.stages[2].state, "Pending");
    EXPECT_EQ(e.stages[2].detail, "2 deployments on 2 clusters; 1 targeted cluster without a deployment yet");
    EXPECT_EQ(e.next, "wait for the scheduler to place it (is flotilla-scheduler running?)");
    EXPECT_EQ(e.stages[4].detail, "Ready on 2 clusters (2 deployments)") << "the placed ones are Ready";
  }
  // Placed there: Ready.
  snap.deployments.push_back(snap.deployments.front());
  snap.deployments.back().cluster = "c3";
  snap.bd_statuses[events::deploymentKey("c3", kWs, kBundle)] = reportOf(snap, "c1");
  snap.bd_statuses[events::deploymentKey("c3", kWs, kBundle)].cluster = "c3";
  EXPECT_FALSE(explain(snap, demo()).blocked);

  // Before the scheduler placed anything, every targeted cluster is awaited (Pending, not "no cluster matches").
  snap.deployments.clear();
  snap.bd_statuses.clear();
  Explanation e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "target");
  EXPECT_FALSE(e.blocked->needs_change);
  EXPECT_EQ(e.blocked->clusters, (std::vector<std::string>{"c1", "c2", "c3"}));
  EXPECT_EQ(e.blocked->reason, "bundle demo-app targets cluster c1 but is not placed there yet (and 2 more)");
}

// Clusters the targets leave out are not awaited: another label, a doNotDeploy customization, a ClusterGroup that
// excludes them, another workspace, a cluster being deregistered. The admin's Cluster document decides the labels.
TEST(ExplainTest, ClustersTheTargetsLeaveOutAreNotAwaited) {
  Snapshot snap = healthy();
  for (auto& cluster : snap.clusters) {
    cluster.metadata.labels["env"] = "prod";
  }
  auto add = [&](const std::string& name, const std::string& env) {
    snap.clusters.push_back(registration(name));
    snap.clusters.back().metadata.labels["env"] = env;
  };
  add("dev-1", "dev");
  retarget(snap, R"([{"clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  EXPECT_FALSE(explain(snap, demo()).blocked) << explanationJson(explain(snap, demo()));

  // The admin's document relabels dev-1 as prod: now it is awaited.
  model::Cluster document = registration("dev-1");
  document.metadata.labels["env"] = "prod";
  snap.cluster_specs["dev-1"] = document;
  auto e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->clusters, std::vector<std::string>{"dev-1"});
  // Targets that do not decode are refused by the scheduler too (it terminates the bundle event): nothing awaited.
  retarget(snap, R"([{"clusterSelector":5}])");
  EXPECT_FALSE(explain(snap, demo()).blocked);
  // A doNotDeploy customization for dev-1 keeps the bundle off it (FirstMatch).
  retarget(snap, R"([{"clusterSelector":{"matchLabels":{"env":"prod"}}}])",
           {events::TargetManifest{.name = "skip-dev-1",
                                   .target = Json::parse(R"({"clusterName":"dev-1","doNotDeploy":true})").value()}});
  EXPECT_FALSE(explain(snap, demo()).blocked);
  // ... or it is being deregistered.
  retarget(snap, R"([{"clusterSelector":{"matchLabels":{"env":"prod"}}}])");
  snap.deregistrations["dev-1"] = events::ClusterDeregistration{.cluster = "dev-1"};
  EXPECT_FALSE(explain(snap, demo()).blocked);
  snap.deregistrations.clear();
  snap.cluster_specs.clear();

  // A cluster of another workspace is never targeted.
  snap.clusters.push_back(registration("other-ws"));
  snap.clusters.back().metadata.ns = "team-b";
  snap.clusters.back().metadata.labels["env"] = "prod";
  EXPECT_FALSE(explain(snap, demo()).blocked);

  // Fleet's default target is the "default" ClusterGroup: once the workspace defines one that selects only prod,
  // dev-1 is not awaited; one that selects dev too makes it awaited.
  retarget(snap, "[]");
  auto group = [&](const std::string& selector) {
    snap.groups = {
        model::decodeClusterGroup(Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"ClusterGroup",
                           "metadata":{"name":"default","namespace":"fleet-default"},"spec":{"selector":)" +
                                              selector + "}}")
                                      .value())
            .value()};
  };
  group(R"({"matchLabels":{"env":"prod"}})");
  EXPECT_FALSE(explain(snap, demo()).blocked);
  group("{}");
  e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->clusters, std::vector<std::string>{"dev-1"});
}

TEST(ExplainTest, WaitingOnADependencyNamesIt) {
  Snapshot snap = healthy();
  auto& report = reportOf(snap, "c1");
  report.state = "WaitApplied";
  report.reason = "DependenciesNotReady";
  report.message = "waiting for dependencies: bundle demo-db is NotReady (accepted: Ready)";
  ExplainSubject bundle{.kind = ExplainSubject::Kind::kBundle, .workspace = kWs, .name = kBundle, .gitrepo = "demo"};
  Json json = explainedJson(snap, bundle);
  EXPECT_EQ(json.getString("subject"), "bundle fleet-default/demo-app");
  EXPECT_EQ(json.at({"blocked", "stage"})->asString(), "apply");
  EXPECT_FALSE(json.at({"blocked", "needsChange"})->asBool());
  EXPECT_EQ(json.getString("next"),
            "waiting on bundle demo-db (dependsOn): it is NotReady (accepted: Ready) on cluster c1");
}

TEST(ExplainTest, ErrAppliedOnOneClusterNamesItAndItsMessage) {
  Snapshot snap = healthy();
  auto& report = reportOf(snap, "c2");
  report.state = "ErrApplied";
  report.reason = "ApplyFailed";
  report.message = "ConfigMap ns/broken: data: expected a map";
  Explanation e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "apply");
  EXPECT_EQ(e.blocked->clusters, std::vector<std::string>{"c2"});
  EXPECT_TRUE(e.blocked->needs_change);
  EXPECT_EQ(e.next, "cluster c2: ConfigMap ns/broken: data: expected a map (fix it with a new commit)");
  EXPECT_EQ(e.stages[4].detail, "1/2 Ready; c2 ErrApplied");
}

TEST(ExplainTest, ADependencyCycleSaysToBreakIt) {
  Snapshot snap = healthy();
  auto& report = reportOf(snap, "c1");
  report.state = "ErrApplied";
  report.reason = "DependencyCycle";
  report.message = "dependsOn cycle: fleet-default/a → fleet-default/b → fleet-default/a";
  Explanation e = explain(snap, demo());
  EXPECT_EQ(e.next.rfind("break the dependsOn cycle", 0), 0u) << e.next;
}

TEST(ExplainTest, AnOfflineClusterIsNamedWithItsLastSignOfLife) {
  Snapshot snap = healthy();
  auto& report = reportOf(snap, "c1");
  report.deployment_id = "old:oooo";  // a newer deployment was sent while the agent was away
  auto& summary = snap.cluster_summaries[events::clusterSummaryKey("c1")];
  summary.offline = true;
  summary.state = "Offline";
  summary.last_seen = "2026-12-06T07:59:00.000Z";
  Json json = explainedJson(snap, demo());
  EXPECT_EQ(json.at({"blocked", "stage"})->asString(), "apply");
  EXPECT_EQ(json.getString("next").rfind("agent of c1 offline since 2026-12-06T07:59:00.000Z", 0), 0u)
      << json.getString("next");
  EXPECT_FALSE(json.at({"blocked", "needsChange"})->asBool());
}

TEST(ExplainTest, AHaltedRolloutBlocksTheDeployAtItsPartition) {
  Snapshot snap = healthy();
  reportOf(snap, "c1").state = "ErrApplied";
  reportOf(snap, "c1").message = "it broke";
  auto& held = snap.deployments[1];
  held.staged_deployment_id = "bbbb:oooo";
  held.staged_reason = std::string(events::kStagedByRollout);
  events::RolloutStatus rollout{.state = "Halted", .partition = "canary", .held = 1};
  rollout.halted_by.push_back({.cluster = "c1", .state = "ErrApplied", .message = "it broke"});
  snap.bundle_summaries.begin()->second.rollout = rollout;
  Json json = explainedJson(snap, demo());
  EXPECT_EQ(json.at({"blocked", "stage"})->asString(), "deploy");
  EXPECT_EQ(json.getString("next").rfind("rollout halted at partition canary: c1 (ErrApplied: it broke)", 0), 0u)
      << json.getString("next");
  EXPECT_TRUE(json.at({"blocked", "needsChange"})->asBool());
}

TEST(ExplainTest, APausedClusterHoldsTheDeploy) {
  Snapshot snap = healthy();
  snap.deployments[0].staged_deployment_id = "bbbb:oooo";
  snap.deployments[0].staged_reason = std::string(events::kStagedByPause);
  model::Cluster document = registration("c1");
  document.spec.paused = true;
  snap.cluster_specs["c1"] = document;
  Explanation e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "deploy");
  EXPECT_EQ(e.next, "unpause: set spec.paused: false on cluster c1");
}

// A new commit rendered but not yet placed: the deployments still show the last placement, which is not Ready yet.
TEST(ExplainTest, ARenderTheSchedulerHasNotPlacedIsPending) {
  Snapshot snap = healthy();
  snap.bundle_summaries.begin()->second.commit = "ffffffffffffffffffffffffffffffffffffffff";
  Explanation e = explain(snap, demo());
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "deploy");
  EXPECT_EQ(e.blocked->reason, "the scheduler has not placed bundle demo-app at 0123456 yet");
  EXPECT_FALSE(e.blocked->needs_change);
}

TEST(ExplainTest, AnOlderCommitIsSuperseded) {
  Snapshot snap = healthy();
  ExplainSubject old = demo();
  old.commit = "ffffffffffffffffffffffffffffffffffffffff";
  Explanation e = explain(snap, old);
  ASSERT_TRUE(e.blocked);
  EXPECT_EQ(e.blocked->stage, "poll");
  EXPECT_EQ(e.blocked->reason, "commit fffffff was superseded by 0123456");
}

// Hundreds of failing clusters with long messages still fit in 1 KB: lists are cut and counted.
TEST(ExplainTest, TheJsonNeverExceedsItsBudget) {
  Snapshot snap = healthy();
  snap.deployments.clear();
  snap.clusters.clear();  // the 300 below are placed; no registered cluster is left without a deployment
  for (int i = 0; i < 300; ++i) {
    const std::string cluster = "cluster-with-a-rather-long-name-" + std::to_string(i);
    snap.deployments.push_back(events::DeploymentRecord{
        .cluster = cluster, .workspace = kWs, .bundle = kBundle, .gitrepo = "demo", .deployment_id = "aaaa:oooo"});
    snap.bd_statuses[events::deploymentKey(cluster, kWs, kBundle)] =
        events::BdStatus{.cluster = cluster,
                         .workspace = kWs,
                         .bundle = kBundle,
                         .deployment_id = "aaaa:oooo",
                         .state = "ErrApplied",
                         .message = std::string(2000, 'x') + "\"quoted\" \xc3\xa9"};
  }
  Explanation e = explain(snap, demo());
  for (size_t budget : {1024u, 700u, 520u}) {
    std::string text = explanationJson(e, budget);
    EXPECT_LE(text.size(), budget);
    auto json = Json::parse(text);
    ASSERT_TRUE(json.ok()) << text;
    const Json* total = json->at({"blocked", "clustersTotal"});
    ASSERT_TRUE(total != nullptr && total->isInt()) << budget << ": " << text;
    EXPECT_EQ(total->asInt(), 300);
  }
  EXPECT_NE(explanationText(e).find("and 290 more"), std::string::npos);
}

TEST(ExplainTest, TheHumanFormHasOneLinePerStage) {
  Snapshot snap = healthy();
  reportOf(snap, "c2").state = "NotReady";
  reportOf(snap, "c2").message = "Deployment web: 1 of 3 replicas";
  std::string text = explanationText(explain(snap, demo()));
  EXPECT_EQ(text.rfind("gitrepo fleet-default/demo at 0123456789ab: blocked at apply\n", 0), 0u) << text;
  EXPECT_NE(text.find("  apply   Waiting  1/2 Ready; c2 NotReady\n"), std::string::npos) << text;
  EXPECT_NE(text.find("next: cluster c2: Deployment web: 1 of 3 replicas\n"), std::string::npos) << text;
}

TEST(ExplainResolveTest, GitReposBundlesAndCommits) {
  Snapshot snap = healthy();
  EXPECT_EQ(resolveSubject(snap, "demo", "").value().gitrepo, "demo");
  EXPECT_EQ(resolveSubject(snap, "fleet-default/demo", "").value().workspace, kWs);
  EXPECT_EQ(resolveSubject(snap, "gitrepo/demo", kWs).value().kind, ExplainSubject::Kind::kGitRepo);
  auto bundle = resolveSubject(snap, "bundle/demo-app", "");
  ASSERT_TRUE(bundle.ok());
  EXPECT_EQ(bundle->kind, ExplainSubject::Kind::kBundle);
  EXPECT_EQ(bundle->gitrepo, "demo");
  EXPECT_EQ(resolveSubject(snap, "demo-app", "").value().kind, ExplainSubject::Kind::kBundle);
  auto commit = resolveSubject(snap, "0123456", "");
  ASSERT_TRUE(commit.ok());
  EXPECT_EQ(commit->commit, kCommit);
  EXPECT_EQ(commit->gitrepo, "demo");
  EXPECT_EQ(resolveSubject(snap, "commit/0123456789", "").value().commit, kCommit);

  EXPECT_EQ(resolveSubject(snap, "nothing", "").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(resolveSubject(snap, "demo", "other").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(resolveSubject(snap, "other/demo", kWs).error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(resolveSubject(snap, "commit/0123", "").error().kind, ErrorKind::kInvalid);  // too short
  snap.gitrepos.push_back(gitRepo("demo"));
  snap.gitrepos.back().metadata.ns = "other";
  auto twice = resolveSubject(snap, "demo", "");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("several workspaces (fleet-default, other)"), std::string::npos);
}

TEST(ExplainResolveTest, ClusterReadinessForWait) {
  Snapshot snap = healthy();
  EXPECT_TRUE(clusterReadiness(snap, "c1").ready);
  EXPECT_FALSE(clusterReadiness(snap, "c9").exists);
  auto& summary = snap.cluster_summaries[events::clusterSummaryKey("c1")];
  summary.offline = true;
  summary.message = "the agent has given no sign of life since 2026-12-06T07:59:00.000Z";
  EXPECT_EQ(clusterReadiness(snap, "c1").reason,
            "cluster c1 is Offline: the agent has given no sign of life since 2026-12-06T07:59:00.000Z");
  snap.cluster_specs["c3"] = registration("c3");
  EXPECT_NE(clusterReadiness(snap, "c3").reason.find("WaitCheckIn"), std::string::npos);
}

TEST(ExplainUsageTest, BadInputNamesTheFlagOrValue) {
  Ran ran = runCaptured({"explain"});
  EXPECT_EQ(ran.code, kExitUsage);
  ran = runCaptured({"explain", "demo", "-o", "yaml"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_NE(ran.err.find("-o: explain prints json or human, got \"yaml\""), std::string::npos) << ran.err;
  ran = runCaptured({"wait", "gitrepo", "demo", "--for", "done"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_NE(ran.err.find("--for: expected ready or delete, got \"done\""), std::string::npos) << ran.err;
  ran = runCaptured({"wait", "gitrepo", "demo", "--timeout", "soon"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_NE(ran.err.find("--timeout:"), std::string::npos) << ran.err;
  // After the command, --timeout is the wait's duration (the NATS timeout stays a number of seconds before it): this
  // one parses and fails only at connecting (exit 1).
  ran = runCaptured({"wait", "gitrepo", "demo", "--timeout", "90s", "--nats-url", "nats://127.0.0.1:1"});
  EXPECT_EQ(ran.code, kExitError) << ran.err;
  EXPECT_NE(ran.err.find("cannot connect to NATS"), std::string::npos) << ran.err;
  ran = runCaptured({"wait", "bundledeployments", "c1/demo-app"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_NE(ran.err.find("only gitrepos, bundles and clusters"), std::string::npos) << ran.err;
  ran = runCaptured({"wait", "gitrepo", "demo", "-o", "json"});
  EXPECT_EQ(ran.code, kExitUsage);
  ran = runCaptured({"get", "gitrepos", "-w", "-o", "json"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_NE(ran.err.find("-w prints table rows"), std::string::npos) << ran.err;
  ran = runCaptured({"wait", "--help"});
  EXPECT_EQ(ran.code, kExitOk);
  EXPECT_NE(ran.out.find("3 timed out, 4 will not be ready without a change"), std::string::npos) << ran.out;
}

}  // namespace
}  // namespace flotilla::cli
