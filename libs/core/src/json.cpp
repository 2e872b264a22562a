#include "flotilla/core/json.h"

#include <atomic>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include <simdjson.h>

namespace flotilla {

bool Json::asBool() const {
  assert(isBool());
  return std::get<bool>(value_);
}
int64_t Json::asInt() const {
  if (type() == Type::kDouble) {
    // Clamped: a double outside int64's range, or NaN, has no integer value, and casting it is undefined (the
    // template fuzzer found `printf "%d"` with a 28-digit number).
    const double value = std::get<double>(value_);
    constexpr double kTwoTo63 = 9223372036854775808.0;
    if (std::isnan(value)) {
      return 0;
    }
    if (value >= kTwoTo63) {
      return std::numeric_limits<int64_t>::max();
    }
    if (value < -kTwoTo63) {
      return std::numeric_limits<int64_t>::min();
    }
    return static_cast<int64_t>(value);
  }
  assert(isInt());
  return std::get<int64_t>(value_);
}
double Json::asDouble() const {
  if (type() == Type::kInt) {
    return static_cast<double>(std::get<int64_t>(value_));
  }
  assert(type() == Type::kDouble);
  return std::get<double>(value_);
}
const std::string& Json::asString() const {
  assert(isString());
  return std::get<std::string>(value_);
}
const Json::Array& Json::asArray() const {
  assert(isArray());
  return std::get<Array>(value_);
}
Json::Array& Json::asArray() {
  return const_cast<Array&>(std::as_const(*this).asArray());
}
const Json::Object& Json::asObject() const {
  assert(isObject());
  return std::get<Object>(value_);
}
Json::Object& Json::asObject() {
  return const_cast<Object&>(std::as_const(*this).asObject());
}

std::string Json::getString(std::string_view key, const std::string& fallback) const {
  const Json* v = find(key);
  return v != nullptr && v->isString() ? v->asString() : fallback;
}
int64_t Json::getInt(std::string_view key, int64_t fallback) const {
  const Json* v = find(key);
  return v != nullptr && v->isNumber() ? v->asInt() : fallback;
}
bool Json::getBool(std::string_view key, bool fallback) const {
  const Json* v = find(key);
  return v != nullptr && v->isBool() ? v->asBool() : fallback;
}

const Json* Json::find(std::string_view key) const {
  if (!isObject()) {
    return nullptr;
  }
  const auto& object = std::get<Object>(value_);
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}
Json* Json::find(std::string_view key) {
  return const_cast<Json*>(static_cast<const Json*>(this)->find(key));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}
const Json* Json::at(std::initializer_list<std::string_view> path) const {
  const Json* node = this;
  for (std::string_view key : path) {
    node = node->find(key);
    if (node == nullptr) {
      return nullptr;
    }
  }
  return node;
}
Json& Json::operator[](std::string_view key) {
  if (isNull()) {
    value_ = Object{};
  }
  auto& object = std::get<Object>(value_);
  auto it = object.find(key);
  if (it == object.end()) {
    it = object.emplace(std::string(key), Json()).first;
  }
  return it->second;
}
void Json::push(Json value) {
  if (isNull()) {
    value_ = Array{};
  }
  std::get<Array>(value_).push_back(std::move(value));
}
bool Json::erase(std::string_view key) {
  if (!isObject()) {
    return false;
  }
  auto& object = std::get<Object>(value_);
  auto it = object.find(key);
  if (it == object.end()) {
    return false;
  }
  object.erase(it);
  return true;
}
size_t Json::size() const {
  if (isArray()) {
    return std::get<Array>(value_).size();
  }
  if (isObject()) {
    return std::get<Object>(value_).size();
  }
  return 0;
}

std::string jsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      return "null";
    case Json::Type::kBool:
      return "a boolean";
    case Json::Type::kInt:
    case Json::Type::kDouble:
      return "a number";
    case Json::Type::kString:
      return "a string";
    case Json::Type::kArray:
      return "a list";
    case Json::Type::kObject:
      return "a map";
  }
  return "a value";
}

std::string jsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

