// Unit tests for the inventory document and its ConfigMap.
#include "flotilla/agent/inventory.h"

#include <gtest/gtest.h>

namespace flotilla::agent {
namespace {

Inventory sample() {
  return Inventory{.workspace = "fleet-default",
                   .bundle = "simple-app",
                   .deployment_id = "abc:def",
                   .generation = 7,
                   .applied = true,
                   .objects = {{"v1", "Namespace", "", "prod"}, {"v1", "ConfigMap", "prod", "settings"}}};
}

// Encode then decode gives the same inventory; the document has pipeline.md's fields.
TEST(InventoryTest, RoundTrip) {
  Json encoded = encodeInventory(sample());
  EXPECT_EQ(encoded.getString("bundle"), "simple-app");
  EXPECT_EQ(encoded.getString("deploymentID"), "abc:def");
  EXPECT_EQ(encoded.at({"objects"})->asArray()[1].getString("namespace"), "prod");
  auto decoded = decodeInventory(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, sample());
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
