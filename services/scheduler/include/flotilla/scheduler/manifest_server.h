// flotilla/scheduler/manifest_server.h
//
// Manifest delivery (docs/pipeline.md "Manifest delivery"): agents never read the shared object store `manifests`;
// each asks the hub on flotilla.manifest.<cluster> (events/manifest.h), a subject its credentials bind to its
// cluster. The server answers in the scheduler (queue group "scheduler", so replicas share the requests):
//
//   cluster   from the subject, never from the request body
//   allowed   a manifest that a deployment record of that cluster references now (`manifestID` of
//             deployments/<cluster>.<ws>.<bundle>), or referenced just before its latest change (a rollout: the
//             agent may still be applying the previous DeployEvent), or the last one of those the agent reported as
//             applied (status/bd.*, not stale: helm.atomic reverts to it); learnt from watches of the two buckets
//             (ManifestIndex), so every replica knows every cluster. A restarted server knows the current and the
//             last applied manifests only (the previous one is not in the records).
//   reply     one chunk of the stored object, at most the NATS server's max_payload minus kChunkHeadroom, with the
//             object's size and digest; the agent asks offset after offset and checks size and digest, so any size
//             works with the one stored copy
//   early     a request naming a generation newer than the index holds for its deployment (the scheduler publishes
//             a DeployEvent before it writes the record, and the watch brings the record a moment later) waits for
//             the record, up to kEarlyWait, instead of being refused: the agent's first ask usually gets its answer
//   refusals  NotDeployed (also for a manifest that exists for another cluster: no existence oracle), Superseded
//             (not allowed, and the request's bundle record of that cluster has a newer generation), NotFound,
//             BadRequest, Unavailable (records not loaded yet, store unreadable); each logged and counted
//             (manifest_requests_total{result})
//
// Objects up to `cache_bytes` are read once and kept (least recently used first out) while their chunks are asked
// for; a larger object is streamed from the store for each chunk, stopping after the chunk.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/service/component.h"

namespace flotilla::scheduler {

//! How long a request ahead of the index waits for its deployment record before it is refused.
inline constexpr std::chrono::milliseconds kEarlyWait{2000};
//! At most this many early requests wait at once; more are answered at once (refused unless allowed).
inline constexpr size_t kMaxEarly = 20000;
//! Bytes of a reply kept free for its headers below the server's max_payload.
inline constexpr int64_t kChunkHeadroom = 4096;
//! The queue group of the manifest subjects (shared by the scheduler's replicas).
inline constexpr std::string_view kManifestQueue = "scheduler";

//! Which manifests each cluster may read, per deployments key: the current manifest of the record, the one before
//! its latest change (a rollout), and the last one the agent reported as applied (helm.atomic reverts to it). Not
//! thread-safe (ManifestServer locks it).
class ManifestIndex {
 public:
  //! How many of a record's latest manifests a report may name.
  static constexpr size_t kRecentManifests = 8;

  //! The record of `cluster` under `key` now references `manifest_id` ("" = none, e.g. paused from the start) at
  //! `generation` (the DeployEvent generation the record holds).
  void put(const std::string& key, const std::string& cluster, const std::string& manifest_id, int64_t generation = 0);
  //! The agent reported `manifest_id` under `key` as applied (a bd status that is not stale); kept only when the
  //! record referenced it lately (one of its last kRecentManifests), so it is always one the hub itself sent to that
  //! cluster, also when the report is read after the record moved on (two watches, no order between them).
  void applied(const std::string& key, const std::string& manifest_id);
  //! The record under `key` was removed: none of its manifests is allowed any more.
  void remove(const std::string& key);
  //! True when a deployment of `cluster` references `manifest_id` (current, previous or last applied).
  [[nodiscard]] bool allows(const std::string& cluster, const std::string& manifest_id) const;
  //! True when the record under `key` holds a newer generation than `generation` (> 0): a DeployEvent of that
  //! generation was replaced by a newer one, already published (the record is written after the publish).
  [[nodiscard]] bool supersedes(const std::string& key, int64_t generation) const;
  //! True when the index has no record under `key` yet, or one older than `generation` (> 0): a DeployEvent of
  //! that generation is out, and its record is still on its way.
  [[nodiscard]] bool behind(const std::string& key, int64_t generation) const;
  [[nodiscard]] size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string cluster;
    std::string current;
    std::string previous;
    std::string applied;
    int64_t generation = 0;          //!< of the record, latest seen
    std::deque<std::string> recent;  //!< the record's last manifests (newest first), to check reports against
  };
  //! Adds (`delta` 1) or drops (-1) the entry's distinct manifests from references_.
  void count(const Entry& entry, int delta);

