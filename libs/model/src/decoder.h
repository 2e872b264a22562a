// flotilla/model/src/decoder.h
//
// Internal helpers for strict decoding: a DecodeContext collects errors with their field path and line, and a
// Fields reader walks one JSON object, marking each key it reads, so finish() can report the unknown ones (with
// a "did you mean" hint drawn from the keys the decoder asked for). Encoding helpers live here too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"

namespace flotilla::model::detail {

//! "a string", "a number", "a map", ... for "expected X, got Y" messages.
std::string typeName(const Json& value);

class DecodeContext {
 public:
  static constexpr size_t kMaxErrors = 10;

  //! `document` (optional) supplies field lines; paths given to fail() are relative to its root.
  DecodeContext(std::string_view source, const YamlDocument* document) : source_(source), document_(document) {}

  //! Records a problem at `path`.
  void fail(std::string_view path, std::string message);
  [[nodiscard]] bool failed() const { return !problems_.empty(); }
  //! All recorded problems as one kInvalid Error (message "file:line: path: message; ...", where "file:line").
  [[nodiscard]] Error error() const;
  //! "source:line" for `path` ("" when neither is known).
  [[nodiscard]] std::string locate(std::string_view path) const;

 private:
  std::string source_;
  const YamlDocument* document_;
  std::vector<std::pair<std::string, std::string>> problems_;  // (location prefix + path, message)
  std::string first_where_;
  size_t dropped_ = 0;
};

//! Reads the fields of one JSON object. Every accessor marks the key as known and consumed; absent and null
//! values leave the output untouched.
class Fields {
 public:
  Fields(DecodeContext& ctx, const Json& value, std::string path);

  //! False when the value was not an object (the error is already recorded).
  [[nodiscard]] bool ok() const { return object_ != nullptr; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string pathOf(std::string_view key) const { return yamlKeyPath(path_, key); }
  [[nodiscard]] DecodeContext& ctx() { return ctx_; }

  //! The raw value of `key`, or nullptr when absent or null; marks the key known.
  const Json* take(std::string_view key);
  //! Accepts `key` and drops its value (fields kept only for compatibility).
  void skip(std::string_view key) { take(key); }
  //! Records "required field is missing" unless `key` has a non-null value.
  void require(std::string_view key);

  void str(std::string_view key, std::string& out);
  void boolean(std::string_view key, bool& out);
  void optBoolean(std::string_view key, std::optional<bool>& out);
  void integer(std::string_view key, int64_t& out, int64_t min = INT64_MIN);
  void optInteger(std::string_view key, std::optional<int64_t>& out, int64_t min = INT64_MIN);
  void strings(std::string_view key, std::vector<std::string>& out);
  void stringMap(std::string_view key, Labels& out);
  void optStringMap(std::string_view key, std::optional<Labels>& out);
  //! Like stringMap, then validates keys and values as Kubernetes labels.
  void labels(std::string_view key, Labels& out);
  //! A free-form map (helm.values, templateValues).
  void map(std::string_view key, std::optional<Json>& out);
  //! A free-form list (agentEnvVars, agentTolerations).
  void list(std::string_view key, std::optional<Json>& out);
  void duration(std::string_view key, std::optional<Duration>& out);
  void intOrPercent(std::string_view key, std::optional<IntOrPercent>& out);
  void selector(std::string_view key, std::optional<LabelSelector>& out);

  //! A nested object decoded by fn(Fields&, T&).
  template <typename T, typename Fn>
  void object(std::string_view key, std::optional<T>& out, Fn&& fn) {
    const Json* value = take(key);
    if (value == nullptr) {
      return;
    }
    Fields sub(ctx_, *value, pathOf(key));
    if (!sub.ok()) {
      return;
    }
    T decoded{};
    fn(sub, decoded);
    sub.finish();
    out = std::move(decoded);
  }
  //! A nested object that is not optional in the model (absent leaves `out` alone).
  template <typename T, typename Fn>
  void plainObject(std::string_view key, T& out, Fn&& fn) {
    std::optional<T> decoded;
    object(key, decoded, fn);
    if (decoded) {
      out = std::move(*decoded);
    }
  }
  //! A list of objects, each decoded by fn(Fields&, T&).
  template <typename T, typename Fn>
  void objects(std::string_view key, std::vector<T>& out, Fn&& fn) {
    const Json* value = take(key);
    if (value == nullptr) {
      return;
    }
    if (!value->isArray()) {
      ctx_.fail(pathOf(key), "expected a list, got " + typeName(*value));
      return;
    }
    std::vector<T> decoded;
    for (size_t i = 0; i < value->asArray().size(); ++i) {
      Fields sub(ctx_, value->asArray()[i], yamlIndexPath(pathOf(key), i));
      if (!sub.ok()) {
        continue;
      }
      T item{};
      fn(sub, item);
      sub.finish();
      decoded.push_back(std::move(item));
    }
    out = std::move(decoded);
  }
  //! Like objects() for a list whose absence differs from an empty list.
  template <typename T, typename Fn>
  void optObjects(std::string_view key, std::optional<std::vector<T>>& out, Fn&& fn) {
    if (object_ == nullptr || object_->find(key) == nullptr || object_->find(key)->isNull()) {
      take(key);
      return;
    }
    std::vector<T> decoded;
    objects(key, decoded, fn);
    out = std::move(decoded);
  }

  //! Reports every key of the object that no accessor asked for as "unknown field".
  void finish();

 private:
  DecodeContext& ctx_;
  const Json* object_ = nullptr;
  std::string path_;
  std::set<std::string, std::less<>> known_;
};

//! Builds a JSON object, omitting zero values (Go's omitempty) unless the field is optional and set.
class Out {
 public:
  void str(std::string_view key, const std::string& value) {
    if (!value.empty()) {
      json_[key] = value;
    }
  }
  void boolean(std::string_view key, bool value) {
    if (value) {
      json_[key] = true;
    }
  }
  void optBoolean(std::string_view key, const std::optional<bool>& value) {
    if (value) {
      json_[key] = *value;
    }
  }
  void integer(std::string_view key, int64_t value) {
    if (value != 0) {
      json_[key] = value;
    }
  }
  void optInteger(std::string_view key, const std::optional<int64_t>& value) {
    if (value) {
      json_[key] = *value;
    }
  }
  void strings(std::string_view key, const std::vector<std::string>& values);
  void stringMap(std::string_view key, const Labels& values);
  void optStringMap(std::string_view key, const std::optional<Labels>& values) {
    if (values) {
      json_[key] = stringMapJson(*values);
    }
  }
  void json(std::string_view key, const std::optional<Json>& value) {
    if (value) {
      json_[key] = *value;
    }
  }
  void duration(std::string_view key, const std::optional<Duration>& value) {
    if (value) {
      json_[key] = formatDuration(*value);
    }
  }
  void intOrPercent(std::string_view key, const std::optional<IntOrPercent>& value);
  void selector(std::string_view key, const std::optional<LabelSelector>& value);
  //! A set optional object, encoded by fn(const T&) -> Json.
  template <typename T, typename Fn>
  void object(std::string_view key, const std::optional<T>& value, Fn&& fn) {
    if (value) {
      json_[key] = fn(*value);
    }
  }
  //! A non-optional object, written only when its encoding is not empty.
  void nonEmpty(std::string_view key, Json value) {
    if (!(value.isObject() && value.size() == 0)) {
      json_[key] = std::move(value);
    }
  }
  template <typename T, typename Fn>
  void objects(std::string_view key, const std::vector<T>& values, Fn&& fn) {
    if (values.empty()) {
      return;
    }
    Json list = Json::array();
    for (const auto& value : values) {
      list.push(fn(value));
    }
    json_[key] = std::move(list);
  }
  template <typename T, typename Fn>
  void optObjects(std::string_view key, const std::optional<std::vector<T>>& values, Fn&& fn) {
    if (!values) {
      return;
    }
    Json list = Json::array();
    for (const auto& value : *values) {
      list.push(fn(value));
    }
    json_[key] = std::move(list);
  }
  void set(std::string_view key, Json value) { json_[key] = std::move(value); }
  //! Copies every member of `other` (an inline struct's fields) into this object.
  void inlineAll(const Json& other);

