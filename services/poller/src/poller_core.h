// services/poller/src/poller_core.h (private to the poller library)
//
// The state the poller's threads share, and the functions each thread runs. The functions live in one file per
// seam: spec_watch.cpp (KV watch of GitRepo specs), dispatch.cpp (what is due, mirrors, workers), completions.cpp
// (results, watchdog), webhook_receiver.cpp (pushes), status_writer.cpp (KV `status` writes) and poller.cpp
// (create/start/stop). See poller.h for the threads and their roles.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/bus/kv.h"
#include "flotilla/core/util.h"
#include "flotilla/http/server.h"
#include "flotilla/poller/gitrepo.h"
#include "flotilla/poller/poll_status.h"
#include "flotilla/poller/poller.h"
#include "flotilla/poller/poller_metrics.h"
#include "flotilla/poller/sync.h"

namespace flotilla::poller {

using SteadyClock = std::chrono::steady_clock;
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

//! One GitRepo as the scheduler knows it.
struct RepoEntry {
  std::string key;
  GitRepoId id;
  std::optional<model::GitRepo> gitrepo;  //!< nullopt while the document is invalid
  std::string spec_hash;
  std::string mirror_id;  //!< of the last valid spec (kept while invalid so the mirror survives a typo)
  uint64_t epoch = 0;     //!< changes with every new spec; results of older syncs trigger a re-poll
  PollStatus status;      //!< the record in KV `status`
  int64_t due_ms = kNever;
  uint64_t running_job = 0;         //!< id of the sync holding this GitRepo, 0 when none
  bool webhook_pending = false;     //!< a push arrived while its sync ran: poll again right after it
  bool webhook_due = false;         //!< due because of a push: dispatched before timed polls
  int64_t webhook_received_ms = 0;  //!< the first push since its last sync started (0: none), stage latency
};

//! One mirror directory and who holds it.
struct MirrorState {
  std::string id;
  std::shared_ptr<MirrorSlot> slot;
  bool busy = false;          //!< a sync or the removal runs on it (also while a stuck sync has not returned)
  bool host_waiting = false;  //!< due GitRepos wait because their host is at --max-per-host
};

enum class JobKind { kSync, kRemove };

//! A unit of work on one mirror, shared by the scheduler and its thread. Also the watchdog's view of it.
struct Job : GitOpGuard {
  uint64_t id = 0;
  JobKind kind = JobKind::kSync;
  std::string mirror_id;
  std::string url;
  std::string host;  //!< of `url`, for the per-host limit ("" for removals)
  std::vector<RepoWork> work;
  std::shared_ptr<MirrorSlot> slot;
  const std::atomic<bool>* stopping = nullptr;
  std::atomic<int>* network_ops = nullptr;   //!< git network calls running, poller-wide
  std::atomic<int>* network_peak = nullptr;  //!< the most ever running at once
  Millis grace{0};                           //!< added to each call's timeout before the watchdog gives up on it

  std::mutex mutex;
  bool in_git = false;
  std::string operation;
  Millis timeout{0};
  SteadyClock::time_point deadline;
  bool abandoned = false;

  bool begin(std::string_view op, Millis op_timeout) override;
  bool end() override;
  [[nodiscard]] bool cancelled() const override { return stopping->load(); }
};

//! A GitRepo whose spec was deleted: its CommitEvent{deleted} is published (retried until JetStream acks it), then
//! its poll status is removed. Until then its status key stays, so a poller that dies first redoes it at start-up.
struct PendingDeletion {
  GitRepoId id;
  uint64_t revision = 0;  //!< KV revision of the delete marker in `gitrepos` (0: unknown)
  PollStatus last;        //!< the status it had: repo and last commit for the event
  int failures = 0;
};

struct Completion {
  std::shared_ptr<Job> job;
  std::optional<std::vector<RepoResult>> results;
};

//! The next poll time for status ("" when never).
inline std::string timeOrEmpty(int64_t epoch_ms) {
  return epoch_ms == kNever ? std::string() : formatEpochMillis(epoch_ms);
}

//! "<workspace>/<name>": how logs and webhook answers name a GitRepo.
inline std::string displayName(const GitRepoId& id) {
  return id.workspace + "/" + id.name;
}

//! The result of a sync that failed for `work` as a whole (watchdog, unexpected exception).
inline RepoResult failedResult(const RepoWork& work, const Error& error, std::string stage) {
  RepoResult result;
  result.key = work.key;
  result.epoch = work.epoch;
  result.error = error;
  result.error_stage = std::move(stage);
  return result;
}

struct Poller::Core : std::enable_shared_from_this<Poller::Core> {
  Core(PollerOptions opts, service::Hub h, Metrics& m) : options(std::move(opts)), hub(std::move(h)), metrics(m) {}

  PollerOptions options;
  service::Hub hub;
  PollerMetrics metrics;
  SyncSettings settings;
  SyncBus bus;
  std::string mirrors_dir;
  std::unique_ptr<service::StoreFullReporter> store_full;
  std::unique_ptr<service::ObjectGc> gc;                 //!< of `sources`, whose one writer the poller is
  std::unique_ptr<service::PublicEvents> public_events;  //!< io.flotilla.gitrepo.* on flotilla.events.gitrepo.>

