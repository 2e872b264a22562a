#include "flotilla/bus/object_store.h"

#include <cstring>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "bus_test_util.h"
#include "flotilla/core/util.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;

std::string randomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < size; ++i) {
    out[i] = static_cast<char>(rng());
  }
  return out;
}

class BusObjectStoreTest : public testing::BusTest {
 protected:
  void setUpBus() override {
    bucket_ = harness::uniqueName("obj");
    assignOk(ObjectStore::open(js_, bucket_), store_);
  }
  void tearDownBus() override {
    store_.reset();
    (void)js_->deleteStream(objectStreamName(bucket_));
  }

  uint64_t streamMessages() {
    auto info = js_->streamInfo(objectStreamName(bucket_));
    EXPECT_TRUE(info.ok());
    return info.ok() ? info->messages : 0;
  }

  std::string bucket_;
  std::shared_ptr<ObjectStore> store_;
};

// A 64 MiB object of random bytes comes back byte for byte, in 512 chunks, with the right digest.
TEST_F(BusObjectStoreTest, SixtyFourMiBRoundTrip) {
  const std::string data = randomBytes(64u << 20, 42);
  auto put = store_->put("big/blob.bin", data);
  ASSERT_TRUE(put.ok()) << put.error().describe();
  EXPECT_EQ(put->size, data.size());
  EXPECT_EQ(put->chunks, 512u);
  EXPECT_EQ(put->digest, objectDigest(sha256Raw(data)));
  EXPECT_EQ(put->bucket, bucket_);
  EXPECT_EQ(streamMessages(), 513u);  // 512 chunks + 1 meta

  auto got = store_->get("big/blob.bin");
  ASSERT_TRUE(got.ok()) << got.error().describe();
  ASSERT_EQ(got->size(), data.size());
  EXPECT_TRUE(*got == data);
  auto info = store_->info("big/blob.bin");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->digest, put->digest);
  EXPECT_EQ(info->nuid, put->nuid);
}

TEST_F(BusObjectStoreTest, ChunkBoundaries) {
  struct Case {
    size_t size;
    uint64_t chunks;
  };
  for (Case c : {Case{0, 0}, Case{1, 1}, Case{kObjectChunkSize, 1}, Case{kObjectChunkSize + 1, 2},
                 Case{3 * kObjectChunkSize, 3}}) {
    std::string name = "obj-" + std::to_string(c.size);
    std::string data = randomBytes(c.size, c.size);
    auto put = store_->put(name, data);
    ASSERT_TRUE(put.ok()) << put.error().describe();
    EXPECT_EQ(put->chunks, c.chunks) << c.size;
    auto got = store_->get(name);
    ASSERT_TRUE(got.ok()) << got.error().describe();
    EXPECT_TRUE(*got == data) << c.size;
  }
}

// The layout other clients read: meta on $O.<bucket>.M.<base64url(name)> with a rollup header, chunks on
// $O.<bucket>.C.<nuid>.
TEST_F(BusObjectStoreTest, UsesTheStandardWireLayout) {
  auto put = store_->put("manifests/abc.yaml", "kind: ConfigMap\n");
  ASSERT_TRUE(put.ok());
  auto meta = js_->getLastMessage(objectStreamName(bucket_), objectMetaSubject(bucket_, "manifests/abc.yaml"));
  ASSERT_TRUE(meta.ok()) << meta.error().describe();
  EXPECT_EQ(meta->header("Nats-Rollup").value_or(""), "sub");
  auto decoded = decodeObjectMeta(meta->data());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->name, "manifests/abc.yaml");
  EXPECT_EQ(decoded->size, 16u);
  auto chunk = js_->getLastMessage(objectStreamName(bucket_), objectChunkSubject(bucket_, put->nuid));
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->data(), "kind: ConfigMap\n");
}

// Overwriting writes new chunks, then the meta, then purges the old chunks: the stream shrinks back.
TEST_F(BusObjectStoreTest, OverwritePurgesOldChunks) {
  std::string v1 = randomBytes(8 * kObjectChunkSize, 1);
  auto first = store_->put("doc", v1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(streamMessages(), 9u);
  std::string v2 = randomBytes(3 * kObjectChunkSize - 5, 2);
  auto second = store_->put("doc", v2);
  ASSERT_TRUE(second.ok()) << second.error().describe();
  EXPECT_NE(second->nuid, first->nuid);
  EXPECT_EQ(streamMessages(), 4u);  // 3 new chunks + 1 meta (rolled up)
  auto counts = js_->streamInfo(objectStreamName(bucket_), objectChunkSubject(bucket_, first->nuid));
  ASSERT_TRUE(counts.ok());
  EXPECT_TRUE(counts->subjects.empty());
  auto got = store_->get("doc");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == v2);
}

