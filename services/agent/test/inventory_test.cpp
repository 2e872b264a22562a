// Unit tests for the inventory document and its ConfigMap, the hold list document and owner annotations.
#include "flotilla/agent/inventory.h"

#include <gtest/gtest.h>

#include "flotilla/agent/ownership.h"
#include "flotilla/agent/released.h"
#include "flotilla/agent/watcher.h"

namespace flotilla::agent {
namespace {

Inventory sample() {
  return Inventory{.workspace = "fleet-default",
                   .bundle = "simple-app",
                   .deployment_id = "abc:def",
                   .generation = 7,
                   .applied = true,
                   .gitrepo = "repo",
                   .commit_sequence = 42,
                   .labels = {{"tier", "db"}},
                   .objects = {{"v1", "Namespace", "", "prod"}, {"v1", "ConfigMap", "prod", "settings"}},
                   .claims = {{"v1", "ConfigMap", "prod", "shared"}},
                   .adopted = {{"v1", "ConfigMap", "prod", "settings"}},
                   .created_namespaces = {"prod-extra"},
                   .previous_manifest_id = "prev",
                   .wait_until = "2026-01-02T03:04:05Z"};
}

// Encode then decode gives the same inventory; the document has pipeline.md's fields.
TEST(InventoryTest, RoundTrip) {
  Json encoded = encodeInventory(sample());
  EXPECT_EQ(encoded.getString("bundle"), "simple-app");
  EXPECT_EQ(encoded.getString("deploymentID"), "abc:def");
  EXPECT_EQ(encoded.at({"objects"})->asArray()[1].getString("namespace"), "prod");
  EXPECT_EQ(encoded.at({"createdNamespaces"})->dump(), R"(["prod-extra"])");
  EXPECT_EQ(encoded.getString("previousManifestID"), "prev");
  auto decoded = decodeInventory(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, sample());
}

// The watch's part of the options is kept (never helm values, which may hold secrets) and round-trips.
TEST(InventoryTest, WatchOptionsRoundTrip) {
  auto options = Json::parse(R"({"defaultNamespace":"app","correctDrift":{"enabled":true},
    "diff":{"comparePatches":[{"kind":"ConfigMap","jsonPointers":["/data/x"]}]},"ignore":{"conditions":[]},
    "helm":{"values":{"password":"hunter2"}},"keepResources":true})");
  ASSERT_TRUE(options.ok());
  Inventory inventory = sample();
  inventory.options = watchOptionsOf(*options);
  EXPECT_EQ(inventory.options.find("helm"), nullptr);
  EXPECT_EQ(inventory.options.find("keepResources"), nullptr);
  EXPECT_EQ(inventory.options.getString("defaultNamespace"), "app");
  ASSERT_NE(inventory.options.find("diff"), nullptr);
  auto decoded = decodeInventory(encodeInventory(inventory));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, inventory);
  Json bad = encodeInventory(inventory);
  bad["options"] = "x";
  EXPECT_FALSE(decodeInventory(bad).ok());
}

// An inventory written before gitrepo, commitSequence, labels, claims and the option fields existed still decodes.
TEST(InventoryTest, OldInventoriesDecode) {
  auto old = Json::parse(R"({"workspace":"ws","bundle":"b","deploymentID":"m:o","generation":3,"applied":true,
    "objects":[{"apiVersion":"v1","kind":"ConfigMap","namespace":"n","name":"c"}]})");
  ASSERT_TRUE(old.ok());
  auto decoded = decodeInventory(*old);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(decoded->gitrepo, "");
  EXPECT_EQ(decoded->commit_sequence, 0);
  EXPECT_TRUE(decoded->labels.empty());
  EXPECT_TRUE(decoded->claims.empty());
  EXPECT_TRUE(decoded->adopted.empty());  // every object of an old inventory counts as created by Flotilla
  EXPECT_TRUE(decoded->created_namespaces.empty());
  EXPECT_EQ(decoded->previous_manifest_id, "");
  EXPECT_EQ(decoded->wait_until, "");
  EXPECT_TRUE(decoded->lists({"v1", "ConfigMap", "n", "c"}));
  EXPECT_TRUE(decoded->lists({"v2", "ConfigMap", "n", "c"}));  // the version is not part of the identity
  EXPECT_FALSE(decoded->lists({"v1", "ConfigMap", "n", "d"}));
  EXPECT_TRUE(decoded->drop({"v1", "ConfigMap", "n", "c"}));
  EXPECT_TRUE(decoded->objects.empty());
  EXPECT_FALSE(decoded->drop({"v1", "ConfigMap", "n", "c"}));
}

