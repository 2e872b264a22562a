// The watcher thread: GitRepo specs from KV `gitrepos` (initial values, then puts and deletes) into the
// scheduler's entries, with the poll status each GitRepo last stored.
#include <set>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/git/url.h"
#include "flotilla/model/codec.h"
#include "poller_core.h"

namespace flotilla::poller {
namespace {

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

}  // namespace

void Poller::Core::sleepFor(Millis duration) {
  std::unique_lock lock(mutex);
  wake.wait_for(lock, duration, [&] { return stopping.load(); });
}

std::map<std::string, PollStatus> Poller::Core::loadStoredStatuses() {
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

std::optional<PollStatus> Poller::Core::fetchStatus(const std::string& key) {
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

void Poller::Core::watchLoop() {
  const std::map<std::string, PollStatus> stored = loadStoredStatuses();
  bool first_load = true;
  while (!stopping) {
    auto watcher_result = hub.gitrepos->watch(">");
    if (!watcher_result.ok()) {
      log::warn("cannot watch gitrepos, retrying", {{"error", watcher_result.error().describe()}});
      metrics.watchRestart();
      sleepFor(Millis(1000));
      continue;
    }
    if (!followWatch(*watcher_result, stored, first_load)) {
      metrics.watchRestart();
    }
    if (!stopping) {
      sleepFor(Millis(1000));
    }
  }
}

bool Poller::Core::followWatch(bus::KvWatcher& kv_watcher, const std::map<std::string, PollStatus>& stored,
                               bool& first_load) {
  std::set<std::string> seen;
  std::map<std::string, uint64_t> tombstones;  //!< delete markers among the initial values
  bool initial = true;
  while (!stopping) {
    auto next = kv_watcher.next(Millis(500));
    if (!next.ok()) {
      log::warn("gitrepos watch failed, restarting it", {{"error", next.error().describe()}});
      return false;
    }
    if (!next->has_value()) {
      if (initial && kv_watcher.initialDone()) {
        initial = false;
        finishInitialLoad(seen, tombstones, first_load ? &stored : nullptr);
        first_load = false;
      }
      continue;
    }
    const bus::KvEntry& entry = **next;
    if (entry.operation != bus::KvOperation::kPut) {
      if (initial) {
        tombstones[entry.key] = entry.revision;
      }
      applyDelete(entry.key, entry.revision);
      continue;
    }
    if (initial) {
      seen.insert(entry.key);
    }
    // The status a GitRepo new to this process last stored: from the start-up snapshot, else read now.
    std::optional<PollStatus> status;
    auto id = parseGitRepoKey(entry.key);
    if (!known(entry.key) && id.ok()) {
      const std::string status_key = pollStatusKey(id->workspace, id->name);
      if (!first_load) {
        status = fetchStatus(status_key);
      } else if (auto it = stored.find(status_key); it != stored.end()) {
        status = it->second;
      }
    }
    applyPut(entry.key, entry.value, first_load && initial, std::move(status));
  }
  return true;
}

bool Poller::Core::known(const std::string& key) {
  std::lock_guard lock(mutex);
  return entries.contains(key);
}

void Poller::Core::finishInitialLoad(const std::set<std::string>& seen,
                                     const std::map<std::string, uint64_t>& tombstones,
                                     const std::map<std::string, PollStatus>* stored) {
  auto revisionOf = [&](const std::string& key) {
    auto it = tombstones.find(key);
    return it == tombstones.end() ? uint64_t{0} : it->second;  // 0: purged, no marker left
  };
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
    applyDelete(key, revisionOf(key));  // deleted while the watch was down
  }
  std::lock_guard lock(mutex);
  // A status without a spec: the GitRepo was deleted while no poller ran, or the poller died before the deletion
  // was published (the status is removed only after that).
  static const std::map<std::string, PollStatus> kNone;
  for (const auto& [status_key, status] : stored != nullptr ? *stored : kNone) {
    const std::string key = events::gitRepoKey(status.workspace, status.gitrepo);
    if (!seen.contains(key) && !entries.contains(key) &&
        pollStatusKey(status.workspace, status.gitrepo) == status_key) {
      log::info("found the status of a GitRepo that no longer exists", {{"key", status_key}});
      queueDeletion(key, GitRepoId{status.workspace, status.gitrepo}, revisionOf(key), status);
    }
  }
  if (!initial_loaded) {
    log::info("initial GitRepos loaded", {{"count", static_cast<int64_t>(seen.size())}});
  }
  initial_loaded = true;
  inventory_changed = true;
  wake.notify_all();
}

void Poller::Core::applyPut(const std::string& key, const std::string& value, bool startup,
                            std::optional<PollStatus> stored) {
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
    // Re-created while its deletion is being published: the stored status is the old GitRepo's.
    e.status = deletions.contains(key) ? PollStatus{} : std::move(stored).value_or(PollStatus{});
    e.status.workspace = id->workspace;
    e.status.gitrepo = id->name;
  }
  const int64_t now = nowEpochMillis();
  if (!decoded.ok()) {
    return applyInvalidSpec(e, decoded.error(), now);
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
  mirrorFor(e.mirror_id);
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
            {{"gitrepo", displayName(e.id)}, {"repo", e.status.repo}, {"poll", settled ? "at its phase" : "now"}});
  enqueueStatus(e);
  wake.notify_all();
}

void Poller::Core::applyInvalidSpec(RepoEntry& e, const Error& error, int64_t now) {
  e.gitrepo.reset();
  e.epoch = ++next_epoch;
  e.due_ms = kNever;
  e.status.last_error = error.describe();
  e.status.last_error_kind = std::string(errorKindName(error.kind));
  e.status.last_error_time = formatEpochMillis(now);
  e.status.next_poll_time.clear();
  e.status.failures = 0;
  log::warn("invalid GitRepo document; not polling it", {{"gitrepo", displayName(e.id)}, {"error", error.describe()}});
  metrics.error("spec", error.kind);
  enqueueStatus(e);
  wake.notify_all();
}

void Poller::Core::applyDelete(const std::string& key, uint64_t revision) {
  std::lock_guard lock(mutex);
  auto it = entries.find(key);
  if (it == entries.end()) {
    return;
  }
  inventory_changed = true;
  // Its status goes only after the deletion is published (deletions.cpp).
  queueDeletion(key, it->second.id, revision, it->second.status);
  entries.erase(it);
  wake.notify_all();
}

MirrorState& Poller::Core::mirrorFor(const std::string& id) {
  MirrorState& mirror = mirrors[id];
  if (!mirror.slot) {
    mirror.id = id;
    mirror.slot = std::make_shared<MirrorSlot>();
    mirror.slot->path = mirrors_dir + "/" + id;
  }
  return mirror;
}

}  // namespace flotilla::poller
