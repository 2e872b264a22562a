// flotilla/agent/agent.h
//
// The agent process around the DeployHandler: it registers the cluster with the hub (request/reply on
// flotilla.register, retried with backoff until the scheduler answers), sends a heartbeat every
// heartbeat_interval, binds the durable consumer agent-<cluster> on FLOTILLA_DEPLOY (filter
// flotilla.deploy.<cluster>) and feeds its messages to the handler, up to --parallel-bundles bundles at once and one
// bundle's deploys in order (keyed by bundle, deployKey), and re-checks the health of
// bundles that are not Ready every resync_interval (and reaps held objects whose --release-hold expired). It reports
// the cluster's API versions at registration and registers again when they change (api_versions.h). Five
// threads: consumer (registration, then the loop), heartbeat, resync, API versions (the CRD and APIService watches),
// and one that hands the heap a burst of deploys freed back to the OS once they settle (malloc_trim); plus the drift
// watch's worker and one thread per watch (watcher.h), whose changes reach the handler's reportFromWatch. The
// handler's wake callback runs the consumer's parked deploys again (Consumer::wakeParked). stop() ends them; a
// message being handled is finished (or abandoned unacked, to be redelivered, if it was waiting on the cluster).
//
// Heartbeats go to flotilla.status.<cluster>.= (events::statusSubject(cluster, "")): DESIGN.md lets an agent
// publish only under flotilla.status.<its cluster>.>, and "=" is the token of the empty bundle name, which no
// bundle can have. The payload is a Heartbeat (events::payloadKind tells it apart from StatusEvents).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "flotilla/agent/api_versions.h"
#include "flotilla/agent/applier.h"
#include "flotilla/agent/deploy_handler.h"
#include "flotilla/agent/inventory.h"
#include "flotilla/agent/manifest_source.h"
#include "flotilla/agent/scope.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/kube/client.h"
#include "flotilla/service/component.h"
#include "flotilla/service/consumer.h"

namespace flotilla::agent {

//! Default of --parallel-bundles: how many different bundles the agent applies at once.
inline constexpr int kDefaultParallelBundles = 4;
//! Upper bound of --parallel-bundles (each worker is a thread with its own API server requests in flight).
inline constexpr int kMaxParallelBundles = 64;

struct AgentOptions {
  //! The cluster: from the agent's credentials (their user JWT names it), else --cluster-name (a hub without auth).
  std::string cluster_name;
  //! The prefix of this agent's reply subjects: _INBOX.agent-<cluster> with agent credentials (the only one its
  //! permissions let it subscribe to), else --nats-inbox-prefix ("" = libnats' default).
  std::string inbox_prefix;
  std::string workspace = "fleet-default";  //!< where the hub keeps the Cluster record
  events::StringMap labels;
  std::string agent_namespace = "flotilla-system";  //!< where inventories live in the downstream cluster
  //! --namespaces (scope.h): the only namespaces bundles may deploy to; empty = unrestricted.
  NamespaceScope namespaces;
  std::chrono::milliseconds heartbeat_interval{30000};
  std::chrono::milliseconds resync_interval{30000};
  std::chrono::milliseconds crd_timeout{60000};
  std::chrono::milliseconds register_timeout{5000};     //!< per registration request
  std::chrono::milliseconds register_backoff_min{500};  //!< first pause after a failed registration
  std::chrono::milliseconds register_backoff_max{30000};
  //! How long one pull of the deploy durable waits for a message. A deploy is handed over the moment it arrives
  //! and stop() wakes the pull, so only an idle agent's pull rate depends on it: one request per 30 s (10,000 idle
  //! agents: ~330 pull requests/s on the hub's NATS, not 10,000).
  std::chrono::milliseconds fetch_timeout{30000};
  std::chrono::milliseconds budget{std::chrono::minutes(10)};  //!< per deploy, between progress() calls
  int parallel_bundles = kDefaultParallelBundles;              //!< --parallel-bundles: bundles applied at once
  DeployHandlerOptions retry;
  //! Fight detection (watcher.h): --fight-corrections corrections of one object within --fight-window.
  size_t fight_corrections = kDefaultFightCorrections;
  std::chrono::milliseconds fight_window = kDefaultFightWindow;
  //! The CRD and APIService watches that re-register when the served API versions change.
  ApiVersionsOptions api_versions;
  //! Manifest requests to the hub (manifest_source.h).
  ManifestSourceOptions manifests;
  std::string agent_version = std::string(kAgentVersion);
};

//! Parses --labels: "k=v,k2=v2" (empty -> no labels). Keys and values are checked as Kubernetes labels.
Result<events::StringMap> parseLabels(std::string_view text);
//! Parses a duration flag: a Go duration ("30s", "1m") or a plain number of seconds.
Result<std::chrono::milliseconds> parseInterval(std::string_view text);
//! The same for --release-hold, where 0 is allowed (delete released objects at once).
Result<std::chrono::milliseconds> parseHold(std::string_view text);
//! The heartbeat subject of a cluster (see the file comment).
std::string heartbeatSubjectFor(std::string_view cluster);
//! The durable consumer name of a cluster's agent: "agent-<escaped cluster>".
std::string consumerName(std::string_view cluster);
//! The ordering key of a deploy message: "<workspace>/<bundle>" from its payload (one bundle's deploys run in
//! order, different bundles in parallel); the subject when the payload has neither (the handler rejects it).
std::string deployKey(const bus::Message& message);

class Agent final : public service::Component {
 public:
  //! `js` is the hub's JetStream context (its connection is used for registration and manifest requests).
  //! Nothing is contacted until start().
  static Result<std::unique_ptr<Agent>> create(AgentOptions options, std::shared_ptr<bus::JetStream> js,
                                               std::shared_ptr<kube::KubeClient> kube, Metrics& metrics);
  ~Agent() override;

