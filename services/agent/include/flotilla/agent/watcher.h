// flotilla/agent/watcher.h
//
// The agent's shared watch cache (docs/pipeline.md stage 5, "Drift"). One resumable watch per (apiVersion, kind)
// across all namespaces (per namespace for Secrets, and for every kind with --namespaces: see keyOf) that the
// registered bundles hold, shared by every bundle, started when the first object of that key is registered and stopped
// when the last one goes. Each watch lists first (the snapshot: an object that is not in it is missing), then watches
// from the list's resourceVersion; a 410 Gone or any error re-lists (after a backoff for errors), so nothing that
// happened in between is lost. Events of objects no bundle registered are dropped at once: per managed object the cache
// keeps only the field set the agent's apply left to manager `flotilla`, the last drift and health summaries, the
// resourceVersion at which it last carried its bundle's annotation (the applier skips the read before a re-apply with
// it), and — only for bundles with correctDrift.enabled — the object as the agent sent it, never whole live objects.
//
// Every change of an object's drift or health marks its bundle; a worker thread then corrects the drift
// (correctDrift: server-side apply of the object as sent, force per correctDrift.force, as the bundle's
// serviceAccount when it has one; a deleted object is re-created) and calls the on_change callback (the
// DeployHandler re-reports the bundle when its state changed). A failed correction (a conflict without force, a verb
// the service account lacks) is retried with a capped exponential backoff (correction_retry_min doubling to
// correction_retry_max), reset by a success, by the object becoming clean and by a new deploy. When the callback
// says the bundle is busy (its deploy holds the bundle's lock: a long CRD wait), the bundle is tried again after
// kDeferredReportDelay, so one slow bundle never holds up the reports and corrections of the others.
//
// Fight detection, per field: when the agent has corrected the same field of an object `fight_corrections` times
// within `fight_window` and it has drifted again, another writer is fighting it. The agent stops correcting that
// object, reports Modified/DriftFight naming the writer and the field, writes a core/v1 Event (reason DriftFight)
// on the object and counts drift_fights_total. Two fields changed by two writers are two counts, not one fight. It
// resumes once no write to the object has been seen for the quiet period: the window, doubled for each fight in a
// row on the object (capped at 16 windows), reset when the object is clean.
//
// Thread-safe. A correction never races a deploy of its bundle: beginApply() waits for a correction in flight and
// stops new ones until registerBundle() brings the new desired state.
#pragma once

#include <atomic>
#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "flotilla/agent/drift.h"
#include "flotilla/agent/health.h"
#include "flotilla/agent/report.h"
#include "flotilla/core/metrics.h"
#include "flotilla/kube/client.h"
#include "flotilla/model/options.h"

