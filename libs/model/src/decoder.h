// flotilla/model/src/decoder.h
//
// What the model's codecs share on top of core's field codec (flotilla/core/codec.h): value codecs for the
// model's own scalar types (durations, int-or-percent, label selectors, state summaries), label checks, and the
// field lists of Fleet's shared structures, each usable by codec::Reader (decode) and codec::Writer (encode).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/codec.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/model/duration.h"
#include "flotilla/model/labels.h"
#include "flotilla/model/options.h"
#include "flotilla/model/state.h"

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

inline constexpr DurationCodec kDuration{};
inline constexpr IntOrPercentCodec kIntOrPercent{};
inline constexpr SelectorCodec kSelector{};
inline constexpr SummaryCodec kSummary{};

//! Reads `key` as a string map whose keys and values must be valid Kubernetes labels.
void labels(Reader& in, std::string_view key, Labels& out);
inline void labels(Writer& out, std::string_view key, const Labels& value) {
  out.stringMap(key, value);
}

//! The field lists of Fleet's shared structures, for both directions (codec_options.cpp; the selector's in
//! decoder.cpp).
void fields(Reader& v, BundleDeploymentOptions& s);
void fields(Writer& v, const BundleDeploymentOptions& s);
void fields(Reader& v, GitTarget& s);
void fields(Writer& v, const GitTarget& s);
void fields(Reader& v, BundleTarget& s);
void fields(Writer& v, const BundleTarget& s);
void fields(Reader& v, BundleRef& s);
void fields(Writer& v, const BundleRef& s);
void fields(Reader& v, RolloutStrategy& s);
void fields(Writer& v, const RolloutStrategy& s);
void fields(Reader& v, CorrectDrift& s);
void fields(Writer& v, const CorrectDrift& s);
void fields(Reader& v, LabelSelector& s);
void fields(Writer& v, const LabelSelector& s);

//! Passes any of the structures above to a nested object or list: `v.objects("targets", s.targets, kFields)`.
struct FieldList {
  template <typename V, typename S>
  void operator()(V& v, S& s) const {
    fields(v, s);
  }
};
inline constexpr FieldList kFields{};

//! BundleSpec's fields. `internal` (a stored Bundle) also has resources, targetRestrictions, contentsId and
//! valuesHash, which fleet.yaml must not set.
void bundleSpecFields(Reader& v, BundleSpec& s, bool internal);
void bundleSpecFields(Writer& v, const BundleSpec& s, bool internal);

}  // namespace flotilla::model::detail
