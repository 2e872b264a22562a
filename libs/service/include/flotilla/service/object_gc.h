// flotilla/service/object_gc.h
//
// Garbage collection of the content-addressed object stores (`sources`, written by the poller; `manifests`, written
// by the bundler; docs/pipeline.md "Garbage collection"). Each store's one writer runs one ObjectGc: every
// interval it lists the objects, and purges those that no KV record names (ReferenceSource) and that were neither
// written (object mtime) nor reused by this process (touch()) within the grace period. A pass that cannot read
// every reference deletes nothing.
//
// Reuse and deletion exclude each other: a writer calls touch(name) before it checks whether the object exists, and
// a deletion re-checks the touches under the same lock, so an object is either kept or already gone when the
// writer looks (it then stores it anew) — never deleted after the writer decided to reuse it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "flotilla/bus/object_store.h"
#include "flotilla/core/clock.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/service/background_thread.h"
#include "flotilla/service/hub.h"

namespace flotilla::service {

//! The object names the KV records refer to, read anew for every pass.
using ReferenceSource = std::function<Result<std::set<std::string>>()>;

//! Default of --gc-grace: how long an unreferenced object is kept after its last write or reuse.
inline constexpr std::chrono::milliseconds kDefaultGcGrace = std::chrono::hours(1);
//! Default of --gc-interval: time between passes.
inline constexpr std::chrono::milliseconds kDefaultGcInterval = std::chrono::minutes(10);

struct GcOptions {
  std::chrono::milliseconds grace = kDefaultGcGrace;
  std::chrono::milliseconds interval = kDefaultGcInterval;
  Clock* clock = nullptr;  //!< nullptr = the system clock
};

//! What one pass did.
struct GcPass {
  size_t objects = 0;          //!< objects listed
  size_t deleted = 0;          //!< purged now
  uint64_t deleted_bytes = 0;  //!< their sizes
  size_t referenced = 0;       //!< kept: a KV record names them
  size_t young = 0;            //!< kept: written or reused within the grace period
};

class ObjectGc {
 public:
  //! Counts gc_deleted_objects_total{store}, gc_deleted_bytes_total{store}, gc_runs_total{store,result} in `metrics`.
  ObjectGc(std::shared_ptr<bus::ObjectStore> store, ReferenceSource references, Metrics& metrics, GcOptions options);
  ObjectGc(const ObjectGc&) = delete;
  ObjectGc& operator=(const ObjectGc&) = delete;
  //! Stops the background thread.
  ~ObjectGc();

  //! Runs a pass every interval on a background thread (the first one after one interval).
  void start();
  void stop();
  //! Runs a pass soon instead of at the next interval (a writer found the store full).
  void requestPass();

  //! `name` is in use now: a writer stored it or is about to reuse it (call before checking that it exists).
  void touch(const std::string& name);

  //! One pass now (also what the thread runs). A failure to list or to read references deletes nothing.
  Result<GcPass> runPass();

 private:
  void loop();
  [[nodiscard]] bool touchedWithinGrace(const std::string& name, SystemTime now) const;
  bool purgeIfUnused(const bus::ObjectInfo& object, SystemTime now, GcPass& pass);
  [[nodiscard]] Clock& clock() const;

  std::shared_ptr<bus::ObjectStore> store_;
  ReferenceSource references_;
  Metrics& metrics_;
  GcOptions options_;
  mutable std::mutex touch_mutex_;  //!< touches and deletions (see the file comment)
  std::map<std::string, SystemTime> touched_;
  std::mutex pass_mutex_;    //!< one pass at a time
  BackgroundThread passes_;  //!< the pass every interval; wake() = a pass requested
};

//! The `sources` objects the KV records name: PollStatus.sourceObject (status gitrepo.*), BundleClaim.sourceObject
//! (status bundle-claim.*) and BundleRecord.sourceObject (bundles).
Result<std::set<std::string>> sourceReferences(const Hub& hub);

//! The `manifests` objects the KV records name: BundleRecord manifestID and lastGood's manifestID/variantsObject
//! (bundles), every manifestID in those variants tables, DeploymentRecord manifestID and the manifests of
//! deploymentID/stagedDeploymentID (deployments), RenderStatus manifestID/lastGoodManifestID (status bundle-render.*).
Result<std::set<std::string>> manifestReferences(const Hub& hub);

}  // namespace flotilla::service