namespace flotilla::agent {

// Reasons of the Modified state.
inline constexpr std::string_view kReasonDrifted = "Drifted";
inline constexpr std::string_view kReasonDriftFight = "DriftFight";

//! Defaults of --fight-corrections and --fight-window.
inline constexpr size_t kDefaultFightCorrections = 3;
inline constexpr std::chrono::milliseconds kDefaultFightWindow{60000};
//! The backoff of a failed correction's retries: the first pause, doubled per failure up to the cap.
inline constexpr std::chrono::milliseconds kDefaultCorrectionRetryMin{1000};
inline constexpr std::chrono::milliseconds kDefaultCorrectionRetryMax{300000};
//! How soon a bundle whose deploy held its lock is reported (and corrected) again.
inline constexpr std::chrono::milliseconds kDeferredReportDelay{250};

//! What a bundle's options say about drift (correctDrift, diff.comparePatches, ignore.conditions).
struct DriftSettings {
  bool correct = false;            //!< correctDrift.enabled
  bool force = false;              //!< correctDrift.force
  bool keep_fail_history = false;  //!< correctDrift.keepFailHistory: a Kubernetes Event per failed correction
  //! serviceAccount: the user corrections are made as (serviceAccountUser), so its RBAC bounds them as it bounds
  //! the deploy; "" = the agent itself.
  std::string service_account_user;
  model::DiffOptions diff;
  std::vector<model::Labels> ignore_conditions;
};
//! The drift settings of a bundle's options; `agent_namespace` is where its serviceAccount lives.
DriftSettings driftSettings(const model::BundleDeploymentOptions& options, std::string_view agent_namespace);
//! "system:serviceaccount:<agent_namespace>:<service_account>": the user a bundle with serviceAccount acts as.
std::string serviceAccountUser(std::string_view agent_namespace, std::string_view service_account);
//! The options the watch needs after a restart (defaultNamespace, namespace, correctDrift, diff, ignore, and
//! serviceAccount: whom corrections act as), kept in the inventory; never helm values, which may hold secrets.
Json watchOptionsOf(const Json& options);
//! kInvalid naming the field when diff.comparePatches asks for something the agent does not do: an operation other
//! than remove/ignore, a value, or a path that is not a JSON pointer.
Status checkDriftOptions(const model::BundleDeploymentOptions& options);

//! One object of a bundle as the agent applied it.
struct WatchedObject {
  ObjectRef ref;
  Json live;     //!< as the apply returned it: the applied field set and the first health
  Json desired;  //!< as it was sent; kept only when the bundle corrects drift (else null)
  //! `live` gives only the field set; the current state comes from a fresh list: a dry-run answer after a
  //! restart, or a CRD whose Established condition came after the apply's answer.
  bool relist = false;
};

struct WatcherOptions {
  size_t fight_corrections = kDefaultFightCorrections;  //!< K: corrections within the window that make a fight
  std::chrono::milliseconds fight_window = kDefaultFightWindow;
  std::chrono::milliseconds correction_retry_min = kDefaultCorrectionRetryMin;  //!< backoff of failed corrections
  std::chrono::milliseconds correction_retry_max = kDefaultCorrectionRetryMax;
  std::chrono::milliseconds retry_min{500};  //!< first pause before re-listing after a watch error
  std::chrono::milliseconds retry_max{30000};
  std::chrono::milliseconds poll{1000};  //!< how long one read of a watch waits (bounds how fast stop() is)
  std::string cluster;                   //!< for logs and the Events' reportingInstance
  //! --namespaces (scope.h): every kind is listed and watched per namespace, as Roles in those namespaces allow.
  bool per_namespace = false;
};

class DriftWatcher {
 public:
  //! Called on the worker thread with "<workspace>/<bundle>" after its objects' drift or health changed. Returns
  //! false when the bundle is busy (a deploy of it holds its lock): the worker calls again after
  //! kDeferredReportDelay instead of waiting, so other bundles go on meanwhile.
  using ChangeCallback = std::function<bool(const std::string& owner)>;

  DriftWatcher(kube::KubeClient& client, Metrics& metrics, WatcherOptions options);
  ~DriftWatcher();
  DriftWatcher(const DriftWatcher&) = delete;
  DriftWatcher& operator=(const DriftWatcher&) = delete;

  //! Where changes go (set before start()).
  void setOnChange(ChangeCallback on_change);
  //! Starts the worker thread (watches start as bundles are registered).
  void start();
  //! Stops the worker and every watch, and waits for them. Idempotent.
  void stop();

  //! A deploy of `owner` is about to apply: waits for a correction of it in flight, stops new ones.
  void beginApply(const std::string& owner);
  //! The bundle's objects as just applied (replacing what it had registered) and its drift settings.
  void registerBundle(const std::string& owner, const DriftSettings& settings, std::vector<WatchedObject> objects);
  //! Watches `refs` of a bundle applied before this process started: the applied field set is taken from the
  //! first live state seen (so only a deleted object shows drift made while the agent was down), and nothing is
  //! corrected until the next registerBundle.
  void adoptBundle(const std::string& owner, const DriftSettings& settings, const std::vector<ObjectRef>& refs);
  //! Forgets the bundle (deleted, or its deploy failed as a whole); watches nobody needs any more stop.
  void unregisterBundle(const std::string& owner);
  [[nodiscard]] bool registered(const std::string& owner) const;
  //! The resourceVersion at which the watch last saw `ref` carrying `owner`'s annotation, when that is the newest
  //! state it has seen of an object `owner` registered; 0 otherwise (ApplierOptions::owned_version).
  [[nodiscard]] uint64_t ownedVersion(const ObjectRef& ref, const std::string& owner) const;

