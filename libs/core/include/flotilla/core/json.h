// flotilla/core/json.h
//
// A small JSON document type used as the common currency between Flotilla's libraries: Kubernetes objects,
// event payloads and KV records. Objects keep their keys sorted, so dump() is canonical: the same content
// always serializes to the same bytes, which is what content addressing (manifestID) needs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json, std::less<>>;
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  Json() = default;
  Json(std::nullptr_t) {}                                // NOLINT(google-explicit-constructor)
  Json(bool v) : value_(v) {}                            // NOLINT
  Json(int v) : value_(static_cast<int64_t>(v)) {}       // NOLINT
  Json(int64_t v) : value_(v) {}                         // NOLINT
  Json(uint64_t v) : value_(static_cast<int64_t>(v)) {}  // NOLINT
  Json(double v) : value_(v) {}                          // NOLINT
  Json(const char* v) : value_(std::string(v)) {}        // NOLINT
  Json(std::string v) : value_(std::move(v)) {}          // NOLINT
  Json(std::string_view v) : value_(std::string(v)) {}   // NOLINT
  Json(Array v) : value_(std::move(v)) {}                // NOLINT
  Json(Object v) : value_(std::move(v)) {}               // NOLINT

  static Json object() { return Json(Object{}); }
  static Json array() { return Json(Array{}); }
  //! Builds an object from key/value pairs: Json::obj({{"a", 1}, {"b", "x"}}).
  static Json obj(std::initializer_list<std::pair<const std::string, Json>> items) { return Json(Object(items)); }

  [[nodiscard]] Type type() const { return static_cast<Type>(value_.index()); }
  [[nodiscard]] bool isNull() const { return type() == Type::kNull; }
  [[nodiscard]] bool isBool() const { return type() == Type::kBool; }
  [[nodiscard]] bool isInt() const { return type() == Type::kInt; }
  [[nodiscard]] bool isNumber() const { return type() == Type::kInt || type() == Type::kDouble; }
  [[nodiscard]] bool isString() const { return type() == Type::kString; }
  [[nodiscard]] bool isArray() const { return type() == Type::kArray; }
  [[nodiscard]] bool isObject() const { return type() == Type::kObject; }

  // Checked accessors: assert the type (an invariant: callers check isX() first on untrusted input).
  [[nodiscard]] bool asBool() const;
  [[nodiscard]] int64_t asInt() const;  //!< also converts an integral double
  [[nodiscard]] double asDouble() const;
  [[nodiscard]] const std::string& asString() const;
  [[nodiscard]] const Array& asArray() const;
  [[nodiscard]] Array& asArray();
  [[nodiscard]] const Object& asObject() const;
  [[nodiscard]] Object& asObject();

  // Lenient accessors for reading records: a missing or mistyped value yields the fallback.
  [[nodiscard]] std::string getString(std::string_view key, const std::string& fallback = {}) const;
  [[nodiscard]] int64_t getInt(std::string_view key, int64_t fallback = 0) const;
  [[nodiscard]] bool getBool(std::string_view key, bool fallback = false) const;

  //! Member lookup; nullptr when this is not an object or the key is absent.
  [[nodiscard]] const Json* find(std::string_view key) const;
  [[nodiscard]] Json* find(std::string_view key);
  //! Follows a path of object keys ("metadata", "name"); nullptr when any step is missing.
  [[nodiscard]] const Json* at(std::initializer_list<std::string_view> path) const;
  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != nullptr; }
  //! Object member access that turns null into an object and inserts the key (like std::map).
  Json& operator[](std::string_view key);
  //! Appends to an array (null becomes an array).
  void push(Json value);
  bool erase(std::string_view key);
  [[nodiscard]] size_t size() const;

  //! Compact canonical serialization (sorted keys, no spaces, shortest round-trip doubles).
  [[nodiscard]] std::string dump() const;
  //! Indented serialization for humans.
  [[nodiscard]] std::string pretty(int indent = 2) const;

  //! Parses JSON text. The error names the byte offset or field that failed; kind is kInvalid.
  static Result<Json> parse(std::string_view text);
  //! Documents up to `bytes` are parsed by a parser each thread keeps (default 16 KiB); a larger one gets a parser
  //! of its own, freed after the parse. A kept parser holds ~14 bytes per byte of the largest document its thread
  //! parsed, so a process of many mostly idle threads (the agent) sets 0. Called at start-up, before parsing.
  static void setThreadParserLimit(size_t bytes);

  friend bool operator==(const Json& a, const Json& b) { return a.value_ == b.value_; }

 private:
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> value_;
};

//! "null", "a boolean", "a number", "a string", "a list" or "a map": for "expected X, got Y" messages.
std::string jsonTypeName(const Json& value);

//! Escapes a string as a JSON string literal including the quotes.
std::string jsonQuote(std::string_view s);

//! Applies an RFC 7386 JSON merge patch to `target`.
void jsonMergePatch(Json& target, const Json& patch);

}  // namespace flotilla
