#include "flotilla/agent/released.h"

#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/core/time.h"

namespace flotilla::agent {
namespace {

// The agent's own bookkeeping objects are written by this field manager (as the inventories are).
constexpr std::string_view kManager = "flotilla-agent";

Failure invalid(const std::string& field, std::string_view problem) {
  return fail(ErrorKind::kInvalid, "released." + field + ": " + std::string(problem));
}

Result<std::string> requiredString(const Json& item, std::string_view key, const std::string& path, bool required) {
  const Json* field = item.find(key);
  if (field == nullptr) {
    if (required) {
      return invalid(path + std::string(key), "missing");
    }
    return std::string();
  }
  if (!field->isString()) {
    return invalid(path + std::string(key), "expected a string");
  }
  return field->asString();
}

Result<ReleasedObject> decodeEntry(const Json& item, const std::string& path) {
  if (!item.isObject()) {
    return invalid(path, "expected an object");
  }
  for (const auto& [key, unused] : item.asObject()) {
    if (key != "apiVersion" && key != "kind" && key != "namespace" && key != "name" && key != "releasedBy" &&
        key != "releasedAt") {
      std::string field = path;
      field += ".";
      field += key;
      return invalid(field, "unknown field");
    }
  }
  ReleasedObject entry;
  struct Field {
    std::string_view key;
    std::string* target;
    bool required;
  };
  for (const auto& [key, target, required] :
       {Field{"apiVersion", &entry.ref.api_version, true}, Field{"kind", &entry.ref.kind, true},
        Field{"namespace", &entry.ref.ns, false}, Field{"name", &entry.ref.name, true},
        Field{"releasedBy", &entry.released_by, true}, Field{"releasedAt", &entry.released_at, true}}) {
    auto value = requiredString(item, key, path + ".", required);
    FLOTILLA_TRY(value);
    *target = std::move(value).value();
  }
  if (!parseRfc3339(entry.released_at)) {
    return invalid(path + ".releasedAt", "expected an RFC 3339 time");
  }
  return entry;
}

}  // namespace

Json encodeReleased(const std::vector<ReleasedObject>& released) {
  Json out = Json::array();
  for (const auto& entry : released) {
    out.push(Json::obj({{"apiVersion", entry.ref.api_version},
                        {"kind", entry.ref.kind},
                        {"namespace", entry.ref.ns},
                        {"name", entry.ref.name},
                        {"releasedBy", entry.released_by},
                        {"releasedAt", entry.released_at}}));
  }
  return out;
}

Result<std::vector<ReleasedObject>> decodeReleased(const Json& value) {
  if (!value.isArray()) {
    return fail(ErrorKind::kInvalid, "released: expected an array");
  }
  std::vector<ReleasedObject> released;
  for (size_t i = 0; i < value.asArray().size(); ++i) {
    auto entry = decodeEntry(value.asArray()[i], "[" + std::to_string(i) + "]");
    FLOTILLA_TRY(entry);
    released.push_back(std::move(entry).value());
  }
  return released;
}

Result<std::vector<ReleasedObject>> ReleasedStore::load() {
  auto config_map = client_.get("v1", "ConfigMap", ns_, std::string(kReleasedName));
  if (!config_map.ok()) {
    if (config_map.error().kind == ErrorKind::kNotFound) {
      return std::vector<ReleasedObject>();
    }
    return fail(config_map.error());
  }
  const Json* data = config_map->at({"data", kReleasedDataKey});
  Result<std::vector<ReleasedObject>> decoded = fail(ErrorKind::kInvalid, "no data." + std::string(kReleasedDataKey));
  if (data != nullptr && data->isString()) {
    auto parsed = Json::parse(data->asString());
    decoded = parsed.ok() ? decodeReleased(*parsed) : Result<std::vector<ReleasedObject>>(fail(parsed.error()));
  }
  if (!decoded.ok()) {
    metrics_.counter("released_invalid_total", "Hold lists (flotilla-released) that did not decode").Increment();
    log::error("ignoring a hold list that does not decode; the objects it named are left in place",
               {{"configmap", std::string(kReleasedName)}, {"error", decoded.error().describe()}});
    return std::vector<ReleasedObject>();
  }
  return decoded;
}

void ReleasedStore::setGauge(size_t held) {
  metrics_.gauge("released_objects", "Objects held after their bundle released them (flotilla-released)")
      .Set(static_cast<double>(held));
}

Status ReleasedStore::save(const std::vector<ReleasedObject>& released) {
  if (released.empty()) {
    auto removed = client_.remove("v1", "ConfigMap", ns_, std::string(kReleasedName));
    if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
      return removed;
    }
    setGauge(0);
    return {};
  }
  Json config_map = Json::obj({{"apiVersion", "v1"}, {"kind", "ConfigMap"}});
  config_map["metadata"]["name"] = std::string(kReleasedName);
  config_map["metadata"]["namespace"] = ns_;
  config_map["data"][kReleasedDataKey] = encodeReleased(released).dump();
  setGauge(released.size());
  kube::ApplyOptions options{.field_manager = std::string(kManager), .force = true};
  auto applied = client_.apply(config_map, options);
  if (!applied.ok() && applied.error().kind == ErrorKind::kNotFound) {
    // A fresh cluster: the agent namespace is created on first use (as for inventories).
    Json ns = Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", ns_}})}});
    auto created = client_.apply(ns, kube::ApplyOptions{.field_manager = std::string(kManager)});
    if (!created.ok()) {
      return fail(created.error());
    }
    applied = client_.apply(config_map, options);
  }
  if (!applied.ok()) {
    return fail(applied.error());
  }
  return {};
}

Status ReleasedStore::update(const std::function<void(std::vector<ReleasedObject>&)>& edit) {
  std::lock_guard lock(edit_mutex_);
  auto released = load();
  FLOTILLA_TRY(released);
  const std::vector<ReleasedObject> before = *released;
  edit(*released);
  if (*released == before) {
    return {};
  }
  return save(*released);
}

Status ReleasedStore::add(const std::vector<ReleasedObject>& entries) {
  return update([&](std::vector<ReleasedObject>& released) {
    for (const auto& entry : entries) {
      const std::string identity = entry.ref.identity();
      std::erase_if(released, [&](const ReleasedObject& r) { return r.ref.identity() == identity; });
      released.push_back(entry);
    }
  });
}

Result<std::optional<ReleasedObject>> ReleasedStore::find(const ObjectRef& ref, std::string_view owner) {
  auto released = load();
  FLOTILLA_TRY(released);
  const std::string identity = ref.identity();
  for (const auto& entry : *released) {
    if (entry.ref.identity() == identity && entry.released_by == owner) {
      return std::optional<ReleasedObject>(entry);
    }
  }
  return std::optional<ReleasedObject>();
}

Status ReleasedStore::remove(const ObjectRef& ref) {
  const std::string identity = ref.identity();
  return update([&](std::vector<ReleasedObject>& released) {
    std::erase_if(released, [&](const ReleasedObject& r) { return r.ref.identity() == identity; });
  });
}

}  // namespace flotilla::agent
