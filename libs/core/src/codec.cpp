#include "flotilla/core/codec.h"

#include <algorithm>

#include "flotilla/core/ascii.h"

namespace flotilla::codec {
namespace {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same = asciiLower(a[i - 1]) == asciiLower(b[j - 1]);
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The known key nearest to `key` (at most two edits away), or "".
std::string nearestKey(std::string_view key, const std::set<std::string, std::less<>>& known) {
  std::string best;
  size_t best_distance = 3;
  for (const auto& candidate : known) {
    size_t d = editDistance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace

std::string typeName(const Json& value) {
  return value.type() == Json::Type::kDouble ? "a decimal number" : jsonTypeName(value);
}

// ---- Problems ----

std::string Problems::locate(std::string_view path) const {
  std::string out = source_;
  if (document_ != nullptr) {
    out += (out.empty() ? "line " : ":") + std::to_string(document_->lineOf(path));
  }
  return out;
}

void Problems::fail(std::string_view path, std::string_view message) {
  if (capped_ && list_->size() >= kMaxProblems) {
    ++dropped_;
    return;
  }
  std::string where = locate(path);
  if (list_->empty()) {
    first_where_ = where;
  }
  std::string problem = where.empty() ? "" : where + ": ";
  problem.append(path.empty() ? std::string_view("(document)") : path).append(": ").append(message);
  list_->push_back(std::move(problem));
}

Error Problems::error(const std::string& where) const {
  std::string message;
  for (const auto& problem : *list_) {
    message.append(message.empty() ? "" : "; ").append(problem);
  }
  if (dropped_ > 0) {
    message += "; and " + std::to_string(dropped_) + " more";
  }
  return makeError(ErrorKind::kInvalid, std::move(message), where.empty() ? first_where_ : where);
}

// ---- Reader ----

Reader::Reader(Problems& problems, const Json& value, std::string path) : problems_(&problems), path_(std::move(path)) {
  if (value.isObject()) {
    object_ = &value;
  } else if (value.isNull() && problems.null_is_empty) {
    static const Json kEmpty = Json::object();
    object_ = &kEmpty;
  } else {
    fail(path_, "expected a map, got " + typeName(value));
  }
}

Reader::Reader(const Json& value, std::string path, std::vector<std::string>& problems)
    : owned_(std::make_unique<Problems>(problems)), problems_(owned_.get()), path_(std::move(path)) {
  owned_->null_is_empty = false;
  if (value.isObject()) {
    object_ = &value;
  } else {
    fail(path_, "expected a map, got " + typeName(value));
  }
}

const Json* Reader::take(std::string_view key, bool required) {
  known_.emplace(key);
  const Json* value = object_ == nullptr ? nullptr : object_->find(key);
  if (value != nullptr && value->isNull()) {
    value = nullptr;
  }
  if (value == nullptr && required && object_ != nullptr) {
    fail(pathOf(key), "required field is missing");
  }
  return value;
}

const Json* Reader::takeAs(std::string_view key, bool (Json::*is)() const, std::string_view expected, bool required) {
  const Json* value = take(key, required);
  if (value != nullptr && !(value->*is)()) {
    fail(pathOf(key), std::string("expected ").append(expected).append(", got ") + typeName(*value));
    return nullptr;
  }
  return value;
}

void Reader::str(std::string_view key, std::string& out, bool required) {
  if (const Json* value = takeAs(key, &Json::isString, "a string", required)) {
    if (required && value->asString().empty()) {
      fail(pathOf(key), "must not be empty");
    }
    out = value->asString();
  }
}

void Reader::optBoolean(std::string_view key, std::optional<bool>& out, bool required) {
  if (const Json* value = takeAs(key, &Json::isBool, "true or false", required)) {
    out = value->asBool();
  }
}

void Reader::boolean(std::string_view key, bool& out, bool required) {
  std::optional<bool> value;
  optBoolean(key, value, required);
  out = value.value_or(out);
}

void Reader::integer(std::string_view key, int64_t& out, bool required) {
  if (const Json* value = takeAs(key, &Json::isInt, "an integer", required)) {
    out = value->asInt();
  }
}

void Reader::optCount(std::string_view key, std::optional<int64_t>& out) {
  if (const Json* value = takeAs(key, &Json::isInt, "an integer")) {
    if (value->asInt() < 0) {
      fail(pathOf(key), "must be at least 0, got " + std::to_string(value->asInt()));
      return;
    }
    out = value->asInt();
  }
}

void Reader::count(std::string_view key, int64_t& out) {
  std::optional<int64_t> value;
  optCount(key, value);
  out = value.value_or(out);
}

void Reader::strings(std::string_view key, std::vector<std::string>& out) {
  const Json* value = takeAs(key, &Json::isArray, "a list of strings");
  if (value == nullptr) {
    return;
  }
  std::vector<std::string> decoded;
  for (size_t i = 0; i < value->asArray().size(); ++i) {
    const Json& item = value->asArray()[i];
    if (!item.isString()) {
      fail(yamlIndexPath(pathOf(key), i), "expected a string, got " + typeName(item));
      continue;
    }
    decoded.push_back(item.asString());
  }
  out = std::move(decoded);
}

void Reader::optStringMap(std::string_view key, std::optional<StringMap>& out) {
  const Json* value = takeAs(key, &Json::isObject, "a map of strings");
  if (value == nullptr) {
    return;
  }
  StringMap decoded;
  for (const auto& [k, v] : value->asObject()) {
    if (!v.isString()) {
      fail(yamlKeyPath(pathOf(key), k),
           "expected a string, got " + typeName(v) + (v.isNull() ? "" : " (quote it: \"...\")"));
      continue;
    }
    decoded.emplace(k, v.asString());
  }
  out = std::move(decoded);
}

void Reader::stringMap(std::string_view key, StringMap& out) {
  std::optional<StringMap> value;
  optStringMap(key, value);
  if (value) {
    out = std::move(*value);
  }
}

void Reader::map(std::string_view key, std::optional<Json>& out) {
  if (const Json* value = takeAs(key, &Json::isObject, "a map")) {
    out = *value;
  }
}

void Reader::list(std::string_view key, std::optional<Json>& out) {
  if (const Json* value = takeAs(key, &Json::isArray, "a list")) {
    out = *value;
  }
}

void Reader::object(std::string_view key, Json& out, bool required) {
  if (const Json* value = takeAs(key, &Json::isObject, "a map", required)) {
    out = *value;
  }
}

void Reader::array(std::string_view key, Json& out) {
  if (const Json* value = takeAs(key, &Json::isArray, "a list")) {
    out = *value;
  }
}

void Reader::any(std::string_view key, Json& out) {
  if (const Json* value = take(key)) {
    out = *value;
  }
}

void Reader::finish() {
  if (object_ == nullptr) {
    return;
  }
  for (const auto& [key, value] : object_->asObject()) {
    if (known_.contains(key)) {
      continue;
    }
    std::string best = nearestKey(key, known_);
    fail(pathOf(key), best.empty() ? "unknown field" : "unknown field (did you mean \"" + best + "\"?)");
  }
}

// ---- Writer ----

void Writer::strings(std::string_view key, const std::vector<std::string>& values) {
  Json list = Json::array();
  for (const auto& value : values) {
    list.push(value);
  }
  put(key, values.empty(), std::move(list));
}

Json Writer::stringMapJson(const StringMap& values) {
  Json map = Json::object();
  for (const auto& [k, v] : values) {
    map[k] = v;
  }
  return map;
}

}  // namespace flotilla::codec