  mutable std::mutex mutex;
  std::condition_variable wake;  //!< the scheduler (new specs, completions, stop)
  std::atomic<bool> stopping{false};
  bool started = false;
  bool stopped = false;
  bool initial_loaded = false;
  bool orphans_scanned = false;
  std::map<std::string, RepoEntry> entries;
  std::map<std::string, MirrorState> mirrors;
  std::vector<std::shared_ptr<Job>> running;
  std::vector<Completion> inbox;
  int active = 0;                        //!< running jobs not abandoned
  int stuck = 0;                         //!< abandoned jobs whose thread has not returned
  std::map<std::string, int> host_jobs;  //!< running sync jobs (abandoned included) per host
  int host_peak = 0;                     //!< the most sync jobs ever running against one host
  std::atomic<int> network_ops{0};
  std::atomic<int> network_peak{0};
  std::unique_ptr<http::Server> webhook_server;
  bool inventory_changed = true;  //!< GitRepos, mirrors or jobs changed since the last housekeeping
  SteadyClock::time_point last_housekeeping;
  int valid_count = 0;
  int invalid_count = 0;
  int mirrors_in_use = 0;
  uint64_t next_epoch = 0;
  uint64_t next_job = 0;

  std::mutex status_mutex;
  std::condition_variable status_cv;
  std::map<std::string, std::optional<std::string>> status_pending;  //!< key -> record, nullopt = delete
  bool status_stop = false;

  //! Deleted GitRepos whose CommitEvent{deleted} is not acked yet, by gitrepos key (guarded by `mutex`). A GitRepo
  //! re-created under the same key is not polled before it is, so its first commit follows the delete.
  std::map<std::string, PendingDeletion> deletions;
  std::condition_variable deletions_cv;  //!< the deleter (new deletions, stop); waits on `mutex`

  std::thread watcher;
  std::thread scheduler;
  std::thread writer;
  std::thread deleter;

  // ---- KV watch (watcher thread; spec_watch.cpp) ----
  void sleepFor(Millis duration);
  std::map<std::string, PollStatus> loadStoredStatuses();
  std::optional<PollStatus> fetchStatus(const std::string& key);
  void watchLoop();
  //! Reads one watch of `gitrepos` until it fails or the poller stops; false when it failed.
  bool followWatch(bus::KvWatcher& kv_watcher, const std::map<std::string, PollStatus>& stored, bool& first_load);
  bool known(const std::string& key);
  //! After the initial values: GitRepos gone meanwhile are deleted; at the first load also those with a stored
  //! status but no spec (deleted while no poller ran). `tombstones`: delete markers seen, by key, with revision.
  void finishInitialLoad(const std::set<std::string>& seen, const std::map<std::string, uint64_t>& tombstones,
                         const std::map<std::string, PollStatus>* stored);
  void applyPut(const std::string& key, const std::string& value, bool startup, std::optional<PollStatus> stored);
  void applyInvalidSpec(RepoEntry& e, const Error& error, int64_t now);
  //! The spec of `key` was deleted at `revision`: drop the entry and queue its CommitEvent{deleted}.
  void applyDelete(const std::string& key, uint64_t revision);

  // ---- deleted GitRepos (deleter thread; deletions.cpp) ----
  //! Queues the deletion of a GitRepo (`mutex` held). `last` is its stored status.
  void queueDeletion(const std::string& key, const GitRepoId& id, uint64_t revision, PollStatus last);
  void deleteLoop();
  //! True while a sync that has not been abandoned still works on `key` (its commit could land after the delete).
  bool syncRunningFor(const std::string& key) const;
  //! Publishes one deletion's event; then removes its status (or writes the re-created GitRepo's) and wakes the
  //! scheduler. `mutex` is not held.
  Status publishDeletion(const std::string& key, const PendingDeletion& deletion);
  void finishDeletion(const std::string& key);
  MirrorState& mirrorFor(const std::string& id);

  // ---- scheduling (scheduler thread; every function below runs with `mutex` held; dispatch.cpp) ----
  int64_t timedDue(const RepoEntry& e, int64_t now) const;
  bool mirrorUsed(const std::string& id) const;
  bool canDispatch() const { return active < options.workers && stuck < options.max_stuck; }
  void spawn(const std::shared_ptr<Job>& job);
  void collectGarbage();
  void scanOrphanMirrors();
  int dispatch(int64_t now);
  //! Starts a sync of `list` on `mirror`; false (nothing started) when the mirror's host is at its limit.
  bool dispatchMirror(MirrorState& mirror, std::vector<RepoEntry*>& list);
  void countInventory();
  void updateGauges(int waiting);
  void scheduleLoop();
  static void runJob(const std::shared_ptr<Core>& core, const std::shared_ptr<Job>& job);

  // ---- results and the watchdog (scheduler thread, `mutex` held; completions.cpp) ----
  void applyResult(const RepoResult& r, uint64_t job_id, int64_t now);
  void processCompletions(int64_t now);
  //! Releases what a finished job held (worker slot, host count, mirror); true when it had been abandoned.
  bool releaseJob(Job& job);
  void abandon(Job& job, int64_t now);
  void watchdog(int64_t now);

  // ---- webhooks (the HTTP server's thread; webhook_receiver.cpp) ----
  std::vector<std::string> triggerFromWebhook(const std::vector<std::pair<std::string, std::string>>& key_commits);
  http::Response handleWebhook(const http::Request& request);
  Status startWebhookServer();

  // ---- status writer thread (status_writer.cpp) ----
  void enqueueStatus(const RepoEntry& e);
  void enqueueStatusRemoval(const std::string& status_key);
  void writeLoop();
  //! Writes (or removes) one record; a write that lost a race with another replica is read and merged again.
  Status writeStatusRecord(const std::string& key, const std::optional<std::string>& record);
};

}  // namespace flotilla::poller
