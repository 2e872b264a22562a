#include "flotilla/agent/inventory.h"

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::agent {
namespace {

// The field manager for the agent's own bookkeeping objects, kept apart from "flotilla" (bundle content).
constexpr std::string_view kInventoryManager = "flotilla-agent";

Failure invalid(std::string_view field, std::string_view problem) {
  return fail(ErrorKind::kInvalid, "inventory." + std::string(field) + ": " + std::string(problem));
}

Result<std::string> stringField(const Json& value, std::string_view key, std::string_view path, bool required) {
  const Json* field = value.find(key);
  if (field == nullptr) {
    if (required) {
      return invalid(std::string(path) + std::string(key), "missing");
    }
    return std::string();
  }
  if (!field->isString()) {
    return invalid(std::string(path) + std::string(key), "expected a string");
  }
  return field->asString();
}

}  // namespace

std::string inventoryName(std::string_view workspace, std::string_view bundle) {
  // Escaped, so no two (workspace, bundle) pairs share a key ("a"+"b/c" vs "a/b"+"c"); plain names are unchanged.
  std::string key = events::escapeToken(workspace) + "/" + events::escapeToken(bundle);
  return "flotilla-inv-" + sha256Hex(key).substr(0, 40);
}

Json encodeInventory(const Inventory& inventory) {
  Json objects = Json::array();
  for (const auto& ref : inventory.objects) {
    objects.push(
        Json::obj({{"apiVersion", ref.api_version}, {"kind", ref.kind}, {"namespace", ref.ns}, {"name", ref.name}}));
  }
  return Json::obj({{"workspace", inventory.workspace},
                    {"bundle", inventory.bundle},
                    {"deploymentID", inventory.deployment_id},
                    {"generation", inventory.generation},
                    {"applied", inventory.applied},
                    {"objects", std::move(objects)}});
}

Result<Inventory> decodeInventory(const Json& value) {
  if (!value.isObject()) {
    return invalid("", "expected an object");
  }
  for (const auto& [key, unused] : value.asObject()) {
    if (key != "workspace" && key != "bundle" && key != "deploymentID" && key != "generation" && key != "applied" &&
        key != "objects") {
      return invalid(key, "unknown field");
    }
  }
  Inventory inventory;
  auto workspace = stringField(value, "workspace", "", false);
  FLOTILLA_TRY(workspace);
  inventory.workspace = *workspace;
  auto bundle = stringField(value, "bundle", "", true);
  FLOTILLA_TRY(bundle);
  inventory.bundle = *bundle;
  auto deployment = stringField(value, "deploymentID", "", false);
  FLOTILLA_TRY(deployment);
  inventory.deployment_id = *deployment;
  if (const Json* generation = value.find("generation")) {
    if (!generation->isInt()) {
      return invalid("generation", "expected an integer");
    }
    inventory.generation = generation->asInt();
  }
  if (const Json* applied = value.find("applied")) {
    if (!applied->isBool()) {
      return invalid("applied", "expected a boolean");
    }
    inventory.applied = applied->asBool();
  }
  const Json* objects = value.find("objects");
  if (objects == nullptr || !objects->isArray()) {
    return invalid("objects", "expected an array");
  }
  for (size_t i = 0; i < objects->asArray().size(); ++i) {
    const Json& item = objects->asArray()[i];
    std::string path = "objects[" + std::to_string(i) + "].";
    if (!item.isObject()) {
      return invalid(path.substr(0, path.size() - 1), "expected an object");
    }
    ObjectRef ref;
    auto api_version = stringField(item, "apiVersion", path, true);
    FLOTILLA_TRY(api_version);
    auto kind = stringField(item, "kind", path, true);
    FLOTILLA_TRY(kind);
    auto ns = stringField(item, "namespace", path, false);
    FLOTILLA_TRY(ns);
    auto name = stringField(item, "name", path, true);
    FLOTILLA_TRY(name);
    inventory.objects.push_back(ObjectRef{*api_version, *kind, *ns, *name});
  }
  return inventory;
}

Json inventoryConfigMap(const Inventory& inventory, std::string_view ns) {
  Json config_map = Json::obj({{"apiVersion", "v1"}, {"kind", "ConfigMap"}});
  Json& metadata = config_map["metadata"];
  metadata["name"] = inventoryName(inventory.workspace, inventory.bundle);
  metadata["namespace"] = std::string(ns);
  metadata["labels"][kInventoryLabel] = "true";
  metadata["annotations"][kBundleAnnotation] = inventory.workspace + "/" + inventory.bundle;
  config_map["data"][kInventoryDataKey] = encodeInventory(inventory).dump();
  return config_map;
}

Result<Inventory> inventoryFromConfigMap(const Json& config_map) {
  const Json* data = config_map.at({"data", kInventoryDataKey});
  if (data == nullptr || !data->isString()) {
    return fail(ErrorKind::kInvalid, "inventory ConfigMap has no data." + std::string(kInventoryDataKey));
  }
  auto parsed = Json::parse(data->asString());
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, "inventory." + std::string(kInventoryDataKey) + ": " + parsed.error().message);
  }
  return decodeInventory(*parsed);
}