  //! Starts the threads (registration happens on the consumer thread, so start() does not block nor fail).
  Status start() override;
  void stop() override;
  //! Ready when registered and the consumer is bound.
  bool ready(std::string& why) const override;
  [[nodiscard]] bool registered() const { return registered_; }
  //! The cluster id the hub answered with (the deploy/status subject token); "" until registered.
  [[nodiscard]] std::string clusterId() const;

  [[nodiscard]] DeployHandler& handler() { return *handler_; }
  [[nodiscard]] Applier& applier() { return *applier_; }
  [[nodiscard]] InventoryStore& inventories() { return *inventories_; }
  [[nodiscard]] DriftWatcher& drift() { return *drift_; }

 private:
  Agent(AgentOptions options, std::shared_ptr<bus::JetStream> js, std::shared_ptr<kube::KubeClient> kube,
        Metrics& metrics);

  //! Sleeps up to `duration`; false when stop() was called meanwhile.
  bool sleepFor(std::chrono::milliseconds duration);
  //! Registration with retries; false when stopped first.
  bool registerWithHub();
  Result<events::RegisterReply> registerOnce(const std::vector<std::string>& api_versions);
  //! Registers again (`why`: a changed API-version set, api_versions.h, or the hub asked); true when accepted.
  bool reregister(const std::vector<std::string>& api_versions, std::string_view why);
  //! The hub's asks to register again (its record of this cluster is gone: identity::agentReregisterSubject):
  //! subscribes once registered, answers an ask by registering with the credentials it holds. Heartbeat thread.
  void answerReregisterAsks();
  //! The API-version thread: after the registration, the CRD and APIService watches (ApiVersionsTracker::run).
  void apiVersionsLoop();
  //! The runtime's settings for the agent-<cluster> durable.
  service::ConsumerOptions consumerOptions(const std::string& cluster);
  //! Creates the durable and starts the consumer runtime, retried; false when stopped first.
  bool bindConsumer();
  //! Registers, then starts consuming (the runtime has its own threads).
  void consumerLoop();
  //! The handler's wake callback: the consumer's parked deploys run again (nothing before it is bound).
  void wakeParked();
  //! Seeds the handler and the watch from the cluster's inventories, once.
  void seedOnce(bool& seeded);
  //! One round of the resync thread: seed (once), re-check health, reap expired holds.
  void resyncOnce(bool& seeded);
  void heartbeatLoop();
  void resyncLoop();
  //! The consumer's handler around DeployHandler::handle: counts the deploys in flight for trimLoop.
  Outcome handleDeploy(const bus::Message& message, const Delivery& delivery);
  //! Returns the memory freed by a burst of deploys to the OS once the deploys have been quiet for kTrimQuiet.
  void trimLoop();

  AgentOptions options_;
  std::shared_ptr<bus::JetStream> js_;
  std::unique_ptr<ManifestSource> manifests_;
  std::shared_ptr<kube::KubeClient> kube_;
  Metrics& metrics_;

  std::unique_ptr<DriftWatcher> drift_;
  std::unique_ptr<Applier> applier_;
  std::unique_ptr<InventoryStore> inventories_;
  std::unique_ptr<StatusPublisher> publisher_;
  std::unique_ptr<DeployHandler> handler_;
  std::unique_ptr<ApiVersionsTracker> api_versions_;
  mutable std::mutex consumer_mutex_;  //!< guards the pointer consumer_ (the resync thread wakes through it)
  std::shared_ptr<service::Consumer> consumer_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> registered_{false};
  std::atomic<bool> bound_{false};
  std::atomic<bool> reregister_asked_{false};  //!< set by the subscription, answered by the heartbeat thread
  bus::Subscription reregister_subscription_;  //!< heartbeat thread only (and stop(), after it ended)
  bool reregister_subscribed_ = false;         //!< heartbeat thread only
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string cluster_id_;
  std::thread consumer_thread_;
  std::thread heartbeat_thread_;
  std::thread resync_thread_;
  std::thread api_versions_thread_;
  std::thread trim_thread_;
  int deploys_in_flight_ = 0;     //!< guarded by mutex_
  uint64_t deploys_handled_ = 0;  //!< guarded by mutex_
  bool started_ = false;
};

}  // namespace flotilla::agent
