// Unit tests for the status roll-up: the effective state of one deployment, and the bundle, GitRepo and cluster
// summaries (counts per state, desiredReady, worst state, capped non-ready details, render errors).
#include "flotilla/scheduler/rollup.h"

#include <gtest/gtest.h>

namespace flotilla::scheduler {
namespace {

using model::BundleState;

DeploymentRecord record(std::string cluster, std::string bundle, std::string deployment_id, int64_t generation = 1) {
  return DeploymentRecord{.cluster = std::move(cluster),
                          .workspace = "fleet-default",
                          .bundle = std::move(bundle),
                          .gitrepo = "repo",
                          .deployment_id = std::move(deployment_id),
                          .generation = generation};
}

BdStatus report(const DeploymentRecord& r, std::string state, std::string message = {}, std::string deployment_id = {},
                int64_t generation = 0) {
  return BdStatus{.cluster = r.cluster,
                  .workspace = r.workspace,
                  .bundle = r.bundle,
                  .deployment_id = deployment_id.empty() ? r.deployment_id : deployment_id,
                  .generation = generation == 0 ? r.generation : generation,
                  .state = std::move(state),
                  .message = std::move(message)};
}

// Sent but not reported yet counts as WaitApplied (Fleet: appliedDeploymentID != deploymentID).
TEST(RollupTest, SentWithoutStatusIsWaitApplied) {
  auto r = record("c1", "b", "m:o");
  auto state = effectiveState(r, nullptr);
  EXPECT_EQ(state.state, BundleState::kWaitApplied);
  EXPECT_EQ(state.reason, "WaitingForAgent");
}

// A report about the current deployment gives its state; about an older one WaitApplied; an ErrApplied for this
// generation (or newer) stays ErrApplied even if the agent names another deployment.
TEST(RollupTest, StatusAgainstTheCurrentDeployment) {
  auto r = record("c1", "b", "new:o", 5);
  auto ready = report(r, "Ready");
  EXPECT_EQ(effectiveState(r, &ready).state, BundleState::kReady);
  auto not_ready = report(r, "NotReady", "1 of 3 replicas");
  EXPECT_EQ(effectiveState(r, &not_ready).state, BundleState::kNotReady);
  EXPECT_EQ(effectiveState(r, &not_ready).message, "1 of 3 replicas");

  auto old = report(r, "Ready", "", "old:o", 4);
  auto waiting = effectiveState(r, &old);
  EXPECT_EQ(waiting.state, BundleState::kWaitApplied);
  EXPECT_NE(waiting.message.find("waiting for"), std::string::npos);

  auto failed = report(r, "ErrApplied", "manifest missing", "old:o", 5);
  EXPECT_EQ(effectiveState(r, &failed).state, BundleState::kErrApplied);
}

// Paused bundles: nothing released -> Pending; a newer deployment held -> at least OutOfSync.
TEST(RollupTest, PausedBundlesArePendingOrOutOfSync) {
  auto held = record("c1", "b", "");
  held.staged_deployment_id = "new:o";
  EXPECT_EQ(effectiveState(held, nullptr).state, BundleState::kPending);

  auto r = record("c1", "b", "old:o");
  r.staged_deployment_id = "new:o";
  auto ready = report(r, "Ready");
  EXPECT_EQ(effectiveState(r, &ready).state, BundleState::kOutOfSync);
  auto failed = report(r, "ErrApplied");
  EXPECT_EQ(effectiveState(r, &failed).state, BundleState::kErrApplied);
}

// The bundle summary counts per state across clusters, names non-ready clusters and reports the worst state.
TEST(RollupTest, BundleSummaryCountsAndWorstState) {
  auto r1 = record("c1", "b", "m:o");
  auto r2 = record("c2", "b", "m:o");
  auto r3 = record("c3", "b", "m:o");
  auto s1 = report(r1, "Ready");
  auto s2 = report(r2, "NotReady", "pulling image");
  std::vector<DeploymentView> views = {{&r1, &s1}, {&r2, &s2}, {&r3, nullptr}};
  Json summary = events::encode(bundleSummaryRecord("fleet-default", "b", nullptr, views));
  EXPECT_EQ(summary.getString("state"), "WaitApplied");
  EXPECT_EQ(summary.getString("readyClusters"), "1/3");
  const Json& counts = *summary.find("summary");
  EXPECT_EQ(counts.getInt("ready"), 1);
  EXPECT_EQ(counts.getInt("notReady"), 1);
  EXPECT_EQ(counts.getInt("waitApplied"), 1);
  EXPECT_EQ(counts.getInt("desiredReady"), 3);
  const Json* details = counts.find("nonReadyResources");
  ASSERT_NE(details, nullptr);
  ASSERT_EQ(details->size(), 2u);
  EXPECT_EQ(details->asArray()[0].getString("name"), "c3");  // worst first
  EXPECT_EQ(details->asArray()[1].getString("name"), "c2");
  EXPECT_EQ(details->asArray()[1].getString("message"), "pulling image");
}

// At most ten non-ready details, however many clusters fail.
TEST(RollupTest, DetailsAreCappedAtTen) {
  std::vector<DeploymentRecord> records;
  std::vector<BdStatus> reports;
  records.reserve(25);
  reports.reserve(25);
  std::vector<DeploymentView> views;
  for (int i = 0; i < 25; ++i) {
    records.push_back(record("c" + std::to_string(i), "b", "m:o"));
    reports.push_back(report(records.back(), "ErrApplied", "boom"));
  }
  for (size_t i = 0; i < records.size(); ++i) {
    views.push_back({&records[i], &reports[i]});
  }
  Json summary = events::encode(bundleSummaryRecord("fleet-default", "b", nullptr, views));
  EXPECT_EQ(summary.find("summary")->getInt("errApplied"), 25);
  EXPECT_EQ(summary.find("summary")->find("nonReadyResources")->size(), 10u);
}

// The GitRepo summary spans its bundles and shows render errors (which are not deployments: counts unchanged).
TEST(RollupTest, GitRepoSummaryIncludesRenderErrors) {
  auto a1 = record("c1", "repo-a", "m:o");
  auto a2 = record("c2", "repo-a", "m:o");
  auto b1 = record("c1", "repo-b", "n:o");
  auto s_a1 = report(a1, "Ready");
  auto s_a2 = report(a2, "Ready");
  auto s_b1 = report(b1, "Modified", "configmap changed");
  BundleInfo broken{.workspace = "fleet-default", .gitrepo = "repo", .bundle = "repo-b"};
  broken.error = events::RenderError{.file = "b/fleet.yaml", .line = 3, .message = "helm.chart: expected a string"};
  broken.error_commit = "abc";
  std::vector<GitRepoBundle> bundles = {
      GitRepoBundle{.deployments = {{&a1, &s_a1}, {&a2, &s_a2}}},
      GitRepoBundle{.bundle = &broken, .deployments = {{&b1, &s_b1}}},
  };
  Json summary = events::encode(gitRepoSummaryRecord("fleet-default", "repo", bundles));
  EXPECT_EQ(summary.getString("state"), "Modified");
  EXPECT_EQ(summary.getString("readyBundleDeployments"), "2/3");
  EXPECT_EQ(summary.getInt("readyClusters"), 1);  // c2 only: c1 has a Modified bundle
  EXPECT_EQ(summary.getInt("desiredReadyClusters"), 2);
  EXPECT_TRUE(summary.getBool("error"));
  ASSERT_EQ(summary.find("renderErrors")->size(), 1u);
  EXPECT_EQ(summary.find("renderErrors")->asArray()[0].getString("file"), "b/fleet.yaml");
  EXPECT_NE(summary.getString("message").find("render failed: b/fleet.yaml:3"), std::string::npos)
      << summary.getString("message");
  EXPECT_EQ(summary.find("summary")->getInt("desiredReady"), 3);
  // The render error is listed among the details, worst first.
  EXPECT_EQ(summary.find("summary")->find("nonReadyResources")->asArray()[0].getString("name"), "repo-b");
}

// Every bundle of the GitRepo deleted, deletes sent and not all reported: Deleting, with what is left; a failed
// delete keeps its message. A live bundle among them: not Deleting.
TEST(RollupTest, GitRepoWithOnlyDeletingDeploymentsIsDeleting) {
  auto a1 = record("c1", "repo-a", "m:o", 7);
  auto a2 = record("c2", "repo-a", "m:o", 7);
  auto b1 = record("c1", "repo-b", "n:o", 7);
  for (auto* r : {&a1, &a2, &b1}) {
    r->deleting = true;
  }
  std::vector<GitRepoBundle> gone = {GitRepoBundle{.deployments = {{&a1, nullptr}, {&a2, nullptr}}},
                                     GitRepoBundle{.deployments = {{&b1, nullptr}}}};
  auto summary = gitRepoSummaryRecord("fleet-default", "repo", gone);
  EXPECT_EQ(summary.state, "Deleting");
  EXPECT_EQ(summary.message, "deleting: 3 deployments left on 2 clusters");
  EXPECT_TRUE(events::decodeRecord<events::GitRepoSummary>(events::encode(summary)).ok());
  EXPECT_EQ(effectiveState(a1, nullptr).reason, "Deleting");

  auto failed = BdStatus{.cluster = "c1",
                         .workspace = "fleet-default",
                         .bundle = "repo-b",
                         .generation = 7,
                         .state = "ErrApplied",
                         .reason = "PruneFailed",
                         .message = "failed to delete 1 object"};
  std::vector<GitRepoBundle> one = {GitRepoBundle{.deployments = {{&b1, &failed}}}};
  summary = gitRepoSummaryRecord("fleet-default", "repo", one);
  EXPECT_EQ(summary.state, "Deleting");
  EXPECT_NE(summary.message.find("deleting: 1 deployment left on 1 cluster; ErrApplied(1)"), std::string::npos)
      << summary.message;
  EXPECT_NE(summary.message.find("failed to delete 1 object"), std::string::npos) << summary.message;

  BundleInfo live{.workspace = "fleet-default", .gitrepo = "repo", .bundle = "repo-c"};
  auto c1 = record("c1", "repo-c", "p:o");
  auto s_c1 = report(c1, "Ready");
  std::vector<GitRepoBundle> mixed = {GitRepoBundle{.deployments = {{&a1, nullptr}}},
                                      GitRepoBundle{.bundle = &live, .deployments = {{&c1, &s_c1}}}};
  EXPECT_EQ(gitRepoSummaryRecord("fleet-default", "repo", mixed).state, "WaitApplied");
}

// A bundle without any deployment (no registered cluster targeted) is NoTargets, not the Ready an empty count
// gives: 0 of 0 clusters is nothing to be ready. So is its GitRepo while none of its bundles has a deployment; one
// deployment anywhere makes the GitRepo's state that of its deployments again.
TEST(RollupTest, ABundleWithoutDeploymentsIsNoTargetsNotReady) {
  BundleInfo alone{.workspace = "fleet-default", .gitrepo = "repo", .bundle = "repo-a"};
  auto bundle = bundleSummaryRecord("fleet-default", "repo-a", &alone, {}, nullptr);
  EXPECT_EQ(bundle.state, "NoTargets");
  EXPECT_EQ(bundle.ready_clusters, "0/0");
  EXPECT_EQ(bundle.message, "no registered cluster is targeted");
  auto decoded = events::decodeRecord<events::BundleSummary>(events::encode(bundle));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(decoded->state, "NoTargets");

  std::vector<GitRepoBundle> none = {GitRepoBundle{.bundle = &alone}};
  auto gitrepo = gitRepoSummaryRecord("fleet-default", "repo", none);
  EXPECT_EQ(gitrepo.state, "NoTargets");
  EXPECT_EQ(gitrepo.ready_bundle_deployments, "0/0");
  ASSERT_EQ(gitrepo.bundles.size(), 1u);
  EXPECT_EQ(gitrepo.bundles[0].state, "NoTargets");
  EXPECT_TRUE(events::decodeRecord<events::GitRepoSummary>(events::encode(gitrepo)).ok());

  BundleInfo placed{.workspace = "fleet-default", .gitrepo = "repo", .bundle = "repo-b"};
  auto b1 = record("c1", "repo-b", "n:o");
  auto s_b1 = report(b1, "Ready");
  std::vector<GitRepoBundle> some = {GitRepoBundle{.bundle = &alone},
                                     GitRepoBundle{.bundle = &placed, .deployments = {{&b1, &s_b1}}}};
  gitrepo = gitRepoSummaryRecord("fleet-default", "repo", some);
  EXPECT_EQ(gitrepo.state, "Ready");
  EXPECT_EQ(gitrepo.bundles[0].state, "NoTargets");
  EXPECT_EQ(gitrepo.bundles[1].state, "Ready");
  EXPECT_EQ(bundleSummaryRecord("fleet-default", "repo-b", &placed, {{&b1, &s_b1}}, nullptr).state, "Ready");
}

// The cluster summary spans the cluster's bundles and carries the last heartbeat and versions.
TEST(RollupTest, ClusterSummaryCarriesHeartbeat) {
  auto a = record("c1", "repo-a", "m:o");
  auto b = record("c1", "repo-b", "n:o");
  auto s_a = report(a, "Ready");
  model::Cluster cluster;
  cluster.metadata.name = "c1";
  cluster.metadata.ns = "fleet-default";
  cluster.status.agent =
      model::AgentStatus{.last_seen = "2026-12-02T10:00:00.000Z", .version = "0.1.0", .kubernetes_version = "v1.31.2"};
  Json summary =
      events::encode(clusterSummaryRecord("c1", &cluster, {{&a, &s_a}, {&b, nullptr}}, "2026-12-02T10:05:00.000Z"));
  EXPECT_EQ(summary.getString("readyBundles"), "1/2");
  EXPECT_EQ(summary.getString("state"), "WaitApplied");
  EXPECT_EQ(summary.getString("lastHeartbeat"), "2026-12-02T10:05:00.000Z");
  EXPECT_EQ(summary.getString("lastSeen"), "2026-12-02T10:05:00.000Z");
  EXPECT_EQ(summary.getString("kubernetesVersion"), "v1.31.2");
  EXPECT_EQ(summary.find("summary")->find("nonReadyResources")->asArray()[0].getString("name"), "fleet-default/repo-b");
}

// An offline cluster's summary says so and since when; the bundles' counts stay.
TEST(RollupTest, OfflineClusterSummary) {
  auto a = record("c1", "repo-a", "m:o");
  auto s_a = report(a, "Ready");
  model::Cluster cluster;
  cluster.metadata.name = "c1";
  cluster.status.agent = model::AgentStatus{.last_seen = "2026-12-02T10:00:00.000Z"};
  auto summary = clusterSummaryRecord("c1", &cluster, {{&a, &s_a}}, "2026-12-02T10:05:00.000Z", true);
  EXPECT_TRUE(summary.offline);
  EXPECT_EQ(summary.state, events::kOfflineState);
  EXPECT_EQ(summary.message, "the agent has given no sign of life since 2026-12-02T10:05:00.000Z");
  EXPECT_EQ(summary.ready_bundles, "1/1");
  EXPECT_FALSE(clusterSummaryRecord("c1", &cluster, {{&a, &s_a}}, "", false).offline);
}

}  // namespace
}  // namespace flotilla::scheduler
