#include "flotilla/bus/kv.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "bus_test_util.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;

class BusKvTest : public testing::BusTest {
 protected:
  void setUpBus() override {
    bucket_ = harness::uniqueName("kv");
    assignOk(KeyValue::ensure(js_, {.bucket = bucket_, .history = 5, .storage = StorageType::kMemory}), kv_);
  }
  void tearDownBus() override {
    kv_.reset();
    (void)KeyValue::destroy(js_, bucket_);
  }

  //! Puts each (key, value) in order; a failed put fails the test. Callers wrap it in ASSERT_NO_FATAL_FAILURE.
  void putAll(std::initializer_list<std::pair<std::string, std::string>> entries) {
    for (const auto& [key, value] : entries) {
      auto put = kv_->put(key, value);
      ASSERT_TRUE(put.ok()) << key << ": " << put.error().describe();
    }
  }

  std::string bucket_;
  std::shared_ptr<KeyValue> kv_;
};

TEST_F(BusKvTest, PutGetAndRevisions) {
  auto r1 = kv_->put("gitrepos.default.app", R"({"v":1})");
  ASSERT_TRUE(r1.ok()) << r1.error().describe();
  auto r2 = kv_->put("gitrepos.default.app", R"({"v":2})");
  ASSERT_TRUE(r2.ok());
  EXPECT_GT(*r2, *r1);
  auto entry = kv_->get("gitrepos.default.app");
  ASSERT_TRUE(entry.ok()) << entry.error().describe();
  EXPECT_EQ(entry->key, "gitrepos.default.app");
  EXPECT_EQ(entry->value, R"({"v":2})");
  EXPECT_EQ(entry->revision, *r2);
  EXPECT_EQ(entry->operation, KvOperation::kPut);
  EXPECT_LT(std::chrono::system_clock::now() - entry->created, 60s);
  auto old = kv_->getRevision("gitrepos.default.app", *r1);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->value, R"({"v":1})");
  auto history = kv_->history("gitrepos.default.app");
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].revision, *r1);
}

// putAll writes each key as put would (readers and watchers see ordinary values), revisions in the batch's order;
// a bad key fails the batch before anything is sent.
TEST_F(BusKvTest, PutAllWritesEveryKeyInOrder) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (int i = 0; i < 500; ++i) {
    entries.emplace_back("deployments.c" + std::to_string(i), "v" + std::to_string(i));
  }
  entries.emplace_back("deployments.c7", "v7-again");
  auto revisions = kv_->putAll(entries);
  ASSERT_TRUE(revisions.ok()) << revisions.error().describe();
  ASSERT_EQ(revisions->size(), entries.size());
  EXPECT_TRUE(std::is_sorted(revisions->begin(), revisions->end()));
  auto entry = kv_->get("deployments.c7");
  ASSERT_TRUE(entry.ok()) << entry.error().describe();
  EXPECT_EQ(entry->value, "v7-again") << "the later write of a key wins";
  EXPECT_EQ(entry->revision, revisions->back());
  EXPECT_EQ(kv_->get("deployments.c499")->value, "v499");

  auto refused = kv_->putAll({{"ok.key", "1"}, {"bad key", "2"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalid) << refused.error().describe();
  EXPECT_EQ(kv_->get("ok.key").error().kind, ErrorKind::kNotFound) << "nothing of a refused batch is written";
}

TEST_F(BusKvTest, MissingKeyIsNotFound) {
  auto entry = kv_->get("nope");
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.error().kind, ErrorKind::kNotFound);
}

// find: a missing (or deleted) key is an answer, not a failure.
TEST_F(BusKvTest, FindAnswersNulloptForAMissingKey) {
  auto missing = kv_->find("nope");
  ASSERT_TRUE(missing.ok()) << missing.error().describe();
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(kv_->put("here", "v").ok());
  auto found = kv_->find("here");
  ASSERT_TRUE(found.ok()) << found.error().describe();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->value, "v");
  ASSERT_TRUE(kv_->remove("here").ok());
  auto removed = kv_->find("here");
  ASSERT_TRUE(removed.ok()) << removed.error().describe();
  EXPECT_FALSE(removed->has_value());
}

TEST_F(BusKvTest, BinaryValuesRoundTrip) {
  std::string value("a\0b\xff", 4);
  ASSERT_TRUE(kv_->put("bin", value).ok());
  EXPECT_EQ(kv_->get("bin")->value, value);
}

// Optimistic concurrency: an update based on a stale revision and a create over an existing key are conflicts.
TEST_F(BusKvTest, RevisionConflictIsDetected) {
  auto created = kv_->create("clusters.c1", "v1");
  ASSERT_TRUE(created.ok()) << created.error().describe();
  auto updated = kv_->update("clusters.c1", "v2", *created);
  ASSERT_TRUE(updated.ok()) << updated.error().describe();

  auto stale = kv_->update("clusters.c1", "v3", *created);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().kind, ErrorKind::kConflict) << stale.error().describe();
  EXPECT_EQ(stale.error().where, "kvStore_Update");

  auto again = kv_->create("clusters.c1", "v4");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().kind, ErrorKind::kConflict) << again.error().describe();
  EXPECT_EQ(kv_->get("clusters.c1")->value, "v2");

  // Update of a key that never existed (expected revision > 0) is a conflict too.
  auto phantom = kv_->update("clusters.c9", "x", 42);
  ASSERT_FALSE(phantom.ok());
  EXPECT_EQ(phantom.error().kind, ErrorKind::kConflict) << phantom.error().describe();
}