  //! The bundle's state from the watch: Modified (Drifted or DriftFight) when an object drifted, else NotReady or
  //! Ready from the objects' health. nullopt when the bundle is not registered or an object was not seen yet.
  [[nodiscard]] std::optional<BundleReport> bundleReport(const std::string& owner) const;
  //! How many watches run (one per apiVersion and kind; per namespace for Secrets).
  [[nodiscard]] size_t watchCount() const;

 private:
  struct WatchKey {
    std::string api_version;
    std::string kind;
    std::string ns;
    auto operator<=>(const WatchKey&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy misreads it
  };
  struct Fight {
    std::string manager;
    std::string path;
    std::chrono::steady_clock::time_point since;
    std::chrono::milliseconds quiet{0};  //!< how long the writer must stay quiet before correcting resumes
  };
  //! One successful correction of one field ("" = the whole object, re-created), for fight detection.
  struct FieldCorrection {
    FieldPath path;
    std::chrono::steady_clock::time_point at;
  };
  //! What only an object that drifted needs (fight detection, correction retries): allocated on its first drift and
  //! freed once it is clean with no recent correction, so the thousands of objects that never drift stay small.
  struct Correcting {
    std::chrono::steady_clock::time_point last_write{};  //!< the last event that changed a drifted object
    std::vector<FieldCorrection> corrections;  //!< within the fight window (pruned when the entry is corrected)
    std::optional<Fight> fight;
    size_t fights_in_a_row = 0;
    std::string correction_error;
    uint32_t failed_corrections = 0;  //!< failed corrections in a row: > 0 means retrying with backoff
    std::chrono::milliseconds retry_delay{0};
    std::chrono::steady_clock::time_point retry_at{};  //!< the next retry is not made before
  };
  //! One managed object. The watch cache holds one per object every bundle applied, so it is kept small: the owner's
  //! name is shared by the bundle's entries, the object as sent is allocated only for bundles that correct drift.
  struct Entry {
    std::shared_ptr<const std::string> owner;  //!< "<workspace>/<bundle>", one string per registration
    ObjectRef ref;
    FieldValues applied;
    bool adopt = false;                   //!< take `applied` from the first live state
    bool known = false;                   //!< a live state (or its absence) has been seen
    std::unique_ptr<const Json> desired;  //!< null unless the bundle corrects drift
    //! The newest resourceVersion seen (etcd revisions are numbers): a late event of an older one is skipped.
    uint64_t min_version = 0;
    //! min_version when that state carried the owner's annotation, else 0.
    uint64_t owned_version = 0;
    ObjectDrift drift;
    Health health;
    std::unique_ptr<Correcting> correcting;  //!< null while the object has no drift history
    [[nodiscard]] bool fighting() const { return correcting && correcting->fight; }
    [[nodiscard]] bool retrying() const { return correcting && correcting->failed_corrections > 0; }
    Correcting& correctingState() {
      if (!correcting) {
        correcting = std::make_unique<Correcting>();
      }
      return *correcting;
    }
  };
  struct BundleEntry {
    DriftSettings settings;
    std::vector<const std::string*> ids;  //!< its entries' keys in entries_ (stable while the entry exists)
    uint64_t epoch = 0;                   //!< bumped by beginApply
    uint64_t registered = 0;              //!< the epoch registerBundle saw: corrections run only while equal
    std::shared_ptr<std::mutex> apply_mutex = std::make_shared<std::mutex>();
  };
  //! What a watch thread and its owner share.
  struct WatchFlags {
    std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);  //!< its thread returned
    //! Set when an object whose live state is not known yet joins a running watch: it lists again.
    std::shared_ptr<std::atomic<bool>> relist = std::make_shared<std::atomic<bool>>(false);
  };
  struct WatchLoop {
    WatchFlags flags;
    std::thread thread;
    size_t users = 0;
  };
  //! A watch thread told to stop, joined by the worker once it has returned (or by stop()).
  struct RetiredWatch {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  //! A correction to make, copied out of the cache.
  struct Correction {
    std::string id;
    ObjectRef ref;
    Json desired;
    std::vector<FieldPath> fields;  //!< the drifted fields it corrects ("" = the object was missing)
  };

