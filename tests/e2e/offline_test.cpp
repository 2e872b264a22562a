// End-to-end: an agent killed with kill -9 makes its cluster Offline on the hub (what `flotilla get clusters`
// shows), a commit meanwhile reaches the other cluster, and the restarted agent converges from its durable: the
// commit lands and the cluster is back (issue 13, "Offline clusters"). A cluster whose record the hub lost is
// registered again by its running agent, asked by the hub when its next heartbeat arrives.
#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::e2e {
namespace {

//! The `get clusters -o json` item of `cluster`'s display state ("" when it cannot be read).
std::string clusterState(Hub& hub, const std::string& cluster) {
  auto listed = hub.cli({"get", "clusters", "-o", "json"});
  if (!listed.ok() || listed->exit_code != 0) {
    return {};
  }
  auto json = Json::parse(listed->out);
  if (!json.ok()) {
    return {};
  }
  const Json* items = json->find("items");
  if (items == nullptr || !items->isArray()) {
    return {};
  }
  for (const auto& item : items->asArray()) {
    const Json* name = item.at({"metadata", "name"});
    const Json* state = item.at({"status", "display", "state"});
    if (name != nullptr && name->isString() && name->asString() == cluster && state != nullptr && state->isString()) {
      return state->asString();
    }
  }
  return {};
}

TEST(PipelineOfflineTest, AKilledAgentsClusterIsOfflineAndConvergesWhenItReturns) {
  // Heartbeats every second: a silent agent is Offline after 3 s.
  auto started = Hub::start({.services = {{"scheduler", {.flags = {"--agent-heartbeat-interval", "1"}}},
                                          {"agent", {.flags = {"--heartbeat-interval", "1s"}}}}});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  const std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  const std::string name = "offline-" + randomHex(3);
  const std::string ns = "ns-" + name;
  auto first = applyConfigMapRepo(hub, name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, both); }, kLands)) << hub.allLogs();
  EXPECT_EQ(clusterState(hub, both[0]), "Ready");

  hub.kill9("agent-0");
  ASSERT_TRUE(Hub::waitFor([&] { return clusterState(hub, both[0]) == "Offline"; }, std::chrono::seconds(30)))
      << "state " << clusterState(hub, both[0]) << "\n"
      << hub.logTail("scheduler");
  EXPECT_EQ(clusterState(hub, both[1]), "Ready") << "the other agent keeps beating";

  // A commit while it is away reaches the other cluster; the offline one keeps the old content.
  auto second = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, {both[1]}); }, kLands)) << hub.allLogs();
  EXPECT_EQ(configMapValue(hub, 0, ns, "c", "value"), "v1");
  EXPECT_EQ(clusterState(hub, both[0]), "Offline");

  // Back: the restarted agent takes the waiting deploy from its durable, and the cluster is no longer Offline.
  ASSERT_TRUE(hub.startService("agent-0").ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, both); }, kLands)) << hub.allLogs();
  EXPECT_EQ(configMapValue(hub, 0, ns, "c", "value"), "v2");
  EXPECT_TRUE(Hub::waitFor([&] { return clusterState(hub, both[0]) == "Ready"; }, std::chrono::seconds(30)))
      << "state " << clusterState(hub, both[0]);
}

// With the hub's identities (the server checks that the scheduler may ask and the agent may listen): the cluster
// record removed from KV (as if the hub's state were lost), the agent's next heartbeat makes the scheduler ask it
// to register again, and it does, with the credentials it holds; its deployments stay where they are.
TEST(PipelineOfflineTest, AnAgentWhoseRecordTheHubLostRegistersAgainWhenAsked) {
  auto started = Hub::start({.services = {{"scheduler", {.flags = {"--agent-heartbeat-interval", "1"}}},
                                          {"agent", {.flags = {"--heartbeat-interval", "1s"}}}},
                             .secure = true});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  const std::string cluster = hub.clusterName(0);
  ASSERT_TRUE(Hub::waitFor([&] { return !clusterState(hub, cluster).empty(); }, kLands)) << hub.allLogs();
  auto clusters = hub.kv("clusters");
  ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
  auto before = (*clusters)->get(events::clusterKey(cluster));
  ASSERT_TRUE(before.ok()) << before.error().describe();

  ASSERT_TRUE((*clusters)->remove(events::clusterKey(cluster)).ok());
  ASSERT_TRUE(Hub::waitFor(
      [&] {
        auto record = (*clusters)->get(events::clusterKey(cluster));
        return record.ok() && record->revision > before->revision;
      },
      std::chrono::seconds(30)))
      << hub.logTail("scheduler") << hub.logTail("agent-0");
  EXPECT_NE(hub.logTail("scheduler", 200).find("asked the agent of an unregistered cluster to register again"),
            std::string::npos);
  EXPECT_NE(hub.logTail("agent-0", 200).find("the hub has no record of this cluster"), std::string::npos);
  EXPECT_TRUE(Hub::waitFor([&] { return !clusterState(hub, cluster).empty(); }, std::chrono::seconds(30)));
}

}  // namespace
}  // namespace flotilla::e2e