TEST_F(BusKvTest, DeleteAndPurgeMakeTheKeyNotFound) {
  ASSERT_NO_FATAL_FAILURE(putAll({{"a", "1"}, {"b", "1"}}));
  ASSERT_TRUE(kv_->remove("a").ok());
  EXPECT_EQ(kv_->get("a").error().kind, ErrorKind::kNotFound);
  ASSERT_TRUE(kv_->purge("b").ok());
  EXPECT_EQ(kv_->get("b").error().kind, ErrorKind::kNotFound);
  // A deleted key can be created again.
  auto recreated = kv_->create("a", "2");
  ASSERT_TRUE(recreated.ok()) << recreated.error().describe();
  EXPECT_EQ(kv_->get("a")->value, "2");
}

TEST_F(BusKvTest, KeysWithFilter) {
  ASSERT_NO_FATAL_FAILURE(putAll(
      {{"status.c1.b1", "x"}, {"status.c1.b2", "x"}, {"status.c2.b1", "x"}, {"other", "x"}, {"status.c1.gone", "x"}}));
  ASSERT_TRUE(kv_->remove("status.c1.gone").ok());
  auto c1 = kv_->keys("status.c1.*");
  ASSERT_TRUE(c1.ok()) << c1.error().describe();
  EXPECT_EQ(*c1, (std::vector<std::string>{"status.c1.b1", "status.c1.b2"}));
  auto all = kv_->keys();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u);
}

TEST_F(BusKvTest, KeysOfEmptyBucket) {
  auto keys = kv_->keys();
  ASSERT_TRUE(keys.ok()) << keys.error().describe();
  EXPECT_TRUE(keys->empty());
}

TEST_F(BusKvTest, InvalidKeyIsRejected) {
  for (const char* key : {"", "a b", "a*", ".a", "a>"}) {
    auto put = kv_->put(key, "x");
    ASSERT_FALSE(put.ok()) << key;
    EXPECT_EQ(put.error().kind, ErrorKind::kInvalid);
  }
}

// A watcher delivers the current values, then the end-of-initial-values marker, then live changes.
TEST_F(BusKvTest, WatchDeliversInitialValuesMarkerThenLiveUpdatesAndDeletes) {
  ASSERT_NO_FATAL_FAILURE(putAll({{"deploy.c1", "a"}, {"deploy.c2", "b"}, {"deploy.c2", "b2"}, {"unrelated", "z"}}));
  auto watcher = kv_->watch("deploy.>");
  ASSERT_TRUE(watcher.ok()) << watcher.error().describe();
  EXPECT_FALSE(watcher->initialDone());

  auto first = watcher->next(5s);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->key, "deploy.c1");
  auto second = watcher->next(5s);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->has_value());
  EXPECT_EQ((*second)->key, "deploy.c2");
  EXPECT_EQ((*second)->value, "b2");  // latest only, no history
  auto marker = watcher->next(5s);
  ASSERT_TRUE(marker.ok());
  EXPECT_FALSE(marker->has_value());
  EXPECT_TRUE(watcher->initialDone());

  auto idle = watcher->next(200ms);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(idle->has_value());

  ASSERT_NO_FATAL_FAILURE(putAll({{"deploy.c3", "c"}, {"unrelated", "zz"}}));
  ASSERT_TRUE(kv_->remove("deploy.c1").ok());
  auto live = watcher->next(5s);
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE(live->has_value());
  EXPECT_EQ((*live)->key, "deploy.c3");
  EXPECT_EQ((*live)->value, "c");
  EXPECT_EQ((*live)->operation, KvOperation::kPut);
  auto deleted = watcher->next(5s);
  ASSERT_TRUE(deleted.ok());
  ASSERT_TRUE(deleted->has_value());
  EXPECT_EQ((*deleted)->key, "deploy.c1");
  EXPECT_EQ((*deleted)->operation, KvOperation::kDelete);
}

TEST_F(BusKvTest, WatchOfEmptyPatternGivesMarkerAtOnce) {
  auto watcher = kv_->watch("nothing.>");
  ASSERT_TRUE(watcher.ok());
  auto initial = watcher->initialValues(5s);
  ASSERT_TRUE(initial.ok()) << initial.error().describe();
  EXPECT_TRUE(initial->empty());
  EXPECT_TRUE(watcher->initialDone());
}

TEST_F(BusKvTest, WatchUpdatesOnlySkipsInitialValues) {
  ASSERT_NO_FATAL_FAILURE(putAll({{"x.1", "old"}, {"x.2", "old"}}));
  auto watcher = kv_->watch("x.>", {.updates_only = true});
  ASSERT_TRUE(watcher.ok());
  auto none = watcher->next(300ms);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_TRUE(watcher->initialDone());
  ASSERT_TRUE(kv_->put("x.1", "new").ok());
  auto live = watcher->next(5s);
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE(live->has_value());
  EXPECT_EQ((*live)->value, "new");
}

TEST_F(BusKvTest, WatchWithHistoryReplaysEveryRevision) {
  ASSERT_NO_FATAL_FAILURE(putAll({{"h", "1"}, {"h", "2"}, {"h", "3"}}));
  auto watcher = kv_->watch("h", {.include_history = true});
  ASSERT_TRUE(watcher.ok());
  auto initial = watcher->initialValues(5s);
  ASSERT_TRUE(initial.ok());
  ASSERT_EQ(initial->size(), 3u);
  EXPECT_EQ((*initial)[0].value, "1");
  EXPECT_EQ((*initial)[2].value, "3");
}

TEST_F(BusKvTest, EnsureBindsAnExistingBucketAndOpenMissingIsNotFound) {
  ASSERT_TRUE(kv_->put("k", "v").ok());
  auto again = KeyValue::ensure(js_, {.bucket = bucket_, .history = 1});
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_EQ((*again)->get("k")->value, "v");
  auto missing = KeyValue::open(js_, harness::uniqueName("nokv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound) << missing.error().describe();
}

}  // namespace
}  // namespace flotilla::bus
