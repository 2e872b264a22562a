// Garbage collection of the object stores against a real nats-server: an old unreferenced object is deleted;
// objects a KV record names, young ones and ones a writer reused are kept; a pass that cannot read the references
// deletes nothing.
#include "flotilla/service/object_gc.h"

#include <gtest/gtest.h>

#include "flotilla/core/time.h"
#include "flotilla/harness/hub_test.h"

namespace flotilla::service {
namespace {

class ObjectGcTest : public harness::HubTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(startHub("gc-test")); }

  //! Stores `name` and rewrites its meta as if it had been written `age` ago.
  void putOld(bus::ObjectStore& store, const std::string& name, std::chrono::hours age = std::chrono::hours(2)) {
    ASSERT_TRUE(store.put(name, "content of " + name).ok());
    auto info = store.info(name);
    ASSERT_TRUE(info.ok());
    info->mtime = formatRfc3339(std::chrono::system_clock::now() - age);
    ASSERT_TRUE(hub_.js
                    ->publish(bus::objectMetaSubject(store.bucket(), name), bus::encodeObjectMeta(*info), "",
                              {{"Nats-Rollup", "sub"}})
                    .ok());
  }
  void putRecord(bus::KeyValue& bucket, const std::string& key, const std::string& json) {
    ASSERT_TRUE(bucket.put(key, json).ok());
  }
  bool exists(bus::ObjectStore& store, const std::string& name) { return store.info(name).ok(); }
  //! Only kNotFound is "deleted"; another error fails the test.
  bool absent(bus::ObjectStore& store, const std::string& name) {
    return harness::notFound(store.info(name), store.bucket() + "/" + name);
  }

  Metrics metrics_{"gctest"};
};

TEST_F(ObjectGcTest, OldUnreferencedSourceIsDeletedReferencedAndYoungAreKept) {
  bus::ObjectStore& sources = *hub_.sources;
  for (const char* name : {"old-unreferenced", "old-polled", "old-bundled", "old-claimed"}) {
    ASSERT_NO_FATAL_FAILURE(putOld(sources, name));
  }
  ASSERT_TRUE(sources.put("young", "fresh").ok());
  putRecord(*hub_.status, "gitrepo.fleet-default.a", R"({"workspace":"fleet-default","sourceObject":"old-polled"})");
  putRecord(*hub_.bundles, "fleet-default.b", R"({"bundle":"b","sourceObject":"old-bundled"})");
  putRecord(*hub_.status, "bundle-claim.fleet-default.c.a", R"({"sourceObject":"old-claimed"})");
  const uint64_t size = sources.info("old-unreferenced")->size;

  ObjectGc gc(
      hub_.sources, [this] { return sourceReferences(hub_); }, metrics_, GcOptions{});
  auto pass = gc.runPass();
  ASSERT_TRUE(pass.ok()) << pass.error().describe();
  EXPECT_EQ(pass->objects, 5u);
  EXPECT_EQ(pass->deleted, 1u);
  EXPECT_EQ(pass->deleted_bytes, size);
  EXPECT_EQ(pass->referenced, 3u);
  EXPECT_EQ(pass->young, 1u);
  EXPECT_TRUE(absent(sources, "old-unreferenced"));
  for (const char* kept : {"old-polled", "old-bundled", "old-claimed", "young"}) {
    EXPECT_TRUE(exists(sources, kept)) << kept;
  }
  EXPECT_EQ(metrics_.value("gc_deleted_objects_total", {{"store", "sources"}}), 1);
  EXPECT_EQ(metrics_.value("gc_deleted_bytes_total", {{"store", "sources"}}), static_cast<double>(size));
  EXPECT_EQ(metrics_.value("gc_runs_total", {{"store", "sources"}, {"result", "ok"}}), 1);
}

