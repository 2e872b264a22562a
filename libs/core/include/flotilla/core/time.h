// flotilla/core/time.h
//
// RFC 3339 times as Flotilla writes them: UTC, millisecond precision, "2026-12-02T10:00:00.123Z". Every
// producer uses formatRfc3339 so stored times of one layout also order correctly as strings.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla {

using SystemTime = std::chrono::system_clock::time_point;

//! "2026-12-02T10:00:00.123Z" (UTC, milliseconds; finer precision is truncated).
std::string formatRfc3339(SystemTime at);
//! The same for a time given in milliseconds since the Unix epoch.
std::string formatRfc3339Millis(int64_t epoch_ms);
//! Milliseconds since the Unix epoch.
int64_t epochMillis(SystemTime at);

//! Parses an RFC 3339 date-time: "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)" ('t'/'z' accepted too).
//! The fraction is kept to milliseconds. nullopt for anything else, including out-of-range fields.
std::optional<SystemTime> parseRfc3339(std::string_view text);

}  // namespace flotilla
