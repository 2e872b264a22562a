// The watch cache's worker (watcher.h): corrections (correctDrift, as the bundle's serviceAccount, failed ones
// retried with backoff), per-field fight detection, busy bundles deferred, Kubernetes Events, and the bundle state
// the watch sees.
#include <algorithm>

#include "flotilla/agent/applier.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::agent {

using SteadyClock = std::chrono::steady_clock;

namespace {

//! The longest quiet period a repeated fight waits for: 16 windows.
constexpr size_t kMaxQuietDoublings = 4;

std::string secondsText(std::chrono::milliseconds duration) {
  return std::to_string((duration.count() + 999) / 1000) + "s";
}

}  // namespace

void DriftWatcher::workerLoop() {
  const auto tick = std::min<std::chrono::milliseconds>(options_.poll, std::chrono::milliseconds(1000));
  while (!stopping_) {
    std::set<std::string> owners;
    std::set<std::string> deferred_due;
    std::vector<RetiredWatch> finished;
    ChangeCallback on_change;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_until(lock, nextWakeLocked(tick), [&] { return stopping_.load() || !dirty_.empty(); });
      if (stopping_) {
        return;
      }
      wakeDueEntriesLocked();
      owners = takeWorkLocked(deferred_due);
      auto done = std::partition(retired_.begin(), retired_.end(), [](const RetiredWatch& r) { return !*r.done; });
      std::move(done, retired_.end(), std::back_inserter(finished));
      retired_.erase(done, retired_.end());
      on_change = on_change_;
    }
    for (auto& retired : finished) {
      retired.thread.join();  // already returned: joining does not wait
    }
    for (const auto& owner : owners) {
      try {
        correctBundle(owner);
        if (on_change && !on_change(owner)) {
          deferBundle(owner, deferred_due.contains(owner));
        }
      } catch (const std::exception& e) {
        metrics_.counter("handler_exceptions_total", "Exceptions caught around the deploy handler").Increment();
        log::error("drift worker threw",
                   {{"cluster", options_.cluster}, {"bundle", owner}, {"error", std::string(e.what())}});
      }
    }
  }
}

std::set<std::string> DriftWatcher::takeWorkLocked(std::set<std::string>& deferred_due) {
  std::set<std::string> owners;
  owners.swap(dirty_);
  const auto now = SteadyClock::now();
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    owners.insert(it->first);
    deferred_due.insert(it->first);
    it = deferred_.erase(it);
  }
  return owners;
}

SteadyClock::time_point DriftWatcher::nextWakeLocked(std::chrono::milliseconds tick) const {
  auto wake = SteadyClock::now() + tick;
  for (const auto& [owner, due] : deferred_) {
    wake = std::min(wake, due);
  }
  return wake;
}

void DriftWatcher::deferBundle(const std::string& owner, bool again) {
  std::lock_guard lock(mutex_);
  if (!bundles_.contains(owner)) {
    return;  // unregistered meanwhile
  }
  auto [it, first] = deferred_.insert_or_assign(owner, SteadyClock::now() + kDeferredReportDelay);
  if (again || !first) {
    return;  // the same busy spell: counted and logged once
  }
  metrics_.counter("watch_reports_deferred_total", "Watch reports deferred because a deploy of the bundle was running")
      .Increment();
  // Debug, not info: it happens once for almost every deploy (the deploy registers its objects while it holds the
  // bundle's lock); the counter above shows how often.
  log::debug("a deploy of the bundle is running: its watch report is deferred, other bundles go on",
             {{"cluster", options_.cluster},
              {"bundle", owner},
              {"retry_in_ms", static_cast<int64_t>(kDeferredReportDelay.count())}});
}

void DriftWatcher::wakeDueEntriesLocked() {
  const auto now = SteadyClock::now();
  for (auto& [id, entry] : entries_) {
    if (!entry.correcting) {
      continue;  // never drifted, or clean for longer than the fight window
    }
    Correcting& state = *entry.correcting;
    if (state.fight && now - state.last_write >= state.fight->quiet) {
      log::info("the other writer stayed quiet: correcting drift again", {{"cluster", options_.cluster},
                                                                          {"bundle", *entry.owner},
                                                                          {"object", entry.ref.describe()},
                                                                          {"manager", state.fight->manager}});
      state.fight.reset();
      state.corrections.clear();
      markDirtyLocked(*entry.owner);
    }
    if (state.failed_corrections > 0 && state.retry_at <= now && entry.drift.drifted()) {
      markDirtyLocked(*entry.owner);  // a failed correction's retry is due
    }
    forgetCleanLocked(entry);
  }
}

