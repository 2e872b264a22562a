// The gateway's shared state and threads (gateway.h). Internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/gateway/fleet_status.h"
#include "flotilla/gateway/gateway.h"
#include "flotilla/gateway/views.h"
#include "flotilla/gateway/write_limiter.h"

namespace flotilla::gateway {

inline constexpr std::string_view kFleetApiVersion = "fleet.cattle.io/v1alpha1";

// The queue's write keys: a prefix saying what is written, then the id of its facts.
inline constexpr std::string_view kGitRepoWrite = "gitrepo|";            // + "<namespace>/<name>"
inline constexpr std::string_view kClusterWrite = "cluster|";            // + "<name>"
inline constexpr std::string_view kClusterGroupWrite = "clustergroup|";  // + "<namespace>/<name>"
inline constexpr std::string_view kBundleWrite = "bundle|";              // + "<ws>/<bundle>"
inline constexpr std::string_view kDeploymentWrite = "bd|";              // + "<cluster>/<ws>/<bundle>"

//! The write key of `id` under `prefix`.
inline std::string writeKey(std::string_view prefix, const std::string& id) {
  return std::string(prefix) + id;
}

//! One CR kind the gateway mirrors into KV, and how.
struct MirroredKind {
  std::string kind;  //!< "GitRepo", "ClusterGroup", "Cluster"
  //! Decodes one CR strictly and stores its spec; kInvalid when the spec is refused (the message names the field).
  std::function<Result<std::string>(const Json& object)> store;
  //! The CR is gone: its spec goes (and the pipeline cascades).
  std::function<Status(const std::string& ns, const std::string& name)> remove;
  //! Every (namespace, name) whose spec is stored in KV, to remove the ones whose CR went while nobody watched.
  std::function<Result<std::set<std::pair<std::string, std::string>>>()> stored;
};

//! The gateway's counters (flotilla_gateway_<name>).
class GatewayMetrics {
 public:
  explicit GatewayMetrics(Metrics& metrics) : metrics_(metrics) {}
  //! specs_total{kind, result}: "created", "configured", "unchanged", "rejected", "removed", "failed".
  void spec(const std::string& kind, const std::string& result);
  //! status_writes_total{result}: "written", "unchanged" (nothing to write), "gone" (no CR), "failed".
  void statusWrite(const std::string& result);
  //! status_coalesced_total: a change to an object already waiting for its write.
  void coalesced();
  //! status_queue_depth.
  void queueDepth(size_t depth);
  //! view_writes_total{kind, result}: Bundle / BundleDeployment views "written", "unchanged", "deleted", "failed".
  void view(const std::string& kind, const std::string& result);
  //! mirror_restarts_total{kind, reason}: "gone" (410: list again), "error".
  void mirrorRestart(const std::string& kind, const std::string& reason);

 private:
  Metrics& metrics_;
};

struct Gateway::Core {
  Core(GatewayOptions gateway_options, service::Hub hub_handles, std::unique_ptr<kube::KubeClient> kube_client,
       Metrics& service_metrics);

  GatewayOptions options;
  service::Hub hub;
  std::unique_ptr<kube::KubeClient> kube;
  GatewayMetrics metrics;
  std::vector<MirroredKind> kinds;

  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable wake;
  // What each write is made from, guarded by mutex. The queue's keys say which: "gitrepo|<ns>/<name>",
  // "cluster|<name>", "clustergroup|<ns>/<name>", "bundle|<ws>/<bundle>", "bd|<cluster>/<ws>/<bundle>".
  std::map<std::string, GitRepoFacts> gitrepos;          //!< by "<namespace>/<name>"
  std::map<std::string, ClusterFacts> clusters;          //!< by cluster name
  std::map<std::string, ClusterGroupFacts> groups;       //!< by "<namespace>/<name>"
  std::map<std::string, events::BundleSummary> bundles;  //!< by "<ws>/<bundle>"
  std::map<std::string, DeploymentFacts> deployments;    //!< by "<cluster>/<ws>/<bundle>"
  std::set<std::string> listed;                          //!< kinds listed and mirrored once, guarded by mutex
  CoalescingQueue queue;
  std::vector<std::thread> threads;

  //! Sleeps up to `duration`, less when stopping.
  void sleepFor(std::chrono::milliseconds duration);
  //! Changes the facts of one GitRepo under the lock and queues its status write.
  void updateFacts(const std::string& key, const std::function<void(GitRepoFacts&)>& change);
  //! Queues a write ("gitrepo|...", "cluster|...", "clustergroup|...", "bundle|...", "bd|..."), counting a
  //! coalesced one.
  void queueWrite(const std::string& key);
  //! A CR of `kind` seen (its status as it is, and the verdict on its spec when one was made) or, with `gone`,
  //! deleted: the facts of its status write change and the write is queued.
  void noteObject(const std::string& kind, const std::string& ns, const std::string& name, const Json* current,
                  const std::optional<Acceptance>& acceptance, bool gone = false);

  // spec_mirror.cpp
  void runSpecMirror(const MirroredKind& kind);
  //! One list + watch round; returns when the watch must start over (410, an error) or on shutdown. `seen`: the
  //! metadata (generation, labels, annotations) each CR of the kind was last mirrored with.
  Status mirrorRound(const MirroredKind& kind, std::map<std::string, Json>& seen);
  //! Stores one CR's spec unless its metadata is as last mirrored (a status write changes neither); a refused
  //! spec is reported on the CR, not an error. An error (KV unreachable) makes the round start over.
  Status mirrorObject(const MirroredKind& kind, const Json& object, std::map<std::string, Json>& seen);
  Status mirrorDelete(const MirroredKind& kind, const Json& object, std::map<std::string, Json>& seen);

  // status_mirror.cpp
  //! Watches `bucket` under `filter` and hands each entry to `apply` (which updates the facts and queues writes).
  void runKvWatch(bus::KeyValue& bucket, const std::string& filter,
                  const std::function<void(const bus::KvEntry&)>& apply);
  void applyGitRepoRecord(const bus::KvEntry& entry, bool summary);
  void applyBundleSummary(const bus::KvEntry& entry);
  void applyDeploymentFact(const bus::KvEntry& entry, bool report);
  void runStatusWriter();
  //! Waits for a write token (false when stopping).
  bool spendToken(TokenBucket& bucket);
  void applyClusterSummary(const bus::KvEntry& entry);
  //! A status to write: the status subresource's path and the status.
  struct StatusWrite {
    std::string path;
    Json status;
  };
  //! The status the CR of write key `key` ("gitrepo|", "cluster|", "clustergroup|") should have, or nullopt when it
  //! has it already (or no CR was seen).
  std::optional<StatusWrite> pendingStatus(const std::string& key, const std::map<std::string, Json>& written);
  //! The status and the CR's current one, from the facts (under the lock); nullopt when there are none.
  std::optional<std::pair<StatusWrite, Json>> composeStatus(const std::string& key);
  //! PATCHes the status subresource; a failed write is queued again after a pause.
  void writeStatus(const std::string& key, StatusWrite write, std::map<std::string, Json>& written);
  //! Drops the facts behind a status write key whose CR is gone.
  void forget(const std::string& key);
  //! Brings the view of "bundle|..." or "bd|..." to its facts: created/updated (apply + status), or deleted.
  void writeView(const std::string& key, TokenBucket& bucket, std::map<std::string, View>& written);
};

//! The kinds the gateway mirrors, wired to libs/specs.
std::vector<MirroredKind> mirroredKinds(const service::Hub& hub);

}  // namespace flotilla::gateway
