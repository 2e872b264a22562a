// flotilla/model/duration.h
//
// Go-style duration strings ("15s", "1m30s", "1.5h", "500ms"), the form Fleet's metav1.Duration fields use
// (pollingInterval, imageScanInterval). Flotilla keeps them as milliseconds.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::model {

//! Durations are kept at millisecond precision.
using Duration = std::chrono::milliseconds;

//! Fleet's default (and the value of an explicit 0) for GitRepo.spec.pollingInterval.
inline constexpr Duration kDefaultPollingInterval{15'000};

//! Parses a Go duration: an optional "+", then one or more <decimal><unit> with units ns, us (µs), ms, s, m, h;
//! "0" alone is zero. Sub-millisecond remainders are truncated. Negative, empty or overflowing input is kInvalid.
Result<Duration> parseDuration(std::string_view text);

//! Formats like Go's time.Duration.String() at millisecond precision: "0s", "500ms", "15s", "1m30.5s", "2h0m0s".
std::string formatDuration(Duration duration);

}  // namespace flotilla::model