namespace {

void appendDouble(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";  // JSON has no NaN/Inf
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  (void)ec;
  std::string_view text(buf, static_cast<size_t>(end - buf));
  out += text;
  // Keep a double recognisable as one after a round trip ("1.0", not "1").
  if (text.find_first_of(".eE") == std::string_view::npos) {
    out += ".0";
  }
}

void dumpTo(const Json& v, std::string& out, int indent, int depth) {
  auto newline = [&](int d) {
    if (indent > 0) {
      out.push_back('\n');
      out.append(static_cast<size_t>(indent) * static_cast<size_t>(d), ' ');
    }
  };
  switch (v.type()) {
    case Json::Type::kNull:
      out += "null";
      break;
    case Json::Type::kBool:
      out += v.asBool() ? "true" : "false";
      break;
    case Json::Type::kInt:
      out += std::to_string(v.asInt());
      break;
    case Json::Type::kDouble:
      appendDouble(out, v.asDouble());
      break;
    case Json::Type::kString:
      out += jsonQuote(v.asString());
      break;
    case Json::Type::kArray: {
      const auto& array = v.asArray();
      out.push_back('[');
      bool first = true;
      for (const auto& item : array) {
        if (!first) {
          out.push_back(',');
        }
        first = false;
        newline(depth + 1);
        dumpTo(item, out, indent, depth + 1);
      }
      if (!array.empty()) {
        newline(depth);
      }
      out.push_back(']');
      break;
    }
    case Json::Type::kObject: {
      const auto& object = v.asObject();
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : object) {
        if (!first) {
          out.push_back(',');
        }
        first = false;
        newline(depth + 1);
        out += jsonQuote(key);
        out += indent > 0 ? ": " : ":";
        dumpTo(item, out, indent, depth + 1);
      }
      if (!object.empty()) {
        newline(depth);
      }
      out.push_back('}');
      break;
    }
  }
}

Result<Json> fromElement(simdjson::dom::element element) {
  switch (element.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return Json();
    case simdjson::dom::element_type::BOOL:
      return Json(bool(element.get_bool().value()));
    case simdjson::dom::element_type::INT64:
      return Json(int64_t(element.get_int64().value()));
    case simdjson::dom::element_type::UINT64: {
      uint64_t u = element.get_uint64().value();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Json(static_cast<double>(u));
      }
      return Json(static_cast<int64_t>(u));
    }
    case simdjson::dom::element_type::DOUBLE:
      return Json(double(element.get_double().value()));
    case simdjson::dom::element_type::STRING:
      return Json(std::string(element.get_string().value()));
    case simdjson::dom::element_type::ARRAY: {
      Json::Array array;
      simdjson::dom::array items = element.get_array().value();
      for (auto item : items) {
        auto converted = fromElement(item);
        if (!converted.ok()) {
          return converted;
        }
        array.push_back(std::move(converted).value());
      }
      return Json(std::move(array));
    }
    case simdjson::dom::element_type::OBJECT: {
      Json::Object object;
      simdjson::dom::object fields = element.get_object().value();
      for (auto field : fields) {
        auto converted = fromElement(field.value);
        if (!converted.ok()) {
          return converted;
        }
        object.insert_or_assign(std::string(field.key), std::move(converted).value());
      }
      return Json(std::move(object));
    }
  }
  return fail(ErrorKind::kInternal, "unknown JSON element type");
}

}  // namespace

std::string Json::dump() const {
  std::string out;
  dumpTo(*this, out, 0, 0);
  return out;
}

std::string Json::pretty(int indent) const {
  std::string out;
  dumpTo(*this, out, indent, 0);
  return out;
}

namespace {

//! The largest document the per-thread parser takes. A simdjson parser keeps buffers of about 14 bytes per byte of
//! the largest document it has parsed, for the life of its thread; a big document (a list) gets a parser of its own.
std::atomic<size_t> g_thread_parser_max_bytes{size_t{16} * 1024};

Result<Json> parseWith(simdjson::dom::parser& parser, std::string_view text) {
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  auto error = parser.parse(padded).get(root);
  if (error != simdjson::SUCCESS) {
    return fail(ErrorKind::kInvalid, std::string("invalid JSON: ") + simdjson::error_message(error));
  }
  return fromElement(root);
}

}  // namespace

void Json::setThreadParserLimit(size_t bytes) {
  g_thread_parser_max_bytes.store(bytes, std::memory_order_relaxed);
}

Result<Json> Json::parse(std::string_view text) {
  if (text.size() > g_thread_parser_max_bytes.load(std::memory_order_relaxed)) {
    simdjson::dom::parser parser;
    return parseWith(parser, text);
  }
  // One parser per thread: simdjson parsers are expensive to create and not thread-safe.
  thread_local simdjson::dom::parser parser;
  return parseWith(parser, text);
}

void jsonMergePatch(Json& target, const Json& patch) {
  if (!patch.isObject()) {
    target = patch;
    return;
  }
  if (!target.isObject()) {
    target = Json::object();
  }
  for (const auto& [key, value] : patch.asObject()) {
    if (value.isNull()) {
      target.erase(key);
    } else {
      jsonMergePatch(target[key], value);
    }
  }
}

}  // namespace flotilla
