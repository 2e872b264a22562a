// The deleter thread: a GitRepo whose spec was deleted gets a CommitEvent{deleted} (the bundler then deletes every
// bundle it made: docs/pipeline.md "Deletes that cascade"), retried until JetStream acks it; only then is its poll
// status removed. The status is the poller's memory of the deletion: one that is still there without a spec at
// start-up (the poller was down, or died before the ack) is deleted again (spec_watch.cpp finishInitialLoad).
#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "poller_core.h"

namespace flotilla::poller {
namespace {

constexpr Millis kRetryBase{200};
constexpr Millis kRetryMax{5'000};
//! How often the deleter looks again while a sync still works on a deleted GitRepo.
constexpr Millis kSyncWait{100};

events::CommitEvent deletedEvent(const PendingDeletion& deletion) {
  events::CommitEvent event;
  event.workspace = deletion.id.workspace;
  event.gitrepo = deletion.id.name;
  event.deleted = true;
  event.repo = deletion.last.repo;
  event.previous_commit = deletion.last.commit;
  event.force_sync_generation = deletion.last.force_sync_generation;
  event.id = events::commitDeletedMsgId(deletion.id.workspace, deletion.id.name, deletion.revision);
  event.time = log::nowRfc3339();
  return event;
}

}  // namespace

void Poller::Core::queueDeletion(const std::string& key, const GitRepoId& id, uint64_t revision, PollStatus last) {
  auto [it, inserted] = deletions.try_emplace(key);
  PendingDeletion& deletion = it->second;
  if (inserted) {
    deletion.id = id;
    deletion.last = std::move(last);
  }
  // Deleted again before the first delete was published (re-created meanwhile, never polled): one event, for the
  // newest delete; the status of the first keeps the repository and commit it ran.
  deletion.revision = std::max(deletion.revision, revision);
  log::info("GitRepo deleted; publishing its deletion",
            {{"gitrepo", displayName(id)}, {"revision", static_cast<int64_t>(revision)}});
  deletions_cv.notify_all();
}

bool Poller::Core::syncRunningFor(const std::string& key) const {
  for (const auto& job : running) {
    if (job->kind != JobKind::kSync) {
      continue;
    }
    {
      std::lock_guard job_lock(job->mutex);
      if (job->abandoned) {
        continue;  // an abandoned sync publishes nothing when its git call returns
      }
    }
    if (std::any_of(job->work.begin(), job->work.end(), [&](const RepoWork& w) { return w.key == key; })) {
      return true;
    }
  }
  return false;
}

void Poller::Core::deleteLoop() {
  std::unique_lock lock(mutex);
  while (!stopping) {
    // A sync still running for the GitRepo could publish its commit after the delete: wait for it.
    auto next =
        std::find_if(deletions.begin(), deletions.end(), [&](const auto& item) { return !syncRunningFor(item.first); });
    if (next == deletions.end()) {
      const Millis wait = deletions.empty() ? Millis(1'000) : kSyncWait;
      deletions_cv.wait_for(lock, wait, [&] { return stopping.load(); });
      continue;
    }
    const std::string key = next->first;
    const PendingDeletion deletion = next->second;
    lock.unlock();
    const Status published = publishDeletion(key, deletion);
    lock.lock();
    auto it = deletions.find(key);
    if (it == deletions.end()) {
      continue;
    }
    if (published.ok()) {
      if (it->second.revision == deletion.revision) {
        finishDeletion(key);
      }
      continue;  // deleted again meanwhile: publish the newer delete too
    }
    const int failures = ++it->second.failures;
    const Millis delay = std::min(kRetryMax, kRetryBase * (1 << std::min(failures - 1, 10)));
    deletions_cv.wait_for(lock, delay, [&] { return stopping.load(); });
  }
}

Status Poller::Core::publishDeletion(const std::string& key, const PendingDeletion& deletion) {
  const events::CommitEvent event = deletedEvent(deletion);
  auto ack =
      bus.js->publish(events::commitSubject(event.workspace, event.gitrepo), events::encode(event).dump(), event.id);
  if (!ack.ok()) {
    metrics.error("delete", ack.error().kind);
    log::warn("cannot publish a deleted GitRepo's commit event, retrying",
              {{"gitrepo", displayName(deletion.id)},
               {"key", key},
               {"failures", static_cast<int64_t>(deletion.failures + 1)},
               {"error", ack.error().describe()}});
    return fail(ack.error());
  }
  metrics.deletionPublished(ack->duplicate);
  announceCommit(public_events.get(), event);
  log::info(ack->duplicate ? "deleted GitRepo's commit event was already published (duplicate dropped)"
                           : "deleted GitRepo's commit event published",
            {{"gitrepo", displayName(deletion.id)},
             {"msg_id", event.id},
             {"previous_commit", event.previous_commit},
             {"sequence", static_cast<int64_t>(ack->sequence)}});
  return {};
}

void Poller::Core::finishDeletion(const std::string& key) {
  auto it = deletions.find(key);
  const std::string status_key = pollStatusKey(it->second.id.workspace, it->second.id.name);
  deletions.erase(it);
  if (auto entry = entries.find(key); entry != entries.end()) {
    enqueueStatus(entry->second);  // re-created meanwhile: its own (fresh) status replaces the old one
  } else {
    enqueueStatusRemoval(status_key);
  }
  inventory_changed = true;
  wake.notify_all();  // a re-created GitRepo may poll now
}

}  // namespace flotilla::poller
