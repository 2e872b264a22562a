#include "reader.h"

namespace flotilla::events::detail {

std::string Reader::typeName(const Json& value) {
  return jsonTypeName(value);
}

Reader::Reader(const Json& value, std::string path, std::vector<std::string>& problems)
    : path_(std::move(path)), problems_(problems) {
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

void Reader::str(std::string_view key, std::string& out, bool required) {
  const Json* value = take(key, required);
  if (value == nullptr) {
    return;
  }
  if (!value->isString()) {
    fail(pathOf(key), "expected a string, got " + typeName(*value));
    return;
  }
  if (required && value->asString().empty()) {
    fail(pathOf(key), "must not be empty");
  }
  out = value->asString();
}

void Reader::integer(std::string_view key, int64_t& out, bool required) {
  const Json* value = take(key, required);
  if (value == nullptr) {
    return;
  }
  if (!value->isInt()) {
    fail(pathOf(key), "expected an integer, got " + typeName(*value));
    return;
  }
  out = value->asInt();
}

void Reader::boolean(std::string_view key, bool& out, bool required) {
  const Json* value = take(key, required);
  if (value == nullptr) {
    return;
  }
  if (!value->isBool()) {
    fail(pathOf(key), "expected true or false, got " + typeName(*value));
    return;
  }
  out = value->asBool();
}

void Reader::strings(std::string_view key, std::vector<std::string>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isArray()) {
    fail(pathOf(key), "expected a list of strings, got " + typeName(*value));
    return;
  }
  for (size_t i = 0; i < value->asArray().size(); ++i) {
    const Json& item = value->asArray()[i];
    if (!item.isString()) {
      fail(pathOf(key) + "[" + std::to_string(i) + "]", "expected a string, got " + typeName(item));
      continue;
    }
    out.push_back(item.asString());
  }
}

void Reader::stringMap(std::string_view key, StringMap& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isObject()) {
    fail(pathOf(key), "expected a map of strings, got " + typeName(*value));
    return;
  }
  for (const auto& [k, v] : value->asObject()) {
    if (!v.isString()) {
      fail(pathOf(key) + "." + k, "expected a string, got " + typeName(v));
      continue;
    }
    out.emplace(k, v.asString());
  }
}

void Reader::object(std::string_view key, Json& out, bool required) {
  const Json* value = take(key, required);
  if (value == nullptr) {
    return;
  }
  if (!value->isObject()) {
    fail(pathOf(key), "expected a map, got " + typeName(*value));
    return;
  }
  out = *value;
}

void Reader::array(std::string_view key, Json& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isArray()) {
    fail(pathOf(key), "expected a list, got " + typeName(*value));
    return;
  }
  out = *value;
}

void Reader::any(std::string_view key, Json& out) {
  const Json* value = take(key);
  if (value != nullptr) {
    out = *value;
  }
}

void Reader::finish() {
  if (object_ == nullptr) {
    return;
  }
  for (const auto& [key, value] : object_->asObject()) {
    if (!known_.contains(key)) {
      fail(pathOf(key), "unknown field");
    }
  }
}

PayloadReader::PayloadReader(const Json& json, std::string_view kind)
    : reader_(json, std::string(kind), problems_), kind_(kind) {
  std::string api_version;
  std::string actual_kind;
  reader_.str("apiVersion", api_version, true);
  reader_.str("kind", actual_kind, true);
  if (!api_version.empty() && api_version != kApiVersion) {
    reader_.fail(reader_.pathOf("apiVersion"),
                 "unsupported apiVersion \"" + api_version + "\" (expected " + std::string(kApiVersion) + ")");
  }
  if (!actual_kind.empty() && actual_kind != kind) {
    reader_.fail(reader_.pathOf("kind"), "expected " + std::string(kind) + ", got \"" + actual_kind + "\"");
  }
}

void PayloadReader::header(std::string& id, std::string& time) {
  reader_.str("id", id, true);
  reader_.str("time", time, true);
  if (!time.empty() && !isRfc3339(time)) {
    reader_.fail(reader_.pathOf("time"),
                 "expected an RFC 3339 time such as \"2026-12-02T10:00:00Z\", got \"" + time + "\"");
  }
}

Status PayloadReader::finish() {
  reader_.finish();
  if (problems_.empty()) {
    return okStatus();
  }
  std::string message;
  for (const auto& problem : problems_) {
    message += (message.empty() ? "" : "; ") + problem;
  }
  return fail(ErrorKind::kInvalid, message, "decode " + kind_);
}

}  // namespace flotilla::events::detail
