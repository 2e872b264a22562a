#include "flotilla/render/patch.h"

#include <algorithm>
#include <string>
#include <vector>

#include "flotilla/core/util.h"

namespace flotilla::render {
namespace {

Result<std::vector<std::string>> pointerTokens(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) {
    return tokens;
  }
  if (pointer.front() != '/') {
    return fail(ErrorKind::kInvalid, "JSON pointer \"" + std::string(pointer) + "\" must start with '/'");
  }
  for (auto& raw : split(pointer.substr(1), '/')) {
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token.push_back(raw[i + 1] == '0' ? '~' : '/');
        ++i;
      } else if (raw[i] == '~') {
        return fail(ErrorKind::kInvalid, "JSON pointer \"" + std::string(pointer) + "\" has a bad '~' escape");
      } else {
        token.push_back(raw[i]);
      }
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

//! An array index token: digits only (no leading zeros), or "-" for "past the end" when allowed.
bool arrayIndex(const std::string& token, size_t size, bool allow_end, size_t& index) {
  if (token == "-" && allow_end) {
    index = size;
    return true;
  }
  if (token.empty() || token.size() > 9 || (token.size() > 1 && token.front() == '0')) {
    return false;
  }
  for (char c : token) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  index = std::stoul(token);
  return allow_end ? index <= size : index < size;
}

Json* walk(Json& doc, const std::vector<std::string>& tokens, size_t count) {
  Json* node = &doc;
  for (size_t i = 0; i < count; ++i) {
    if (node->isObject()) {
      node = node->find(tokens[i]);
    } else if (node->isArray()) {
      size_t index = 0;
      if (!arrayIndex(tokens[i], node->asArray().size(), false, index)) {
        return nullptr;
      }
      node = &node->asArray()[index];
    } else {
      return nullptr;
    }
    if (node == nullptr) {
      return nullptr;
    }
  }
  return node;
}

//! The container of the value `tokens` name (all tokens but the last).
Result<Json*> parentOf(Json& doc, const std::vector<std::string>& tokens) {
  Json* parent = walk(doc, tokens, tokens.size() - 1);
  if (parent == nullptr) {
    return fail(ErrorKind::kInvalid, "the parent does not exist");
  }
  return parent;
}

//! `token` as an index into an array of `size` elements (see arrayIndex).
Result<size_t> indexIn(const std::string& token, size_t size, bool allow_end) {
  size_t index = 0;
  if (!arrayIndex(token, size, allow_end, index)) {
    return fail(ErrorKind::kInvalid, "bad array index \"" + token + "\"");
  }
  return index;
}

Status addAt(Json& doc, const std::vector<std::string>& tokens, Json value) {
  if (tokens.empty()) {
    doc = std::move(value);
    return {};
  }
  auto parent_of = parentOf(doc, tokens);
  FLOTILLA_TRY(parent_of);
  Json* parent = *parent_of;
  const std::string& last = tokens.back();
  if (parent->isObject()) {
    (*parent)[last] = std::move(value);
    return {};
  }
  if (parent->isArray()) {
    auto& array = parent->asArray();
    auto index = indexIn(last, array.size(), true);
    FLOTILLA_TRY(index);
    array.insert(array.begin() + static_cast<std::ptrdiff_t>(*index), std::move(value));
    return {};
  }
  return fail(ErrorKind::kInvalid, "the parent is not a map or a list");
}

//! Removes the value at `tokens`; when `removed` is set it receives the value.
Status removeAt(Json& doc, const std::vector<std::string>& tokens, Json* removed) {
  if (tokens.empty()) {
    return fail(ErrorKind::kInvalid, "cannot remove the whole document");
  }
  auto parent_of = parentOf(doc, tokens);
  FLOTILLA_TRY(parent_of);
  Json* parent = *parent_of;
  const std::string& last = tokens.back();
  if (parent->isObject()) {
    Json* member = parent->find(last);
    if (member == nullptr) {
      return fail(ErrorKind::kInvalid, "no member \"" + last + "\"");
    }
    if (removed != nullptr) {
      *removed = *member;
    }
    parent->erase(last);
    return {};
  }
  if (parent->isArray()) {
    auto& array = parent->asArray();
    auto index = indexIn(last, array.size(), false);
    FLOTILLA_TRY(index);
    if (removed != nullptr) {
      *removed = array[*index];
    }
    array.erase(array.begin() + static_cast<std::ptrdiff_t>(*index));
    return {};
  }
  return fail(ErrorKind::kInvalid, "the parent is not a map or a list");
}

Status applyOne(Json& doc, const Json& op) {
  if (!op.isObject()) {
    return fail(ErrorKind::kInvalid, "an operation must be a map");
  }
  const std::string name = op.getString("op");
  const Json* path_value = op.find("path");
  if (path_value == nullptr || !path_value->isString()) {
    return fail(ErrorKind::kInvalid, "\"path\" is required");
  }
  auto path = pointerTokens(path_value->asString());
  if (!path.ok()) {
    return fail(path.error());
  }
  auto from = [&]() -> Result<std::vector<std::string>> {
    const Json* from_value = op.find("from");
    if (from_value == nullptr || !from_value->isString()) {
      return fail(ErrorKind::kInvalid, "\"from\" is required");
    }
    return pointerTokens(from_value->asString());
  };
  const Json* value = op.find("value");
  if (name == "add" || name == "replace" || name == "test") {
    if (value == nullptr) {
      return fail(ErrorKind::kInvalid, "\"value\" is required");
    }
  }
  if (name == "add") {
    return addAt(doc, *path, *value);
  }
  if (name == "remove") {
    return removeAt(doc, *path, nullptr);
  }
  if (name == "replace") {
    Json* target = walk(doc, *path, path->size());
    if (target == nullptr) {
      return fail(ErrorKind::kInvalid, "the target does not exist");
    }
    *target = *value;
    return {};
  }
  if (name == "move" || name == "copy") {
    auto source = from();
    if (!source.ok()) {
      return fail(source.error());
    }
    Json moved;
    if (name == "move") {
      FLOTILLA_TRY(removeAt(doc, *source, &moved));
    } else {
      Json* found = walk(doc, *source, source->size());
      if (found == nullptr) {
        return fail(ErrorKind::kInvalid, "the source does not exist");
      }
      moved = *found;
    }
    return addAt(doc, *path, std::move(moved));
  }
  if (name == "test") {
    Json* target = walk(doc, *path, path->size());
    if (target == nullptr || !(*target == *value)) {
      return fail(ErrorKind::kInvalid, "test failed");
    }
    return {};
  }
  return fail(ErrorKind::kInvalid, "unknown op \"" + name + "\"");
}

// ---- strategic merge patch ----

//! One list field and its merge key. `parent` restricts the entry to lists under that field ("" = anywhere).
struct ListKey {
  std::string_view field;
  std::string_view parent;
  std::string_view key;  //!< "" = a primitive list merged as a set (finalizers)
};

// The patchMergeKey of Kubernetes' built-in types for the lists one patches in practice (k8s.io/api struct tags).
// `ports` under a container merges by containerPort; anywhere else (Service) by port.
constexpr ListKey kStrategicListKeys[] = {
    {"containers", "", "name"},
    {"initContainers", "", "name"},
    {"ephemeralContainers", "", "name"},
    {"volumes", "", "name"},
    {"env", "", "name"},
    {"ports", "containers", "containerPort"},
    {"ports", "initContainers", "containerPort"},
    {"ports", "ephemeralContainers", "containerPort"},
    {"ports", "", "port"},
    {"volumeMounts", "", "mountPath"},
    {"volumeDevices", "", "devicePath"},
    {"imagePullSecrets", "", "name"},
    {"hostAliases", "", "ip"},
    {"topologySpreadConstraints", "", "topologyKey"},
    {"resourceClaims", "", "name"},
    {"ownerReferences", "", "uid"},
    {"secrets", "", "name"},  // ServiceAccount.secrets
    {"conditions", "", "type"},
    {"finalizers", "metadata", ""},
};

constexpr std::string_view kPatchDirective = "$patch";
constexpr std::string_view kRetainKeys = "$retainKeys";
constexpr std::string_view kSetElementOrder = "$setElementOrder/";
constexpr std::string_view kDeleteFromPrimitiveList = "$deleteFromPrimitiveList/";

//! The list's merge strategy: the entry for `field` under `parent` (the nearest map field above the list).
const ListKey* listKeyFor(std::string_view field, std::string_view parent) {
  const ListKey* fallback = nullptr;
  for (const auto& entry : kStrategicListKeys) {
    if (entry.field != field) {
      continue;
    }
    if (entry.parent == parent) {
      return &entry;
    }
    if (entry.parent.empty() && fallback == nullptr) {
      fallback = &entry;
    }
  }
  return fallback;
}

std::string joinPath(const std::string& path, std::string_view field) {
  return path.empty() ? std::string(field) : path + "." + std::string(field);
}

//! A patch value stored as is: its directives removed (a new map or list takes the patch's content).
Json stripDirectives(const Json& value) {
  if (value.isObject()) {
    Json out = Json::object();
    for (const auto& [key, child] : value.asObject()) {
      if (key == kPatchDirective || key == kRetainKeys || startsWith(key, kSetElementOrder) ||
          startsWith(key, kDeleteFromPrimitiveList)) {
        continue;
      }
      out[key] = stripDirectives(child);
    }
    return out;
  }
  if (value.isArray()) {
    Json out = Json::array();
    for (const auto& item : value.asArray()) {
      if (item.isObject() && item.getString(std::string(kPatchDirective)) == "replace" && item.size() == 1) {
        continue;
      }
      out.push(stripDirectives(item));
    }
    return out;
  }
  return value;
}

enum class MapResult { kKeep, kDelete };

Result<MapResult> mergeMap(Json& original, const Json& patch, const std::string& path, std::string_view field);

Status mergeList(Json& original, const Json& patch, const std::string& path, std::string_view field,
                 std::string_view parent) {
  const auto& items = patch.asArray();
  for (const auto& item : items) {
    if (item.isObject() && item.getString(std::string(kPatchDirective)) == "replace") {
      original = stripDirectives(patch);  // the whole list is replaced by the other items
      return {};
    }
  }
  const ListKey* strategy = listKeyFor(field, parent);
  if (strategy == nullptr) {
    original = stripDirectives(patch);  // no patch strategy: lists are atomic
    return {};
  }
  auto& list = original.asArray();
  if (strategy->key.empty()) {
    for (const auto& item : items) {
      if (std::find(list.begin(), list.end(), item) == list.end()) {
        list.push_back(item);
      }
    }
    return {};
  }
  const std::string key(strategy->key);
  for (size_t i = 0; i < items.size(); ++i) {
    const Json& item = items[i];
    std::string where = path;
    where.append("[").append(std::to_string(i)).append("]");
    if (!item.isObject()) {
      std::string message = where;
      message.append(": ").append(field).append(" is merged by \"").append(key);
      message.append("\"; its items must be maps, got ").append(jsonTypeName(item));
      return fail(ErrorKind::kInvalid, std::move(message));
    }
    const Json* value = item.find(key);
    if (value == nullptr) {
      std::string message = where;
      message.append(": the item has no merge key \"").append(key).append("\"");
      return fail(ErrorKind::kInvalid, std::move(message));
    }
    auto match = std::find_if(list.begin(), list.end(), [&](const Json& existing) {
      const Json* existing_value = existing.isObject() ? existing.find(key) : nullptr;
      return existing_value != nullptr && *existing_value == *value;
    });
    const std::string directive = item.getString(std::string(kPatchDirective));
    if (directive == "delete") {
      list.erase(std::remove_if(list.begin(), list.end(),
                                [&](const Json& existing) {
                                  const Json* existing_value = existing.isObject() ? existing.find(key) : nullptr;
                                  return existing_value != nullptr && *existing_value == *value;
                                }),
                 list.end());
      continue;
    }
    if (match == list.end()) {
      list.push_back(stripDirectives(item));
      continue;
    }
    auto merged = mergeMap(*match, item, where, field);
    if (!merged.ok()) {
      return fail(merged.error());
    }
    if (*merged == MapResult::kDelete) {
      list.erase(match);
    }
  }
  return {};
}

Result<MapResult> mergeMap(Json& original, const Json& patch, const std::string& path, std::string_view field) {
  if (const Json* directive = patch.find(kPatchDirective); directive != nullptr) {
    const std::string value = directive->isString() ? directive->asString() : std::string();
    if (value == "delete") {
      return MapResult::kDelete;
    }
    if (value == "replace") {
      original = stripDirectives(patch);
      return MapResult::kKeep;
    }
    if (value != "merge") {
      return fail(ErrorKind::kInvalid, (path.empty() ? std::string("the patch") : path) + ": unknown $patch \"" +
                                           value + "\" (expected merge, replace or delete)");
    }
  }
  if (!original.isObject()) {
    original = Json::object();
  }
  for (const auto& [key, value] : patch.asObject()) {
    if (key == kPatchDirective || key == kRetainKeys || startsWith(key, kSetElementOrder)) {
      continue;
    }
    if (startsWith(key, kDeleteFromPrimitiveList)) {
      const std::string target = key.substr(kDeleteFromPrimitiveList.size());
      Json* list = original.find(target);
      if (list != nullptr && list->isArray() && value.isArray()) {
        auto& items = list->asArray();
        for (const auto& doomed : value.asArray()) {
          items.erase(std::remove(items.begin(), items.end(), doomed), items.end());
        }
      }
      continue;
    }
    const std::string child_path = joinPath(path, key);
    if (value.isNull()) {
      original.erase(key);
      continue;
    }
    Json* existing = original.find(key);
    if (value.isObject()) {
      Json base = existing != nullptr && existing->isObject() ? *existing : Json::object();
      auto merged = mergeMap(base, value, child_path, key);
      if (!merged.ok()) {
        return fail(merged.error());
      }
      if (*merged == MapResult::kDelete) {
        original.erase(key);
      } else {
        original[key] = std::move(base);
      }
      continue;
    }
    if (value.isArray() && existing != nullptr && existing->isArray()) {
      FLOTILLA_TRY(mergeList(*existing, value, child_path, key, field));
      continue;
    }
    original[key] = stripDirectives(value);
  }
  if (const Json* retain = patch.find(kRetainKeys); retain != nullptr) {
    if (!retain->isArray()) {
      return fail(ErrorKind::kInvalid, joinPath(path, kRetainKeys) + ": must be a list of field names");
    }
    std::vector<std::string> doomed;
    for (const auto& [key, value] : original.asObject()) {
      if (std::find(retain->asArray().begin(), retain->asArray().end(), Json(key)) == retain->asArray().end()) {
        doomed.push_back(key);
      }
    }
    for (const auto& key : doomed) {
      original.erase(key);
    }
  }
  return MapResult::kKeep;
}

}  // namespace

bool isBuiltinApiVersion(std::string_view api_version) {
  auto slash = api_version.find('/');
  if (slash == std::string_view::npos) {
    return api_version == "v1";
  }
  std::string_view group = api_version.substr(0, slash);
  return group.find('.') == std::string_view::npos || endsWith(group, ".k8s.io");
}

Status applyStrategicMergePatch(Json& target, const Json& patch) {
  if (!patch.isObject()) {
    return fail(ErrorKind::kInvalid, "a strategic merge patch must be a map");
  }
  Json working = target;
  auto merged = mergeMap(working, patch, "", "");
  if (!merged.ok()) {
    return fail(merged.error());
  }
  if (*merged == MapResult::kDelete) {
    return fail(ErrorKind::kInvalid, "$patch: delete at the top of a patch would delete the whole object");
  }
  target = std::move(working);
  return {};
}

Status applyOverlayPatch(Json& target, const Json& patch) {
  if (patch.isArray()) {
    return applyJsonPatch(target, patch);
  }
  if (!patch.isObject()) {
    return fail(ErrorKind::kInvalid,
                "a patch must be a map (merge patch) or a list (JSON patch), got " + jsonTypeName(patch));
  }
  if (target.isObject() && isBuiltinApiVersion(target.getString("apiVersion"))) {
    return applyStrategicMergePatch(target, patch);
  }
  jsonMergePatch(target, patch);
  return {};
}

Status applyJsonPatch(Json& target, const Json& patch) {
  if (!patch.isArray()) {
    return fail(ErrorKind::kInvalid, "a JSON patch must be a list of operations");
  }
  Json working = target;
  const auto& ops = patch.asArray();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto status = applyOne(working, ops[i]); !status.ok()) {
      return fail(ErrorKind::kInvalid, "operation " + std::to_string(i) + " (" + ops[i].getString("op") + " " +
                                           ops[i].getString("path") + "): " + status.error().message);
    }
  }
  target = std::move(working);
  return {};
}

const Json* resolvePointer(const Json& doc, std::string_view pointer) {
  auto tokens = pointerTokens(pointer);
  if (!tokens.ok()) {
    return nullptr;
  }
  return walk(const_cast<Json&>(doc), *tokens, tokens->size());
}

}  // namespace flotilla::render