TEST_F(ObjectGcTest, ManifestsNamedByRecordsDeploymentsAndVariantTablesAreKept) {
  bus::ObjectStore& manifests = *hub_.manifests;
  for (const char* name :
       {"m-record", "m-last-good", "m-customized", "m-variant", "m-deployed", "m-staged", "m-unreferenced"}) {
    ASSERT_NO_FATAL_FAILURE(putOld(manifests, name));
  }
  ASSERT_TRUE(manifests
                  .put("variants-t",
                       R"({"apiVersion":"bundler.flotilla.io/v1","kind":"BundleVariants","workspace":"ws",)"
                       R"("bundle":"b","commit":"c","variants":[{"manifestID":"m-variant","options":{},)"
                       R"("customizations":[]}],"clusters":{"one":0}})")
                  .ok());
  putRecord(*hub_.bundles, "ws.b",
            R"({"manifestID":"m-record","lastGood":{"manifestID":"m-last-good","variantsObject":"variants-t",)"
            R"("customizations":[{"name":"prod","manifestID":"m-customized"},{"name":"skip","manifestID":""}]}})");
  putRecord(
      *hub_.deployments, "one.ws.b",
      R"({"cluster":"one","manifestID":"","deploymentID":"m-deployed:0123","stagedDeploymentID":"m-staged:4567"})");

  ObjectGc gc(
      hub_.manifests, [this] { return manifestReferences(hub_); }, metrics_, GcOptions{});
  auto pass = gc.runPass();
  ASSERT_TRUE(pass.ok()) << pass.error().describe();
  EXPECT_EQ(pass->deleted, 1u);
  EXPECT_TRUE(absent(manifests, "m-unreferenced"));
  // A customization's manifest counts too, though no cluster runs it now: a cluster matching it later needs it.
  for (const char* kept :
       {"m-record", "m-last-good", "m-customized", "m-variant", "m-deployed", "m-staged", "variants-t"}) {
    EXPECT_TRUE(exists(manifests, kept)) << kept;
  }
}

// A writer reusing an old object touches it before it looks, so the pass keeps it.
TEST_F(ObjectGcTest, ObjectTouchedByAWriterIsKept) {
  ASSERT_NO_FATAL_FAILURE(putOld(*hub_.sources, "reused"));
  ObjectGc gc(
      hub_.sources, [this] { return sourceReferences(hub_); }, metrics_, GcOptions{});
  gc.touch("reused");
  auto pass = gc.runPass();
  ASSERT_TRUE(pass.ok());
  EXPECT_EQ(pass->deleted, 0u);
  EXPECT_TRUE(exists(*hub_.sources, "reused"));
}

TEST_F(ObjectGcTest, UnreadableReferencesDeleteNothing) {
  ASSERT_NO_FATAL_FAILURE(putOld(*hub_.sources, "maybe-referenced"));
  putRecord(*hub_.bundles, "ws.broken", "not json");
  ObjectGc gc(
      hub_.sources, [this] { return sourceReferences(hub_); }, metrics_, GcOptions{});
  auto pass = gc.runPass();
  ASSERT_FALSE(pass.ok());
  EXPECT_NE(pass.error().message.find("bundles/ws.broken is not JSON"), std::string::npos) << pass.error().message;
  EXPECT_TRUE(exists(*hub_.sources, "maybe-referenced"));
  EXPECT_EQ(metrics_.value("gc_runs_total", {{"store", "sources"}, {"result", "error"}}), 1);
}

// The limits reach every stream, KV bucket and object store; the event stream alone drops its oldest messages.
TEST_F(ObjectGcTest, ProvisioningAppliesTheSizeCaps) {
  StoreLimits limits = StoreLimits::fromBudget(int64_t{1} << 30);
  limits.max_bytes["sources"] = int64_t{3} << 20;
  auto hub = connectHub(bus::ConnectOptions{.servers = {nats_->url()}, .name = "caps"}, HubAccess::kProvision, nullptr,
                        std::chrono::seconds(10), limits);
  ASSERT_TRUE(hub.ok()) << hub.error().describe();
  for (const auto& [store, share] : kStoreShares) {
    const std::string name = store;
    const std::string stream = name.rfind("FLOTILLA_", 0) == 0              ? name
                               : (name == "sources" || name == "manifests") ? "OBJ_" + name
                                                                            : "KV_" + name;
    auto info = hub->js->streamInfo(stream);
    ASSERT_TRUE(info.ok()) << stream;
    EXPECT_EQ(info->max_bytes, limits.of(name)) << stream;
    EXPECT_EQ(info->discard_new, name != kEventsStream && name != kStatusStream) << stream;
  }
  EXPECT_EQ(hub->js->streamInfo("OBJ_sources")->max_bytes, int64_t{3} << 20);
}

}  // namespace
}  // namespace flotilla::service
