// flotilla/service/lease.h
//
// A lease on one KV key that the replicas of a service compete for: the one holding it does the work that must not
// run twice (the scheduler's placement and publishing), the others wait as standbys and take over when the holder
// stops renewing. No clock is compared across machines: a standby takes the lease when the key's revision has not
// moved for the holder's ttl by its own monotonic clock, and a holder stops counting itself the holder when it has
// not renewed for two thirds of the ttl, so the two never overlap while clocks run at the same rate.
//
// The value is JSON: {"holder": "<replica id>", "ttlMs": <ms>, "renewed": "<RFC 3339>"}; a released lease has an
// empty holder (a standby takes it at once). Ids must be unique among the replicas: a replica that finds its own id
// holding the key takes it at once (its own earlier process, killed before it could release).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "flotilla/bus/kv.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/service/background_thread.h"

namespace flotilla::service {

struct LeaseOptions {
  std::string key;                       //!< the KV key, e.g. "lease.scheduler"
  std::string holder;                    //!< this replica's id (unique among the replicas)
  std::chrono::milliseconds ttl{10000};  //!< a holder silent this long loses the lease to a standby
  //! Added to the lease's metrics: one process holding several leases of a kind (the scheduler's partitions) tells
  //! them apart, e.g. {partition="p1"}.
  prometheus::Labels labels;
};

//! What one round of the lease loop found (tryAcquire / renew), for the loop and for tests.
enum class LeaseRound {
  kHeld,     //!< this replica holds the lease (acquired or renewed)
  kWaiting,  //!< another replica holds it and renewed within its ttl
  kLost,     //!< this replica held it and does not any more (taken, or not renewed in time)
  kError,    //!< the bucket could not be read or written; the round is tried again
};

class Lease {
 public:
  Lease(std::shared_ptr<bus::KeyValue> bucket, Metrics& metrics, LeaseOptions options);
  //! Stops the loop; does not release (call release() for a clean hand-over).
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Lease(Lease&&) = delete;
  Lease& operator=(Lease&&) = delete;

  //! Runs the loop on a background thread: every ttl/3 it tries to acquire (standby) or renews (holder).
  //! `on_acquired` runs once, on that thread, when the lease is first held; `on_lost` once when it is lost after
  //! that (the loop then ends: a replica that lost the lease starts again as a standby, with fresh state).
  void start(std::function<void()> on_acquired, std::function<void()> on_lost);
  //! Ends the loop. Idempotent.
  void stop();
  //! Stops the loop and gives the lease up if held (a standby takes it at its next round, without waiting out
  //! the ttl). Best effort: a failure is logged, and the standby then waits for the ttl.
  void release();

  //! True while this replica may act as the holder: acquired, and renewed within two thirds of the ttl. Checked
  //! before each piece of work that must not run twice.
  [[nodiscard]] bool held() const;
  //! The holder last seen in the key ("" when free or unread).
  [[nodiscard]] std::string holder() const;

  // ---- one round each (the loop calls these; tests may too) ----

  //! A standby's round: takes the lease when it is free, released, held by this id, or its revision has not moved
  //! for the holder's ttl since this replica first saw that revision.
  LeaseRound tryAcquire(std::chrono::steady_clock::time_point now);
  //! A holder's round: writes a new revision over its own. kLost when another replica's write came between, or
  //! when no renewal succeeded for two thirds of the ttl.
  LeaseRound renew(std::chrono::steady_clock::time_point now);

 private:
  void loop();
  //! The key's value naming `holder` ("" for a released lease), with this replica's ttl and the time.
  [[nodiscard]] std::string valueHeldBy(const std::string& holder) const;
  LeaseRound takeOver(uint64_t expected_revision, bool exists, std::chrono::steady_clock::time_point now,
                      const char* how);
  LeaseRound lose(const char* reason, const std::string& detail);

  std::shared_ptr<bus::KeyValue> bucket_;
  Metrics& metrics_;
  LeaseOptions options_;
  BackgroundThread thread_;
  std::function<void()> on_acquired_;
  std::function<void()> on_lost_;
  std::thread acquired_thread_;  //!< runs on_acquired_, so a slow start does not hold up the renewals

  mutable std::mutex mutex_;  //!< guards the fields below
  bool holding_ = false;
  uint64_t revision_ = 0;  //!< the holder's last written revision
  std::chrono::steady_clock::time_point renewed_at_;
  std::string seen_holder_;
  uint64_t seen_revision_ = 0;  //!< a standby's last seen revision of another holder
  std::chrono::steady_clock::time_point seen_since_;
};

}  // namespace flotilla::service