  Json take() { return std::move(json_); }

  static Json stringMapJson(const Labels& values);

 private:
  Json json_ = Json::object();
};

//! Fleet's shared structures (src/codec_options.cpp).
void decodeOptionsInto(Fields& in, BundleDeploymentOptions& out);
Json encodeOptionsJson(const BundleDeploymentOptions& value);
void decodeGitTargetInto(Fields& in, GitTarget& out);
Json encodeGitTargetJson(const GitTarget& value);
void decodeBundleTargetInto(Fields& in, BundleTarget& out);
Json encodeBundleTargetJson(const BundleTarget& value);
void decodeBundleRefInto(Fields& in, BundleRef& out);
Json encodeBundleRefJson(const BundleRef& value);
void decodeRolloutInto(Fields& in, RolloutStrategy& out);
Json encodeRolloutJson(const RolloutStrategy& value);
void decodeCorrectDriftInto(Fields& in, CorrectDrift& out);
Json encodeCorrectDriftJson(const CorrectDrift& value);
//! BundleSpec fields; `internal` also accepts resources, targetRestrictions, contentsId and valuesHash, which
//! fleet.yaml must not set.
void decodeBundleSpecInto(Fields& in, BundleSpec& out, bool internal);
void encodeBundleSpecInto(Out& out, const BundleSpec& value, bool internal);
void decodeSelectorInto(Fields& in, LabelSelector& out);

//! Runs `fn(Fields&, T&)` over a whole value as the root object; kInvalid with all problems if any.
template <typename T, typename Fn>
Result<T> decodeRoot(const Json& value, std::string_view path, Fn&& fn) {
  DecodeContext ctx({}, nullptr);
  Fields in(ctx, value, std::string(path));
  T out{};
  if (in.ok()) {
    fn(in, out);
    in.finish();
  }
  if (ctx.failed()) {
    return fail(ctx.error());
  }
  return out;
}

}  // namespace flotilla::model::detail
