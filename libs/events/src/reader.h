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

}  // namespace flotilla::events::detail
