// Unit tests of the rollout as a pure decision (rollout.h): partitions (manual and automatic), the budgets
// (maxUnavailable, per partition, maxUnavailablePartitions), maxNew batches, paused and offline clusters, halting
// and a newer commit superseding a halted rollout.
#include "flotilla/scheduler/rollout.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace flotilla::scheduler {
namespace {

model::IntOrPercent count(int64_t n) {
  return {.value = n, .percent = false};
}
model::IntOrPercent percent(int64_t n) {
  return {.value = n, .percent = true};
}

//! A cluster named `name` with labels, running `released` (Ready when `ready`), wanting `wanted`.
RolloutTarget target(std::string name, std::string wanted, std::string released, bool ready = true,
                     model::Labels labels = {}) {
  RolloutTarget t;
  t.cluster = name;
  t.facts.name = name;
  t.facts.workspace = "ws";
  t.facts.labels = std::move(labels);
  t.wanted = std::move(wanted);
  t.released = std::move(released);
  t.available = !t.released.empty() && ready;
  t.state = t.released.empty() ? "" : (ready ? "Ready" : "WaitApplied");
  return t;
}

RolloutTarget failing(std::string name, std::string wanted, std::string released, std::string state = "ErrApplied") {
  RolloutTarget t = target(std::move(name), std::move(wanted), std::move(released), false);
  t.failing = true;
  t.state = std::move(state);
  t.message = "boom";
  return t;
}

std::vector<std::string> released(const RolloutPlan& plan) {
  return {plan.release.begin(), plan.release.end()};
}

model::Partition partition(std::string name, std::string env, std::optional<model::IntOrPercent> max = std::nullopt) {
  model::Partition p;
  p.name = std::move(name);
  p.max_unavailable = max;
  model::LabelSelector selector;
  selector.match_labels = {{"env", std::move(env)}};
  p.cluster_selector = selector;
  return p;
}

TEST(RolloutLimitTest, FollowsFleet) {
  EXPECT_EQ(rolloutLimit(0, percent(10), std::nullopt, percent(100)), 1);  // no items: 1
  EXPECT_EQ(rolloutLimit(10, std::nullopt, std::nullopt, percent(100)), 10);
  EXPECT_EQ(rolloutLimit(10, percent(25), std::nullopt, percent(100)), 2);  // rounded down
  EXPECT_EQ(rolloutLimit(3, percent(10), std::nullopt, percent(100)), 1);   // at least 1
  EXPECT_EQ(rolloutLimit(10, percent(0), std::nullopt, percent(100)), 1);
  EXPECT_EQ(rolloutLimit(10, count(0), std::nullopt, percent(100)), 0);  // a count is taken as is
  EXPECT_EQ(rolloutLimit(10, std::nullopt, count(3), percent(100)), 3);  // the fallback
}

// Fleet's defaults: one partition "All", everything released at once.
TEST(RolloutTest, DefaultsReleaseEverythingAtOnce) {
  auto plan = planRollout(std::nullopt, {target("a", "new", "old"), target("b", "new", "old"), target("c", "new", "")});
  EXPECT_EQ(released(plan), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(plan.status.partitions.size(), 1U);
  EXPECT_EQ(plan.status.partitions[0].name, "All");
  EXPECT_EQ(plan.status.partitions[0].state, "Rolling");
  EXPECT_EQ(plan.status.state, "Released");
  EXPECT_EQ(plan.status.held, 0);
  EXPECT_EQ(plan.status.max_new, kDefaultMaxNew);
  EXPECT_FALSE(plan.another_pass);
}

TEST(RolloutTest, UpToDateClustersMakeAReadyPartition) {
  auto plan = planRollout(std::nullopt, {target("a", "v1", "v1"), target("b", "v1", "v1")});
  EXPECT_EQ(released(plan), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan.status.partitions[0].state, "Ready");
  EXPECT_EQ(plan.status.state, "Released");
  EXPECT_EQ(plan.status.partition, "");
}

// Manual partitions go in order: a partition counts its clusters that are not up to date (held ones too), and the
// next one waits while that is over the partition's budget (Fleet's rule: the rollout goes on once the last of a
// partition's clusters is released within the budget).
TEST(RolloutTest, PartitionsAreReleasedInOrderByHealth) {
  model::RolloutStrategy rollout;
  rollout.partitions = {partition("canary", "canary", count(1)), partition("prod", "prod")};
  std::vector<RolloutTarget> targets = {
      target("c1", "v2", "v1", true, {{"env", "canary"}}), target("c2", "v2", "v1", true, {{"env", "canary"}}),
      target("p1", "v2", "v1", true, {{"env", "prod"}}), target("p2", "v2", "v1", true, {{"env", "prod"}})};
  auto first = planRollout(rollout, targets);
  EXPECT_EQ(released(first), (std::vector<std::string>{"c1"}));
  EXPECT_EQ(first.status.state, "Progressing");
  EXPECT_EQ(first.status.partition, "canary");
  ASSERT_EQ(first.status.partitions.size(), 2U);
  EXPECT_EQ(first.status.partitions[0].state, "Rolling");
  EXPECT_EQ(first.status.partitions[0].unavailable, 2);
  EXPECT_EQ(first.status.partitions[1].state, "Waiting");
  EXPECT_EQ(first.status.held, 3);

  // c1 applied v2 but is not Ready yet: still waiting.
  targets[0] = target("c1", "v2", "v2", false, {{"env", "canary"}});
  auto waiting = planRollout(rollout, targets);
  EXPECT_EQ(released(waiting), (std::vector<std::string>{"c1"}));
  EXPECT_EQ(waiting.status.state, "Progressing");

  // Its Ready report releases c2, which leaves the canary within its budget: prod goes.
  targets[0] = target("c1", "v2", "v2", true, {{"env", "canary"}});
  auto next = planRollout(rollout, targets);
  EXPECT_EQ(released(next), (std::vector<std::string>{"c1", "c2", "p1", "p2"}));
  EXPECT_EQ(next.status.partitions[0].state, "Rolling");
  EXPECT_EQ(next.status.partitions[1].state, "Rolling");
  EXPECT_EQ(next.status.state, "Released");
}

// A first deployment: new clusters count as not up to date, so with a budget of 0 a partition is a strict gate.
TEST(RolloutTest, AZeroBudgetGatesAFirstDeploymentStrictly) {
  model::RolloutStrategy rollout;
  rollout.partitions = {partition("canary", "canary", count(0)), partition("prod", "prod")};
  std::vector<RolloutTarget> targets = {target("c1", "v1", "", false, {{"env", "canary"}}),
                                        target("p1", "v1", "", false, {{"env", "prod"}})};
  EXPECT_EQ(released(planRollout(rollout, targets)), (std::vector<std::string>{"c1"}));
  targets[0] = target("c1", "v1", "v1", false, {{"env", "canary"}});
  EXPECT_EQ(released(planRollout(rollout, targets)), (std::vector<std::string>{"c1"}));
  targets[0] = target("c1", "v1", "v1", true, {{"env", "canary"}});
  EXPECT_EQ(released(planRollout(rollout, targets)), (std::vector<std::string>{"c1", "p1"}));
}

// A partition over its budget with a failing cluster halts the rollout; the status names it.
TEST(RolloutTest, AFailingPartitionHaltsTheRollout) {
  model::RolloutStrategy rollout;
  rollout.partitions = {partition("canary", "canary", count(1)), partition("prod", "prod")};
  std::vector<RolloutTarget> targets = {failing("c1", "v2", "v2"), failing("c2", "v2", "v2", "NotReady"),
                                        target("p1", "v2", "v1", true, {{"env", "prod"}})};
  targets[0].facts.labels = {{"env", "canary"}};
  targets[1].facts.labels = {{"env", "canary"}};
  auto plan = planRollout(rollout, targets);
  EXPECT_EQ(released(plan), (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(plan.status.state, "Halted");
  EXPECT_EQ(plan.status.partition, "canary");
  EXPECT_EQ(plan.status.partitions[0].state, "Halted");
  EXPECT_EQ(plan.status.partitions[0].unavailable, 2);
  EXPECT_EQ(plan.status.partitions[1].state, "Waiting");
  ASSERT_EQ(plan.status.halted_by.size(), 2U);
  EXPECT_EQ(plan.status.halted_by[0].cluster, "c1");
  EXPECT_EQ(plan.status.halted_by[0].state, "ErrApplied");
  EXPECT_EQ(plan.status.halted_by[1].state, "NotReady");
  EXPECT_EQ(plan.status.held, 1);

  // A newer commit supersedes it: the failing clusters get it at once (they are unavailable already), the prod
  // partition still waits for the canary to be healthy.
  for (auto& t : targets) {
    t.wanted = "v3";
  }
  auto fix = planRollout(rollout, targets);
  EXPECT_EQ(released(fix), (std::vector<std::string>{"c1", "c2"}));
  EXPECT_EQ(fix.status.partitions[1].state, "Waiting");
  // ... and once they report v3 Ready, prod goes.
  targets[0] = target("c1", "v3", "v3", true, {{"env", "canary"}});
  targets[1] = target("c2", "v3", "v3", true, {{"env", "canary"}});
  auto resumed = planRollout(rollout, targets);
  EXPECT_EQ(released(resumed), (std::vector<std::string>{"c1", "c2", "p1"}));
  EXPECT_EQ(resumed.status.state, "Released");
}

// maxUnavailable across the bundle: available clusters are updated one at a time.
TEST(RolloutTest, MaxUnavailableUpdatesOneAtATime) {
  model::RolloutStrategy rollout;
  rollout.max_unavailable = count(1);
  std::vector<RolloutTarget> targets = {target("a", "v2", "v1"), target("b", "v2", "v1"), target("c", "v2", "v1")};
  auto plan = planRollout(rollout, targets);
  EXPECT_EQ(released(plan), (std::vector<std::string>{"a"}));
  EXPECT_EQ(plan.status.held, 2);
  EXPECT_EQ(plan.status.unavailable, 1);
  EXPECT_EQ(plan.status.max_unavailable, 1);
  targets[0] = target("a", "v2", "v2");
  EXPECT_EQ(released(planRollout(rollout, targets)), (std::vector<std::string>{"a", "b"}));
  // A cluster that is unavailable anyway is updated regardless of the budget, which it uses up: b waits.
  targets[2] = failing("c", "v2", "v1");
  EXPECT_EQ(released(planRollout(rollout, targets)), (std::vector<std::string>{"a", "c"}));
}

// maxNew: at most that many clusters get their first deployment per pass; the rest ask for another pass.
TEST(RolloutTest, MaxNewReleasesNewClustersInBatches) {
  model::RolloutStrategy rollout;
  rollout.max_new = 2;
  std::vector<RolloutTarget> targets = {target("a", "v1", ""), target("b", "v1", ""), target("c", "v1", ""),
                                        target("d", "v1", "v0")};
  auto plan = planRollout(rollout, targets);
  EXPECT_EQ(released(plan), (std::vector<std::string>{"a", "b", "d"}));  // d is an update, not new
  EXPECT_TRUE(plan.another_pass);
  EXPECT_EQ(plan.status.held, 1);
  targets[0].released = "v1";
  targets[1].released = "v1";
  auto second = planRollout(rollout, targets);
  EXPECT_EQ(released(second), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_FALSE(second.another_pass);
  // maxNew 0: nothing new ever goes, and no pass asks for another.
  rollout.max_new = 0;
  targets[2].released.clear();
  auto none = planRollout(rollout, targets);
  EXPECT_FALSE(none.release.contains("c"));
  EXPECT_FALSE(none.another_pass);
}

// Rounds: one call walks the passes maxNew asks for, each releasing the next batch, up to max_rounds; what the
// rounds release together is what that many passes would.
TEST(RolloutTest, RoundsReleaseMaxNewBatchesOneAfterAnother) {
  model::RolloutStrategy rollout;
  rollout.max_new = 2;
  std::vector<RolloutTarget> targets = {target("a", "v1", ""), target("b", "v1", ""), target("c", "v1", ""),
                                        target("d", "v1", "v0"), target("e", "v1", "")};
  auto all = planRollout(rollout, targets, 10);
  ASSERT_EQ(all.rounds.size(), 2u);
  EXPECT_EQ(all.rounds[0], (std::vector<std::string>{"a", "b", "d"}));  // d is an update, not new
  EXPECT_EQ(all.rounds[1], (std::vector<std::string>{"c", "e"}));
  EXPECT_EQ(released(all), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_FALSE(all.another_pass);
  EXPECT_EQ(all.status.held, 0);

  auto two = planRollout(rollout, targets, 1);
  EXPECT_EQ(two.rounds.size(), 1u);
  EXPECT_TRUE(two.another_pass) << "one round: the next batch is another pass's";
  EXPECT_EQ(two.status.held, 2);

  // Partitions still gate: with no partition allowed to be unavailable, the rounds stop where a pass would.
  rollout.max_new = 1;
  rollout.auto_partition_threshold = 2;
  rollout.auto_partition_size = model::IntOrPercent{.value = 2};
  rollout.max_unavailable = model::IntOrPercent{.value = 0};
  auto gated = planRollout(rollout, targets, 10);
  EXPECT_FALSE(gated.another_pass);
  EXPECT_FALSE(gated.release.contains("c")) << "partition c-d waits for a-b to be Ready";
}

// Above autoPartitionThreshold clusters are cut into autoPartitionSize partitions, by name.
TEST(RolloutTest, AutoPartitionsAboveTheThreshold) {
  model::RolloutStrategy rollout;
  rollout.auto_partition_threshold = 4;
  rollout.auto_partition_size = percent(50);
  rollout.max_unavailable = count(0);  // nothing available may be updated: the partitions show the cut
  std::vector<RolloutTarget> targets;
  for (const char* name : {"e", "d", "c", "b", "a"}) {
    targets.push_back(target(name, "v1", "v1"));
  }
  auto plan = planRollout(rollout, targets);
  ASSERT_EQ(plan.status.partitions.size(), 3U);
  EXPECT_EQ(plan.status.partitions[0].name, "Partition 0 - 2");
  EXPECT_EQ(plan.status.partitions[2].name, "Partition 4 - 5");
  EXPECT_EQ(plan.status.partitions[2].count, 1);
  // Below the threshold: one partition.
  targets.pop_back();
  targets.pop_back();
  EXPECT_EQ(planRollout(rollout, targets).status.partitions.size(), 1U);
  // autoPartitionSize 0 turns it off.
  rollout.auto_partition_threshold = 1;
  rollout.auto_partition_size = count(0);
  EXPECT_EQ(planRollout(rollout, targets).status.partitions.size(), 1U);
}

// Automatic partitions of a first deployment: new clusters count as not up to date, so the next partition waits
// for the first one's reports once over budget.
TEST(RolloutTest, AutoPartitionsGateAFirstDeployment) {
  model::RolloutStrategy rollout;
  rollout.auto_partition_threshold = 4;
  rollout.auto_partition_size = count(2);
  rollout.max_unavailable = count(1);
  std::vector<RolloutTarget> targets;
  for (const char* name : {"a", "b", "c", "d"}) {
    targets.push_back(target(name, "v1", ""));
  }
  auto plan = planRollout(rollout, targets);
  EXPECT_EQ(released(plan), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan.status.state, "Progressing");
  EXPECT_EQ(plan.status.partitions[1].state, "Waiting");
}

// Clusters no manual partition matches are left out (Fleet's rule) and named.
TEST(RolloutTest, ClustersOutsideEveryPartitionAreNamed) {
  model::RolloutStrategy rollout;
  rollout.partitions = {partition("canary", "canary")};
  auto plan = planRollout(
      rollout, {target("c1", "v2", "v1", true, {{"env", "canary"}}), target("x", "v2", "v1"), target("y", "v2", "v2")});
  EXPECT_EQ(released(plan), (std::vector<std::string>{"c1", "y"}));  // y runs it already
  EXPECT_EQ(plan.status.outside_partitions, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(plan.status.outside_partitions_count, 2);
  EXPECT_EQ(plan.status.held, 1);
  EXPECT_EQ(plan.status.state, "Progressing");
}

// maxUnavailablePartitions lets the rollout go past a partition that is still over its budget.
TEST(RolloutTest, MaxUnavailablePartitionsLetsTheRolloutGoOn) {
  model::RolloutStrategy rollout;
  rollout.partitions = {partition("one", "one", count(1)), partition("two", "two", count(1))};
  rollout.max_unavailable_partitions = count(1);
  std::vector<RolloutTarget> targets = {target("a", "v2", "v1", true, {{"env", "one"}}),
                                        target("b", "v2", "v1", true, {{"env", "one"}}),
                                        target("c", "v2", "v1", true, {{"env", "two"}})};
  auto plan = planRollout(rollout, targets);
  EXPECT_EQ(released(plan), (std::vector<std::string>{"a", "c"}));
  rollout.max_unavailable_partitions = count(0);
  EXPECT_EQ(released(planRollout(rollout, targets)), (std::vector<std::string>{"a"}));
}

// Paused clusters release nothing; offline ones count as unavailable and fail the partition.
TEST(RolloutTest, PausedAndOfflineClusters) {
  model::RolloutStrategy rollout;
  rollout.max_unavailable = count(1);
  RolloutTarget paused = target("a", "v2", "v1");
  paused.paused = true;
  RolloutTarget offline = failing("b", "v2", "v1", "Offline");
  auto plan = planRollout(rollout, {paused, offline, target("c", "v2", "v1")});
  // b is unavailable (offline): it gets v2 (waiting in its stream) without using the budget, which b already
  // exhausts, so c waits; a is paused.
  EXPECT_EQ(released(plan), (std::vector<std::string>{"b"}));
  EXPECT_EQ(plan.status.state, "Halted");
  ASSERT_EQ(plan.status.halted_by.size(), 1U);
  EXPECT_EQ(plan.status.halted_by[0].state, "Offline");
}

}  // namespace
}  // namespace flotilla::scheduler
