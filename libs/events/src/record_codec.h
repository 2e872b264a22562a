// flotilla/events/src/record_codec.h
//
// What the record codecs (records.cpp, records_summary.cpp) share: decoding one record with a strict Reader and
// collecting its problems into one kInvalid Status, and the small encoders of repeated shapes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "reader.h"

namespace flotilla::events::detail {

//! Problems as one kInvalid Status ("decode <kind>"), or ok.
Status problemsStatus(const std::vector<std::string>& problems, std::string_view kind);

//! Decodes a record of type T (named T::kKind in paths): `fn(reader, out)` reads the fields; unknown fields and
//! every problem are reported together.
template <typename T, typename Fn>
Result<T> decodeRecordWith(const Json& json, Fn&& fn) {
  std::vector<std::string> problems;
  Reader reader(json, std::string(T::kKind), problems);
  T out{};
  if (reader.ok()) {
    fn(reader, out);
  }
  reader.finish();
  if (auto status = problemsStatus(problems, T::kKind); !status.ok()) {
    return fail(status.error());
  }
  return out;
}

//! Checks a bundler record's apiVersion and kind.
void recordEnvelope(Reader& in, std::string_view api_version, std::string_view kind);

//! A state name field: one of the seven bundle states, or "".
void stateField(Reader& in, std::string_view key, std::string& out, bool required = false);

Json encodeRenderError(const RenderError& error);
void readRenderError(Reader& in, RenderError& error);

}  // namespace flotilla::events::detail
