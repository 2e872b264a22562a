// flotilla/core/codec.h
//
// One strict field codec for JSON objects: a struct's fields are named once, in a field list written as a
// template over a visitor, and that list drives both a strict decoder (codec::Reader) and an encoder
// (codec::Writer):
//
//   constexpr auto kCommitSpec = [](auto& v, auto& s) {
//     v.str("authorName", s.author_name);
//     v.count("depth", s.depth);                       // an integer >= 0
//     v.object("helm", s.helm, kHelm);                 // a nested std::optional<Helm>
//     v.validate([&](codec::Reader& in) { ... });      // checks that only decoding runs
//   };
//   codec::Reader in(problems, json, "spec");  kCommitSpec(in, spec);  in.finish();
//   codec::Writer out;                         kCommitSpec(out, spec); Json json = out.take();
//
// Decoding is strict: a value of the wrong type is "expected X, got Y", and every key no accessor asked for is an
// "unknown field" with a "did you mean" hint drawn from the keys that were asked for. Problems are collected with
// their field path ("spec.targets[0].name") and, for YAML input, the file and line of the field. `null` is the
// same as an absent field. The writer omits zero values (Go's omitempty) unless told to write every field; set
// std::optional fields are always written.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/core/yaml.h"

namespace flotilla::codec {

using StringMap = std::map<std::string, std::string, std::less<>>;

//! "a string", "a number", "a decimal number", "a map", ... for "expected X, got Y" messages.
std::string typeName(const Json& value);

//! Where the problems of one decode go, and how they are located and reported.
class Problems {
 public:
  static constexpr size_t kMaxProblems = 10;

  //! `document` (optional) supplies field lines; paths are relative to its root. `source` names the input.
  explicit Problems(std::string_view source = {}, const YamlDocument* document = nullptr)
      : source_(source), document_(document), list_(&own_) {}
  //! Appends "path: message" problems to `external` instead (no cap, no locations).
  explicit Problems(std::vector<std::string>& external) : list_(&external), capped_(false) {}
  Problems(const Problems&) = delete;
  Problems& operator=(const Problems&) = delete;

  //! Records a problem at `path`.
  void fail(std::string_view path, std::string_view message);
  [[nodiscard]] bool failed() const { return !list_->empty(); }
  [[nodiscard]] const std::vector<std::string>& list() const { return *list_; }
  //! All problems as one kInvalid Error ("file:line: path: message; ..."); `where` defaults to the first
  //! problem's "file:line".
  [[nodiscard]] Error error(const std::string& where = {}) const;
  //! "source:line" for `path` ("" when neither is known).
  [[nodiscard]] std::string locate(std::string_view path) const;

  //! Whether a null object reads as an empty one (YAML `helm:` with nothing under it) or is an error.
  bool null_is_empty = true;

 private:
  std::string source_;
  const YamlDocument* document_ = nullptr;
  std::vector<std::string> own_;
  std::vector<std::string>* list_;
  bool capped_ = true;
  std::string first_where_;
  size_t dropped_ = 0;
};

//! Reads the fields of one JSON object strictly. Every accessor marks its key known; absent and null values
//! leave the output untouched.
class Reader {
 public:
  static constexpr bool kDecoding = true;

