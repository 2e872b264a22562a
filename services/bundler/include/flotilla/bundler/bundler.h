// flotilla/bundler/bundler.h
//
// The bundler service: the durable consumer `bundler` on FLOTILLA_COMMITS (created with ensureConsumer, then
// bound; replicas share it and split the work) feeding a bounded pool of workers that run the CommitHandler.
//
// One fetch thread pulls only as many messages as there are free slots (workers + a small queue), and hands each
// to the worker chosen by hashing its subject, so the commits of one GitRepo are handled one at a time and in
// stream order by this process (across replicas the handler's stale check keeps order). A worker applies the
// handler's outcome: ack (after the effects are durable), nak with backoff, or term. Exceptions are caught,
// logged and counted, and the message is nak'ed. stop() stops fetching, lets each worker finish the message it
// is on, and naks the queued ones so they are redelivered at once (here or to another replica).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/bundler/commit_handler.h"
#include "flotilla/bundler/metrics.h"
#include "flotilla/bus/jetstream.h"

namespace flotilla::bundler {

inline constexpr std::string_view kConsumerName = "bundler";

struct BundlerOptions {
  HandlerOptions handler;
  int workers = 2;
  std::string stream = "FLOTILLA_COMMITS";
  std::string consumer = std::string(kConsumerName);
  std::chrono::milliseconds ack_wait{std::chrono::minutes(2)};  //!< long renders call inProgress() meanwhile
  std::chrono::milliseconds fetch_timeout{std::chrono::seconds(1)};
  std::chrono::milliseconds fetch_error_backoff{std::chrono::seconds(1)};
};

class Bundler {
 public:
  Bundler(HandlerBus bus, std::shared_ptr<const render::RendererSet> renderers, Metrics& metrics,
          BundlerOptions options);
  ~Bundler();
  Bundler(const Bundler&) = delete;
  Bundler& operator=(const Bundler&) = delete;

  //! Creates (or updates) the durable consumer, binds it and starts the fetch thread and the workers.
  Status start();
  //! Stops fetching, finishes in-flight messages, naks queued ones, joins the threads. Idempotent.
  void stop();
  //! Ready once bound and fetching without errors.
  bool ready(std::string& why) const;

  [[nodiscard]] CommitHandler& handler() { return handler_; }

 private:
  struct Worker {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<bus::Message> queue;
    std::thread thread;
  };

  void fetchLoop();
  //! Per-cluster variants: keeps the ClusterDirectory current from KV `clusters` and queues the workspaces of
  //! changed clusters; rerenderLoop re-renders their per-cluster bundles (CommitHandler::rerenderWorkspace).
  Status loadClusters();
  void clusterLoop();
  void rerenderLoop();
  void workLoop(Worker& worker);
  void process(bus::Message& message);

  HandlerBus bus_;
  BundlerMetrics metrics_;
  BundlerOptions options_;
  CommitHandler handler_;
  bus::PullConsumer consumer_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::thread fetcher_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> fetch_healthy_{false};
  std::mutex slots_mutex_;
  std::condition_variable slots_cv_;
  int busy_ = 0;  //!< messages queued or in progress

  std::shared_ptr<ClusterDirectory> clusters_;
  bus::KvWatcher cluster_watcher_;
  std::thread cluster_thread_;
  std::thread rerender_thread_;
  std::mutex rerender_mutex_;
  std::condition_variable rerender_cv_;
  std::set<std::string> rerender_pending_;  //!< workspaces whose clusters changed
};

}  // namespace flotilla::bundler