  std::map<std::string, Entry> entries_;                           //!< by deployments key
  std::map<std::pair<std::string, std::string>, int> references_;  //!< (cluster, manifest) -> entries naming it
};

struct ManifestServerOptions {
  //! Objects up to this size stay in memory while they are sent (least recently used out first).
  size_t cache_bytes = size_t{64} << 20;
  //! Largest chunk per reply; 0 = the NATS server's max_payload minus kChunkHeadroom (tests set less).
  int64_t max_chunk = 0;
  //! How long start() waits for the deployments bucket's current records.
  std::chrono::milliseconds load_timeout{30000};
};

//! A reply before it is sent: headers and body (tests call answer() directly).
struct ManifestReply {
  bus::Headers headers;
  std::string body;
};

class ManifestServer final : public service::Component {
 public:
  //! `deployments` and `status` are the hub's KV buckets (records and the agents' bd.* reports), `manifests` the
  //! object store.
  ManifestServer(std::shared_ptr<bus::Connection> connection, std::shared_ptr<bus::KeyValue> deployments,
                 std::shared_ptr<bus::KeyValue> status, std::shared_ptr<bus::ObjectStore> manifests, Metrics& metrics,
                 ManifestServerOptions options = {});
  ~ManifestServer() override;

  //! Loads the deployment records and bd reports, starts their watches and subscribes to flotilla.manifest.*.
  Status start() override;
  //! Unsubscribes and stops the watch. Idempotent.
  void stop() override;
  //! Records loaded and subscribed.
  bool ready(std::string& why) const override;

  //! The reply to one request on `subject` (what the subscription sends back).
  ManifestReply answer(std::string_view subject, std::string_view data);

 private:
  struct Cached {
    bus::ObjectInfo info;
    std::string data;
  };
  //! A request that arrived before its deployment record (see "early" above).
  struct EarlyRequest {
    std::string subject;
    std::string data;
    std::string reply;
    std::chrono::steady_clock::time_point deadline;
  };
  //! Answers a request (or parks it while it is early) and sends the reply.
  void handleRequest(const bus::Message& message);
  void send(const std::string& reply_subject, const ManifestReply& reply);
  //! Parks the request when it names a generation newer than the index's record of it (mutex_ held); true if parked.
  bool parkIfEarly(std::string_view subject, std::string_view data, std::string_view reply);
  //! Answers the parked requests for `key` (a record arrived), and those past their deadline (refused as usual).
  void answerParked(const std::string& key);
  void expireParked();
  //! Follows one watch (records or reports) until stop(); restarts it after an error.
  void follow(bus::KvWatcher& watcher, const std::shared_ptr<bus::KeyValue>& bucket, std::string_view filter,
              bool records);
  void applyRecord(const bus::KvEntry& entry);
  void applyReport(const bus::KvEntry& entry);
  ManifestReply refuse(std::string_view reason, const std::string& cluster, const std::string& manifest_id,
                       const std::string& message);
  //! The chunk [offset, offset + max) of the object and its meta; kNotFound when missing.
  Result<std::pair<bus::ObjectInfo, std::string>> readChunk(const std::string& name, uint64_t offset, uint64_t max);
  //! The cached object (and marks it most recently used); nullptr when not cached.
  std::shared_ptr<const Cached> cached(const std::string& name);
  void remember(const std::string& name, const bus::ObjectInfo& info, std::string data);
  [[nodiscard]] uint64_t chunkSize() const;

  std::shared_ptr<bus::Connection> connection_;
  std::shared_ptr<bus::KeyValue> deployments_;
  std::shared_ptr<bus::KeyValue> status_;
  std::shared_ptr<bus::ObjectStore> manifests_;
  Metrics& metrics_;
  ManifestServerOptions options_;

  mutable std::mutex mutex_;  //!< guards index_ and early_
  ManifestIndex index_;
  std::map<std::string, std::vector<EarlyRequest>> early_;  //!< requests waiting for their record, by key
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>> early_deadlines_;  //!< oldest first
  size_t early_count_ = 0;
  std::mutex cache_mutex_;                                      //!< guards cache_, cache_order_, cache_used_
  std::map<std::string, std::shared_ptr<const Cached>> cache_;  //!< shared: a reply slices it outside the lock
  std::list<std::string> cache_order_;                          //!< most recently used first
  size_t cache_used_ = 0;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> loaded_{false};
  std::atomic<bool> subscribed_{false};
  bus::KvWatcher records_watcher_;
  bus::KvWatcher reports_watcher_;
  bus::Subscription subscription_;
  std::thread records_thread_;
  std::thread reports_thread_;
};

}  // namespace flotilla::scheduler