  Reader(Problems& problems, const Json& value, std::string path);
  //! A root reader appending "path: message" problems to `problems`.
  Reader(const Json& value, std::string path, std::vector<std::string>& problems);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  //! False when the value was not an object (the problem is already recorded).
  [[nodiscard]] bool ok() const { return object_ != nullptr; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string pathOf(std::string_view key) const { return yamlKeyPath(path_, key); }
  [[nodiscard]] Problems& problems() { return *problems_; }
  void fail(std::string_view path, std::string_view message) { problems_->fail(path, message); }

  //! The raw value of `key`, or nullptr when absent or null; marks the key known. `required` records
  //! "required field is missing" when absent.
  const Json* take(std::string_view key, bool required = false);
  //! Accepts `key` and drops its value (fields kept only for compatibility).
  void skip(std::string_view key) { take(key); }
  //! Records "required field is missing" unless `key` has a non-null value.
  void require(std::string_view key) { take(key, true); }

  //! `required`: the field must be present and not empty.
  void str(std::string_view key, std::string& out, bool required = false);
  //! A string the writer leaves out when empty, even when it writes every field.
  void optStr(std::string_view key, std::string& out) { str(key, out); }
  void boolean(std::string_view key, bool& out, bool required = false);
  void optBoolean(std::string_view key, std::optional<bool>& out, bool required = false);
  void integer(std::string_view key, int64_t& out, bool required = false);
  //! An integer that must not be negative.
  void count(std::string_view key, int64_t& out);
  void optCount(std::string_view key, std::optional<int64_t>& out);
  void strings(std::string_view key, std::vector<std::string>& out);
  void stringMap(std::string_view key, StringMap& out);
  void optStringMap(std::string_view key, std::optional<StringMap>& out);
  //! Free-form JSON: a map, a list, or anything. The plain-Json forms keep absent as their default.
  void map(std::string_view key, std::optional<Json>& out);
  void list(std::string_view key, std::optional<Json>& out);
  void object(std::string_view key, Json& out, bool required = false);
  void array(std::string_view key, Json& out);
  void any(std::string_view key, Json& out);

  //! A value with its own codec: `codec.read(Reader&, key, const Json&, T&) -> bool` and `codec.write(const T&)`.
  template <typename T, typename Codec>
  void value(std::string_view key, T& out, const Codec& codec, bool required = false) {
    if (const Json* raw = take(key, required)) {
      codec.read(*this, key, *raw, out);
    }
  }
  template <typename T, typename Codec>
  void value(std::string_view key, std::optional<T>& out, const Codec& codec) {
    const Json* raw = take(key);
    T decoded{};
    if (raw != nullptr && codec.read(*this, key, *raw, decoded)) {
      out = std::move(decoded);
    }
  }

  //! A nested object decoded by fields(Reader&, T&).
  template <typename T, typename Fn>
  void object(std::string_view key, std::optional<T>& out, Fn&& fields) {
    const Json* raw = take(key);
    if (raw == nullptr) {
      return;
    }
    Reader sub(*problems_, *raw, pathOf(key));
    if (sub.ok()) {
      T decoded{};
      fields(sub, decoded);
      sub.finish();
      out = std::move(decoded);
    }
  }
  //! Same as object(); the name the record codecs use.
  template <typename T, typename Fn>
  void optObject(std::string_view key, std::optional<T>& out, Fn&& fields) {
    object(key, out, std::forward<Fn>(fields));
  }
  //! A nested object that is not optional in the struct (absent leaves `out` alone; the writer omits it when
  //! it encodes to an empty map).
  template <typename T, typename Fn>
  void plain(std::string_view key, T& out, Fn&& fields) {
    std::optional<T> decoded;
    object(key, decoded, std::forward<Fn>(fields));
    if (decoded) {
      out = std::move(*decoded);
    }
  }
  //! A nested object whose fields live in `out` itself (fields(Reader&, T&) reads some of them).
  template <typename T, typename Fn>
  void nested(std::string_view key, T& out, Fn&& fields) {
    const Json* raw = take(key);
    if (raw == nullptr) {
      return;
    }
    Reader sub(*problems_, *raw, pathOf(key));
    if (sub.ok()) {
      fields(sub, out);
      sub.finish();
    }
  }
  //! A list of objects, each decoded by fields(Reader&, T&).
  template <typename T, typename Fn>
  void objects(std::string_view key, std::vector<T>& out, Fn&& fields) {
    const Json* raw = takeAs(key, &Json::isArray, "a list");
    if (raw == nullptr) {
      return;
    }
    std::vector<T> decoded;
    for (size_t i = 0; i < raw->asArray().size(); ++i) {
      Reader sub(*problems_, raw->asArray()[i], yamlIndexPath(pathOf(key), i));
      if (!sub.ok()) {
        continue;
      }
      T item{};
      fields(sub, item);
      sub.finish();
      decoded.push_back(std::move(item));
    }
    out = std::move(decoded);
  }
  //! Like objects() for a list whose absence differs from an empty list.
  template <typename T, typename Fn>
  void optObjects(std::string_view key, std::optional<std::vector<T>>& out, Fn&& fields) {
    if (take(key) == nullptr) {
      return;
    }
    std::vector<T> decoded;
    objects(key, decoded, std::forward<Fn>(fields));
    out = std::move(decoded);
  }

  //! Runs `check(Reader&)`: semantic checks that only decoding needs (the writer skips them).
  template <typename Fn>
  void validate(Fn&& check) {
    check(*this);
  }

  //! Reports every key of the object that no accessor asked for as "unknown field".
  void finish();

 private:
  //! take(), then "expected <expected>, got ..." (and nullptr) unless the value passes `is`.
  const Json* takeAs(std::string_view key, bool (Json::*is)() const, std::string_view expected, bool required = false);

  std::unique_ptr<Problems> owned_;  // set by the root constructor that appends to an external list
  Problems* problems_;
  const Json* object_ = nullptr;
  std::string path_;
  std::set<std::string, std::less<>> known_;
};

//! Writes a JSON object through the same field lists. With omit_empty (the default) zero values are left out
//! (Go's omitempty); otherwise every field is written. Set optional fields are always written, null never.
class Writer {
 public:
  static constexpr bool kDecoding = false;

  explicit Writer(bool omit_empty = true) : omit_empty_(omit_empty) {}