// Decoding is strict and names the field.
TEST(InventoryTest, DecodeRejectsBadShapes) {
  Json encoded = encodeInventory(sample());
  encoded["extra"] = 1;
  EXPECT_NE(decodeInventory(encoded).error().message.find("inventory.extra"), std::string::npos);
  Json bad_object = encodeInventory(sample());
  bad_object["objects"].asArray()[0].erase("kind");
  EXPECT_NE(decodeInventory(bad_object).error().message.find("objects[0].kind"), std::string::npos);
  Json no_objects = encodeInventory(sample());
  no_objects.erase("objects");
  EXPECT_FALSE(decodeInventory(no_objects).ok());
  Json bad_generation = encodeInventory(sample());
  bad_generation["generation"] = "7";
  EXPECT_FALSE(decodeInventory(bad_generation).ok());
  Json bad_sequence = encodeInventory(sample());
  bad_sequence["commitSequence"] = "42";
  EXPECT_NE(decodeInventory(bad_sequence).error().message.find("inventory.commitSequence"), std::string::npos);
  Json bad_label = encodeInventory(sample());
  bad_label["labels"]["tier"] = 1;
  EXPECT_NE(decodeInventory(bad_label).error().message.find("inventory.labels.tier"), std::string::npos);
  Json bad_claim = encodeInventory(sample());
  bad_claim["claims"].asArray()[0].erase("name");
  EXPECT_NE(decodeInventory(bad_claim).error().message.find("claims[0].name"), std::string::npos);
  Json claims_not_array = encodeInventory(sample());
  claims_not_array["claims"] = Json::object();
  EXPECT_FALSE(decodeInventory(claims_not_array).ok());
  Json bad_namespaces = encodeInventory(sample());
  bad_namespaces["createdNamespaces"] = Json::parse("[1]").value();
  EXPECT_NE(decodeInventory(bad_namespaces).error().message.find("inventory.createdNamespaces"), std::string::npos);
  Json bad_adopted = encodeInventory(sample());
  bad_adopted["adopted"].asArray()[0].erase("kind");
  EXPECT_NE(decodeInventory(bad_adopted).error().message.find("adopted[0].kind"), std::string::npos);
}

// The hold list: round trip, strict decoding (unknown fields, missing fields, a time that is not RFC 3339).
TEST(ReleasedTest, RoundTripAndStrictDecoding) {
  std::vector<ReleasedObject> held{
      {.ref = {"v1", "ConfigMap", "app", "x"}, .released_by = "ws/a", .released_at = "2026-12-02T10:00:00.123Z"},
      {.ref = {"v1", "Namespace", "", "n"}, .released_by = "ws/b", .released_at = "2026-12-02T10:00:01.000Z"}};
  Json encoded = encodeReleased(held);
  EXPECT_EQ(encoded.asArray()[0].getString("releasedBy"), "ws/a");
  auto decoded = decodeReleased(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, held);
  Json extra = encoded;
  extra.asArray()[0]["why"] = "x";
  EXPECT_NE(decodeReleased(extra).error().message.find("released.[0].why"), std::string::npos);
  Json missing = encoded;
  missing.asArray()[1].erase("releasedBy");
  EXPECT_NE(decodeReleased(missing).error().message.find("[1].releasedBy"), std::string::npos);
  Json bad_time = encoded;
  bad_time.asArray()[0]["releasedAt"] = "yesterday";
  EXPECT_NE(decodeReleased(bad_time).error().message.find("releasedAt"), std::string::npos);
  EXPECT_FALSE(decodeReleased(Json::object()).ok());
}

// Owner annotations split into workspace and bundle.
TEST(OwnershipTest, SplitOwner) {
  EXPECT_EQ(splitOwner("ws/app")->first, "ws");
  EXPECT_EQ(splitOwner("ws/app")->second, "app");
  EXPECT_FALSE(splitOwner("app"));
  EXPECT_FALSE(splitOwner("/app"));
  EXPECT_FALSE(splitOwner("ws/"));
}

// The ConfigMap name is a hash of workspace/bundle: stable, valid and distinct per bundle.
TEST(InventoryTest, NameIsStableAndDistinct) {
  std::string name = inventoryName("fleet-default", "simple-app");
  EXPECT_EQ(name, inventoryName("fleet-default", "simple-app"));
  EXPECT_EQ(name.size(), std::string("flotilla-inv-").size() + 40);
  EXPECT_NE(name, inventoryName("other", "simple-app"));
  EXPECT_NE(inventoryName("a", "b/c"), inventoryName("a/b", "c"));
}

// The ConfigMap carries the document, the listing label and round-trips.
TEST(InventoryTest, ConfigMapRoundTrip) {
  Json config_map = inventoryConfigMap(sample(), "flotilla-system");
  EXPECT_EQ(config_map.at({"metadata", "namespace"})->asString(), "flotilla-system");
  EXPECT_EQ(config_map.at({"metadata", "labels", kInventoryLabel})->asString(), "true");
  auto back = inventoryFromConfigMap(config_map);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, sample());
  Json broken = config_map;
  broken["data"][kInventoryDataKey] = "{";
  EXPECT_EQ(inventoryFromConfigMap(broken).error().kind, ErrorKind::kInvalid);
}

}  // namespace
}  // namespace flotilla::agent