kube::KubeClient& DriftWatcher::correctionClient(const std::string& user) {
  if (user.empty()) {
    return client_;
  }
  std::lock_guard lock(mutex_);
  auto& client = correction_clients_[user];
  if (!client) {
    // Only the user: the API server derives a service account's groups itself (as the deploy's client does).
    client = client_.impersonating(kube::Impersonation{.user = user, .groups = {}});
  }
  return *client;
}

void DriftWatcher::correctBundle(const std::string& owner) {
  Notes fight_notes;
  std::vector<Correction> due;
  std::shared_ptr<std::mutex> apply_mutex;
  DriftSettings settings;
  uint64_t epoch = 0;
  {
    std::lock_guard lock(mutex_);
    auto bundle = bundles_.find(owner);
    if (bundle == bundles_.end() || !bundle->second.settings.correct ||
        bundle->second.registered != bundle->second.epoch) {
      return;  // not correcting, or a deploy of it is applying right now
    }
    due = dueCorrectionsLocked(owner, fight_notes);
    apply_mutex = bundle->second.apply_mutex;
    settings = bundle->second.settings;
    epoch = bundle->second.epoch;
  }
  for (const auto& [ref, message] : fight_notes) {
    writeEvent(ref, kReasonDriftFight, message);
  }
  if (due.empty()) {
    return;
  }
  kube::KubeClient& client = correctionClient(settings.service_account_user);
  std::lock_guard applying(*apply_mutex);
  {
    std::lock_guard lock(mutex_);
    auto bundle = bundles_.find(owner);
    if (bundle == bundles_.end() || bundle->second.epoch != epoch || bundle->second.registered != epoch) {
      return;  // a deploy started meanwhile: it brings the desired state itself
    }
  }
  for (const auto& correction : due) {
    kube::ApplyOptions apply{.field_manager = std::string(kFieldManager), .force = settings.force};
    recordCorrection(correction, client.apply(correction.desired, apply), settings);
  }
}

namespace {

//! The fields a correction of `drift` corrects: its changed paths, or "" (the whole object) when it is missing.
std::vector<FieldPath> driftedFields(const ObjectDrift& drift) {
  if (drift.missing) {
    return {FieldPath()};
  }
  std::vector<FieldPath> fields;
  fields.reserve(drift.changes.size());
  for (const auto& change : drift.changes) {
    fields.push_back(change.path);
  }
  return fields;
}

}  // namespace

std::vector<DriftWatcher::Correction> DriftWatcher::dueCorrectionsLocked(const std::string& owner, Notes& fight_notes) {
  std::vector<Correction> due;
  const auto now = SteadyClock::now();
  for (const std::string* id : bundles_[owner].ids) {
    auto it = entries_.find(*id);
    if (it == entries_.end() || *it->second.owner != owner) {
      continue;
    }
    Entry& entry = it->second;
    if (!entry.drift.drifted() || entry.fighting() || !entry.desired || entry.desired->isNull()) {
      continue;
    }
    if (entry.retrying() && now < entry.correcting->retry_at) {
      continue;  // backing off after a failed correction; the worker comes back when the retry is due
    }
    std::vector<FieldPath> fields = driftedFields(entry.drift);
    if (auto fought = foughtFieldLocked(entry, fields)) {
      startFightLocked(entry, *fought, fight_notes);
      continue;
    }
    if (entry.retrying()) {
      metrics_.counter("drift_correction_retries_total", "Failed drift corrections tried again after a backoff")
          .Increment();
      log::info("retrying a failed drift correction",
                {{"cluster", options_.cluster},
                 {"bundle", owner},
                 {"object", entry.ref.describe()},
                 {"attempt", static_cast<int64_t>(entry.correcting->failed_corrections) + 1},
                 {"last_error", entry.correcting->correction_error}});
    }
    due.push_back(Correction{.id = *id, .ref = entry.ref, .desired = *entry.desired, .fields = std::move(fields)});
  }
  return due;
}

