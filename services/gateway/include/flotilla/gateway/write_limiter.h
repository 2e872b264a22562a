// flotilla/gateway/write_limiter.h
//
// How the gateway bounds its writes to the API server: a queue of objects whose status changed, each queued at most
// once however often it changes before its turn (the write then carries the latest state), drained at a fixed rate
// with a small burst (a token bucket). 1,000 GitRepos changing at once cost at most `rate` writes a second.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace flotilla::gateway {

//! A token bucket: `rate` tokens a second, at most `burst` saved. Not thread-safe (the writer thread owns it).
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double rate, double burst, Clock::time_point now);
  //! How long to wait from `now` until a token is there (zero when one is).
  [[nodiscard]] Clock::duration waitFrom(Clock::time_point now);
  //! Takes a token (call when waitFrom returned zero).
  void take();

 private:
  void refill(Clock::time_point now);
  double rate_;
  double burst_;
  double tokens_;
  Clock::time_point last_;
};

//! Keys waiting for a write, in the order first queued, each at most once. Thread-safe.
class CoalescingQueue {
 public:
  //! Queues `key` unless it is already waiting; returns false when it was (the change coalesced).
  bool push(const std::string& key);
  //! The oldest key, waiting up to `timeout` for one; nullopt on timeout or after close().
  std::optional<std::string> pop(std::chrono::milliseconds timeout);
  void close();
  [[nodiscard]] size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::string> order_;
  std::set<std::string> waiting_;
  bool closed_ = false;
};

}  // namespace flotilla::gateway
