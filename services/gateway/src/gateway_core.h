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
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "flotilla/gateway/cluster_registry.h"
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
//! Not a write: list the Bundle and BundleDeployment views and delete the ones whose records are gone.
inline constexpr std::string_view kViewSweep = "sweep|views";

//! The API path of the fleet.cattle.io `plural` collection in namespace `ns`, or of object `name` in it.
inline std::string fleetPath(std::string_view ns, std::string_view plural, std::string_view name = {}) {
  std::string path =
      "/apis/" + std::string(kFleetApiVersion) + "/namespaces/" + kube::urlEncode(ns) + "/" + std::string(plural);
  return name.empty() ? path : path + "/" + kube::urlEncode(name);
}

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
  //! The CR to create for a spec stored in KV (its metadata and spec): a hub leaving KV mode adopts its specs.
  std::function<Result<Json>(const std::string& ns, const std::string& name)> storedCr;
};

//! Which record of the clusters bucket a watch reads.
enum class ClusterRecord { kRegistration, kDocument, kGroup, kDeregistration };

//! What the writer thread owns: the write budget, the failed writes waiting for their retry, and what it wrote.
struct WriterState {
  TokenBucket bucket;
  RetrySchedule retries;
  std::map<std::string, Json> statuses;  //!< each CR's status as last written by this process, by write key
  std::map<std::string, View> views;     //!< each view as last written
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
  //! cluster_crs_total{result}: Cluster CRs made for registered clusters, "created", "exists", "failed".
  void clusterCr(const std::string& result);
  //! view_sweeps_total{result}: start-up sweeps of the views whose records are gone, "done", "failed".
  void viewSweep(const std::string& result);
  //! write_retries: failed writes waiting for their retry.
  void retriesWaiting(size_t count);

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
  ClusterRegistry registry;                              //!< the clusters bucket's registrations, documents, groups
  //! Clusters whose CR was deleted (or gone when its status was written): no CR is made for them again until a CR
  //! is seen or their registration goes (the delete deregisters them).
  std::set<std::string> deleted_cluster_crs;
  std::set<std::string> listed;  //!< kinds listed and mirrored once, guarded by mutex
  CoalescingQueue queue;
  std::vector<std::thread> threads;
  //! The hub was in KV mode when the gateway started: the specs in KV with no CR get one (adopted) instead of being
  //! removed, and Kubernetes mode is marked once every kind was listed.
  std::atomic<bool> adopting{false};
  //! The record watches the views are made from that have not delivered their initial values yet; at zero the
  //! views whose records went while no gateway ran are swept.
  std::atomic<int> view_watches_pending{0};

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
  //! Creates the CR of a spec in KV that has none (adopting); an existing CR is fine.
  Status adopt(const MirroredKind& kind, const std::string& ns, const std::string& name);
  //! After a kind was listed: once every kind was, an adopting gateway marks Kubernetes mode; the Cluster kind
  //! queues the registered clusters (their CRs can be made now).
  Status afterListed(const MirroredKind& kind);

  // status_mirror.cpp
  //! Watches `bucket` under `filter` and hands each entry to `apply` (which updates the facts and queues writes);
  //! `initial_done` (if set) runs once, when the first watch has delivered every value there was.
  void runKvWatch(bus::KeyValue& bucket, const std::string& filter,
                  const std::function<void(const bus::KvEntry&)>& apply, const std::function<void()>& initial_done);
  //! A record of the clusters bucket: the registry changes, and the writes it affects are queued (the cluster's
  //! CR or status, the groups of its workspace).
  void applyClusterRecord(const bus::KvEntry& entry, ClusterRecord record);
  //! Queues the status writes of the groups of the workspaces in `workspaces`.
  void queueGroupsOf(const std::set<std::string>& workspaces);
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
  //! PATCHes the status subresource; a failed write is tried again after its backoff.
  void writeStatus(const std::string& key, StatusWrite write, WriterState& writer);
  //! A failed write of `key`: logged, counted, and tried again after its backoff.
  void retryLater(const std::string& key, WriterState& writer, const Error& error);
  //! The Cluster CR a registered cluster should have and does not (nullopt: none to make).
  std::optional<Json> missingClusterCr(const std::string& name);
  void createClusterCr(const std::string& name, const Json& cr, WriterState& writer);
  //! Lists the views and queues the delete of each one whose records are gone.
  void sweepViews(WriterState& writer);
  //! Drops the facts behind a status write key whose CR is gone.
  void forget(const std::string& key);
  //! Brings the view of "bundle|..." or "bd|..." to its facts: created/updated (apply + status), or deleted.
  void writeView(const std::string& key, WriterState& writer);
};

//! The kinds the gateway mirrors, wired to libs/specs.
std::vector<MirroredKind> mirroredKinds(const service::Hub& hub);

}  // namespace flotilla::gateway
