// The shared watch cache (watcher.h): registration of bundles, one watch thread per (apiVersion, kind) — per namespace
// for Secrets —, and how list snapshots and watch events update the managed objects. Corrections and reports:
// drift_correct.cpp.
#include "flotilla/agent/watcher.h"

#include <algorithm>

#include "flotilla/agent/applier.h"
#include "flotilla/core/log.h"
#include "flotilla/kube/errors.h"

namespace flotilla::agent {

using SteadyClock = std::chrono::steady_clock;

namespace {

//! A resourceVersion as a number (etcd revisions are); 0 when it is not one, which orders before anything.
uint64_t versionNumber(const std::string& version) {
  uint64_t value = 0;
  for (char c : version) {
    if (c < '0' || c > '9') {
      return 0;
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

//! metadata.resourceVersion of an object as a number (versionNumber).
uint64_t resourceVersionOf(const Json& live) {
  const Json* version = live.at({"metadata", "resourceVersion"});
  return version != nullptr && version->isString() ? versionNumber(version->asString()) : 0;
}

}  // namespace

std::string serviceAccountUser(std::string_view agent_namespace, std::string_view service_account) {
  return "system:serviceaccount:" + std::string(agent_namespace) + ":" + std::string(service_account);
}

DriftSettings driftSettings(const model::BundleDeploymentOptions& options, std::string_view agent_namespace) {
  DriftSettings settings;
  if (!options.service_account.empty()) {
    settings.service_account_user = serviceAccountUser(agent_namespace, options.service_account);
  }
  if (options.correct_drift) {
    settings.correct = options.correct_drift->enabled;
    settings.force = options.correct_drift->force;
    settings.keep_fail_history = options.correct_drift->keep_fail_history;
  }
  if (options.diff) {
    settings.diff = *options.diff;
  }
  if (options.ignore) {
    settings.ignore_conditions = options.ignore->conditions;
  }
  return settings;
}

Json watchOptionsOf(const Json& options) {
  Json kept = Json::object();
  for (const char* key : {"defaultNamespace", "namespace", "correctDrift", "diff", "ignore", "serviceAccount"}) {
    if (const Json* value = options.find(key)) {
      kept[key] = *value;
    }
  }
  return kept;
}

Status checkDriftOptions(const model::BundleDeploymentOptions& options) {
  if (!options.diff) {
    return okStatus();
  }
  const auto& patches = options.diff->compare_patches;
  for (size_t i = 0; i < patches.size(); ++i) {
    const std::string at = "diff.comparePatches[" + std::to_string(i) + "]";
    for (size_t j = 0; j < patches[i].operations.size(); ++j) {
      const auto& operation = patches[i].operations[j];
      const std::string op_at = at + ".operations[" + std::to_string(j) + "]";
      if (operation.op != "remove" && operation.op != "ignore") {
        return fail(ErrorKind::kInvalid, op_at + ".op: \"" + operation.op +
                                             "\" is not supported: the agent only hides fields from drift (remove, "
                                             "ignore)");
      }
      if (!operation.value.empty()) {
        return fail(ErrorKind::kInvalid, op_at + ".value: not used by " + operation.op + " operations");
      }
      if (!operation.path.starts_with("/")) {
        return fail(ErrorKind::kInvalid, op_at + ".path: expected a JSON pointer starting with /");
      }
    }
    for (size_t j = 0; j < patches[i].json_pointers.size(); ++j) {
      if (!patches[i].json_pointers[j].starts_with("/")) {
        return fail(ErrorKind::kInvalid,
                    at + ".jsonPointers[" + std::to_string(j) + "]: expected a JSON pointer starting with /");
      }
    }
  }
  return okStatus();
}

DriftWatcher::DriftWatcher(kube::KubeClient& client, Metrics& metrics, WatcherOptions options)
    : client_(client), metrics_(metrics), options_(std::move(options)) {}

DriftWatcher::~DriftWatcher() {
  stop();
}

void DriftWatcher::setOnChange(ChangeCallback on_change) {
  std::lock_guard lock(mutex_);
  on_change_ = std::move(on_change);
}

void DriftWatcher::start() {
  std::lock_guard lock(mutex_);
  if (started_ || stopping_) {
    return;
  }
  started_ = true;
  worker_ = std::thread([this] { workerLoop(); });
}

void DriftWatcher::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& [key, loop] : watches_) {
      *loop.flags.stop = true;
      threads.push_back(std::move(loop.thread));
    }
    watches_.clear();
    for (auto& retired : retired_) {
      threads.push_back(std::move(retired.thread));
    }
    retired_.clear();
    if (worker_.joinable()) {
      threads.push_back(std::move(worker_));
    }
  }
  wake_.notify_all();
  for (auto& thread : threads) {
    if (thread.joinable()) {
      thread.join();
    }
  }
}

// ---- registration ---------------------------------------------------------------------------------------------

DriftWatcher::WatchKey DriftWatcher::keyOf(const ObjectRef& ref) const {
  // One watch per kind across all namespaces: every watch is a thread and an HTTPS connection of its own (HTTP/1.1
  // cannot multiplex them), so a watch per namespace cost about 0.35 MiB each (bench_agent: 49 MiB for 100
  // namespaces). Secrets are the exception: a cluster-wide list of them reads every Helm release and token in the
  // cluster, far more data (and a wider read) than the bundles' own, so they are watched per namespace. With
  // --namespaces every kind is: the agent's Roles allow no list or watch across namespaces.
  const bool per_namespace = options_.per_namespace || (ref.kind == "Secret" && ref.api_version == "v1");
  return WatchKey{.api_version = ref.api_version, .kind = ref.kind, .ns = per_namespace ? ref.ns : std::string()};
}

void DriftWatcher::beginApply(const std::string& owner) {
  std::shared_ptr<std::mutex> apply_mutex;
  {
    std::lock_guard lock(mutex_);
    BundleEntry& bundle = bundles_[owner];
    ++bundle.epoch;
    apply_mutex = bundle.apply_mutex;
  }
  std::lock_guard wait_for_correction(*apply_mutex);  // a correction in flight finishes first
}

void DriftWatcher::registerBundle(const std::string& owner, const DriftSettings& settings,
                                  std::vector<WatchedObject> objects) {
  std::lock_guard lock(mutex_);
  BundleEntry& bundle = bundles_[owner];
  bundle.settings = settings;
  bundle.registered = bundle.epoch;
  std::vector<Entry> entries;
  entries.reserve(objects.size());
  const auto name = std::make_shared<const std::string>(owner);
  for (auto& object : objects) {
    Entry entry{.owner = name, .ref = object.ref, .applied = appliedFieldValues(object.live)};
    if (settings.correct) {
      entry.desired = std::make_unique<const Json>(std::move(object.desired));
    }
    if (!object.relist) {
      updateEntryLocked(entry, &object.live);  // the first drift and health, from the apply's answer
    }
    entries.push_back(std::move(entry));
  }
  addEntriesLocked(owner, std::move(entries));
}

void DriftWatcher::adoptBundle(const std::string& owner, const DriftSettings& settings,
                               const std::vector<ObjectRef>& refs) {
  std::lock_guard lock(mutex_);
  if (auto it = bundles_.find(owner); it != bundles_.end() && !it->second.ids.empty()) {
    return;  // registered by a deploy meanwhile: that registration knows more
  }
  BundleEntry& bundle = bundles_[owner];
  bundle.settings = settings;
  bundle.settings.correct = false;  // nothing to correct towards until a deploy brings the desired objects
  bundle.registered = bundle.epoch;
  std::vector<Entry> entries;
  entries.reserve(refs.size());
  const auto name = std::make_shared<const std::string>(owner);
  for (const auto& ref : refs) {
    entries.push_back(Entry{.owner = name, .ref = ref, .adopt = true});
  }
  addEntriesLocked(owner, std::move(entries));
}

void DriftWatcher::addEntriesLocked(const std::string& owner, std::vector<Entry> entries) {
  // The old entries' watches are released after the new ones are retained, so a re-deploy keeps its watches.
  std::vector<WatchKey> previous = dropEntriesLocked(owner);
  for (auto& entry : entries) {
    std::string id = entry.ref.identity();
    if (auto it = entries_.find(id); it != entries_.end()) {
      // Another bundle had it registered (a handover): the object is this bundle's now.
      std::erase(bundles_[*it->second.owner].ids, &it->first);
      releaseWatchLocked(keyOf(it->second.ref));
    }
    retainWatchLocked(keyOf(entry.ref), !entry.known);
    auto placed = entries_.insert_or_assign(std::move(id), std::move(entry)).first;
    bundles_[owner].ids.push_back(&placed->first);
  }
  for (const auto& key : previous) {
    releaseWatchLocked(key);
  }
  markDirtyLocked(owner);
}

void DriftWatcher::unregisterBundle(const std::string& owner) {
  std::lock_guard lock(mutex_);
  for (const auto& key : dropEntriesLocked(owner)) {
    releaseWatchLocked(key);
  }
  bundles_.erase(owner);
  dirty_.erase(owner);
  deferred_.erase(owner);
}

std::vector<DriftWatcher::WatchKey> DriftWatcher::dropEntriesLocked(const std::string& owner) {
  std::vector<WatchKey> keys;
  auto bundle = bundles_.find(owner);
  if (bundle == bundles_.end()) {
    return keys;
  }
  for (const std::string* id : bundle->second.ids) {
    auto it = entries_.find(*id);
    if (it != entries_.end() && *it->second.owner == owner) {
      keys.push_back(keyOf(it->second.ref));
      entries_.erase(it);
    }
  }
  bundle->second.ids.clear();
  return keys;
}

bool DriftWatcher::registered(const std::string& owner) const {
  std::lock_guard lock(mutex_);
  auto it = bundles_.find(owner);
  return it != bundles_.end() && !it->second.ids.empty();
}

uint64_t DriftWatcher::ownedVersion(const ObjectRef& ref, const std::string& owner) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(ref.identity());
  if (it == entries_.end() || *it->second.owner != owner || it->second.ref.api_version != ref.api_version) {
    return 0;
  }
  return it->second.owned_version;
}

