// flotilla/events/src/reader.h
//
// Strict reading of one JSON object: each accessor marks its key as known, finish() reports the rest as
// unknown fields. Problems are collected with their field path ("BundleEvent.customizations[0].name").
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"

namespace flotilla::events::detail {

class Reader {
 public:
  //! `problems` is shared by a reader and the readers of its nested objects.
  Reader(const Json& value, std::string path, std::vector<std::string>& problems);

  [[nodiscard]] bool ok() const { return object_ != nullptr; }
  [[nodiscard]] std::string pathOf(std::string_view key) const { return path_ + "." + std::string(key); }
  void fail(const std::string& path, const std::string& message) { problems_.push_back(path + ": " + message); }

  //! The value of `key` (nullptr when absent or null); marks the key known. `required` records a problem if absent.
  const Json* take(std::string_view key, bool required = false);
  void str(std::string_view key, std::string& out, bool required = false);
  void integer(std::string_view key, int64_t& out, bool required = false);
  void boolean(std::string_view key, bool& out, bool required = false);
  void strings(std::string_view key, std::vector<std::string>& out);
  void stringMap(std::string_view key, StringMap& out);
  //! A free-form JSON object (options, target matchers).
  void object(std::string_view key, Json& out, bool required = false);
  //! A free-form JSON array (targets, dependsOn).
  void array(std::string_view key, Json& out);
  //! Any JSON value (null when absent).
  void any(std::string_view key, Json& out);

  template <typename T, typename Fn>
  void objects(std::string_view key, std::vector<T>& out, Fn&& fn) {
    const Json* value = take(key);
    if (value == nullptr) {
      return;
    }
    if (!value->isArray()) {
      fail(pathOf(key), "expected a list, got " + typeName(*value));
      return;
    }
    for (size_t i = 0; i < value->asArray().size(); ++i) {
      Reader item(value->asArray()[i], pathOf(key) + "[" + std::to_string(i) + "]", problems_);
      if (!item.ok()) {
        continue;
      }
      T decoded{};
      fn(item, decoded);
      item.finish();
      out.push_back(std::move(decoded));
    }
  }

  template <typename T, typename Fn>
  void optObject(std::string_view key, std::optional<T>& out, Fn&& fn) {
    const Json* value = take(key);
    if (value == nullptr) {
      return;
    }
    Reader item(*value, pathOf(key), problems_);
    if (!item.ok()) {
      return;
    }
    T decoded{};
    fn(item, decoded);
    item.finish();
    out = std::move(decoded);
  }

  void finish();

  static std::string typeName(const Json& value);

 private:
  const Json* object_ = nullptr;
  std::string path_;
  std::vector<std::string>& problems_;
  std::set<std::string, std::less<>> known_;
};

//! Starts decoding a payload of `kind`: checks apiVersion and kind, reads id and time. The caller reads its
//! fields, then calls finishPayload.
class PayloadReader {
 public:
  PayloadReader(const Json& json, std::string_view kind);
  Reader& fields() { return reader_; }
  void header(std::string& id, std::string& time);
  //! Unknown fields and collected problems as one kInvalid Status.
  Status finish();

 private:
  std::vector<std::string> problems_;
  Reader reader_;
  std::string kind_;
};

}  // namespace flotilla::events::detail