std::optional<FieldPath> DriftWatcher::foughtFieldLocked(Entry& entry, const std::vector<FieldPath>& fields) {
  if (!entry.correcting) {
    return std::nullopt;  // never corrected
  }
  pruneOldCorrections(*entry.correcting);
  const auto& corrections = entry.correcting->corrections;
  for (const auto& field : fields) {
    const auto times = std::count_if(corrections.begin(), corrections.end(),
                                     [&](const FieldCorrection& correction) { return correction.path == field; });
    if (static_cast<size_t>(times) >= options_.fight_corrections) {
      return field;
    }
  }
  return std::nullopt;
}

void DriftWatcher::startFightLocked(Entry& entry, const FieldPath& field, Notes& fight_notes) {
  const auto change = std::find_if(entry.drift.changes.begin(), entry.drift.changes.end(),
                                   [&](const FieldChange& c) { return c.path == field; });
  const bool named = change != entry.drift.changes.end() && !change->manager.empty();
  Correcting& state = entry.correctingState();
  const auto corrected = std::count_if(state.corrections.begin(), state.corrections.end(),
                                       [&](const FieldCorrection& correction) { return correction.path == field; });
  auto quiet = options_.fight_window * (1 << std::min(state.fights_in_a_row, kMaxQuietDoublings));
  state.fight = Fight{.manager = named ? change->manager : "another writer",
                      .path = field.empty() ? std::string("(the whole object)") : displayPath(field),
                      .since = SteadyClock::now(),
                      .quiet = quiet};
  ++state.fights_in_a_row;
  resetRetry(entry);  // not corrected during the fight: no retry pending either
  metrics_.counter("drift_fights_total", "Objects whose drift correction was stopped: another writer kept changing it")
      .Increment();
  std::string message = "field manager " + state.fight->manager + " keeps changing " + state.fight->path + " of " +
                        entry.ref.describe() + ": corrected " + std::to_string(corrected) + " times within " +
                        secondsText(options_.fight_window) +
                        "; flotilla stops correcting it until that writer stays quiet for " + secondsText(quiet);
  log::warn("drift fight: correction stopped", {{"cluster", options_.cluster},
                                                {"bundle", *entry.owner},
                                                {"object", entry.ref.describe()},
                                                {"manager", state.fight->manager},
                                                {"field", state.fight->path},
                                                {"quiet_s", static_cast<int64_t>(quiet.count() / 1000)}});
  fight_notes.emplace_back(entry.ref, std::move(message));
}

void DriftWatcher::recordCorrection(const Correction& correction, const Result<Json>& result,
                                    const DriftSettings& settings) {
  metrics_
      .counter("drift_corrections_total", "Drifted objects re-applied (correctDrift), by result",
               {{"result", result.ok() ? "ok" : "failed"}})
      .Increment();
  std::string message;
  std::chrono::milliseconds retry_in{0};
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(correction.id);
    if (it != entries_.end()) {
      Entry& entry = it->second;
      if (result.ok()) {
        const auto now = SteadyClock::now();
        auto& corrections = entry.correctingState().corrections;
        for (const auto& field : correction.fields) {
          corrections.push_back(FieldCorrection{.path = field, .at = now});
        }
        resetRetry(entry);
        // The answer is the corrected object: the entry is clean now, not only once the watch brings the change,
        // so the worker never corrects it twice (nor counts two corrections towards a fight) in between.
        updateEntryLocked(entry, &*result);
      } else {
        Correcting& state = entry.correctingState();
        ++state.failed_corrections;
        state.retry_delay = state.failed_corrections == 1
                                ? options_.correction_retry_min
                                : std::min(state.retry_delay * 2, options_.correction_retry_max);
        state.retry_at = SteadyClock::now() + state.retry_delay;
        retry_in = state.retry_delay;
        state.correction_error = truncateMessage(result.error().message);
        message = "correcting drift of " + correction.ref.describe() + " failed: " + state.correction_error;
      }
    }
  }
  if (result.ok()) {
    log::info("drift corrected", {{"cluster", options_.cluster}, {"object", correction.ref.describe()}});
    return;
  }
  log::warn("drift correction failed, retried after a backoff",
            {{"cluster", options_.cluster},
             {"object", correction.ref.describe()},
             {"retry_in_ms", static_cast<int64_t>(retry_in.count())},
             {"error", result.error().describe()}});
  if (settings.keep_fail_history && !message.empty()) {
    writeEvent(correction.ref, "DriftCorrectionFailed", message);
  }
}

