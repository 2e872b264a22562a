// services/scheduler/src/times.h
//
// The few time helpers the scheduler's handlers share.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/clock.h"

namespace flotilla::scheduler::detail {

inline int64_t nowMs() {
  return systemClock().nowMillis();
}

//! True when `incoming` is an older event time than `current` (both RFC 3339 UTC with the same layout, as every
//! Flotilla producer writes them; anything else is not compared).
inline bool olderThan(std::string_view incoming, std::string_view current) {
  if (incoming.empty() || current.empty() || incoming.size() != current.size() || incoming.back() != 'Z' ||
      current.back() != 'Z') {
    return false;
  }
  return incoming < current;
}

}  // namespace flotilla::scheduler::detail
