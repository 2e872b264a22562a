#include "flotilla/poller/poller.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/git/url.h"
#include "flotilla/http/server.h"
#include "flotilla/model/codec.h"
#include "flotilla/poller/credentials_store.h"
#include "flotilla/poller/gitrepo.h"
#include "flotilla/poller/poll_status.h"
#include "flotilla/poller/poller_metrics.h"
#include "flotilla/poller/sync.h"
#include "flotilla/poller/webhook.h"

namespace flotilla::poller {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

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
  uint64_t running_job = 0;      //!< id of the sync holding this GitRepo, 0 when none
  bool webhook_pending = false;  //!< a push arrived while its sync ran: poll again right after it
  bool webhook_due = false;      //!< due because of a push: dispatched before timed polls
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

  bool begin(std::string_view op, Millis op_timeout) override {
    std::lock_guard lock(mutex);
    if (stopping->load()) {
      return false;
    }
    const int running_now = network_ops->fetch_add(1) + 1;
    for (int peak = network_peak->load();
         running_now > peak && !network_peak->compare_exchange_weak(peak, running_now);) {
    }
    in_git = true;
    operation = std::string(op);
    timeout = op_timeout;
    // A zero timeout means "no limit" in libs/git; the watchdog then leaves the call alone too.
    deadline = op_timeout.count() > 0 ? SteadyClock::now() + op_timeout + grace : SteadyClock::time_point{};
    return true;
  }
  bool end() override {
    std::lock_guard lock(mutex);
    if (in_git) {
      network_ops->fetch_sub(1);
    }
    in_git = false;
    return !abandoned;
  }
  [[nodiscard]] bool cancelled() const override { return stopping->load(); }
};

struct Completion {
  std::shared_ptr<Job> job;
  std::optional<std::vector<RepoResult>> results;
};

Result<model::GitRepo> decodeSpec(const std::string& key, const std::string& value, const GitRepoId& id) {
  const std::string source = "gitrepos/" + key;
  auto json = Json::parse(value);
  if (!json.ok()) {
    return fail(ErrorKind::kInvalid, source + ": not a JSON document: " + json.error().message, source);
  }
  auto gitrepo = model::decodeGitRepo(*json, source);
  if (!gitrepo.ok()) {
    return fail(gitrepo.error());
  }
  if (gitrepo->metadata.ns != id.workspace || gitrepo->metadata.name != id.name) {
    return fail(ErrorKind::kInvalid,
                source + ": metadata.namespace/name \"" + gitrepo->metadata.ns + "/" + gitrepo->metadata.name +
                    "\" does not match the key's \"" + id.workspace + "/" + id.name + "\"",
                source);
  }
  return gitrepo;
}

std::string timeOrEmpty(int64_t epoch_ms) {
  return epoch_ms == kNever ? std::string() : formatEpochMillis(epoch_ms);
}

//! The host the per-host limit counts a URL against (lower-case; "" for local repositories).
std::string hostOf(const std::string& url) {
  auto parsed = git::parseGitUrl(url, true);
  if (!parsed.ok()) {
    return {};
  }
  std::string host = parsed->host;
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return std::tolower(c); });
  return host;
}

}  // namespace

struct Poller::Core : std::enable_shared_from_this<Poller::Core> {
  Core(PollerOptions opts, service::Hub h, Metrics& m) : options(std::move(opts)), hub(std::move(h)), metrics(m) {}

  PollerOptions options;
  service::Hub hub;
  PollerMetrics metrics;
  SyncSettings settings;
  SyncBus bus;
  std::string mirrors_dir;

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

  std::thread watcher;
  std::thread scheduler;
  std::thread writer;

  // ---- KV watch (watcher thread) ----

  void sleepFor(Millis duration) {
    std::unique_lock lock(mutex);
    wake.wait_for(lock, duration, [&] { return stopping.load(); });
  }

  std::map<std::string, PollStatus> loadStoredStatuses() {
    while (!stopping) {
      auto watcher_result = hub.status->watch("gitrepo.>");
      Result<std::vector<bus::KvEntry>> values = watcher_result.ok()
                                                     ? watcher_result->initialValues(std::chrono::seconds(10))
                                                     : Result<std::vector<bus::KvEntry>>(fail(watcher_result.error()));
      if (values.ok()) {
        std::map<std::string, PollStatus> out;
        for (const auto& entry : *values) {
          if (entry.operation != bus::KvOperation::kPut) {
            continue;
          }
          auto decoded = decodePollStatus(entry.value);
          if (decoded.ok()) {
            out.emplace(entry.key, std::move(decoded).value());
          } else {
            log::warn("ignoring unreadable poll status record", {{"key", entry.key}});
          }
        }
        return out;
      }
      log::warn("cannot read poll status records, retrying", {{"error", values.error().describe()}});
      metrics.error("watch", values.error().kind);
      sleepFor(Millis(1000));
    }
    return {};
  }