  [[nodiscard]] WatchKey keyOf(const ObjectRef& ref) const;
  void addEntriesLocked(const std::string& owner, std::vector<Entry> entries);
  //! Removes the bundle's entries; returns their watch keys (the caller releases them).
  std::vector<WatchKey> dropEntriesLocked(const std::string& owner);
  //! Counts one more object on the key's watch (started when new; `relist`: the object needs a fresh list).
  void retainWatchLocked(const WatchKey& key, bool relist);
  void releaseWatchLocked(const WatchKey& key);

  // The watch threads (watcher.cpp).
  void runWatch(const WatchKey& key, const WatchFlags& flags);
  bool watchFromList(const WatchKey& key, const WatchFlags& flags);
  bool pause(std::chrono::milliseconds duration, const std::shared_ptr<std::atomic<bool>>& stop);
  void applySnapshot(const WatchKey& key, const std::vector<Json>& items, const std::string& list_version);
  void applyEvent(const kube::WatchEvent& event);
  //! Updates an entry from a live object (nullptr: deleted); true when its drift or health changed.
  bool updateEntryLocked(Entry& entry, const Json* live);
  void markDirtyLocked(const std::string& owner);
  //! Forgets the entry's failed corrections (a success, or the object is clean): no retry pending.
  static void resetRetry(Entry& entry);
  //! Drops the corrections older than the fight window.
  void pruneOldCorrections(Correcting& state) const;
  //! Frees the entry's drift history once it is clean, not fighting, and its corrections are outside the window.
  void forgetCleanLocked(Entry& entry) const;

  // The worker (drift_correct.cpp).
  void workerLoop();
  //! The bundles to handle now: the dirty ones and the deferred ones that are due (moved to `deferred_due`).
  std::set<std::string> takeWorkLocked(std::set<std::string>& deferred_due);
  //! When the worker must look again at the latest: a tick from now, or the first deferred bundle.
  std::chrono::steady_clock::time_point nextWakeLocked(std::chrono::milliseconds tick) const;
  //! Marks the bundles of fights whose writer stayed quiet and of corrections whose retry is due.
  void wakeDueEntriesLocked();
  //! The bundle was busy: handled again after kDeferredReportDelay (`again`: already deferred, not counted).
  void deferBundle(const std::string& owner, bool again);
  void correctBundle(const std::string& owner);
  //! The client corrections are made with: the agent's own, or one impersonating `user` (made once).
  kube::KubeClient& correctionClient(const std::string& user);
  //! Objects to write an Event on, with its message.
  using Notes = std::vector<std::pair<ObjectRef, std::string>>;
  std::vector<Correction> dueCorrectionsLocked(const std::string& owner, Notes& fight_notes);
  //! Of `fields` (the entry's drifted ones), the first corrected fight_corrections times within the window
  //! (nullopt: none); forgets corrections older than the window.
  std::optional<FieldPath> foughtFieldLocked(Entry& entry, const std::vector<FieldPath>& fields);
  void startFightLocked(Entry& entry, const FieldPath& field, Notes& fight_notes);
  //! Takes the result of a correction's apply (the corrected object, or why it failed) into the entry.
  void recordCorrection(const Correction& correction, const Result<Json>& result, const DriftSettings& settings);
  void writeEvent(const ObjectRef& ref, std::string_view reason, const std::string& message);

  kube::KubeClient& client_;
  Metrics& metrics_;
  WatcherOptions options_;
  ChangeCallback on_change_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::string, Entry> entries_;  //!< by ObjectRef::identity
  std::map<std::string, BundleEntry> bundles_;
  std::map<WatchKey, WatchLoop> watches_;
  std::vector<RetiredWatch> retired_;
  std::set<std::string> dirty_;
  //! Bundles whose report found them busy, with when to try again.
  std::map<std::string, std::chrono::steady_clock::time_point> deferred_;
  //! Impersonating clients for corrections, by user (serviceAccount), made once.
  std::map<std::string, std::unique_ptr<kube::KubeClient>> correction_clients_;
  std::atomic<bool> stopping_{false};
  std::thread worker_;
  bool started_ = false;
};

}  // namespace flotilla::agent