void DriftWatcher::writeEvent(const ObjectRef& ref, std::string_view reason, const std::string& message) {
  const std::string ns = ref.ns.empty() ? "default" : ref.ns;
  const std::string now = log::nowRfc3339();
  Json event = Json::obj(
      {{"apiVersion", "v1"},
       {"kind", "Event"},
       {"metadata", Json::obj({{"name", ref.name + "." + randomHex(8)}, {"namespace", ns}})},
       {"involvedObject",
        Json::obj({{"apiVersion", ref.api_version}, {"kind", ref.kind}, {"name", ref.name}, {"namespace", ref.ns}})},
       {"reason", std::string(reason)},
       {"message", message},
       {"type", "Warning"},
       {"count", 1},
       {"firstTimestamp", now},
       {"lastTimestamp", now},
       {"source", Json::obj({{"component", "flotilla-agent"}})},
       {"reportingComponent", "flotilla-agent"},
       {"reportingInstance", options_.cluster}});
  auto created = client_.request("POST", "/api/v1/namespaces/" + kube::urlEncode(ns) + "/events", event.dump(),
                                 "application/json");
  metrics_
      .counter("kube_events_total", "Kubernetes Events the agent wrote, by reason and result",
               {{"reason", std::string(reason)}, {"result", created.ok() ? "ok" : "failed"}})
      .Increment();
  if (!created.ok()) {
    log::warn("cannot write a Kubernetes Event", {{"cluster", options_.cluster},
                                                  {"object", ref.describe()},
                                                  {"reason", std::string(reason)},
                                                  {"error", created.error().describe()}});
  }
}

// ---- the bundle's state from the watch ------------------------------------------------------------------------

std::optional<BundleReport> DriftWatcher::bundleReport(const std::string& owner) const {
  std::lock_guard lock(mutex_);
  auto bundle = bundles_.find(owner);
  if (bundle == bundles_.end() || bundle->second.ids.empty()) {
    return std::nullopt;
  }
  std::vector<ObjectOutcome> outcomes;
  BundleReport modified{.state = model::BundleState::kModified, .reason = std::string(kReasonDrifted)};
  size_t drifted = 0;
  for (const std::string* id : bundle->second.ids) {
    auto it = entries_.find(*id);
    if (it == entries_.end()) {
      continue;
    }
    const Entry& entry = it->second;
    if (!entry.known) {
      return std::nullopt;  // its list has not come back yet
    }
    outcomes.push_back(ObjectOutcome{.ref = entry.ref, .ready = entry.health.ready, .message = entry.health.message});
    if (!entry.drift.drifted()) {
      continue;
    }
    std::string text = describeDrift(entry.drift);
    if (entry.fighting()) {
      const Fight& fought = *entry.correcting->fight;
      modified.reason = std::string(kReasonDriftFight);
      std::string fight = "fight with field manager " + fought.manager;
      fight += " over " + fought.path;
      fight += ": not corrected until it stays quiet for " + secondsText(fought.quiet);
      fight += " (" + text + ")";
      text = std::move(fight);
    } else if (entry.correcting && !entry.correcting->correction_error.empty()) {
      text += "; correction failed (retried with backoff): " + entry.correcting->correction_error;
    }
    if (drifted < kMaxMessageItems) {
      modified.message += (drifted == 0 ? "" : "; ") + entry.ref.describe() + ": " + text;
    }
    if (modified.resources.size() < kMaxReportedResources) {
      modified.resources.push_back(events::ObjectResult{.api_version = entry.ref.api_version,
                                                        .kind = entry.ref.kind,
                                                        .ns = entry.ref.ns,
                                                        .name = entry.ref.name,
                                                        .state = "Modified",
                                                        .message = truncateMessage(text)});
    }
    ++drifted;
  }
  if (drifted == 0) {
    return summarize(outcomes);
  }
  if (drifted > kMaxMessageItems) {
    modified.message += "; and " + std::to_string(drifted - kMaxMessageItems) + " more";
  }
  return modified;
}

}  // namespace flotilla::agent
