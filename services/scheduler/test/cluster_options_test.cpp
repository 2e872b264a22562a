// Unit tests of what a Cluster document changes in the scheduler's pure parts: a paused cluster stages new
// deployments like a paused bundle (and unpausing releases them), and the agents' heartbeat interval flag.
#include <gtest/gtest.h>

#include "flotilla/scheduler/flags.h"
#include "flotilla/scheduler/placement.h"

namespace flotilla::scheduler {
namespace {

using Action = PlacementDecision::Action;

BundleTargeting targeting() {
  BundleTargeting t;
  t.workspace = "ws";
  t.gitrepo = "repo";
  t.bundle = "repo-app";
  t.commit = "c2";
  t.manifest_id = "m2";
  return t;
}

TEST(ClusterPausedTest, APausedClusterStagesAndUnpausingReleases) {
  BundleTargeting t = targeting();
  events::DeploymentRecord record{.cluster = "c-1",
                                  .workspace = "ws",
                                  .bundle = "repo-app",
                                  .commit = "c1",
                                  .deployment_id = "m1:o",
                                  .manifest_id = "m1",
                                  .generation = 7};
  PlacementInput in{.workspace = "ws",
                    .bundle = "repo-app",
                    .cluster = "c-1",
                    .gitrepo = "repo",
                    .targeting = &t,
                    .want = Placement{.target = "all", .manifest_id = "m2", .deployment_id = "m2:o"},
                    .record = &record,
                    .cluster_paused = true,
                    .clock_ms = 1'800'000'000'000,
                    .now = "2027-01-15T08:00:00.000Z"};
  auto held = decidePlacement(in);
  EXPECT_EQ(held.action, Action::kStage);
  EXPECT_FALSE(held.event.has_value());
  EXPECT_EQ(held.record.staged_deployment_id, "m2:o");
  EXPECT_EQ(held.record.deployment_id, "m1:o");

  in.record = &held.record;
  EXPECT_EQ(decidePlacement(in).action, Action::kNothing) << "staged already";

  in.cluster_paused = false;
  auto released = decidePlacement(in);
  EXPECT_EQ(released.action, Action::kDeploy);
  ASSERT_TRUE(released.event.has_value());
  EXPECT_EQ(released.event->deployment_id, "m2:o");
  EXPECT_TRUE(released.record.staged_deployment_id.empty());

  // A paused cluster that gets nothing yet: nothing is released (the record says what is held).
  in.record = nullptr;
  in.cluster_paused = true;
  auto first = decidePlacement(in);
  EXPECT_EQ(first.action, Action::kStage);
  EXPECT_TRUE(first.record.deployment_id.empty());
}

TEST(ClusterPausedTest, HeartbeatIntervalFlag) {
  const char* none[] = {"flotilla-scheduler"};
  auto defaults = schedulerOptionsFrom(service::Config::parse(1, none, schedulerFlags()).value());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->heartbeat_interval, std::chrono::seconds(30));

  const char* some[] = {"flotilla-scheduler", "--agent-heartbeat-interval", "5"};
  auto parsed = schedulerOptionsFrom(service::Config::parse(3, some, schedulerFlags()).value());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->heartbeat_interval, std::chrono::seconds(5));

  const char* bad[] = {"flotilla-scheduler", "--agent-heartbeat-interval", "0"};
  auto failed = schedulerOptionsFrom(service::Config::parse(3, bad, schedulerFlags()).value());
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("--agent-heartbeat-interval"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::scheduler