TEST_F(BusObjectStoreTest, DeleteThenGetIsNotFound) {
  ASSERT_TRUE(store_->put("gone", randomBytes(300000, 3)).ok());
  ASSERT_TRUE(store_->remove("gone").ok());
  auto got = store_->get("gone");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().kind, ErrorKind::kNotFound) << got.error().describe();
  EXPECT_EQ(store_->info("gone").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(store_->remove("gone").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(streamMessages(), 1u);  // only the delete marker (meta with deleted=true) is left
  auto meta = js_->getLastMessage(objectStreamName(bucket_), objectMetaSubject(bucket_, "gone"));
  ASSERT_TRUE(meta.ok());
  EXPECT_TRUE(decodeObjectMeta(meta->data())->deleted);
  // Putting it again brings it back.
  ASSERT_TRUE(store_->put("gone", "back").ok());
  EXPECT_EQ(*store_->get("gone"), "back");
}

TEST_F(BusObjectStoreTest, MissingObjectIsNotFound) {
  EXPECT_EQ(store_->get("never").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(store_->info("never").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(store_->remove("never").error().kind, ErrorKind::kNotFound);
}

TEST_F(BusObjectStoreTest, ListIsSortedAndHidesDeleted) {
  ASSERT_TRUE(store_->put("b", "2").ok());
  ASSERT_TRUE(store_->put("a", "1").ok());
  ASSERT_TRUE(store_->put("c", "3").ok());
  ASSERT_TRUE(store_->remove("c").ok());
  auto list = store_->list();
  ASSERT_TRUE(list.ok()) << list.error().describe();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "a");
  EXPECT_EQ((*list)[1].name, "b");
  auto with_deleted = store_->list(true);
  ASSERT_TRUE(with_deleted.ok());
  ASSERT_EQ(with_deleted->size(), 3u);
  EXPECT_TRUE((*with_deleted)[2].deleted);
}

TEST_F(BusObjectStoreTest, ListOfEmptyBucket) {
  auto list = store_->list();
  ASSERT_TRUE(list.ok()) << list.error().describe();
  EXPECT_TRUE(list->empty());
}

// A meta whose digest does not match the chunks is reported, not returned.
TEST_F(BusObjectStoreTest, DigestMismatchIsDetected) {
  auto put = store_->put("tampered", randomBytes(200000, 4));
  ASSERT_TRUE(put.ok());
  ObjectInfo forged = *put;
  forged.digest = objectDigest(sha256Raw("something else"));
  ASSERT_TRUE(
      js_->publish(objectMetaSubject(bucket_, "tampered"), encodeObjectMeta(forged), {}, {{"Nats-Rollup", "sub"}})
          .ok());
  auto got = store_->get("tampered");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().kind, ErrorKind::kInternal);
  EXPECT_NE(got.error().message.find("corrupt"), std::string::npos) << got.error().message;
}

TEST_F(BusObjectStoreTest, FileVariantsStream) {
  auto dir = makeTempDir("bus-obj");
  ASSERT_TRUE(dir.ok());
  std::string data = randomBytes(5 * kObjectChunkSize + 77, 5);
  ASSERT_TRUE(writeFile(*dir + "/in.bin", data).ok());
  auto put = store_->putFile("file", *dir + "/in.bin");
  ASSERT_TRUE(put.ok()) << put.error().describe();
  EXPECT_EQ(put->chunks, 6u);
  auto got = store_->getToFile("file", *dir + "/out.bin");
  ASSERT_TRUE(got.ok()) << got.error().describe();
  EXPECT_EQ(readFile(*dir + "/out.bin").valueOr(""), data);
  EXPECT_EQ(store_->putFile("x", *dir + "/missing.bin").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(store_->getToFile("missing", *dir + "/never.bin").error().kind, ErrorKind::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(*dir + "/never.bin")) << "a failed get must not leave a file behind";
  removeAll(*dir);
}

// A failing reader abandons the put: no meta is written and its chunks are purged.
TEST_F(BusObjectStoreTest, FailedPutLeavesNothingBehind) {
  int calls = 0;
  auto put = store_->put("partial", [&](char* buffer, size_t capacity) -> Result<size_t> {
    if (++calls > 3) {
      return fail(ErrorKind::kPermanent, "disk on fire");
    }
    std::memset(buffer, 'x', capacity);
    return capacity;
  });
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().kind, ErrorKind::kPermanent);
  EXPECT_EQ(store_->info("partial").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(streamMessages(), 0u);
}

TEST_F(BusObjectStoreTest, OpenWithoutCreateOfMissingBucketIsNotFound) {
  auto store = ObjectStore::open(js_, harness::uniqueName("noobj"), false);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().kind, ErrorKind::kNotFound) << store.error().describe();
  EXPECT_EQ(ObjectStore::open(js_, "bad.name").error().kind, ErrorKind::kInvalid);
  // An existing bucket opens without create.
  EXPECT_TRUE(ObjectStore::open(js_, bucket_, false).ok());
}

}  // namespace
}  // namespace flotilla::bus
