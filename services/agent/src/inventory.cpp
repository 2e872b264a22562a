#include "flotilla/agent/inventory.h"

#include <algorithm>
#include <iterator>

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

namespace {

Json encodeRefs(const std::vector<ObjectRef>& refs) {
  Json out = Json::array();
  for (const auto& ref : refs) {
    out.push(
        Json::obj({{"apiVersion", ref.api_version}, {"kind", ref.kind}, {"namespace", ref.ns}, {"name", ref.name}}));
  }
  return out;
}

//! The array `key` of refs; a missing array is an error only when `required`.
Result<std::vector<ObjectRef>> decodeRefs(const Json& value, std::string_view key, bool required) {
  std::vector<ObjectRef> refs;
  const Json* array = value.find(key);
  if (array == nullptr && !required) {
    return refs;
  }
  if (array == nullptr || !array->isArray()) {
    return invalid(key, "expected an array");
  }
  for (size_t i = 0; i < array->asArray().size(); ++i) {
    const Json& item = array->asArray()[i];
    std::string path = std::string(key) + "[" + std::to_string(i) + "].";
    if (!item.isObject()) {
      return invalid(path.substr(0, path.size() - 1), "expected an object");
    }
    auto api_version = stringField(item, "apiVersion", path, true);
    FLOTILLA_TRY(api_version);
    auto kind = stringField(item, "kind", path, true);
    FLOTILLA_TRY(kind);
    auto ns = stringField(item, "namespace", path, false);
    FLOTILLA_TRY(ns);
    auto name = stringField(item, "name", path, true);
    FLOTILLA_TRY(name);
    refs.push_back(ObjectRef{*api_version, *kind, *ns, *name});
  }
  return refs;
}

Result<model::Labels> decodeLabels(const Json& value) {
  model::Labels labels;
  const Json* field = value.find("labels");
  if (field == nullptr) {
    return labels;
  }
  if (!field->isObject()) {
    return invalid("labels", "expected an object");
  }
  for (const auto& [key, label] : field->asObject()) {
    if (!label.isString()) {
      return invalid("labels." + key, "expected a string");
    }
    labels[key] = label.asString();
  }
  return labels;
}

Status checkKnownFields(const Json& value) {
  static constexpr std::string_view kKnown[] = {
      "workspace",          "bundle",    "deploymentID", "generation", "applied", "gitrepo",
      "commitSequence",     "labels",    "objects",      "claims",     "adopted", "createdNamespaces",
      "previousManifestID", "waitUntil", "options"};
  for (const auto& [key, unused] : value.asObject()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      return invalid(key, "unknown field");
    }
  }
  return {};
}

//! workspace, bundle, deploymentID, gitrepo.
Status decodeStrings(const Json& value, Inventory& inventory) {
  struct Field {
    std::string_view key;
    std::string* target;
    bool required;
  };
  for (const auto& [key, target, required] :
       {Field{"workspace", &inventory.workspace, false}, Field{"bundle", &inventory.bundle, true},
        Field{"deploymentID", &inventory.deployment_id, false}, Field{"gitrepo", &inventory.gitrepo, false},
        Field{"previousManifestID", &inventory.previous_manifest_id, false},
        Field{"waitUntil", &inventory.wait_until, false}}) {
    auto field = stringField(value, key, "", required);
    FLOTILLA_TRY(field);
    *target = std::move(field).value();
  }
  return {};
}

//! generation, commitSequence, applied.
Status decodeScalars(const Json& value, Inventory& inventory) {
  for (auto [key, target] : {std::pair<std::string_view, int64_t*>{"generation", &inventory.generation},
                             std::pair<std::string_view, int64_t*>{"commitSequence", &inventory.commit_sequence}}) {
    if (const Json* field = value.find(key)) {
      if (!field->isInt()) {
        return invalid(key, "expected an integer");
      }
      *target = field->asInt();
    }
  }
  if (const Json* applied = value.find("applied")) {
    if (!applied->isBool()) {
      return invalid("applied", "expected a boolean");
    }
    inventory.applied = applied->asBool();
  }
  return {};
}