  std::optional<PollStatus> fetchStatus(const std::string& key) {
    for (int attempt = 0; attempt < 3 && !stopping; ++attempt) {
      auto entry = hub.status->get(key);
      if (entry.ok()) {
        auto decoded = decodePollStatus(entry->value);
        return decoded.ok() ? std::optional<PollStatus>(std::move(decoded).value()) : std::nullopt;
      }
      if (entry.error().kind == ErrorKind::kNotFound) {
        return std::nullopt;
      }
      log::warn("cannot read poll status", {{"key", key}, {"error", entry.error().describe()}});
      sleepFor(Millis(200));
    }
    return std::nullopt;
  }

  void watchLoop() {
    std::map<std::string, PollStatus> stored = loadStoredStatuses();
    bool first_load = true;
    while (!stopping) {
      auto watcher_result = hub.gitrepos->watch(">");
      if (!watcher_result.ok()) {
        log::warn("cannot watch gitrepos, retrying", {{"error", watcher_result.error().describe()}});
        metrics.watchRestart();
        sleepFor(Millis(1000));
        continue;
      }
      bus::KvWatcher& kv_watcher = *watcher_result;
      std::set<std::string> seen;
      bool initial = true;
      while (!stopping) {
        auto next = kv_watcher.next(Millis(500));
        if (!next.ok()) {
          log::warn("gitrepos watch failed, restarting it", {{"error", next.error().describe()}});
          metrics.watchRestart();
          break;
        }
        if (!next->has_value()) {
          if (initial && kv_watcher.initialDone()) {
            initial = false;
            finishInitialLoad(seen);
            first_load = false;
          }
          continue;
        }
        const bus::KvEntry& entry = **next;
        if (entry.operation != bus::KvOperation::kPut) {
          applyDelete(entry.key);
          continue;
        }
        if (initial) {
          seen.insert(entry.key);
        }
        std::optional<PollStatus> status;
        if (!known(entry.key)) {
          if (auto id = parseGitRepoKey(entry.key); id.ok()) {
            const std::string status_key = pollStatusKey(id->workspace, id->name);
            if (first_load) {
              if (auto it = stored.find(status_key); it != stored.end()) {
                status = it->second;
              }
            } else {
              status = fetchStatus(status_key);
            }
          }
        }
        applyPut(entry.key, entry.value, first_load && initial, std::move(status));
      }
      if (!stopping) {
        sleepFor(Millis(1000));
      }
    }
  }

  bool known(const std::string& key) {
    std::lock_guard lock(mutex);
    return entries.contains(key);
  }

  void finishInitialLoad(const std::set<std::string>& seen) {
    std::vector<std::string> gone;
    {
      std::lock_guard lock(mutex);
      for (const auto& [key, entry] : entries) {
        if (!seen.contains(key)) {
          gone.push_back(key);
        }
      }
    }
    for (const auto& key : gone) {
      applyDelete(key);  // deleted while the watch was down
    }
    std::lock_guard lock(mutex);
    if (!initial_loaded) {
      log::info("initial GitRepos loaded", {{"count", static_cast<int64_t>(seen.size())}});
    }
    initial_loaded = true;
    inventory_changed = true;
    wake.notify_all();
  }

  void applyPut(const std::string& key, const std::string& value, bool startup, std::optional<PollStatus> stored) {
    auto id = parseGitRepoKey(key);
    if (!id.ok()) {
      log::warn("ignoring a gitrepos key that is not <workspace>.<name>", {{"key", key}});
      metrics.error("spec", ErrorKind::kInvalid);
      return;
    }
    auto decoded = decodeSpec(key, value, *id);
    std::lock_guard lock(mutex);
    inventory_changed = true;
    auto [it, inserted] = entries.try_emplace(key);
    RepoEntry& e = it->second;
    if (inserted) {
      e.key = key;
      e.id = *id;
      e.status = stored.value_or(PollStatus{});
      e.status.workspace = id->workspace;
      e.status.gitrepo = id->name;
    }
    const int64_t now = nowEpochMillis();
    const std::string display = id->workspace + "/" + id->name;
    if (!decoded.ok()) {
      const Error& error = decoded.error();
      e.gitrepo.reset();
      e.epoch = ++next_epoch;
      e.due_ms = kNever;
      e.status.last_error = error.describe();
      e.status.last_error_kind = std::string(errorKindName(error.kind));
      e.status.last_error_time = formatEpochMillis(now);
      e.status.next_poll_time.clear();
      e.status.failures = 0;
      log::warn("invalid GitRepo document; not polling it", {{"gitrepo", display}, {"error", error.describe()}});
      metrics.error("spec", error.kind);
      enqueueStatus(e);
      wake.notify_all();
      return;
    }
    if (e.gitrepo && *e.gitrepo == *decoded) {
      return;  // the same spec written again
    }
    const bool was_invalid = !e.gitrepo && !inserted;
    e.gitrepo = std::move(decoded).value();
    const auto& spec = e.gitrepo->spec;
    e.spec_hash = sourceSpecHash(*e.gitrepo);
    e.mirror_id = mirrorId(spec.repo);
    e.epoch = ++next_epoch;
    MirrorState& mirror = mirrors[e.mirror_id];
    if (!mirror.slot) {
      mirror.id = e.mirror_id;
      mirror.slot = std::make_shared<MirrorSlot>();
      mirror.slot->path = mirrors_dir + "/" + e.mirror_id;
    }
    e.status.repo = git::redactUrl(spec.repo);
    e.status.observed_generation = e.gitrepo->metadata.generation;
    e.status.failures = 0;
    if (was_invalid) {
      e.status.last_error.clear();
      e.status.last_error_kind.clear();
      e.status.last_error_time.clear();
    }
    // After a restart a GitRepo whose current spec was already published waits for its phase; anything new or
    // changed is polled at once.
    const bool settled = startup && !e.status.commit.empty() && e.status.spec_hash == e.spec_hash &&
                         e.status.force_sync_generation == spec.force_sync_generation && e.status.last_error.empty();
    e.due_ms = settled ? timedDue(e, now) : now;
    e.status.next_poll_time = timeOrEmpty(e.due_ms);
    log::info(inserted ? "GitRepo added" : "GitRepo changed",
              {{"gitrepo", display}, {"repo", e.status.repo}, {"poll", settled ? "at its phase" : "now"}});
    enqueueStatus(e);
    wake.notify_all();
  }

