// The bus on a real 3-node JetStream cluster (harness::NatsCluster): a stream and a KV bucket with 3 replicas keep
// every message and key when the node a client is connected to is killed with kill -9; the client fails over to the
// other nodes and goes on; the restarted node catches up; a replica count can be changed on an existing store.
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/harness/nats_cluster.h"
#include "flotilla/harness/poll.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;

//! Retries `op` until it succeeds: right after a node dies, JetStream answers errors until new leaders are elected.
template <typename Op>
bool eventually(Op op, std::chrono::milliseconds timeout = 30s) {
  return harness::waitUntil([&] { return op(); }, timeout);
}

TEST(BusClusterTest, ThreeReplicasKeepEverythingWhenANodeIsKilled) {
  auto cluster = harness::NatsCluster::start();
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  harness::NatsCluster& nodes = **cluster;
  ASSERT_EQ(nodes.size(), 3u);
  // The first node first: the client is connected to the node that is killed below.
  auto connection = Connection::connect({.servers = nodes.urlList(), .name = "cluster-test"});
  ASSERT_TRUE(connection.ok()) << connection.error().describe();
  auto js = JetStream::create(*connection);
  ASSERT_TRUE(js.ok()) << js.error().describe();
  auto info = (*js)->ensureStream({.name = "R3", .subjects = {"r3.>"}, .replicas = 3});
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->replicas, 3);
  auto kv = KeyValue::ensure(*js, {.bucket = "r3kv", .replicas = 3});
  ASSERT_TRUE(kv.ok()) << kv.error().describe();
  ASSERT_TRUE((*kv)->put("k", "v1").ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*js)->publish("r3.a", "before-" + std::to_string(i), "b" + std::to_string(i)).ok());
  }

  nodes.node(0).kill9();
  for (int i = 0; i < 10; ++i) {
    const std::string id = "a" + std::to_string(i);
    EXPECT_TRUE(eventually([&] { return (*js)->publish("r3.a", "after-" + std::to_string(i), id).ok(); }))
        << "publish " << i << " after the kill";
  }
  EXPECT_TRUE(eventually([&] { return (*kv)->put("k", "v2").ok(); }));

  ASSERT_TRUE(nodes.node(0).restart().ok());
  ASSERT_TRUE(nodes.waitCurrent(60s).ok());
  StreamInfo after;
  EXPECT_TRUE(eventually([&] {
    auto got = (*js)->streamInfo("R3");
    if (got.ok()) {
      after = *got;
    }
    return got.ok() && got->messages == 20;
  })) << "messages "
      << after.messages;
  auto value = (*kv)->get("k");
  ASSERT_TRUE(value.ok()) << value.error().describe();
  EXPECT_EQ(value->value, "v2");

  // A store made with one replica is brought to three (what --store-replicas does to an existing hub).
  ASSERT_TRUE((*js)->ensureStream({.name = "R1", .subjects = {"r1.>"}, .replicas = 1}).ok());
  ASSERT_TRUE((*js)->applyLimits("R1", -1, /*discard_new=*/false, 3).ok());
  auto scaled = (*js)->streamInfo("R1");
  ASSERT_TRUE(scaled.ok()) << scaled.error().describe();
  EXPECT_EQ(scaled->replicas, 3);
}

}  // namespace
}  // namespace flotilla::bus