size_t DriftWatcher::watchCount() const {
  std::lock_guard lock(mutex_);
  return watches_.size();
}

void DriftWatcher::retainWatchLocked(const WatchKey& key, bool relist) {
  WatchLoop& loop = watches_[key];
  if (loop.users++ > 0 || stopping_) {
    if (relist) {
      *loop.flags.relist = true;
    }
    return;
  }
  metrics_.gauge("watches", "Watches the agent runs (one per apiVersion and kind; per namespace for Secrets)")
      .Set(static_cast<double>(watches_.size()));
  loop.thread = std::thread([this, key, flags = loop.flags] {
    runWatch(key, flags);
    *flags.done = true;
  });
}

void DriftWatcher::releaseWatchLocked(const WatchKey& key) {
  auto it = watches_.find(key);
  if (it == watches_.end() || --it->second.users > 0) {
    return;
  }
  *it->second.flags.stop = true;
  if (it->second.thread.joinable()) {
    // Joined by the worker once it returned: a deploy never waits for a watch to end.
    retired_.push_back(RetiredWatch{.thread = std::move(it->second.thread), .done = it->second.flags.done});
  }
  watches_.erase(it);
  metrics_.gauge("watches", "Watches the agent runs (one per apiVersion and kind; per namespace for Secrets)")
      .Set(static_cast<double>(watches_.size()));
  wake_.notify_all();
}