  void applyDelete(const std::string& key) {
    std::lock_guard lock(mutex);
    auto it = entries.find(key);
    if (it == entries.end()) {
      return;
    }
    log::info("GitRepo deleted", {{"gitrepo", it->second.id.workspace + "/" + it->second.id.name}});
    inventory_changed = true;
    const std::string status_key = pollStatusKey(it->second.id.workspace, it->second.id.name);
    entries.erase(it);
    {
      std::lock_guard status_lock(status_mutex);
      status_pending[status_key] = std::nullopt;
    }
    status_cv.notify_one();
    wake.notify_all();
  }

  // ---- scheduling (scheduler thread; every function below runs with `mutex` held) ----

  int64_t timedDue(const RepoEntry& e, int64_t now) const {
    const auto& spec = e.gitrepo->spec;
    if (spec.disable_polling) {
      return kNever;
    }
    const Millis interval = spec.effectivePollingInterval();
    if (options.align_phases) {
      return nextGridTime(now, interval, Millis(0), interval / 4);
    }
    // Phase and jitter are keyed by the mirror, so the GitRepos of one URL fire together (one sync, one
    // ls-remote per credentials) while different URLs spread over the interval.
    const Millis phase = phaseOffsetOf(e.mirror_id, interval);
    const int64_t grid = nextGridTime(now, interval, phase, interval / 4);
    return grid + gridJitter(e.mirror_id, grid, interval).count();
  }

  void enqueueStatus(const RepoEntry& e) {
    {
      std::lock_guard status_lock(status_mutex);
      status_pending[pollStatusKey(e.id.workspace, e.id.name)] = encode(e.status).dump();
    }
    status_cv.notify_one();
  }

  void applyResult(const RepoResult& r, uint64_t job_id, int64_t now) {
    auto it = entries.find(r.key);
    if (it == entries.end() || it->second.running_job != job_id) {
      return;  // deleted (or re-created) while the sync ran
    }
    RepoEntry& e = it->second;
    e.running_job = 0;
    PollStatus& s = e.status;
    if (r.published) {
      s.commit = r.commit;
      s.source_object = r.source_object;
      s.changed = r.changed;
      s.force_sync_generation = r.force_sync_generation;
      s.spec_hash = r.spec_hash;
      s.last_publish_time = formatEpochMillis(now);
    }
    if (r.polled) {
      s.last_poll_time = formatEpochMillis(now);
      if (!r.polling_commit.empty()) {
        s.polling_commit = r.polling_commit;
      }
    }
    if (!e.gitrepo) {
      enqueueStatus(e);  // became invalid meanwhile: keep its error, record what was published
      return;
    }
    if (r.skipped && !r.error) {
      e.due_ms = now;
      return;
    }
    const Millis interval = e.gitrepo->spec.effectivePollingInterval();
    const char* outcome = "unchanged";
    if (r.error) {
      ++s.failures;
      s.last_error = r.error->describe();
      s.last_error_kind = std::string(errorKindName(r.error->kind));
      s.last_error_time = formatEpochMillis(now);
      e.due_ms = now + backoffDelay(s.failures, interval, options.max_backoff).count() + pollJitter(interval).count();
      metrics.error(r.error_stage, r.error->kind);
      outcome = "failed";
    } else {
      s.failures = 0;
      s.last_error.clear();
      s.last_error_kind.clear();
      s.last_error_time.clear();
      e.due_ms = timedDue(e, now);
      outcome = r.published ? "published" : "unchanged";
    }
    if (r.epoch != e.epoch) {
      e.due_ms = now;  // the spec changed while this sync ran
    }
    if (e.webhook_pending) {
      e.webhook_pending = false;  // a push arrived during the sync: its commit may be newer than what we saw
      e.due_ms = std::min(e.due_ms, now + options.webhook_coalesce.count());
      e.webhook_due = true;
    }
    s.next_poll_time = timeOrEmpty(e.due_ms);
    metrics.poll(outcome);
    enqueueStatus(e);
  }

