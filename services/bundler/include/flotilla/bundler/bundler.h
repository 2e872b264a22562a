// flotilla/bundler/bundler.h
//
// The bundler service: the durable consumer `bundler` on FLOTILLA_COMMITS (replicas share it and split the work),
// run by the consumer runtime (libs/service/consumer.h) with `workers` threads: the commits of one GitRepo (one
// subject) are handled one at a time and in stream order by this process (across replicas the handler's stale
// check keeps order), different GitRepos in parallel. The runtime applies the handler's outcome (ack after the
// effects are durable, nak with backoff, term), keeps long renders alive, and terminates and reports a commit
// that throws, overruns its time budget or fails on its last allowed delivery. stop() stops fetching, lets each
// worker finish the message it is on, and naks the queued ones so they are redelivered at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/bundler/commit_handler.h"
#include "flotilla/bundler/metrics.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/service/component.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/object_gc.h"

namespace flotilla::bundler {

inline constexpr std::string_view kConsumerName = "bundler";

struct BundlerOptions {
  HandlerOptions handler;
  int workers = 2;
  std::string stream = "FLOTILLA_COMMITS";
  std::string consumer = std::string(kConsumerName);
  //! Before JetStream redelivers a message nobody settled: what a bundler killed mid-render costs the restart. The
  //! runtime sends in-progress acks every ack_wait/3 while a render runs, so long renders are not redelivered.
  std::chrono::milliseconds ack_wait{std::chrono::seconds(30)};
  std::chrono::milliseconds fetch_timeout{std::chrono::seconds(1)};
  std::chrono::milliseconds fetch_error_backoff{std::chrono::seconds(1)};
  int64_t max_deliveries = service::kDefaultMaxDeliveries;     //!< --max-deliveries
  std::chrono::milliseconds budget{std::chrono::minutes(10)};  //!< per commit, between progress() calls
  //! Garbage collection of `manifests` (docs/pipeline.md "Garbage collection"): a manifest or variants table no KV
  //! record (nor the variant cache) names is deleted once it was neither written nor reused for `gc_grace`.
  std::chrono::milliseconds gc_grace{service::kDefaultGcGrace};
  std::chrono::milliseconds gc_interval{service::kDefaultGcInterval};
};

class Bundler final : public service::Component {
 public:
  Bundler(HandlerBus bus, std::shared_ptr<const render::RendererSet> renderers, Metrics& metrics,
          BundlerOptions options);
  ~Bundler() override;

  //! Creates (or updates) the durable consumer, binds it and starts the fetch thread and the workers.
  Status start() override;
  //! Stops fetching, finishes in-flight messages, naks queued ones, joins the threads. Idempotent.
  void stop() override;
  //! Ready once bound and fetching without errors.
  bool ready(std::string& why) const override;

  [[nodiscard]] CommitHandler& handler() { return handler_; }
  //! One garbage collection pass of `manifests` now (tests; the bundler runs one every gc_interval by itself).
  Result<service::GcPass> collectManifests();

 private:
  //! The runtime's settings for the `bundler` durable.
  service::ConsumerOptions consumerOptions();
  //! Per-cluster variants: keeps the ClusterDirectory current from KV `clusters` and queues the workspaces of
  //! changed clusters; rerenderLoop re-renders their per-cluster bundles (CommitHandler::rerenderWorkspace).
  Status loadClusters();
  void clusterLoop();
  void rerenderLoop();

  HandlerBus bus_;
  BundlerMetrics metrics_;
  BundlerOptions options_;
  CommitHandler handler_;
  std::unique_ptr<service::ObjectGc> gc_;  //!< of `manifests`, whose writer the bundler is
  std::unique_ptr<service::Consumer> consumer_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};

  std::shared_ptr<ClusterDirectory> clusters_;
  bus::KvWatcher cluster_watcher_;
  std::thread cluster_thread_;
  std::thread rerender_thread_;
  std::mutex rerender_mutex_;
  std::condition_variable rerender_cv_;
  std::set<std::string> rerender_pending_;  //!< workspaces whose clusters changed
};

}  // namespace flotilla::bundler
