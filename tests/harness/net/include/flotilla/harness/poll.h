// flotilla/harness/poll.h
//
// Waiting for a condition that a server or another process makes true eventually.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace flotilla::harness {

//! Polls `check` every `every` until it returns true or `timeout` passes, then returns one last check().
inline bool waitUntil(const std::function<bool()>& check, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) {
      return true;
    }
    std::this_thread::sleep_for(every);
  }
  return check();
}

}  // namespace flotilla::harness