  void processCompletions(int64_t now) {
    std::vector<Completion> done;
    done.swap(inbox);
    for (auto& completion : done) {
      Job& job = *completion.job;
      std::erase(running, completion.job);
      if (job.kind == JobKind::kSync) {
        log::debug("sync finished", {{"url", git::redactUrl(job.url)}, {"job", static_cast<int64_t>(job.id)}});
      }
      bool was_abandoned = false;
      {
        std::lock_guard job_lock(job.mutex);
        was_abandoned = job.abandoned;
      }
      (was_abandoned ? stuck : active) -= 1;
      if (job.kind == JobKind::kSync) {
        if (auto host = host_jobs.find(job.host); host != host_jobs.end() && --host->second <= 0) {
          host_jobs.erase(host);
        }
      }
      auto mirror = mirrors.find(job.mirror_id);
      if (job.kind == JobKind::kRemove) {
        metrics.mirrorRemoved();
        log::info("unused mirror removed", {{"mirror", job.mirror_id}});
        if (mirror != mirrors.end()) {
          mirror->second.busy = false;
          if (!mirrorUsed(job.mirror_id)) {
            mirrors.erase(mirror);
          }
        }
        continue;
      }
      if (mirror != mirrors.end()) {
        mirror->second.busy = false;
        if (was_abandoned) {
          mirror->second.slot->mirror.reset();  // reopen it cleanly next time
        }
      }
      if (was_abandoned) {
        log::info("abandoned git call returned; mirror usable again", {{"url", git::redactUrl(job.url)}});
        continue;  // its GitRepos were already failed by the watchdog
      }
      if (!completion.results) {
        continue;
      }
      for (const auto& result : *completion.results) {
        applyResult(result, job.id, now);
      }
    }
  }

  void abandon(Job& job, int64_t now) {
    job.abandoned = true;
    --active;
    ++stuck;
    metrics.abandoned();
    const std::string display = git::redactUrl(job.url);
    log::error(
        "git call did not return in time; leaving it behind",
        {{"url", display}, {"operation", job.operation}, {"timeout_ms", static_cast<int64_t>(job.timeout.count())}});
    const Error error = makeError(ErrorKind::kTransient,
                                  "git " + job.operation + " on " + display + " did not finish within " +
                                      std::to_string((job.timeout + options.watchdog_grace).count() / 1000) +
                                      "s (the server stopped answering); abandoned it, retrying with backoff",
                                  "watchdog");
    for (const auto& work : job.work) {
      RepoResult result;
      result.key = work.key;
      result.epoch = work.epoch;
      result.error = error;
      result.error_stage = "timeout";
      applyResult(result, job.id, now);
    }
  }

  void watchdog(int64_t now) {
    const auto steady_now = SteadyClock::now();
    for (auto& job : running) {
      std::lock_guard job_lock(job->mutex);
      if (job->abandoned || !job->in_git) {
        continue;
      }
      if (job->deadline == SteadyClock::time_point{}) {
        continue;
      }
      if (steady_now >= job->deadline) {
        abandon(*job, now);
      }
    }
  }

  bool mirrorUsed(const std::string& id) const {
    for (const auto& [key, entry] : entries) {
      if (entry.mirror_id == id) {
        return true;
      }
    }
    return false;
  }

  bool canDispatch() const { return active < options.workers && stuck < options.max_stuck; }

  void spawn(const std::shared_ptr<Job>& job) {
    ++active;
    job->network_ops = &network_ops;
    job->network_peak = &network_peak;
    if (job->kind == JobKind::kSync) {
      host_peak = std::max(host_peak, ++host_jobs[job->host]);
    }
    running.push_back(job);
    std::thread([self = shared_from_this(), job] { runJob(self, job); }).detach();
  }