// ---- watch threads --------------------------------------------------------------------------------------------

void DriftWatcher::runWatch(const WatchKey& key, const WatchFlags& loop) {
  std::chrono::milliseconds delay = options_.retry_min;
  while (!*loop.stop && !stopping_) {
    if (watchFromList(key, loop)) {
      delay = options_.retry_min;  // it ran until a 410 Gone or a relist request: re-list at once
      continue;
    }
    if (!pause(delay, loop.stop)) {
      return;
    }
    delay = std::min(delay * 2, options_.retry_max);
  }
}

bool DriftWatcher::pause(std::chrono::milliseconds duration, const std::shared_ptr<std::atomic<bool>>& stop) {
  std::unique_lock lock(mutex_);
  wake_.wait_for(lock, duration, [&] { return stop->load() || stopping_.load(); });
  return !*stop && !stopping_;
}

//! One list + watch cycle. True when it ended for a 410 Gone, a relist request or a stop (re-list at once), false
//! after an error.
bool DriftWatcher::watchFromList(const WatchKey& key, const WatchFlags& loop) {
  const auto& stop = loop.stop;
  *loop.relist = false;  // this list covers every object registered so far
  const std::string what = key.kind + (key.ns.empty() ? "" : " in " + key.ns);
  auto count_error = [&](std::string_view step, const Error& error) {
    metrics_
        .counter("watch_errors_total", "Watch list or read failures (re-listed after a backoff)",
                 {{"step", std::string(step)}})
        .Increment();
    log::warn(
        "watch failed, re-listing after a pause",
        {{"cluster", options_.cluster}, {"watch", what}, {"step", std::string(step)}, {"error", error.describe()}});
  };
  std::string list_version;
  {
    // The list (every object of the kind, managed or not) is freed before the watch runs: it may run for hours.
    auto listed = client_.list(key.api_version, key.kind, key.ns);
    if (!listed.ok()) {
      count_error("list", listed.error());
      return false;
    }
    metrics_.counter("watch_lists_total", "Lists that (re)started a watch").Increment();
    applySnapshot(key, listed->items, listed->resource_version);
    list_version = std::move(listed->resource_version);
  }
  auto watch = client_.watch(key.api_version, key.kind, key.ns, {.resource_version = list_version});
  if (!watch.ok()) {
    count_error("watch", watch.error());
    return false;
  }
  while (!*stop && !stopping_ && !*loop.relist) {
    auto event = (*watch)->next(options_.poll);
    if (!event.ok()) {
      if (kube::isGone(event.error())) {
        metrics_.counter("watch_relists_total", "Watches re-listed because their resourceVersion expired (410)")
            .Increment();
        log::info("watch expired (410 Gone), re-listing", {{"cluster", options_.cluster}, {"watch", what}});
        return true;
      }
      count_error("read", event.error());
      return false;
    }
    if (event->has_value() && (*event)->type != kube::WatchEventType::kBookmark) {
      applyEvent(**event);
    }
  }
  return true;
}

