// flotilla/model/src/decoder.h
//
// What the model's codecs share on top of core's field codec (flotilla/core/codec.h): value codecs for the
// model's own scalar types (durations, int-or-percent, label selectors, state summaries), label checks, and the
// field lists of Fleet's shared structures, each usable by codec::Reader (decode) and codec::Writer (encode).
#pragma once

#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "flotilla/core/codec.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"
#include "flotilla/model/state.h"

namespace flotilla::model {

//! S is T or const T: constrains a field list to its struct, for decoding (T&) and encoding (const T&).
template <typename S, typename T>
concept Of = std::same_as<std::remove_const_t<S>, T>;

}  // namespace flotilla::model

namespace flotilla::model::detail {

using codec::Reader;
using codec::Writer;

//! A Go duration string ("1m30s").
struct DurationCodec {
  bool read(Reader& in, std::string_view key, const Json& value, Duration& out) const;
  Json write(const Duration& value) const { return formatDuration(value); }
};
//! A count (10) or a percentage ("10%").
struct IntOrPercentCodec {
  bool read(Reader& in, std::string_view key, const Json& value, IntOrPercent& out) const;
  Json write(const IntOrPercent& value) const;
};
//! A metav1.LabelSelector ({matchLabels, matchExpressions}), validated.
struct SelectorCodec {
  bool read(Reader& in, std::string_view key, const Json& value, LabelSelector& out) const;
  Json write(const LabelSelector& value) const { return encodeSelector(value); }
};
//! Fleet's BundleSummary (state counters, desiredReady, nonReadyResources).
struct SummaryCodec {
  bool read(Reader& in, std::string_view key, const Json& value, StateSummary& out) const;
  Json write(const StateSummary& value) const { return encodeStateSummary(value); }
};

//! Reads a string through `parse(std::string) -> Result<T>`; `expected` names the form for a value of another type.
template <typename T, typename Parse>
bool readParsed(Reader& in, std::string_view key, const Json& value, std::string_view expected, Parse&& parse, T& out) {
  if (!value.isString()) {
    in.fail(in.pathOf(key), std::string("expected ").append(expected).append(", got ") + codec::typeName(value));
    return false;
  }
  auto parsed = parse(value.asString());
  if (!parsed.ok()) {
    in.fail(in.pathOf(key), parsed.error().message);
    return false;
  }
  out = *parsed;
  return true;
}

inline constexpr DurationCodec kDuration{};
inline constexpr IntOrPercentCodec kIntOrPercent{};
inline constexpr SelectorCodec kSelector{};
inline constexpr SummaryCodec kSummary{};

//! Reads `key` as a string map whose keys and values must be valid Kubernetes labels.
void labels(Reader& in, std::string_view key, Labels& out);
inline void labels(Writer& out, std::string_view key, const Labels& value) {
  out.stringMap(key, value);
}

//! Passes a struct to nested objects and lists: `v.objects("targets", s.targets, kFields)` calls the overload of
//! fields(v, s) for that struct (option_fields.h, status_fields.h), found by argument-dependent lookup.
struct FieldList {
  template <typename V, typename S>
  void operator()(V& v, S& s) const {
    fields(v, s);
  }
};
inline constexpr FieldList kFields{};

}  // namespace flotilla::model::detail