  void collectGarbage() {
    if (!initial_loaded) {
      return;
    }
    if (!orphans_scanned) {
      orphans_scanned = true;
      std::error_code ec;
      for (std::filesystem::directory_iterator it(mirrors_dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string id = it->path().filename().string();
        if (!mirrors.contains(id)) {
          MirrorState& state = mirrors[id];
          state.id = id;
          state.slot = std::make_shared<MirrorSlot>();
          state.slot->path = it->path().string();
        }
      }
    }
    std::set<std::string> used;
    for (const auto& [key, entry] : entries) {
      used.insert(entry.mirror_id);
    }
    for (auto& [id, mirror] : mirrors) {
      if (mirror.busy || used.contains(id)) {
        continue;
      }
      if (!canDispatch()) {
        return;
      }
      auto job = std::make_shared<Job>();
      job->id = ++next_job;
      job->kind = JobKind::kRemove;
      job->mirror_id = id;
      job->slot = mirror.slot;
      job->stopping = &stopping;
      mirror.busy = true;
      spawn(job);
    }
  }

  int dispatch(int64_t now) {
    std::map<std::string, std::vector<RepoEntry*>> due;
    for (auto& [key, entry] : entries) {
      if (entry.gitrepo && entry.running_job == 0 && entry.due_ms <= now) {
        due[entry.mirror_id].push_back(&entry);
      }
    }
    // Mirrors a webhook asked for go first, so a push is not queued behind timed polls when the pool is busy.
    std::vector<std::pair<const std::string*, std::vector<RepoEntry*>*>> order;
    order.reserve(due.size());
    for (auto& [id, list] : due) {
      order.emplace_back(&id, &list);
    }
    std::stable_partition(order.begin(), order.end(), [](const auto& item) {
      return std::any_of(item.second->begin(), item.second->end(), [](const RepoEntry* e) { return e->webhook_due; });
    });
    int waiting = 0;
    for (auto& [id_ptr, list_ptr] : order) {
      const std::string& id = *id_ptr;
      std::vector<RepoEntry*>& list = *list_ptr;
      MirrorState& mirror = mirrors[id];
      if (!mirror.slot) {
        mirror.id = id;
        mirror.slot = std::make_shared<MirrorSlot>();
        mirror.slot->path = mirrors_dir + "/" + id;
      }
      if (mirror.busy || !canDispatch()) {
        waiting += static_cast<int>(list.size());
        continue;
      }
      const std::string& url = list.front()->gitrepo->spec.repo;
      std::string host = hostOf(url);
      if (auto running_on_host = host_jobs.find(host);
          running_on_host != host_jobs.end() && running_on_host->second >= options.max_per_host) {
        waiting += static_cast<int>(list.size());
        if (!mirror.host_waiting) {
          mirror.host_waiting = true;
          metrics.hostLimited();
          log::debug("sync waits for the per-host limit", {{"host", host}, {"limit", options.max_per_host}});
        }
        continue;
      }
      mirror.host_waiting = false;
      auto job = std::make_shared<Job>();
      job->id = ++next_job;
      job->kind = JobKind::kSync;
      job->mirror_id = id;
      job->url = url;
      job->host = std::move(host);
      job->slot = mirror.slot;
      job->stopping = &stopping;
      job->grace = options.watchdog_grace;
      for (RepoEntry* entry : list) {
        job->work.push_back(RepoWork{entry->key, entry->epoch, *entry->gitrepo, entry->spec_hash, entry->status});
        entry->running_job = job->id;
        entry->webhook_due = false;
      }
      mirror.busy = true;
      log::debug("sync started", {{"url", git::redactUrl(job->url)},
                                  {"job", static_cast<int64_t>(job->id)},
                                  {"gitrepos", static_cast<int64_t>(job->work.size())}});
      spawn(job);
    }
    return waiting;
  }

  //! Recounts GitRepos and mirrors in use (O(GitRepos) with string copies: only after a change).
  void countInventory() {
    valid_count = 0;
    invalid_count = 0;
    std::set<std::string> used;
    for (const auto& [key, entry] : entries) {
      (entry.gitrepo ? valid_count : invalid_count) += 1;
      if (!entry.mirror_id.empty()) {
        used.insert(entry.mirror_id);
      }
    }
    mirrors_in_use = static_cast<int>(used.size());
  }

  void updateGauges(int waiting) {
    metrics.setGauges(active, stuck, waiting, valid_count, invalid_count, mirrors_in_use);
    metrics.setNetworkGauges(network_ops.load(), network_peak.load(), host_peak);
  }

  void scheduleLoop() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      const int64_t now = nowEpochMillis();
      inventory_changed = !inbox.empty() || inventory_changed;
      processCompletions(now);
      watchdog(now);
      // The scheduler wakes every 100 ms while syncs run; the O(GitRepos) housekeeping (unused mirrors, counts)
      // runs only when GitRepos or jobs changed, and once a second as a safety net.
      const auto steady_now = SteadyClock::now();
      if (inventory_changed || steady_now - last_housekeeping >= std::chrono::seconds(1)) {
        inventory_changed = false;
        last_housekeeping = steady_now;
        collectGarbage();
        countInventory();
      }
      const int waiting = dispatch(now);
      updateGauges(waiting);
      int64_t next = now + 1000;
      for (const auto& [key, entry] : entries) {
        if (entry.gitrepo && entry.running_job == 0 && entry.due_ms > now && entry.due_ms < next) {
          next = entry.due_ms;
        }
      }
      if (!running.empty()) {
        next = std::min(next, now + 100);  // the watchdog looks at running git calls often
      }
      wake.wait_for(lock, Millis(std::clamp<int64_t>(next - now, 1, 1000)));
    }
  }

  static void runJob(const std::shared_ptr<Core>& core, const std::shared_ptr<Job>& job) {
    std::optional<std::vector<RepoResult>> results;
    if (job->kind == JobKind::kRemove) {
      job->slot->mirror.reset();
      removeAll(job->slot->path);
      results.emplace();
    } else {
      try {
        results = syncMirror(core->settings, core->bus, core->metrics, *job, *job->slot, job->url, job->work);
      } catch (const std::exception& e) {
        // Never expected (everything below returns errors); keep the GitRepos retrying rather than crash.
        log::error("mirror sync threw", {{"url", git::redactUrl(job->url)}, {"error", e.what()}});
        results.emplace();
        for (const auto& work : job->work) {
          RepoResult result;
          result.key = work.key;
          result.epoch = work.epoch;
          result.error = makeError(ErrorKind::kInternal, std::string("unexpected exception: ") + e.what(), "sync");
          result.error_stage = "internal";
          results->push_back(std::move(result));
        }
      }
    }
    std::lock_guard lock(core->mutex);
    core->inbox.push_back(Completion{job, std::move(results)});
    core->wake.notify_all();
  }

  // ---- webhooks (the HTTP server's thread) ----

  //! Makes GitRepos due `webhook_coalesce` from now (or right after their running sync) and records the pushed
  //! commit. Returns the display names of those triggered.
  std::vector<std::string> triggerFromWebhook(const std::vector<std::pair<std::string, std::string>>& key_commits) {
    std::vector<std::string> triggered;
    std::lock_guard lock(mutex);
    const int64_t now = nowEpochMillis();
    for (const auto& [key, commit] : key_commits) {
      auto it = entries.find(key);
      if (it == entries.end() || !it->second.gitrepo) {
        continue;
      }
      RepoEntry& e = it->second;
      if (!commit.empty()) {
        e.status.webhook_commit = commit;
      }
      e.status.last_webhook_time = formatEpochMillis(now);
      if (e.running_job != 0) {
        e.webhook_pending = true;
      } else {
        e.due_ms = std::min(e.due_ms, now + options.webhook_coalesce.count());
        e.webhook_due = true;
        e.status.next_poll_time = timeOrEmpty(e.due_ms);
      }
      enqueueStatus(e);
      triggered.push_back(e.id.workspace + "/" + e.id.name);
    }
    wake.notify_all();
    return triggered;
  }

  http::Response handleWebhook(const http::Request& request) {
    const auto provider = detectProvider(request);
    if (!provider) {
      metrics.webhook("unknown", "bad_request");
      log::warn("webhook rejected: unknown provider (no recognised event or signature header)",
                {{"remote", request.remote_address}});
      return http::Response::text(400, "unknown webhook provider: no recognised event or signature header\n");
    }
    const std::string provider_name(providerName(*provider));
    auto push = parsePush(*provider, request);
    if (!push.ok()) {
      metrics.webhook(provider_name, "bad_request");
      log::warn("webhook rejected: unreadable payload",
                {{"provider", provider_name}, {"remote", request.remote_address}, {"error", push.error().message}});
      return http::Response::text(400, push.error().message + "\n");
    }
    // The GitRepos on the pushed repository, whatever their ref: their secrets decide whether the request is
    // genuine; the ref decides which of them poll.
    struct Candidate {
      std::string key;
      std::string display;
      std::string secret_name;
      bool wants_ref = false;
      std::string commit;
    };
    std::vector<Candidate> candidates;
    {
      std::set<std::string> pushed_keys;
      for (const auto& url : push->repo_urls) {
        if (auto key = webhookRepoKey(url); !key.empty()) {
          pushed_keys.insert(std::move(key));
        }
      }
      std::lock_guard lock(mutex);
      for (const auto& [key, entry] : entries) {
        if (!entry.gitrepo || !pushed_keys.contains(webhookRepoKey(entry.gitrepo->spec.repo))) {
          continue;
        }
        const auto& spec = entry.gitrepo->spec;
        candidates.push_back(Candidate{key, entry.id.workspace + "/" + entry.id.name,
                                       spec.webhook_secret.empty() ? options.webhook_secret : spec.webhook_secret,
                                       pushMatches(spec, *push), pushedCommitFor(spec, *push)});
      }
    }
    std::map<std::string, std::pair<bool, std::string>> verdicts;  // secret name -> (ok, why not)
    auto verify = [&](const std::string& secret_name) -> const std::pair<bool, std::string>& {
      auto it = verdicts.find(secret_name);
      if (it != verdicts.end()) {
        return it->second;
      }
      std::pair<bool, std::string> verdict{false, ""};
      if (secret_name.empty()) {
        verdict.second = "no webhook secret: set spec.webhookSecret or the poller's --webhook-secret";
      } else if (auto secret = loadWebhookSecret(options.credentials_dir, secret_name); !secret.ok()) {
        verdict.second = "webhook secret: " + secret.error().message;
        metrics.error("webhook", secret.error().kind);
      } else {
        verdict.first = verifyWebhook(*provider, request, *secret, verdict.second);
      }
      return verdicts.emplace(secret_name, std::move(verdict)).first->second;
    };
    auto reject = [&](const std::string& why) {
      metrics.webhook(provider_name, "unauthorized");
      log::warn("webhook rejected: bad signature or token",
                {{"provider", provider_name}, {"remote", request.remote_address}, {"reason", why}});
      return http::Response::text(401, "webhook rejected: " + why + "\n");
    };
    if (candidates.empty()) {
      if (!options.webhook_secret.empty()) {
        const auto& verdict = verify(options.webhook_secret);
        if (!verdict.first) {
          return reject(verdict.second);
        }
      }
      metrics.webhook(provider_name, "ignored");
      log::info("webhook ignored: no GitRepo uses the repository",
                {{"provider", provider_name}, {"event", push->event}, {"remote", request.remote_address}});
      return http::Response::text(200, "no GitRepo uses this repository\n");
    }
    std::vector<std::pair<std::string, std::string>> to_trigger;
    bool any_verified = false;
    std::string first_failure;
    for (const auto& candidate : candidates) {
      const auto& verdict = verify(candidate.secret_name);
      if (!verdict.first) {
        if (first_failure.empty()) {
          first_failure = verdict.second;
        }
        log::warn("webhook not verified for a GitRepo", {{"provider", provider_name},
                                                         {"gitrepo", candidate.display},
                                                         {"webhook_secret", candidate.secret_name},
                                                         {"reason", verdict.second}});
        continue;
      }
      any_verified = true;
      if (candidate.wants_ref) {
        to_trigger.emplace_back(candidate.key, candidate.commit);
      }
    }
    if (!any_verified) {
      return reject(first_failure);
    }
    const auto triggered = triggerFromWebhook(to_trigger);
    if (triggered.empty()) {
      metrics.webhook(provider_name, "ignored");
      log::info("webhook verified; no GitRepo follows the pushed refs",
                {{"provider", provider_name}, {"event", push->event}});
      return http::Response::text(200, "no GitRepo follows the pushed refs\n");
    }
    metrics.webhook(provider_name, "accepted");
    Json names = Json::array();
    for (const auto& name : triggered) {
      names.push(name);
    }
    log::info(
        "webhook accepted; polling",
        {{"provider", provider_name}, {"event", push->event}, {"gitrepos", static_cast<int64_t>(triggered.size())}});
    return http::Response::json(202, Json::obj({{"triggered", names}}).dump() + "\n");
  }

  // ---- status writer thread ----

  void writeLoop() {
    std::unique_lock lock(status_mutex);
    std::optional<SteadyClock::time_point> give_up;
    while (true) {
      status_cv.wait(lock, [&] { return status_stop || !status_pending.empty(); });
      if (status_pending.empty()) {
        return;  // stopping and everything written
      }
      if (status_stop && !give_up) {
        give_up = SteadyClock::now() + std::chrono::seconds(5);
      }
      auto node = status_pending.extract(status_pending.begin());
      lock.unlock();
      Status written;
      if (node.mapped()) {
        auto put = hub.status->put(node.key(), *node.mapped());
        written = put.ok() ? Status() : Status(fail(put.error()));
      } else {
        written = hub.status->remove(node.key());
        if (!written.ok() && written.error().kind == ErrorKind::kNotFound) {
          written = Status();
        }
      }
      metrics.statusWrite(written.ok());
      lock.lock();
      if (written.ok()) {
        continue;
      }
      log::warn("cannot write GitRepo poll status, retrying",
                {{"key", node.key()}, {"error", written.error().describe()}});
      if (give_up && SteadyClock::now() >= *give_up) {
        log::error("giving up on poll status writes at shutdown",
                   {{"pending", static_cast<int64_t>(status_pending.size() + 1)}});
        return;
      }
      if (!status_pending.contains(node.key())) {
        status_pending.insert(std::move(node));  // unless a newer record replaced it meanwhile
      }
      status_cv.wait_for(lock, Millis(500), [&] { return false; });
    }
  }
};

