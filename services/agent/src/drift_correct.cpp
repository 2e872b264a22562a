// The watch cache's worker (watcher.h): corrections (correctDrift), fight detection, Kubernetes Events, and the
// bundle state the watch sees.
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
    std::vector<RetiredWatch> finished;
    ChangeCallback on_change;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, tick, [&] { return stopping_.load() || !dirty_.empty(); });
      if (stopping_) {
        return;
      }
      resumeQuietFightsLocked();
      owners.swap(dirty_);
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
        if (on_change) {
          on_change(owner);
        }
      } catch (const std::exception& e) {
        metrics_.counter("handler_exceptions_total", "Exceptions caught around the deploy handler").Increment();
        log::error("drift worker threw",
                   {{"cluster", options_.cluster}, {"bundle", owner}, {"error", std::string(e.what())}});
      }
    }
  }
}

void DriftWatcher::resumeQuietFightsLocked() {
  const auto now = SteadyClock::now();
  for (auto& [id, entry] : entries_) {
    if (entry.fight && now - entry.last_write >= entry.fight->quiet) {
      log::info("the other writer stayed quiet: correcting drift again", {{"cluster", options_.cluster},
                                                                          {"bundle", entry.owner},
                                                                          {"object", entry.ref.describe()},
                                                                          {"manager", entry.fight->manager}});
      entry.fight.reset();
      entry.corrections.clear();
      markDirtyLocked(entry.owner);
    }
  }
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
    auto applied = client_.apply(correction.desired, apply);
    Status result = okStatus();
    if (!applied.ok()) {
      result = fail(applied.error());
    }
    recordCorrection(correction, result, settings);
  }
}

std::vector<DriftWatcher::Correction> DriftWatcher::dueCorrectionsLocked(const std::string& owner, Notes& fight_notes) {
  std::vector<Correction> due;
  const auto now = SteadyClock::now();
  for (const auto& id : bundles_[owner].ids) {
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.owner != owner) {
      continue;
    }
    Entry& entry = it->second;
    if (!entry.drift.drifted() || entry.fight || entry.desired.isNull()) {
      continue;
    }
    while (!entry.corrections.empty() && now - entry.corrections.front() > options_.fight_window) {
      entry.corrections.pop_front();
    }
    if (entry.corrections.size() >= options_.fight_corrections) {
      startFightLocked(entry, fight_notes);
      continue;
    }
    due.push_back(Correction{.id = id, .ref = entry.ref, .desired = entry.desired});
  }
  return due;
}

void DriftWatcher::startFightLocked(Entry& entry, Notes& fight_notes) {
  const FieldChange* change = entry.drift.changes.empty() ? nullptr : &entry.drift.changes.front();
  auto quiet = options_.fight_window * (1 << std::min(entry.fights_in_a_row, kMaxQuietDoublings));
  entry.fight = Fight{.manager = change != nullptr && !change->manager.empty() ? change->manager : "another writer",
                      .path = change != nullptr ? displayPath(change->path) : std::string("(the whole object)"),
                      .since = SteadyClock::now(),
                      .quiet = quiet};
  ++entry.fights_in_a_row;
  metrics_.counter("drift_fights_total", "Objects whose drift correction was stopped: another writer kept changing it")
      .Increment();
  std::string message = "field manager " + entry.fight->manager + " keeps changing " + entry.fight->path + " of " +
                        entry.ref.describe() + ": corrected " + std::to_string(entry.corrections.size()) +
                        " times within " + secondsText(options_.fight_window) +
                        "; flotilla stops correcting it until that writer stays quiet for " + secondsText(quiet);
  log::warn("drift fight: correction stopped", {{"cluster", options_.cluster},
                                                {"bundle", entry.owner},
                                                {"object", entry.ref.describe()},
                                                {"manager", entry.fight->manager},
                                                {"field", entry.fight->path},
                                                {"quiet_s", static_cast<int64_t>(quiet.count() / 1000)}});
  fight_notes.emplace_back(entry.ref, std::move(message));
}

void DriftWatcher::recordCorrection(const Correction& correction, const Status& result, const DriftSettings& settings) {
  metrics_
      .counter("drift_corrections_total", "Drifted objects re-applied (correctDrift), by result",
               {{"result", result.ok() ? "ok" : "failed"}})
      .Increment();
  std::string message;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(correction.id);
    if (it != entries_.end()) {
      if (result.ok()) {
        it->second.corrections.push_back(SteadyClock::now());
        it->second.correction_error.clear();
      } else {
        it->second.correction_error = truncateMessage(result.error().message);
        message = "correcting drift of " + correction.ref.describe() + " failed: " + it->second.correction_error;
      }
    }
  }
  if (result.ok()) {
    log::info("drift corrected", {{"cluster", options_.cluster}, {"object", correction.ref.describe()}});
    return;
  }
  log::warn(
      "drift correction failed",
      {{"cluster", options_.cluster}, {"object", correction.ref.describe()}, {"error", result.error().describe()}});
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
  for (const auto& id : bundle->second.ids) {
    auto it = entries_.find(id);
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
    if (entry.fight) {
      modified.reason = std::string(kReasonDriftFight);
      std::string fight = "fight with field manager " + entry.fight->manager;
      fight += " over " + entry.fight->path;
      fight += ": not corrected until it stays quiet for " + secondsText(entry.fight->quiet);
      fight += " (" + text + ")";
      text = std::move(fight);
    } else if (!entry.correction_error.empty()) {
      text += "; correction failed: " + entry.correction_error;
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