//! createdNamespaces: a list of strings (absent in older inventories).
Result<std::vector<std::string>> decodeNames(const Json& value, std::string_view key) {
  std::vector<std::string> names;
  const Json* field = value.find(key);
  if (field == nullptr) {
    return names;
  }
  if (!field->isArray()) {
    return invalid(key, "expected an array");
  }
  for (const auto& item : field->asArray()) {
    if (!item.isString()) {
      return invalid(key, "expected an array of strings");
    }
    names.push_back(item.asString());
  }
  return names;
}

bool listsIn(const std::vector<ObjectRef>& refs, const ObjectRef& ref) {
  const std::string identity = ref.identity();
  return std::any_of(refs.begin(), refs.end(), [&](const ObjectRef& r) { return r.identity() == identity; });
}

}  // namespace

bool Inventory::lists(const ObjectRef& ref) const {
  return listsIn(objects, ref);
}

bool Inventory::claimsObject(const ObjectRef& ref) const {
  return listsIn(claims, ref);
}

bool Inventory::drop(const ObjectRef& ref) {
  const std::string identity = ref.identity();
  auto kept =
      std::remove_if(objects.begin(), objects.end(), [&](const ObjectRef& r) { return r.identity() == identity; });
  const bool dropped = kept != objects.end();
  objects.erase(kept, objects.end());
  std::erase_if(adopted, [&](const ObjectRef& r) { return r.identity() == identity; });
  return dropped;
}

Json encodeInventory(const Inventory& inventory) {
  Json labels = Json::object();
  for (const auto& [key, value] : inventory.labels) {
    labels[key] = value;
  }
  Json namespaces = Json::array();
  for (const auto& name : inventory.created_namespaces) {
    namespaces.push(name);
  }
  Json encoded = Json::obj({{"workspace", inventory.workspace},
                            {"bundle", inventory.bundle},
                            {"deploymentID", inventory.deployment_id},
                            {"generation", inventory.generation},
                            {"applied", inventory.applied},
                            {"gitrepo", inventory.gitrepo},
                            {"commitSequence", inventory.commit_sequence},
                            {"labels", std::move(labels)},
                            {"objects", encodeRefs(inventory.objects)},
                            {"claims", encodeRefs(inventory.claims)},
                            {"adopted", encodeRefs(inventory.adopted)},
                            {"createdNamespaces", std::move(namespaces)},
                            {"previousManifestID", inventory.previous_manifest_id},
                            {"waitUntil", inventory.wait_until}});
  if (!inventory.options.isNull()) {
    encoded["options"] = inventory.options;
  }
  return encoded;
}

Result<Inventory> decodeInventory(const Json& value) {
  if (!value.isObject()) {
    return invalid("", "expected an object");
  }
  FLOTILLA_TRY(checkKnownFields(value));
  Inventory inventory;
  FLOTILLA_TRY(decodeStrings(value, inventory));
  FLOTILLA_TRY(decodeScalars(value, inventory));
  auto labels = decodeLabels(value);
  FLOTILLA_TRY(labels);
  inventory.labels = std::move(labels).value();
  auto objects = decodeRefs(value, "objects", true);
  FLOTILLA_TRY(objects);
  inventory.objects = std::move(objects).value();
  auto claims = decodeRefs(value, "claims", false);
  FLOTILLA_TRY(claims);
  inventory.claims = std::move(claims).value();
  auto adopted = decodeRefs(value, "adopted", false);
  FLOTILLA_TRY(adopted);
  inventory.adopted = std::move(adopted).value();
  auto namespaces = decodeNames(value, "createdNamespaces");
  FLOTILLA_TRY(namespaces);
  inventory.created_namespaces = std::move(namespaces).value();
  if (const Json* options = value.find("options")) {
    if (!options->isObject()) {
      return invalid("options", "expected an object");
    }
    inventory.options = *options;
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
