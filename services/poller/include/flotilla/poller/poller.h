// flotilla/poller/poller.h
//
// The poller service: watches GitRepo specs in KV `gitrepos`, polls each at its pollingInterval (stable phase
// per GitRepo plus jitter; immediately when new or changed), keeps one bare mirror per repository URL under
// <data-dir>/mirrors/<sha256(normalized url)>, publishes a CommitEvent when a GitRepo's commit (or its
// forceSyncGeneration or source-shaping spec) changes, and writes each GitRepo's poll status to KV `status`.
//
// A webhook receiver (optional, its own HTTP listener) turns verified pushes into immediate polls of the
// GitRepos on that URL and branch (see webhook.h and the README).
//
// Threads: a KV watcher (specs in), a scheduler (decides what is due and dispatches), at most `workers` sync
// threads (one per busy mirror; never two on one mirror), and a status writer (coalesces and retries KV
// writes). libs/git ends every git call at git_timeout at the socket (a silent or trickling server included); as a
// backstop for what that does not cover (a hanging name lookup), the scheduler's watchdog abandons a git call that
// outlives git_timeout + watchdog_grace, so a stuck call only stalls its own mirror:
// its GitRepos get a "timed out" error with backoff, and a fresh worker takes the slot. The stuck thread is
// detached and exits when the call finally returns (it then touches nothing but its own job).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/poller/schedule.h"
#include "flotilla/service/component.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/object_gc.h"

namespace flotilla::poller {

struct PollerOptions {
  std::string data_dir = "/var/lib/flotilla/poller";  //!< mirrors/ and tmp/ live here
  int workers = 4;                                    //!< concurrent mirror syncs
  std::string credentials_dir;                        //!< secrets for clientSecretName (see credentials_store.h)
  Millis git_timeout{120'000};                        //!< per ls-remote or fetch
  Millis watchdog_grace{5'000};                       //!< extra time before the watchdog abandons a git call
  Millis max_backoff{300'000};                        //!< cap of the exponential retry delay
  uint64_t max_source_bytes = 256ull << 20;           //!< limit of one source archive's content
  bool allow_local = false;                           //!< allow file:// repos (tests and demos only)
  //! Stuck (abandoned) syncs allowed at once on top of `workers`; beyond it nothing new is dispatched.
  int max_stuck = 16;
  //! Mirror syncs (each makes at most one git network call at a time) running at once against one host,
  //! abandoned ones included (they may still hold a connection).
  int max_per_host = 4;
  //! Webhook receiver: "" = off, else the listen address ("127.0.0.1", "0.0.0.0") with `webhook_port` (0 = any
  //! free port; read it back with webhookPort()).
  std::string webhook_address;
  uint16_t webhook_port = 0;
  //! Poller-wide webhook secret, "<workspace>/<name>" in the credentials store, used for GitRepos without
  //! spec.webhookSecret. "" = none.
  std::string webhook_secret;
  size_t webhook_max_body = 10u << 20;  //!< larger payloads get 413
  size_t webhook_max_connections = 64;  //!< connections at once; one more gets 503 (0 = no cap)
  //! Per source address: requests per second and burst (token bucket); over it 429. 0 = no limit.
  double webhook_rate = 10;
  double webhook_burst = 20;
  //! A push makes its GitRepos due this much later (unless due sooner), so a burst of pushes is one sync. 0 (the
  //! default): at once — a commit lands without a fixed delay, and a burst is still at most two syncs, because
  //! pushes that arrive while a GitRepo's sync runs make it due once more after it.
  Millis webhook_coalesce{0};
  //! Test and benchmark only: every GitRepo is due on the same grid (phase 0, no jitter), as equal intervals
  //! behave without a phase spread.
  bool align_phases = false;
  //! Garbage collection of `sources` (docs/pipeline.md "Garbage collection"): an object no KV record names is
  //! deleted once it was neither written nor reused for `gc_grace`; a pass every `gc_interval`.
  Millis gc_grace{service::kDefaultGcGrace};
  Millis gc_interval{service::kDefaultGcInterval};
  Clock* gc_clock = nullptr;  //!< what garbage collection measures ages with; null = the system clock (tests step it)
};

//! How long stop() waits for running syncs before it leaves their git calls behind.
inline constexpr Millis kStopWait{20'000};

class Poller final : public service::Component {
 public:
  struct Core;

  //! Checks the options and creates the data dir. Nothing runs until start().
  static Result<std::unique_ptr<Poller>> create(PollerOptions options, const service::Hub& hub, Metrics& metrics);
  ~Poller() override;

  //! Starts the watcher, scheduler and status writer threads.
  Status start() override;
  //! Stops watching and dispatching, waits for running syncs (abandoning git calls still stuck after
  //! kStopWait), writes the remaining status records, and returns. Idempotent.
  void stop() override;
  //! One garbage collection pass of `sources` now (tests; the poller runs one every gc_interval by itself).
  Result<service::GcPass> collectSources();
  //! Readiness: the hub connection is up and the initial GitRepos were loaded from KV.
  [[nodiscard]] bool ready(std::string& why) const override;
  //! The webhook receiver's port once started (0 when it is off).
  [[nodiscard]] uint16_t webhookPort() const;

 private:
  explicit Poller(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace flotilla::poller
