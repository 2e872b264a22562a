// flotilla/service/store_full.h
//
// What a service does when a store is full (bus ErrorKind::kStoreFull, docs/pipeline.md "Size caps"): it counts
// store_full_total{store} for every failed write and logs at most once per interval and store (with how many
// were not logged), then retries with backoff — the work is never given up. The caller also writes the reason
// where the user looks (poll status, render status).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "flotilla/core/clock.h"
#include "flotilla/core/log.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::service {

//! Default of the interval between two log lines about one full store.
inline constexpr std::chrono::milliseconds kStoreFullLogInterval = std::chrono::minutes(1);

class StoreFullReporter {
 public:
  explicit StoreFullReporter(Metrics& metrics, std::chrono::milliseconds log_interval = kStoreFullLogInterval,
                             Clock* clock = nullptr);

  //! For a kStoreFull error: counts it and logs "store is full" (warn, with `what` and `subject` naming the work
  //! that waits) unless that store was logged within the interval; true for a kStoreFull error. Other errors:
  //! nothing, false.
  bool report(const Error& error, std::string_view what, std::string_view subject);

 private:
  Metrics& metrics_;
  std::chrono::milliseconds interval_;
  Clock* clock_;
  std::mutex mutex_;
  struct Seen {
    Clock::SteadyTime logged;
    int64_t unlogged = 0;
  };
  std::map<std::string, Seen> seen_;
};

}  // namespace flotilla::service