  void str(std::string_view key, const std::string& value, bool /*required*/ = false) {
    put(key, value.empty(), value);
  }
  void optStr(std::string_view key, const std::string& value) {
    if (!value.empty()) {
      json_[key] = value;
    }
  }
  void boolean(std::string_view key, bool value, bool /*required*/ = false) { put(key, !value, value); }
  void optBoolean(std::string_view key, const std::optional<bool>& value) { putOpt(key, value); }
  void integer(std::string_view key, int64_t value, bool /*required*/ = false) { put(key, value == 0, value); }
  void count(std::string_view key, int64_t value) { integer(key, value); }
  void optCount(std::string_view key, const std::optional<int64_t>& value) { putOpt(key, value); }
  void strings(std::string_view key, const std::vector<std::string>& values);
  void stringMap(std::string_view key, const StringMap& values) { put(key, values.empty(), stringMapJson(values)); }
  void optStringMap(std::string_view key, const std::optional<StringMap>& values) {
    if (values) {
      json_[key] = stringMapJson(*values);
    }
  }
  void map(std::string_view key, const std::optional<Json>& value) { putOpt(key, value); }
  void list(std::string_view key, const std::optional<Json>& value) { putOpt(key, value); }
  void object(std::string_view key, const Json& value, bool /*required*/ = false) { any(key, value); }
  void array(std::string_view key, const Json& value) { any(key, value); }
  void any(std::string_view key, const Json& value) {
    if (!value.isNull()) {
      put(key, (value.isObject() || value.isArray()) && value.size() == 0, value);
    }
  }
  void skip(std::string_view /*key*/) {}
  void require(std::string_view /*key*/) {}

  //! A non-optional value is left out at its default unless `required`.
  template <typename T, typename Codec>
  void value(std::string_view key, const T& value, const Codec& codec, bool required = false) {
    put(key, !required && value == T{}, codec.write(value));
  }
  template <typename T, typename Codec>
  void value(std::string_view key, const std::optional<T>& value, const Codec& codec) {
    if (value) {
      json_[key] = codec.write(*value);
    }
  }
  template <typename T, typename Fn>
  void object(std::string_view key, const std::optional<T>& value, Fn&& fields) {
    if (value) {
      json_[key] = encode(*value, fields);
    }
  }
  template <typename T, typename Fn>
  void optObject(std::string_view key, const std::optional<T>& value, Fn&& fields) {
    object(key, value, std::forward<Fn>(fields));
  }
  template <typename T, typename Fn>
  void plain(std::string_view key, const T& value, Fn&& fields) {
    Json encoded = encode(value, fields);
    bool empty = encoded.size() == 0;
    put(key, empty, std::move(encoded));
  }
  template <typename T, typename Fn>
  void nested(std::string_view key, const T& value, Fn&& fields) {
    plain(key, value, std::forward<Fn>(fields));
  }
  template <typename T, typename Fn>
  void objects(std::string_view key, const std::vector<T>& values, Fn&& fields) {
    Json list = Json::array();
    for (const auto& value : values) {
      list.push(encode(value, fields));
    }
    put(key, values.empty(), std::move(list));
  }
  template <typename T, typename Fn>
  void optObjects(std::string_view key, const std::optional<std::vector<T>>& values, Fn&& fields) {
    if (values) {
      Json list = Json::array();
      for (const auto& value : *values) {
        list.push(encode(value, fields));
      }
      json_[key] = std::move(list);
    }
  }
  template <typename Fn>
  void validate(Fn&& /*check*/) {}

  //! Sets `key` whatever its value.
  void set(std::string_view key, Json value) { json_[key] = std::move(value); }
  Json take() { return std::move(json_); }

  static Json stringMapJson(const StringMap& values);

 private:
  template <typename T, typename Fn>
  Json encode(const T& value, Fn& fields) const {
    Writer sub(omit_empty_);
    fields(sub, value);
    return sub.take();
  }
  void put(std::string_view key, bool empty, Json value) {
    if (!(empty && omit_empty_)) {
      json_[key] = std::move(value);
    }
  }
  template <typename T>
  void putOpt(std::string_view key, const std::optional<T>& value) {
    if (value) {
      json_[key] = Json(*value);
    }
  }

  bool omit_empty_;
  Json json_ = Json::object();
};

//! True for codec::Reader (decoding), false for codec::Writer: `if constexpr (codec::kDecoding<decltype(v)>)`.
template <typename V>
inline constexpr bool kDecoding = std::remove_cvref_t<V>::kDecoding;

//! Decodes `value` as the root object with `fields(Reader&, T&)`; kInvalid with every problem if any. `source`
//! and `document` (optional) locate problems by file and line.
template <typename T, typename Fn>
Result<T> decode(const Json& value, std::string_view path, Fn&& fields, std::string_view source = {},
                 const YamlDocument* document = nullptr) {
  Problems problems(source, document);
  Reader in(problems, value, std::string(path));
  T out{};
  if (in.ok()) {
    fields(in, out);
    in.finish();
  }
  if (problems.failed()) {
    return fail(problems.error());
  }
  return out;
}

//! Encodes `value` with `fields(Writer&, const T&)`.
template <typename T, typename Fn>
Json encode(const T& value, Fn&& fields, bool omit_empty = true) {
  Writer out(omit_empty);
  fields(out, value);
  return out.take();
}

}  // namespace flotilla::codec