Result<std::optional<Inventory>> InventoryStore::load(std::string_view workspace, std::string_view bundle) {
  auto config_map = client_.get("v1", "ConfigMap", ns_, inventoryName(workspace, bundle));
  if (!config_map.ok()) {
    if (config_map.error().kind == ErrorKind::kNotFound) {
      return std::optional<Inventory>();
    }
    return fail(config_map.error());
  }
  auto inventory = inventoryFromConfigMap(*config_map);
  FLOTILLA_TRY(inventory);
  return std::optional<Inventory>(std::move(inventory).value());
}

Status InventoryStore::ensureNamespace() {
  Json ns = Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", ns_}})}});
  auto applied = client_.apply(ns, kube::ApplyOptions{.field_manager = std::string(kInventoryManager)});
  if (!applied.ok()) {
    return fail(applied.error());
  }
  log::info("created the agent namespace", {{"namespace", ns_}});
  return {};
}

Status InventoryStore::save(const Inventory& inventory) {
  Json config_map = inventoryConfigMap(inventory, ns_);
  kube::ApplyOptions options{.field_manager = std::string(kInventoryManager), .force = true};
  auto applied = client_.apply(config_map, options);
  if (!applied.ok() && applied.error().kind == ErrorKind::kNotFound) {
    // The agent namespace is created on first use, so a fresh cluster needs no preparation.
    FLOTILLA_TRY(ensureNamespace());
    applied = client_.apply(config_map, options);
  }
  if (!applied.ok()) {
    return fail(applied.error());
  }
  return {};
}

Status InventoryStore::remove(std::string_view workspace, std::string_view bundle) {
  auto removed = client_.remove("v1", "ConfigMap", ns_, inventoryName(workspace, bundle));
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  return {};
}

Result<std::vector<Inventory>> InventoryStore::list() {
  auto listed =
      client_.list("v1", "ConfigMap", ns_, kube::ListOptions{.label_selector = std::string(kInventoryLabel) + "=true"});
  if (!listed.ok()) {
    if (listed.error().kind == ErrorKind::kNotFound) {
      return std::vector<Inventory>();
    }
    return fail(listed.error());
  }
  std::vector<Inventory> inventories;
  for (const auto& item : listed->items) {
    auto inventory = inventoryFromConfigMap(item);
    if (!inventory.ok()) {
      log::warn("skipping an inventory that does not decode",
                {{"configmap", item.at({"metadata", "name"}) != nullptr ? *item.at({"metadata", "name"}) : Json()},
                 {"error", inventory.error().describe()}});
      continue;
    }
    inventories.push_back(std::move(inventory).value());
  }
  return inventories;
}

}  // namespace flotilla::agent