void DriftWatcher::applySnapshot(const WatchKey& key, const std::vector<Json>& items, const std::string& list_version) {
  const uint64_t listed_at = versionNumber(list_version);
  std::lock_guard lock(mutex_);
  std::set<std::string> listed;
  for (const auto& item : items) {
    auto ref = objectRefOf(item);
    if (!ref.ok()) {
      continue;
    }
    auto it = entries_.find(ref->identity());
    if (it == entries_.end()) {
      continue;  // not managed: dropped at once
    }
    listed.insert(it->first);
    if (updateEntryLocked(it->second, &item)) {
      markDirtyLocked(*it->second.owner);
    }
  }
  for (auto& [id, entry] : entries_) {
    // An object applied after the list was taken is not missing: the watch brings it.
    const bool newer = listed_at != 0 && entry.min_version > listed_at;
    if (keyOf(entry.ref) == key && !listed.contains(id) && !newer && updateEntryLocked(entry, nullptr)) {
      markDirtyLocked(*entry.owner);
    }
  }
}

void DriftWatcher::applyEvent(const kube::WatchEvent& event) {
  auto ref = objectRefOf(event.object);
  if (!ref.ok()) {
    return;
  }
  std::lock_guard lock(mutex_);
  auto it = entries_.find(ref->identity());
  if (it == entries_.end()) {
    return;  // not managed
  }
  metrics_.counter("watch_events_total", "Watch events of managed objects").Increment();
  const bool deleted = event.type == kube::WatchEventType::kDeleted;
  if (updateEntryLocked(it->second, deleted ? nullptr : &event.object)) {
    markDirtyLocked(*it->second.owner);
  }
}

bool DriftWatcher::updateEntryLocked(Entry& entry, const Json* live) {
  if (live != nullptr && resourceVersionOf(*live) < entry.min_version) {
    return false;  // an event from before the agent's apply, delivered late: the apply's answer is newer
  }
  const ObjectDrift previous_drift = entry.drift;
  const Health previous_health = entry.health;
  const bool was_known = entry.known;
  entry.known = true;
  if (live == nullptr) {
    entry.owned_version = 0;
    entry.drift = ObjectDrift{.missing = true};
    entry.health = Health{.ready = false, .message = "missing"};
  } else {
    entry.min_version = resourceVersionOf(*live);
    entry.owned_version = ownerAnnotation(*live) == *entry.owner ? entry.min_version : 0;
    if (entry.adopt) {
      entry.applied = appliedFieldValues(*live);
      entry.adopt = false;
    }
    auto settings = bundles_.find(*entry.owner);
    const DriftSettings none;
    const DriftSettings& drift_settings = settings != bundles_.end() ? settings->second.settings : none;
    entry.drift = computeDrift(entry.applied, *live, ignoredPointers(drift_settings.diff, entry.ref));
    entry.health = evaluateHealth(*live, drift_settings.ignore_conditions);
  }
  if (entry.drift.drifted() && (entry.drift != previous_drift || live != nullptr)) {
    // A write to a drifted object: the other writer is not quiet.
    entry.correctingState().last_write = SteadyClock::now();
  }
  if (!entry.drift.drifted() && entry.correcting) {
    entry.correcting->fights_in_a_row = 0;
    resetRetry(entry);
    forgetCleanLocked(entry);
  }
  return !was_known || entry.drift != previous_drift || entry.health.ready != previous_health.ready ||
         entry.health.message != previous_health.message;
}

void DriftWatcher::resetRetry(Entry& entry) {
  if (!entry.correcting) {
    return;
  }
  entry.correcting->correction_error.clear();
  entry.correcting->failed_corrections = 0;
  entry.correcting->retry_delay = std::chrono::milliseconds(0);
}

void DriftWatcher::pruneOldCorrections(Correcting& state) const {
  const auto now = SteadyClock::now();
  std::erase_if(state.corrections,
                [&](const FieldCorrection& correction) { return now - correction.at > options_.fight_window; });
}

void DriftWatcher::forgetCleanLocked(Entry& entry) const {
  if (!entry.correcting || entry.drift.drifted() || entry.correcting->fight) {
    return;
  }
  // Corrections inside the fight window still count towards a fight (the object is clean between two of them).
  pruneOldCorrections(*entry.correcting);
  if (entry.correcting->corrections.empty()) {
    entry.correcting.reset();
  }
}

void DriftWatcher::markDirtyLocked(const std::string& owner) {
  dirty_.insert(owner);
  wake_.notify_all();
}

}  // namespace flotilla::agent
