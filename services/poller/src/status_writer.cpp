// The status writer thread: poll status records into KV `status`, coalesced per key (only the newest record of a
// GitRepo is written) and retried until written, or for at most 5 s once the poller stops.
#include "flotilla/core/log.h"
#include "flotilla/poller/poll_status.h"
#include "poller_core.h"

namespace flotilla::poller {

void Poller::Core::enqueueStatus(const RepoEntry& e) {
  {
    std::lock_guard status_lock(status_mutex);
    status_pending[pollStatusKey(e.id.workspace, e.id.name)] = encode(e.status).dump();
  }
  status_cv.notify_one();
}

void Poller::Core::enqueueStatusRemoval(const std::string& status_key) {
  {
    std::lock_guard status_lock(status_mutex);
    status_pending[status_key] = std::nullopt;
  }
  status_cv.notify_one();
}

namespace {

//! `ours` with the publish of `stored` when that one is later (lastPublishTime): another replica published a commit
//! this one has not, and a replica must not write its older commit over it (README.md "Replicas"). A stored record
//! that does not decode is overwritten.
std::string withNewerPublish(const std::string& ours, const std::string& stored) {
  auto mine = decodePollStatus(ours);
  auto theirs = decodePollStatus(stored);
  if (!mine.ok() || !theirs.ok() || theirs->last_publish_time <= mine->last_publish_time) {
    return ours;
  }
  mine->commit = theirs->commit;
  mine->source_object = theirs->source_object;
  mine->changed = theirs->changed;
  mine->force_sync_generation = theirs->force_sync_generation;
  mine->spec_hash = theirs->spec_hash;
  mine->last_publish_time = theirs->last_publish_time;
  return encode(*mine).dump();
}

constexpr int kStatusWriteAttempts = 3;  //!< writes that lose a race with another replica, before giving up for now

}  // namespace

Status Poller::Core::writeStatusRecord(const std::string& key, const std::optional<std::string>& record) {
  // Read, keep a newer publish of another replica, write if nobody wrote meanwhile (else read again).
  for (int attempt = 1; record; ++attempt) {
    auto current = hub.status->find(key);
    if (!current.ok()) {
      return fail(current.error());
    }
    auto written = *current
                       ? hub.status->update(key, withNewerPublish(*record, (*current)->value), (*current)->revision)
                       : hub.status->create(key, *record);
    if (written.ok()) {
      return {};
    }
    if (written.error().kind != ErrorKind::kConflict || attempt == kStatusWriteAttempts) {
      return fail(written.error());
    }
    metrics.statusWriteConflict();
    log::debug("another poller wrote the GitRepo's status meanwhile; reading it again",
               {{"key", key}, {"attempt", attempt}});
  }
  Status removed = hub.status->remove(key);
  if (!removed.ok() && removed.error().kind == ErrorKind::kNotFound) {
    return {};
  }
  return removed;
}

void Poller::Core::writeLoop() {
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
    const Status written = writeStatusRecord(node.key(), node.mapped());
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

}  // namespace flotilla::poller
