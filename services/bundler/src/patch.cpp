#include "flotilla/bundler/patch.h"

#include <string>
#include <vector>

#include "flotilla/core/util.h"

namespace flotilla::bundler {
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

Status addAt(Json& doc, const std::vector<std::string>& tokens, Json value) {
  if (tokens.empty()) {
    doc = std::move(value);
    return {};
  }
  Json* parent = walk(doc, tokens, tokens.size() - 1);
  if (parent == nullptr) {
    return fail(ErrorKind::kInvalid, "the parent does not exist");
  }
  const std::string& last = tokens.back();
  if (parent->isObject()) {
    (*parent)[last] = std::move(value);
    return {};
  }
  if (parent->isArray()) {
    auto& array = parent->asArray();
    size_t index = 0;
    if (!arrayIndex(last, array.size(), true, index)) {
      return fail(ErrorKind::kInvalid, "bad array index \"" + last + "\"");
    }
    array.insert(array.begin() + static_cast<std::ptrdiff_t>(index), std::move(value));
    return {};
  }
  return fail(ErrorKind::kInvalid, "the parent is not a map or a list");
}

//! Removes the value at `tokens`; when `removed` is set it receives the value.
Status removeAt(Json& doc, const std::vector<std::string>& tokens, Json* removed) {
  if (tokens.empty()) {
    return fail(ErrorKind::kInvalid, "cannot remove the whole document");
  }
  Json* parent = walk(doc, tokens, tokens.size() - 1);
  if (parent == nullptr) {
    return fail(ErrorKind::kInvalid, "the parent does not exist");
  }
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
    size_t index = 0;
    if (!arrayIndex(last, array.size(), false, index)) {
      return fail(ErrorKind::kInvalid, "bad array index \"" + last + "\"");
    }
    if (removed != nullptr) {
      *removed = array[index];
    }
    array.erase(array.begin() + static_cast<std::ptrdiff_t>(index));
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

}  // namespace

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

}  // namespace flotilla::bundler
