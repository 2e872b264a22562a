// Deletes an agent could not finish (docs/pipeline.md "Deletes that cascade"): the agent reports ErrApplied
// (e.g. PruneFailed: the API server refused a delete) and keeps what is left in its inventory; the deployment stays
// `deleting` with the error in its status and the summaries. The scheduler sends the delete again after a backoff
// (SchedulerOptions::retry_base doubling per failed attempt, up to retry_max), until a report says it is done. The
// schedule lives in memory: after a restart the start-up re-targeting (retryFailedDeletes) sends every failed delete
// again.
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/consumer.h"
#include "times.h"

namespace flotilla::scheduler {

void Scheduler::scheduleDeleteRetry(const std::string& key, const DeploymentRecord& record, std::string_view error) {
  DeleteRetry& retry = delete_retries_[key];
  ++retry.failures;
  const auto delay = service::Backoff(options_.retry_base, options_.retry_max).delay(retry.failures);
  retry.due = std::chrono::steady_clock::now() + delay;
  log::warn("the agent could not delete the bundle; the delete is sent again after a backoff",
            {{"cluster", record.cluster},
             {"bundle", record.bundle},
             {"gitrepo", record.gitrepo},
             {"failures", static_cast<int64_t>(retry.failures)},
             {"retry_in_ms", static_cast<int64_t>(delay.count())},
             {"error", std::string(error)}});
}

void Scheduler::retryDueDeletes() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  if (!loaded_ || delete_retries_.empty()) {
    return;
  }
  Affected affected;
  const int64_t clock_ms = detail::nowMs();
  gitrepo_gone_.clear();
  for (auto it = delete_retries_.begin(); it != delete_retries_.end();) {
    auto record = deployments_.find(it->first);
    if (record == deployments_.end() || !record->second.deleting) {
      it = delete_retries_.erase(it);  // settled (or placed again) meanwhile
      continue;
    }
    if (it->second.due > now) {
      ++it;
      continue;
    }
    const DeploymentRecord gone = record->second;  // reconcilePair replaces the record
    auto bundle = bundles_.find(events::bundleKey(gone.workspace, gone.bundle));
    bool published = false;
    Status sent = reconcilePair(bundle == bundles_.end() ? nullptr : &bundle->second, gone.workspace, gone.bundle,
                                gone.cluster, clock_ms, affected, published);
    if (!sent.ok()) {
      it->second.due = now + options_.retry_max;
      log::warn("cannot send a failed delete again yet",
                {{"cluster", gone.cluster}, {"bundle", gone.bundle}, {"error", sent.error().describe()}});
      ++it;
      continue;
    }
    metrics_.counter("delete_retries_total", "Deletes sent again after an agent reported it could not finish one")
        .Increment();
    log::info("failed delete sent again", {{"cluster", gone.cluster},
                                           {"bundle", gone.bundle},
                                           {"gitrepo", gone.gitrepo},
                                           {"failures", static_cast<int64_t>(it->second.failures)},
                                           {"sent", published}});
    it->second.due = std::chrono::steady_clock::time_point::max();  // the next report re-arms it
    ++it;
  }
  if (auto written = writeSummaries(affected); !written.ok()) {
    log::warn("cannot write summaries after resending deletes", {{"error", written.error().describe()}});
  }
}

}  // namespace flotilla::scheduler
