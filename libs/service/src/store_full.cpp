#include "flotilla/service/store_full.h"

#include "flotilla/bus/errors.h"
#include "flotilla/service/hub.h"

namespace flotilla::service {

StoreFullReporter::StoreFullReporter(Metrics& metrics, std::chrono::milliseconds log_interval, Clock* clock)
    : metrics_(metrics), interval_(log_interval), clock_(clock != nullptr ? clock : &systemClock()) {
  // Every store's series exists from the start (at 0), so the alert FlotillaStoreFull has data to evaluate.
  for (const auto& [store, share] : kStoreShares) {
    metrics_.counter("store_full_total", "Writes refused because a store was at its size cap", {{"store", store}});
  }
}

bool StoreFullReporter::report(const Error& error, std::string_view what, std::string_view subject) {
  if (error.kind != ErrorKind::kStoreFull) {
    return false;
  }
  const std::string store = bus::fullStoreName(error);
  metrics_.counter("store_full_total", "Writes refused because a store was at its size cap", {{"store", store}})
      .Increment();
  int64_t unlogged = 0;
  {
    std::lock_guard lock(mutex_);
    const auto now = clock_->steadyNow();
    auto [it, first] = seen_.try_emplace(store, Seen{now, 0});
    if (!first && now - it->second.logged < interval_) {
      ++it->second.unlogged;
      return true;
    }
    unlogged = it->second.unlogged;
    it->second = Seen{now, 0};
  }
  log::warn("store is full; the work waits and is retried with backoff until space is freed",
            {{"store", store},
             {"what", std::string(what)},
             {"subject", std::string(subject)},
             {"error", error.describe()},
             {"not_logged_since_last", unlogged}});
  return true;
}

}  // namespace flotilla::service
