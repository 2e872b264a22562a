// flotilla/harness/poll.h
//
// Waiting for a condition that a server or another process makes true eventually.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace flotilla::harness {

//! Checks `condition` every `interval` until it holds or `timeout` passes; a last check at the deadline decides.
inline bool pollUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds interval) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(interval);
  }
  return condition();
}

}  // namespace flotilla::harness
