// flotilla/gateway/write_limiter.h
//
// How the gateway bounds its writes to the API server: a queue of objects whose status changed, each queued at most
// once however often it changes before its turn (the write then carries the latest state), drained at a fixed rate
// with a small burst (a token bucket). 1,000 GitRepos changing at once cost at most `rate` writes a second.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

//! Writes that failed, each tried again after its own backoff: `base` doubling per failure up to `max`, back to
//! `base` once it succeeds. The writer keeps going with the other objects meanwhile. Not thread-safe (the writer
//! thread owns it).
class RetrySchedule {
 public:
  using Clock = std::chrono::steady_clock;
  RetrySchedule(Clock::duration base, Clock::duration max);
  //! `key` failed at `now`: it is due after its backoff, which is returned.
  Clock::duration failed(const std::string& key, Clock::time_point now);
  //! `key` was written: its next failure waits `base` again.
  void succeeded(const std::string& key);
  //! The keys due at `now`, taken off the schedule (their backoff stays until succeeded()).
  std::vector<std::string> due(Clock::time_point now);
  //! How long from `now` until the next key is due; nullopt when none waits.
  [[nodiscard]] std::optional<Clock::duration> untilNext(Clock::time_point now) const;
  [[nodiscard]] size_t size() const { return due_at_.size(); }

 private:
  Clock::duration base_;
  Clock::duration max_;
  std::map<std::string, Clock::duration> backoff_;  //!< the wait after the key's next failure
  std::map<std::string, Clock::time_point> due_at_;
};

}  // namespace flotilla::gateway
