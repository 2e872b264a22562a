// End-to-end: the hub on a 3-node JetStream cluster (issue 13, "A hub that outgrows one machine"). Every stream, KV
// bucket and object store has 3 replicas (--store-replicas 3) and every process lists all three nodes. A node killed
// with kill -9 in the middle of a rollout loses nothing (the commit lands on both clusters), applies nothing twice
// (each agent logs one "bundle applied" per commit), and the pipeline carries on with the two nodes left — and
// again once the node is back. The hub runs as deployed: operator-mode authentication and TLS on every node, each
// service and agent with its own identity.
#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"

namespace flotilla::e2e {
namespace {

TEST(NatsClusterPipelineTest, AKilledNatsNodeMidRolloutLosesNothingAndAppliesNothingTwice) {
  auto started = Hub::start({.secure = true, .nats_nodes = 3});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  ASSERT_NE(hub.natsCluster(), nullptr);
  const std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  const std::string name = "natscluster-" + randomHex(3);
  const std::string ns = "ns-" + name;
  auto first = applyConfigMapRepo(hub, name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  // Which services still run, with their logs: what a failure needs to be understood.
  auto state = [&] {
    std::string out;
    for (const char* service : {"poller", "bundler", "scheduler", "agent-0", "agent-1"}) {
      out += std::string(service) + (hub.running(service) ? " running" : " NOT running") + "; ";
    }
    return out + "\n" + hub.allLogs(60);
  };
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, both); }, kLands)) << state();

  // Every store of the hub has 3 replicas.
  auto js = hub.js();
  ASSERT_TRUE(js.ok()) << js.error().describe();
  for (const char* stream : {"FLOTILLA_DEPLOY", "FLOTILLA_STATUS", "KV_deployments", "OBJ_manifests"}) {
    auto info = (*js)->streamInfo(stream);
    ASSERT_TRUE(info.ok()) << stream << ": " << info.error().describe();
    EXPECT_EQ(info->replicas, 3) << stream;
  }

  // A commit, and a node killed while it rolls out.
  auto second = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  hub.natsCluster()->node(0).kill9();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, both); }, kLands)) << state();
  EXPECT_EQ(configMapValue(hub, 0, ns, "c", "value"), "v2");
  EXPECT_EQ(configMapValue(hub, 1, ns, "c", "value"), "v2");

  // The pipeline carries on with two nodes.
  auto third = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v3")}}, "third");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *third, both); }, kLands)) << state();

  // And with the node back.
  ASSERT_TRUE(hub.natsCluster()->node(0).restart().ok());
  auto fourth = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v4")}}, "fourth");
  ASSERT_TRUE(fourth.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *fourth, both); }, kLands)) << state();

  // The log line follows the Ready report by moments: wait for each, then none may be there twice.
  for (size_t i = 0; i < 2; ++i) {
    for (const auto* commit : {&*second, &*third, &*fourth}) {
      EXPECT_TRUE(Hub::waitFor([&] { return appliesOf(hub, i, *commit) >= 1; }, std::chrono::seconds(10)))
          << "agent-" << i << " commit " << *commit << "\n"
          << linesNaming(hub, i, *commit);
      EXPECT_EQ(appliesOf(hub, i, *commit), 1u) << "agent-" << i << " commit " << *commit;
    }
  }
}

}  // namespace
}  // namespace flotilla::e2e
