// Unit tests of placement as a pure decision (placement.h): every action, from targeting's answer, the record and
// whether the cluster is paused (a Cluster document's spec.paused).
#include "flotilla/scheduler/placement.h"

#include <gtest/gtest.h>

namespace flotilla::scheduler {
namespace {

using Action = PlacementDecision::Action;

constexpr int64_t kClock = 1'800'000'000'000;

BundleTargeting targeting() {
  BundleTargeting t;
  t.workspace = "ws";
  t.gitrepo = "repo";
  t.bundle = "repo-app";
  t.commit = "c2";
  t.manifest_id = "m2";
  t.commit_sequence = 42;
  t.labels = {{"team", "web"}};
  return t;
}

Placement want(std::string deployment_id = "m2:o") {
  return Placement{.target = "all", .manifest_id = "m2", .deployment_id = std::move(deployment_id)};
}

events::DeploymentRecord released(std::string deployment_id = "m1:o", std::string commit = "c1") {
  return events::DeploymentRecord{.cluster = "c-1",
                                  .workspace = "ws",
                                  .bundle = "repo-app",
                                  .gitrepo = "repo",
                                  .commit = std::move(commit),
                                  .deployment_id = std::move(deployment_id),
                                  .manifest_id = "m1",
                                  .generation = 7,
                                  .commit_sequence = 41,
                                  .labels = {{"team", "web"}}};
}

PlacementInput input(const BundleTargeting* t, std::optional<Placement> w, const events::DeploymentRecord* record) {
  return PlacementInput{.workspace = "ws",
                        .bundle = "repo-app",
                        .cluster = "c-1",
                        .gitrepo = "repo",
                        .targeting = t,
                        .want = std::move(w),
                        .record = record,
                        .clock_ms = kClock,
                        .now = "2026-12-02T10:00:00.000Z"};
}

// A new placement is deployed: the DeployEvent first, with a generation of at least the clock.
TEST(PlacementTest, NewPlacementDeploys) {
  auto t = targeting();
  auto decision = decidePlacement(input(&t, want(), nullptr));
  ASSERT_EQ(decision.action, Action::kDeploy);
  ASSERT_TRUE(decision.event.has_value());
  EXPECT_EQ(decision.event->deployment_id, "m2:o");
  EXPECT_EQ(decision.event->generation, kClock);
  EXPECT_EQ(decision.event->id, deployMsgId("c-1", "repo-app", "m2:o", kClock));
  EXPECT_EQ(decision.record.deployment_id, "m2:o");
  EXPECT_EQ(decision.record.generation, kClock);
  EXPECT_EQ(decision.record.commit, "c2");
  EXPECT_EQ(decision.record.target, "all");
  // What the agent needs for ownership and dependsOn travels with the event and stays in the record.
  EXPECT_EQ(decision.event->gitrepo, "repo");
  EXPECT_EQ(decision.event->commit_sequence, 42);
  EXPECT_EQ(decision.event->labels, (events::StringMap{{"team", "web"}}));
  EXPECT_EQ(decision.record.commit_sequence, 42);
  EXPECT_EQ(decision.record.labels, (events::StringMap{{"team", "web"}}));
}

// New labels are a new release (selectors on the cluster read them), with the same deploymentID.
TEST(PlacementTest, ChangedLabelsRedeploy) {
  auto t = targeting();
  auto same = released("m2:o", "c2");
  t.labels["tier"] = "front";
  auto decision = decidePlacement(input(&t, want(), &same));
  ASSERT_EQ(decision.action, Action::kDeploy);
  EXPECT_EQ(decision.event->deployment_id, "m2:o");
  EXPECT_EQ(decision.event->labels.at("tier"), "front");
}

// What runs already: nothing to do; the same content at a newer commit only moves the record's commit.
TEST(PlacementTest, SameReleaseDoesNothingOrFollowsTheCommit) {
  auto t = targeting();
  auto same = released("m2:o", "c2");
  EXPECT_EQ(decidePlacement(input(&t, want(), &same)).action, Action::kNothing);
  auto older_commit = released("m2:o", "c1");
  auto decision = decidePlacement(input(&t, want(), &older_commit));
  EXPECT_EQ(decision.action, Action::kFollowCommit);
  EXPECT_FALSE(decision.event.has_value());
  EXPECT_EQ(decision.record.commit, "c2");
  EXPECT_EQ(decision.record.generation, 7);
}

// A new deployment for a cluster that has one: a higher generation than the record's.
TEST(PlacementTest, ChangedReleaseRedeploysWithAHigherGeneration) {
  auto t = targeting();
  auto record = released();
  auto decision = decidePlacement(input(&t, want(), &record));
  ASSERT_EQ(decision.action, Action::kDeploy);
  EXPECT_GT(decision.event->generation, record.generation);
}

// Paused: the new deployment is staged, not sent; staging it again changes nothing.
TEST(PlacementTest, PausedBundleStages) {
  auto t = targeting();
  t.paused = true;
  auto record = released();
  auto decision = decidePlacement(input(&t, want(), &record));
  ASSERT_EQ(decision.action, Action::kStage);
  EXPECT_FALSE(decision.event.has_value());
  EXPECT_EQ(decision.record.staged_deployment_id, "m2:o");
  EXPECT_EQ(decision.record.deployment_id, "m1:o");
  EXPECT_EQ(decidePlacement(input(&t, want(), &decision.record)).action, Action::kNothing);
}

// A paused cluster stages new deployments like a paused bundle, and unpausing releases them; a paused cluster that
// gets nothing yet has nothing released (the record says what is held).
TEST(PlacementTest, PausedClusterStagesAndUnpausingReleases) {
  auto t = targeting();
  auto record = released();
  auto in = input(&t, want(), &record);
  in.cluster_paused = true;
  auto held = decidePlacement(in);
  EXPECT_EQ(held.action, Action::kStage);
  EXPECT_FALSE(held.event.has_value());
  EXPECT_EQ(held.record.staged_deployment_id, "m2:o");
  EXPECT_EQ(held.record.deployment_id, "m1:o");

  in.record = &held.record;
  EXPECT_EQ(decidePlacement(in).action, Action::kNothing) << "staged already";

  in.cluster_paused = false;
  auto freed = decidePlacement(in);
  EXPECT_EQ(freed.action, Action::kDeploy);
  ASSERT_TRUE(freed.event.has_value());
  EXPECT_EQ(freed.event->deployment_id, "m2:o");
  EXPECT_TRUE(freed.record.staged_deployment_id.empty());

  in.record = nullptr;
  in.cluster_paused = true;
  auto first = decidePlacement(in);
  EXPECT_EQ(first.action, Action::kStage);
  EXPECT_TRUE(first.record.deployment_id.empty());
}

// The rollout holding a deployment stages it with reason Rollout; a pause takes precedence as the reason, and the
// rollout releasing it deploys.
TEST(PlacementTest, RolloutHeldStagesWithItsReason) {
  auto t = targeting();
  auto record = released();
  auto in = input(&t, want(), &record);
  in.rollout_held = true;
  auto held = decidePlacement(in);
  EXPECT_EQ(held.action, Action::kStage);
  EXPECT_EQ(held.record.staged_deployment_id, "m2:o");
  EXPECT_EQ(held.record.staged_reason, events::kStagedByRollout);
  // Ready on what it runs: OutOfSync, held by the rollout.
  const events::BdStatus ready{.cluster = "c-1", .bundle = "repo-app", .deployment_id = "m1:o", .state = "Ready"};
  const auto state = events::deploymentState(held.record, &ready);
  EXPECT_EQ(state.state, "OutOfSync");
  EXPECT_EQ(state.reason, "Rollout");
  EXPECT_NE(state.message.find("held by the rollout"), std::string::npos) << state.message;

  in.record = &held.record;
  EXPECT_EQ(decidePlacement(in).action, Action::kNothing) << "staged already";
  in.cluster_paused = true;
  auto paused = decidePlacement(in);
  EXPECT_EQ(paused.action, Action::kStage) << "the reason changed";
  EXPECT_EQ(paused.record.staged_reason, events::kStagedByPause);

  in.cluster_paused = false;
  in.rollout_held = false;
  auto freed = decidePlacement(in);
  EXPECT_EQ(freed.action, Action::kDeploy);
  EXPECT_TRUE(freed.record.staged_reason.empty());

  // Nothing released yet: Pending, with the rollout as the reason.
  in.record = nullptr;
  in.rollout_held = true;
  auto pending = decidePlacement(in);
  EXPECT_EQ(pending.action, Action::kStage);
  auto pending_state = events::deploymentState(pending.record, nullptr);
  EXPECT_EQ(pending_state.state, "Pending");
  EXPECT_EQ(pending_state.reason, "Rollout");
}

// A per-cluster bundle not rendered for the cluster yet is held, whatever the record says.
TEST(PlacementTest, HeldPlacementLeavesTheClusterAlone) {
  auto t = targeting();
  auto record = released();
  Placement held = want();
  held.hold = true;
  EXPECT_EQ(decidePlacement(input(&t, held, &record)).action, Action::kHold);
}

// No longer targeted (or the bundle is gone): a delete DeployEvent with the record's options, then no record.
TEST(PlacementTest, UntargetedClusterIsRemoved) {
  auto t = targeting();
  auto record = released();
  record.options = Json::obj({{"keepResources", true}});
  auto decision = decidePlacement(input(&t, std::nullopt, &record));
  ASSERT_EQ(decision.action, Action::kRemove);
  ASSERT_TRUE(decision.event.has_value());
  EXPECT_TRUE(decision.event->remove);
  EXPECT_EQ(decision.event->options, record.options);
  EXPECT_EQ(decision.event->id, deployMsgId("c-1", "repo-app", "", decision.event->generation));
  EXPECT_EQ(decision.event->gitrepo, "repo");
  EXPECT_EQ(decision.event->commit_sequence, 41);
  EXPECT_EQ(decision.event->labels, record.labels);
  // The record stays, marked deleting at the delete's generation, until the agent reports.
  EXPECT_TRUE(decision.record.deleting);
  EXPECT_EQ(decision.record.generation, decision.event->generation);
  EXPECT_EQ(decision.record.deployment_id, "m1:o");
  auto staged_only = released("");
  auto quiet = decidePlacement(input(nullptr, std::nullopt, &staged_only));
  EXPECT_EQ(quiet.action, Action::kRemove);
  EXPECT_FALSE(quiet.event.has_value());
  EXPECT_EQ(decidePlacement(input(nullptr, std::nullopt, nullptr)).action, Action::kNothing);
}

// A delete in flight is not sent again; one the agent failed is (a new generation); a cluster targeted again while
// its delete is pending gets a fresh deployment.
TEST(PlacementTest, DeletingRecordWaitsForTheAgent) {
  auto record = released();
  record.deleting = true;
  EXPECT_EQ(decidePlacement(input(nullptr, std::nullopt, &record)).action, Action::kNothing);
  events::BdStatus failed{.cluster = "c-1", .bundle = "repo-app", .generation = 7, .state = "ErrApplied"};
  auto again = input(nullptr, std::nullopt, &record);
  again.status = &failed;
  auto decision = decidePlacement(again);
  ASSERT_EQ(decision.action, Action::kRemove);
  ASSERT_TRUE(decision.event.has_value());
  EXPECT_GT(decision.event->generation, 7);
  events::BdStatus older{.cluster = "c-1", .bundle = "repo-app", .generation = 6, .state = "ErrApplied"};
  again.status = &older;
  EXPECT_EQ(decidePlacement(again).action, Action::kNothing);

  auto t = targeting();
  auto back = released("m2:o", "c2");
  back.deleting = true;
  auto redeploy = decidePlacement(input(&t, want(), &back));
  ASSERT_EQ(redeploy.action, Action::kDeploy);
  EXPECT_FALSE(redeploy.record.deleting);
}

}  // namespace
}  // namespace flotilla::scheduler