Poller::Poller(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Poller::~Poller() {
  stop();
}

Result<std::unique_ptr<Poller>> Poller::create(PollerOptions options, const service::Hub& hub, Metrics& metrics) {
  if (options.max_per_host < 1) {
    return fail(ErrorKind::kInvalid, "--max-per-host must be at least 1", "Poller::create");
  }
  if (options.workers < 1) {
    return fail(ErrorKind::kInvalid, "--workers must be at least 1", "Poller::create");
  }
  if (options.data_dir.empty()) {
    return fail(ErrorKind::kInvalid, "--data-dir must not be empty", "Poller::create");
  }
  if (!hub.gitrepos || !hub.status || !hub.sources || !hub.js) {
    return fail(ErrorKind::kInvalid, "the hub lacks the gitrepos/status buckets or the sources store",
                "Poller::create");
  }
  auto core = std::make_shared<Core>(options, hub, metrics);
  core->mirrors_dir = options.data_dir + "/mirrors";
  core->settings.credentials_dir = options.credentials_dir;
  core->settings.scratch_dir = options.data_dir + "/tmp";
  core->settings.git_timeout = options.git_timeout;
  core->settings.max_source_bytes = options.max_source_bytes;
  core->settings.allow_local = options.allow_local;
  core->bus = SyncBus{hub.js, hub.sources};
  removeAll(core->settings.scratch_dir);  // leftovers of a crash
  std::error_code ec;
  std::filesystem::create_directories(core->mirrors_dir, ec);
  if (!ec) {
    std::filesystem::create_directories(core->settings.scratch_dir, ec);
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot create " + options.data_dir + ": " + ec.message(), "Poller::create");
  }
  return std::unique_ptr<Poller>(new Poller(std::move(core)));
}

Status Poller::start() {
  Core& core = *core_;
  {
    std::lock_guard lock(core.mutex);
    if (core.started) {
      return fail(ErrorKind::kConflict, "the poller is already started", "Poller::start");
    }
    core.started = true;
  }
  if (!core.options.webhook_address.empty()) {
    http::ServerOptions server_options;
    server_options.address = core.options.webhook_address;
    server_options.port = core.options.webhook_port;
    server_options.max_body_bytes = core.options.webhook_max_body;
    server_options.on_body_too_large = [&core](const http::Request& request) {
      const auto provider = detectProvider(request);
      const std::string name = provider ? std::string(providerName(*provider)) : "unknown";
      core.metrics.webhook(name, "too_large");
      log::warn("webhook rejected: payload too large",
                {{"provider", name}, {"remote", request.remote_address}, {"limit", core.options.webhook_max_body}});
    };
    std::map<std::string, http::Handler> routes;
    for (const char* path : {"/", "/webhook"}) {
      routes[http::routeKey("POST", path)] = [&core](const http::Request& request) {
        return core.handleWebhook(request);
      };
    }
    auto server = http::Server::start(server_options, std::move(routes));
    if (!server.ok()) {
      std::lock_guard lock(core.mutex);
      core.started = false;
      return fail(server.error());
    }
    core.webhook_server = std::move(server).value();
    log::info("webhook receiver listening",
              {{"address", core.options.webhook_address}, {"port", static_cast<int64_t>(core.webhook_server->port())}});
  }
  core.writer = std::thread([&core] { core.writeLoop(); });
  core.scheduler = std::thread([&core] { core.scheduleLoop(); });
  core.watcher = std::thread([&core] { core.watchLoop(); });
  log::info("poller started", {{"data_dir", core.options.data_dir},
                               {"workers", core.options.workers},
                               {"git_timeout_ms", static_cast<int64_t>(core.options.git_timeout.count())}});
  return {};
}

void Poller::stop(Millis wait) {
  Core& core = *core_;
  {
    std::lock_guard lock(core.mutex);
    if (!core.started || core.stopped) {
      return;
    }
    core.stopped = true;
    core.stopping = true;
  }
  core.wake.notify_all();
  if (core.webhook_server) {
    core.webhook_server->stop();
  }
  if (core.watcher.joinable()) {
    core.watcher.join();
  }
  if (core.scheduler.joinable()) {
    core.scheduler.join();
  }
  {
    // Let running syncs finish (they stop after their current GitRepo) and record what they published; git
    // calls still running at the deadline are left behind like the watchdog would.
    std::unique_lock lock(core.mutex);
    const auto deadline = SteadyClock::now() + wait;
    while (true) {
      core.processCompletions(nowEpochMillis());
      if (core.active == 0) {
        break;
      }
      if (SteadyClock::now() >= deadline) {
        for (auto& job : core.running) {
          std::lock_guard job_lock(job->mutex);
          if (!job->abandoned && job->in_git) {
            core.abandon(*job, nowEpochMillis());
          }
        }
      }
      core.wake.wait_for(lock, Millis(100));
    }
  }
  {
    std::lock_guard status_lock(core.status_mutex);
    core.status_stop = true;
  }
  core.status_cv.notify_all();
  if (core.writer.joinable()) {
    core.writer.join();
  }
  log::info("poller stopped", {{"stuck_git_calls", core.stuck}});
}

uint16_t Poller::webhookPort() const {
  return core_->webhook_server ? core_->webhook_server->port() : 0;
}

bool Poller::ready(std::string& why) const {
  if (!core_->hub.connection || !core_->hub.connection->connected()) {
    why = "not connected to NATS";
    return false;
  }
  std::lock_guard lock(core_->mutex);
  if (!core_->initial_loaded) {
    why = "initial GitRepos not loaded yet";
    return false;
  }
  return true;
}

}  // namespace flotilla::poller
