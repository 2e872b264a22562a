// The status writer thread: poll status records into KV `status`, coalesced per key (only the newest record of a
// GitRepo is written) and retried until written, or for at most 5 s once the poller stops.
#include "flotilla/core/log.h"
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

Status Poller::Core::writeStatusRecord(const service::Hub& hub, const std::string& key,
                                       const std::optional<std::string>& record) {
  if (record) {
    auto put = hub.status->put(key, *record);
    return put.ok() ? Status() : Status(fail(put.error()));
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
    const Status written = writeStatusRecord(hub, node.key(), node.mapped());
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
