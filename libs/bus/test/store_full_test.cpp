// Size caps against a real nats-server: a stream, KV bucket or object store at its max_bytes refuses new writes
// with kStoreFull naming the store, keeps what it has, and accepts writes again once space is freed.
#include <gtest/gtest.h>

#include "bus_test_util.h"
#include "flotilla/bus/errors.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"

namespace flotilla::bus {
namespace {

class BusStoreFullTest : public testing::BusTest {
 protected:
  void tearDownBus() override {
    for (const auto& stream : streams_) {
      (void)js_->deleteStream(stream);
    }
  }
  std::vector<std::string> streams_;
};

TEST_F(BusStoreFullTest, FullStreamRefusesPublishNamingTheStream) {
  const std::string name = harness::uniqueName("CAPPED");
  streams_.push_back(name);
  const std::string subject = name + ".x";
  ASSERT_TRUE(
      js_->ensureStream({.name = name, .subjects = {name + ".>"}, .max_bytes = 4096, .discard_new = true}).ok());
  const std::string payload(1000, 'a');
  Result<PublishAck> last = PublishAck{};
  int stored = 0;
  for (int i = 0; i < 20 && last.ok(); ++i) {
    last = js_->publish(subject, payload, "m" + std::to_string(i));
    stored += last.ok() ? 1 : 0;
  }
  ASSERT_FALSE(last.ok()) << "a 4 KiB stream took 20 KB";
  EXPECT_EQ(last.error().kind, ErrorKind::kStoreFull) << last.error().describe();
  EXPECT_NE(last.error().message.find("stream " + name + " is full: "), std::string::npos) << last.error().message;
  EXPECT_EQ(fullStoreName(last.error()), name);
  auto info = js_->streamInfo(name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, static_cast<uint64_t>(stored));  // nothing already stored was dropped

  ASSERT_TRUE(js_->purgeSubject(name, subject).ok());
  EXPECT_TRUE(js_->publish(subject, payload, "after-purge").ok());
}

// A batch that runs into a full stream fails as one publish would: kStoreFull naming the stream.
TEST_F(BusStoreFullTest, FullStreamRefusesABatchNamingTheStream) {
  const std::string name = harness::uniqueName("CAPPEDBATCH");
  streams_.push_back(name);
  ASSERT_TRUE(
      js_->ensureStream({.name = name, .subjects = {name + ".>"}, .max_bytes = 4096, .discard_new = true}).ok());
  std::vector<JetStream::Outgoing> batch;
  for (int i = 0; i < 20; ++i) {
    batch.push_back({.subject = name + ".x", .data = std::string(1000, 'a'), .msg_id = "m" + std::to_string(i)});
  }
  auto acks = js_->publishAll(batch);
  ASSERT_FALSE(acks.ok()) << "a 4 KiB stream took 20 KB";
  EXPECT_EQ(acks.error().kind, ErrorKind::kStoreFull) << acks.error().describe();
  EXPECT_EQ(fullStoreName(acks.error()), name);
}

TEST_F(BusStoreFullTest, FullKvBucketRefusesPutNamingTheBucketAndKeepsItsKeys) {
  const std::string bucket = harness::uniqueName("kvcap");
  streams_.push_back("KV_" + bucket);
  std::shared_ptr<KeyValue> kv;
  assignOk(KeyValue::ensure(js_, KvConfig{.bucket = bucket, .max_bytes = 4096}), kv);
  const std::string value(1000, 'v');
  Status last;
  for (int i = 0; i < 20 && last.ok(); ++i) {
    auto put = kv->put("k" + std::to_string(i), value);
    last = put.ok() ? Status() : Status(fail(put.error()));
  }
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.error().kind, ErrorKind::kStoreFull) << last.error().describe();
  EXPECT_EQ(fullStoreName(last.error()), bucket) << last.error().message;
  EXPECT_TRUE(kv->get("k0").ok()) << "a full bucket must refuse new writes, never drop its oldest keys";
}

TEST_F(BusStoreFullTest, ExistingBucketGetsTheCapOnEnsure) {
  const std::string bucket = harness::uniqueName("kvlater");
  streams_.push_back("KV_" + bucket);
  ASSERT_TRUE(KeyValue::ensure(js_, KvConfig{.bucket = bucket}).ok());
  ASSERT_TRUE(KeyValue::ensure(js_, KvConfig{.bucket = bucket, .max_bytes = 8192}).ok());
  std::shared_ptr<KeyValue> kv;
  assignOk(KeyValue::open(js_, bucket), kv);
  Status last;
  for (int i = 0; i < 20 && last.ok(); ++i) {
    auto put = kv->put("k" + std::to_string(i), std::string(1000, 'v'));
    last = put.ok() ? Status() : Status(fail(put.error()));
  }
  EXPECT_FALSE(last.ok());
}

TEST_F(BusStoreFullTest, FullObjectStoreRefusesPutNamingTheStoreAndPurgeFreesSpace) {
  const std::string bucket = harness::uniqueName("objcap");
  streams_.push_back(objectStreamName(bucket));
  std::shared_ptr<ObjectStore> store;
  assignOk(ObjectStore::open(js_, bucket, true, StorageType::kFile, int64_t{400} << 10), store);
  const std::string big(size_t{300} << 10, 'x');
  ASSERT_TRUE(store->put("first", big).ok());
  auto second = store->put("second", big);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().kind, ErrorKind::kStoreFull) << second.error().describe();
  EXPECT_NE(second.error().message.find("object store " + bucket + " is full: "), std::string::npos)
      << second.error().message;
  EXPECT_EQ(fullStoreName(second.error()), bucket);
  EXPECT_EQ(store->info("second").error().kind, ErrorKind::kNotFound);  // the failed put left nothing behind
  EXPECT_EQ(store->get("first").valueOr(""), big);

  ASSERT_TRUE(store->purge("first").ok());
  EXPECT_EQ(store->info("first").error().kind, ErrorKind::kNotFound);
  auto listed = store->list(true);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << "a purge leaves no tombstone";
  EXPECT_TRUE(store->put("second", big).ok());
}

}  // namespace
}  // namespace flotilla::bus
