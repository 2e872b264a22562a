// The scheduler thread: which GitRepos are due, one sync per mirror on a worker thread (never two on one mirror,
// at most --workers at once and --max-per-host per git host), removal of unused mirrors, and the gauges.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>

#include "flotilla/core/ascii.h"
#include "flotilla/core/log.h"
#include "flotilla/git/url.h"
#include "poller_core.h"

namespace flotilla::poller {
namespace {

//! The host the per-host limit counts a URL against (lower-case; "" for local repositories).
std::string hostOf(const std::string& url) {
  auto parsed = git::parseGitUrl(url, true);
  if (!parsed.ok()) {
    return {};
  }
  return toLowerAscii(parsed->host);
}

}  // namespace

bool Job::begin(std::string_view op, Millis op_timeout) {
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

bool Job::end() {
  std::lock_guard lock(mutex);
  if (in_git) {
    network_ops->fetch_sub(1);
  }
  in_git = false;
  return !abandoned;
}

int64_t Poller::Core::timedDue(const RepoEntry& e, int64_t now) const {
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

bool Poller::Core::mirrorUsed(const std::string& id) const {
  for (const auto& [key, entry] : entries) {
    if (entry.mirror_id == id) {
      return true;
    }
  }
  return false;
}

void Poller::Core::spawn(const std::shared_ptr<Job>& job) {
  ++active;
  job->network_ops = &network_ops;
  job->network_peak = &network_peak;
  if (job->kind == JobKind::kSync) {
    host_peak = std::max(host_peak, ++host_jobs[job->host]);
  }
  running.push_back(job);
  std::thread([self = shared_from_this(), job] { runJob(self, job); }).detach();
}

void Poller::Core::collectGarbage() {
  if (!initial_loaded) {
    return;
  }
  if (!orphans_scanned) {
    orphans_scanned = true;
    scanOrphanMirrors();
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

//! Mirror directories left by GitRepos deleted while the poller was down: known, so collectGarbage removes them.
void Poller::Core::scanOrphanMirrors() {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(mirrors_dir, ec), end; !ec && it != end; it.increment(ec)) {
    mirrorFor(it->path().filename().string());
  }
}

int Poller::Core::dispatch(int64_t now) {
  std::map<std::string, std::vector<RepoEntry*>> due;
  for (auto& [key, entry] : entries) {
    // A GitRepo re-created while its deletion is being published waits for it (its first commit follows the delete).
    if (entry.gitrepo && entry.running_job == 0 && entry.due_ms <= now && !deletions.contains(key)) {
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
  for (auto& [id, list] : order) {
    MirrorState& mirror = mirrorFor(*id);
    if (mirror.busy || !canDispatch() || !dispatchMirror(mirror, *list)) {
      waiting += static_cast<int>(list->size());
    }
  }
  return waiting;
}

bool Poller::Core::dispatchMirror(MirrorState& mirror, std::vector<RepoEntry*>& list) {
  const std::string& url = list.front()->gitrepo->spec.repo;
  std::string host = hostOf(url);
  if (auto running_on_host = host_jobs.find(host);
      running_on_host != host_jobs.end() && running_on_host->second >= options.max_per_host) {
    if (!mirror.host_waiting) {
      mirror.host_waiting = true;
      metrics.hostLimited();
      log::debug("sync waits for the per-host limit", {{"host", host}, {"limit", options.max_per_host}});
    }
    return false;
  }
  mirror.host_waiting = false;
  auto job = std::make_shared<Job>();
  job->id = ++next_job;
  job->kind = JobKind::kSync;
  job->mirror_id = mirror.id;
  job->url = url;
  job->host = std::move(host);
  job->slot = mirror.slot;
  job->stopping = &stopping;
  job->grace = options.watchdog_grace;
  for (RepoEntry* entry : list) {
    const bool by_webhook = entry->webhook_due && entry->webhook_received_ms != 0;
    job->work.push_back(RepoWork{.key = entry->key,
                                 .epoch = entry->epoch,
                                 .gitrepo = *entry->gitrepo,
                                 .spec_hash = entry->spec_hash,
                                 .last = entry->status,
                                 .by_webhook = by_webhook,
                                 .triggered = by_webhook
                                                  ? SystemTime(std::chrono::milliseconds(entry->webhook_received_ms))
                                                  : std::chrono::system_clock::now()});
    entry->running_job = job->id;
    entry->webhook_due = false;
    entry->webhook_received_ms = 0;  // a push during this sync is the next one's
  }
  mirror.busy = true;
  log::debug("sync started", {{"url", git::redactUrl(job->url)},
                              {"job", static_cast<int64_t>(job->id)},
                              {"gitrepos", static_cast<int64_t>(job->work.size())}});
  spawn(job);
  return true;
}

//! Recounts GitRepos and mirrors in use (O(GitRepos) with string copies: only after a change).
void Poller::Core::countInventory() {
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

void Poller::Core::updateGauges(int waiting) {
  metrics.setGauges(active, stuck, waiting, valid_count, invalid_count, mirrors_in_use);
  metrics.setNetworkGauges(network_ops.load(), network_peak.load(), host_peak);
}

void Poller::Core::scheduleLoop() {
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

void Poller::Core::runJob(const std::shared_ptr<Core>& core, const std::shared_ptr<Job>& job) {
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
      const Error error = makeError(ErrorKind::kInternal, std::string("unexpected exception: ") + e.what(), "sync");
      results.emplace();
      for (const auto& work : job->work) {
        results->push_back(failedResult(work, error, "internal"));
      }
    }
  }
  std::lock_guard lock(core->mutex);
  core->inbox.push_back(Completion{job, std::move(results)});
  core->wake.notify_all();
}

}  // namespace flotilla::poller
