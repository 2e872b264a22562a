// What the scheduler does with finished syncs (each GitRepo's result into its status and next poll time) and its
// watchdog, which leaves a git call that outlives its timeout behind (a backstop: libs/git already ends calls to a
// silent server at the socket; a hanging name lookup is not covered there).
#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/git/url.h"
#include "poller_core.h"

namespace flotilla::poller {

void Poller::Core::applyResult(const RepoResult& r, uint64_t job_id, int64_t now) {
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

void Poller::Core::processCompletions(int64_t now) {
  std::vector<Completion> done;
  done.swap(inbox);
  for (auto& completion : done) {
    Job& job = *completion.job;
    std::erase(running, completion.job);
    const bool was_abandoned = releaseJob(job);
    if (job.kind == JobKind::kRemove) {
      continue;
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

bool Poller::Core::releaseJob(Job& job) {
  bool was_abandoned = false;
  {
    std::lock_guard job_lock(job.mutex);
    was_abandoned = job.abandoned;
  }
  (was_abandoned ? stuck : active) -= 1;
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
    return was_abandoned;
  }
  log::debug("sync finished", {{"url", git::redactUrl(job.url)}, {"job", static_cast<int64_t>(job.id)}});
  if (auto host = host_jobs.find(job.host); host != host_jobs.end() && --host->second <= 0) {
    host_jobs.erase(host);
  }
  if (mirror != mirrors.end()) {
    mirror->second.busy = false;
    if (was_abandoned) {
      mirror->second.slot->mirror.reset();  // reopen it cleanly next time
    }
  }
  return was_abandoned;
}

void Poller::Core::abandon(Job& job, int64_t now) {
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
    applyResult(failedResult(work, error, "timeout"), job.id, now);
  }
}

void Poller::Core::watchdog(int64_t now) {
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

}  // namespace flotilla::poller
