// A GitRepo CR's status in Fleet's shape from the hub's records (fleet_status.h).
#include "flotilla/gateway/fleet_status.h"

#include <gtest/gtest.h>

namespace flotilla::gateway {
namespace {

const Json* conditionOf(const Json& status, const std::string& type) {
  for (const auto& item : status.find("conditions")->asArray()) {
    if (item.getString("type") == type) {
      return &item;
    }
  }
  return nullptr;
}

events::GitRepoSummary summary(const std::string& state, const std::string& ready) {
  events::GitRepoSummary out;
  out.workspace = "fleet-default";
  out.gitrepo = "web";
  out.state = state;
  out.ready_bundle_deployments = ready;
  out.ready_clusters = state == "Ready" ? 2 : 1;
  out.desired_ready_clusters = 2;
  out.message = state == "Ready" ? "" : "NotReady(1) [Cluster edge-1/web-app: deployment web not available]";
  out.summary = Json::obj({{"ready", Json(1)}, {"desiredReady", Json(2)}});
  return out;
}

TEST(FleetStatus, BeforeAnythingIsKnownReadyIsUnknown) {
  const Json status = gitRepoStatus({}, "2026-12-06T00:00:00Z");
  const Json* ready = conditionOf(status, "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->getString("status"), "Unknown");
  EXPECT_FALSE(status.contains("display"));
}

TEST(FleetStatus, ARefusedSpecIsNotAcceptedAndNotReadyNamingTheField) {
  GitRepoFacts facts;
  facts.acceptance = Acceptance{.generation = 3, .accepted = false, .message = "spec.paths: expected a list"};
  facts.summary = summary("Ready", "2/2");  // the last accepted spec still runs
  const Json status = gitRepoStatus(facts, "now");
  EXPECT_EQ(status.getInt("observedGeneration"), 3);
  EXPECT_EQ(conditionOf(status, "Accepted")->getString("status"), "False");
  EXPECT_EQ(conditionOf(status, "Accepted")->getString("message"), "spec.paths: expected a list");
  EXPECT_EQ(conditionOf(status, "Ready")->getString("status"), "False");
  EXPECT_EQ(conditionOf(status, "Ready")->getString("reason"), "InvalidSpec");
  EXPECT_EQ(status.at({"display", "readyBundleDeployments"})->asString(), "2/2");
}

TEST(FleetStatus, PollAndRollUpFillFleetsFields) {
  GitRepoFacts facts;
  facts.acceptance = Acceptance{.generation = 1, .accepted = true, .message = ""};
  events::PollStatus poll;
  poll.commit = "abc";
  poll.polling_commit = "abc";
  poll.last_poll_time = "2026-12-06T00:00:01Z";
  facts.poll = poll;
  facts.summary = summary("NotReady", "1/2");
  const Json status = gitRepoStatus(facts, "now");
  EXPECT_EQ(status.getString("commit"), "abc");
  EXPECT_EQ(status.getString("lastPollingTriggered"), "2026-12-06T00:00:01Z");
  EXPECT_EQ(status.getInt("readyClusters"), 1);
  EXPECT_EQ(status.getInt("desiredReadyClusters"), 2);
  EXPECT_EQ(status.at({"summary", "desiredReady"})->asInt(), 2);
  EXPECT_EQ(conditionOf(status, "GitPolling")->getString("status"), "True");
  EXPECT_EQ(conditionOf(status, "Ready")->getString("status"), "False");
  EXPECT_EQ(conditionOf(status, "Ready")->getString("reason"), "NotReady");
  EXPECT_NE(conditionOf(status, "Ready")->getString("message").find("edge-1"), std::string::npos);

  poll.last_error = "ls-remote: authentication required";
  poll.last_error_kind = "permanent";
  facts.poll = poll;
  const Json failing = gitRepoStatus(facts, "now");
  EXPECT_EQ(conditionOf(failing, "GitPolling")->getString("status"), "False");
  EXPECT_EQ(conditionOf(failing, "GitPolling")->getString("message"), "ls-remote: authentication required");
}

TEST(FleetStatus, AnUnchangedConditionKeepsItsTransitionTimeAndIsTheSameStatus) {
  GitRepoFacts facts;
  facts.summary = summary("Ready", "2/2");
  const Json first = gitRepoStatus(facts, "2026-12-06T00:00:00Z");
  Json again = gitRepoStatus(facts, "2026-12-06T01:00:00Z");
  EXPECT_TRUE(sameStatus(first, again));
  keepTransitionTimes(again, first);
  EXPECT_EQ(conditionOf(again, "Ready")->getString("lastTransitionTime"), "2026-12-06T00:00:00Z");

  facts.summary = summary("NotReady", "1/2");
  Json changed = gitRepoStatus(facts, "2026-12-06T02:00:00Z");
  keepTransitionTimes(changed, first);
  EXPECT_FALSE(sameStatus(changed, first));
  EXPECT_EQ(conditionOf(changed, "Ready")->getString("lastTransitionTime"), "2026-12-06T02:00:00Z");
}

TEST(FleetStatus, AClusterShowsItsRollUpAndIsNotReadyWhileOffline) {
  ClusterFacts facts;
  facts.ns = "fleet-default";
  EXPECT_EQ(conditionOf(clusterStatus(facts, "now"), "Ready")->getString("status"), "Unknown");

  events::ClusterSummary summary;
  summary.cluster = "edge-1";
  summary.state = "Ready";
  summary.ready_bundles = "3/3";
  summary.last_seen = "2026-12-06T00:00:00Z";
  summary.ready_git_repos = 2;
  summary.desired_ready_git_repos = 2;
  facts.summary = summary;
  facts.acceptance = Acceptance{.generation = 2, .accepted = true, .message = ""};
  const Json ready = clusterStatus(facts, "now");
  EXPECT_EQ(ready.at({"display", "readyBundles"})->asString(), "3/3");
  EXPECT_EQ(ready.at({"agent", "lastSeen"})->asString(), "2026-12-06T00:00:00Z");
  EXPECT_EQ(ready.getInt("desiredReadyGitRepos"), 2);
  EXPECT_EQ(ready.getInt("observedGeneration"), 2);
  EXPECT_EQ(conditionOf(ready, "Ready")->getString("status"), "True");

  facts.summary->state = "Offline";
  facts.summary->offline = true;
  facts.summary->message = "no heartbeat for 2m";
  const Json offline = clusterStatus(facts, "now");
  EXPECT_EQ(conditionOf(offline, "Ready")->getString("status"), "False");
  EXPECT_EQ(conditionOf(offline, "Ready")->getString("reason"), "Offline");
}

TEST(FleetStatus, AClusterGroupSaysWhetherItsSpecWasAccepted) {
  ClusterGroupFacts facts;
  facts.acceptance = Acceptance{.generation = 1, .accepted = false, .message = "spec.selector: unknown field"};
  const Json status = clusterGroupStatus(facts, "now");
  EXPECT_EQ(conditionOf(status, "Accepted")->getString("status"), "False");
  EXPECT_EQ(conditionOf(status, "Accepted")->getString("message"), "spec.selector: unknown field");
}

events::ClusterSummary clusterRollUp(const std::string& state, int64_t ready, int64_t desired, bool offline = false) {
  events::ClusterSummary out;
  out.state = state;
  out.offline = offline;
  out.summary = Json::obj({{"ready", Json(ready)}, {"desiredReady", Json(desired)}});
  if (ready < desired) {
    out.summary["notReady"] = Json(desired - ready);
  }
  return out;
}

TEST(FleetStatus, AClustersLastSeenAloneIsWrittenAtMostEveryFifteenMinutes) {
  ClusterFacts facts;
  facts.summary = clusterRollUp("Ready", 1, 1);
  facts.summary->last_seen = "2026-12-06T10:00:00Z";
  const Json written = clusterStatus(facts, "now");
  facts.summary->last_seen = "2026-12-06T10:05:00Z";
  EXPECT_TRUE(onlyLivenessTimesMoved(clusterStatus(facts, "now"), written));
  facts.summary->last_seen = "2026-12-06T10:15:00Z";
  EXPECT_FALSE(onlyLivenessTimesMoved(clusterStatus(facts, "now"), written));
  // Any other change is written at once, with the last seen time it brings.
  facts.summary->last_seen = "2026-12-06T10:01:00Z";
  facts.summary->state = "NotReady";
  EXPECT_FALSE(onlyLivenessTimesMoved(clusterStatus(facts, "now"), written));
}

TEST(FleetStatus, AGitReposPollTimeAloneIsWrittenAtMostEveryFifteenMinutes) {
  GitRepoFacts facts;
  events::PollStatus poll;
  poll.commit = "abc";
  poll.last_poll_time = "2026-12-06T10:00:00Z";
  facts.poll = poll;
  const Json written = gitRepoStatus(facts, "now");
  facts.poll->last_poll_time = "2026-12-06T10:00:15Z";
  EXPECT_TRUE(onlyLivenessTimesMoved(gitRepoStatus(facts, "now"), written));
  facts.poll->commit = "def";  // a new commit is written at once
  EXPECT_FALSE(onlyLivenessTimesMoved(gitRepoStatus(facts, "now"), written));
  facts.poll->commit = "abc";
  facts.poll->last_poll_time = "2026-12-06T10:20:00Z";
  EXPECT_FALSE(onlyLivenessTimesMoved(gitRepoStatus(facts, "now"), written));
}

TEST(FleetStatus, AClusterGroupCountsItsClustersAndAddsUpTheirBundles) {
  ClusterGroupFacts facts;
  facts.acceptance = Acceptance{.generation = 2, .accepted = true, .message = ""};
  facts.members = std::vector<GroupMember>{{.name = "a", .summary = clusterRollUp("Ready", 2, 2)},
                                           {.name = "b", .summary = clusterRollUp("NotReady", 1, 2)},
                                           {.name = "c", .summary = clusterRollUp("Ready", 2, 2, /*offline=*/true)},
                                           {.name = "d", .summary = std::nullopt}};
  const Json status = clusterGroupStatus(facts, "now");
  EXPECT_EQ(status.getInt("clusterCount"), 4);
  EXPECT_EQ(status.getInt("nonReadyClusterCount"), 3);
  EXPECT_EQ(status.find("nonReadyClusters")->dump(), R"(["b","c","d"])");
  EXPECT_EQ(status.at({"display", "readyClusters"})->asString(), "1/4");
  EXPECT_EQ(status.at({"display", "readyBundles"})->asString(), "5/6");
  EXPECT_EQ(status.at({"summary", "notReady"})->asInt(), 1);
  EXPECT_EQ(conditionOf(status, "Ready")->getString("status"), "False");
  EXPECT_EQ(conditionOf(status, "Ready")->getString("message"), "3 of 4 clusters not ready: b, c, d");
}

TEST(FleetStatus, AnEmptyClusterGroupIsReadyAndOneNotStoredYetIsUnknown) {
  ClusterGroupFacts facts;
  facts.members = std::vector<GroupMember>{};
  const Json empty = clusterGroupStatus(facts, "now");
  EXPECT_EQ(empty.at({"display", "readyClusters"})->asString(), "0/0");
  EXPECT_EQ(conditionOf(empty, "Ready")->getString("status"), "True");
  facts.members.reset();
  const Json unknown = clusterGroupStatus(facts, "now");
  EXPECT_FALSE(unknown.contains("clusterCount"));
  EXPECT_EQ(conditionOf(unknown, "Ready")->getString("status"), "Unknown");
}

TEST(FleetStatus, AClusterGroupNamesAtMostTenNonReadyClusters) {
  ClusterGroupFacts facts;
  facts.members.emplace();
  for (int i = 0; i < 12; ++i) {
    facts.members->push_back({.name = "c" + std::to_string(10 + i), .summary = clusterRollUp("NotReady", 0, 1)});
  }
  const Json status = clusterGroupStatus(facts, "now");
  EXPECT_EQ(status.find("nonReadyClusters")->asArray().size(), 10U);
  EXPECT_EQ(status.getInt("nonReadyClusterCount"), 12);
  EXPECT_NE(conditionOf(status, "Ready")->getString("message").find(", ..."), std::string::npos);
}

}  // namespace
}  // namespace flotilla::gateway
