// The spec store against a real nats-server (JetStream KV): created/configured/unchanged, generation, uid and
// creationTimestamp kept across updates, status never stored, removal idempotent, a deregistration withdrawn.
#include "flotilla/specs/store.h"

#include <gtest/gtest.h>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"

namespace flotilla::specs {
namespace {

class SpecStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = harness::sharedNatsServer();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    auto conn = bus::Connection::connect({.servers = {(*server)->url()}, .name = "specs-test"});
    ASSERT_TRUE(conn.ok()) << conn.error().describe();
    auto js = bus::JetStream::create(*conn);
    ASSERT_TRUE(js.ok()) << js.error().describe();
    auto kv = bus::KeyValue::ensure(*js, {.bucket = harness::uniqueName("specs")});
    ASSERT_TRUE(kv.ok()) << kv.error().describe();
    conn_ = *conn;
    js_ = *js;
    kv_ = *kv;
  }

  static model::GitRepo gitRepo(const std::string& branch) {
    auto decoded = model::decodeGitRepo(*Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo",
        "metadata":{"name":"web","namespace":"fleet-default","uid":"from-the-api-server","generation":7},
        "spec":{"repo":"https://git.example/web","branch":")" +
                                                     branch + R"(","paths":["app"]},
        "status":{"commit":"ignored for fleet.cattle.io"}})"));
    EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
    return *decoded;
  }

  model::GitRepo stored(const std::string& key) {
    auto entry = kv_->get(key);
    EXPECT_TRUE(entry.ok()) << entry.error().describe();
    auto decoded = model::decodeGitRepo(*Json::parse(entry->value));
    EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
    return *decoded;
  }

  std::shared_ptr<bus::Connection> conn_;
  std::shared_ptr<bus::JetStream> js_;
  std::shared_ptr<bus::KeyValue> kv_;
};

TEST_F(SpecStoreTest, GitRepoIsCreatedConfiguredAndUnchangedWithItsGenerationKept) {
  const std::string key = events::gitRepoKey("fleet-default", "web");
  auto created = storeGitRepo(*kv_, gitRepo("main"));
  ASSERT_TRUE(created.ok()) << created.error().describe();
  EXPECT_EQ(*created, "created");
  const model::GitRepo first = stored(key);
  EXPECT_EQ(first.metadata.generation, 1);
  EXPECT_FALSE(first.metadata.uid.empty());
  EXPECT_FALSE(first.metadata.creation_timestamp.empty());

  auto same = storeGitRepo(*kv_, gitRepo("main"));
  ASSERT_TRUE(same.ok()) << same.error().describe();
  EXPECT_EQ(*same, "unchanged");

  auto changed = storeGitRepo(*kv_, gitRepo("release"));
  ASSERT_TRUE(changed.ok()) << changed.error().describe();
  EXPECT_EQ(*changed, "configured");
  const model::GitRepo second = stored(key);
  EXPECT_EQ(second.metadata.generation, 2);
  EXPECT_EQ(second.metadata.uid, first.metadata.uid);
  EXPECT_EQ(second.metadata.creation_timestamp, first.metadata.creation_timestamp);
  EXPECT_EQ(second.spec.branch, "release");
  EXPECT_EQ(second.status, model::GitRepoStatus{});
}

TEST_F(SpecStoreTest, RemovingIsIdempotent) {
  ASSERT_TRUE(storeGitRepo(*kv_, gitRepo("main")).ok());
  ASSERT_TRUE(removeGitRepo(*kv_, "fleet-default", "web").ok());
  auto gone = kv_->find(events::gitRepoKey("fleet-default", "web"));
  ASSERT_TRUE(gone.ok()) << gone.error().describe();
  EXPECT_FALSE(gone->has_value());
  EXPECT_TRUE(removeGitRepo(*kv_, "fleet-default", "web").ok());
  EXPECT_TRUE(removeClusterGroup(*kv_, "fleet-default", "never-stored").ok());
}

TEST_F(SpecStoreTest, ClusterDocumentWithdrawsADeregistration) {
  ASSERT_TRUE(kv_->put(events::clusterDeregisteredKey("edge-1"), R"({"cluster":"edge-1"})").ok());
  auto cluster = model::decodeCluster(*Json::parse(
      R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster","metadata":{"name":"edge-1",
          "namespace":"fleet-default","labels":{"env":"prod"}},"spec":{}})"));
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  auto stored = storeClusterDocument(*kv_, *cluster);
  ASSERT_TRUE(stored.ok()) << stored.error().describe();
  EXPECT_NE(stored->find("deregistration withdrawn"), std::string::npos) << *stored;
  auto tombstone = kv_->find(events::clusterDeregisteredKey("edge-1"));
  ASSERT_TRUE(tombstone.ok());
  EXPECT_FALSE(tombstone->has_value());
}

TEST_F(SpecStoreTest, DeregisteringWritesTheTombstoneOnceAndRemovesTheDocument) {
  auto cluster = model::decodeCluster(*Json::parse(
      R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster","metadata":{"name":"edge-2"},"spec":{}})"));
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  ASSERT_TRUE(storeClusterDocument(*kv_, *cluster).ok());
  ASSERT_TRUE(deregisterCluster(*kv_, "edge-2", false).ok());
  auto tombstone = kv_->get(events::clusterDeregisteredKey("edge-2"));
  ASSERT_TRUE(tombstone.ok()) << tombstone.error().describe();
  auto document = kv_->find(events::clusterSpecKey("edge-2"));
  ASSERT_TRUE(document.ok());
  EXPECT_FALSE(document->has_value());
  // Again (a retry after a partial failure): the tombstone is not rewritten.
  ASSERT_TRUE(deregisterCluster(*kv_, "edge-2", false).ok());
  auto again = kv_->get(events::clusterDeregisteredKey("edge-2"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->revision, tombstone->revision);
}

}  // namespace
}  // namespace flotilla::specs
