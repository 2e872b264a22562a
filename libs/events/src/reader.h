// flotilla/events/src/reader.h
//
// Strict reading of payloads and records with core's field codec (flotilla/core/codec.h): each accessor marks
// its key as known, finish() reports the rest as unknown fields, and problems are collected with their field
// path ("BundleEvent.customizations[0].name").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/codec.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"

namespace flotilla::events::detail {

using Reader = codec::Reader;

//! Starts decoding a payload of `kind`: checks apiVersion and kind, reads id and time. The caller reads its
//! fields, then calls finish.
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

//! Problems as one kInvalid Status ("decode <kind>"), or ok.
Status problemsStatus(const std::vector<std::string>& problems, std::string_view kind);

//! A payload: the envelope (apiVersion, kind, id, time) and every field, empty ones included.
template <typename T, typename Fn>
Json encodeWith(const T& value, Fn&& fields) {
  Json out = codec::encode(value, fields, /*omit_empty=*/false);
  out["apiVersion"] = std::string(kApiVersion);
  out["kind"] = std::string(T::kKind);
  out["id"] = value.id;
  out["time"] = value.time;
  return out;
}

//! Decodes a payload of type T: its envelope, then `fn(reader, out)` reads the fields.
template <typename T, typename Fn>
Result<T> decodeWith(const Json& json, Fn&& fn) {
  PayloadReader reader(json, T::kKind);
  T out;
  reader.header(out.id, out.time);
  if (reader.fields().ok()) {
    fn(reader.fields(), out);
  }
  if (auto s = reader.finish(); !s.ok()) {
    return fail(s.error());
  }
  return out;
}

}  // namespace flotilla::events::detail
