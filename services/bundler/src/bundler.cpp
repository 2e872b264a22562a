#include "flotilla/bundler/bundler.h"

#include <algorithm>
#include <exception>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"

namespace flotilla::bundler {

Bundler::Bundler(HandlerBus bus, std::shared_ptr<const render::RendererSet> renderers, Metrics& metrics,
                 BundlerOptions options)
    : bus_(bus),
      metrics_(metrics),
      options_(std::move(options)),
      handler_(std::move(bus), std::move(renderers), metrics_, options_.handler) {
  if (options_.workers < 1) {
    options_.workers = 1;
  }
  if (bus_.manifests) {
    auto references = [this]() -> Result<std::set<std::string>> {
      // The cache first: a manifest it names is either still in it or already in a record read after.
      std::set<std::string> names = handler_.cachedManifests();
      auto recorded = service::manifestReferences(bus_);
      FLOTILLA_TRY(recorded);
      names.merge(*recorded);
      return names;
    };
    gc_ = std::make_unique<service::ObjectGc>(
        bus_.manifests, references, metrics,
        service::GcOptions{
            .grace = options_.gc_grace, .interval = options_.gc_interval, .clock = options_.handler.clock});
    handler_.setGarbageCollector(gc_.get());
  }
}

Result<service::GcPass> Bundler::collectManifests() {
  if (!gc_) {
    return fail(ErrorKind::kInvalid, "the bundler has no manifests store", "Bundler::collectManifests");
  }
  return gc_->runPass();
}

Bundler::~Bundler() {
  stop();
}

service::ConsumerOptions Bundler::consumerOptions() {
  service::ConsumerOptions consumer;
  consumer.service = "bundler";
  consumer.label = "commits";
  consumer.stream = options_.stream;
  consumer.config.durable = options_.consumer;
  consumer.config.filter_subject = std::string(events::kCommitFilter);
  consumer.config.ack_wait = options_.ack_wait;
  consumer.config.max_ack_pending = std::max<int64_t>(64, static_cast<int64_t>(options_.workers) * 4);
  consumer.config.description = "flotilla bundler: renders commits into bundles";
  consumer.max_deliveries = options_.max_deliveries;
  consumer.workers = options_.workers;
  consumer.fetch_timeout = options_.fetch_timeout;
  consumer.fetch_backoff = service::Backoff(options_.fetch_error_backoff, options_.handler.retry_max);
  consumer.budget = options_.budget;
  consumer.on_handled = [this](const Outcome& outcome, double seconds) {
    metrics_.commitHandled(outcome.result, seconds);
  };
  return consumer;
}

Status Bundler::start() {
  FLOTILLA_TRY(prepareWorkDir(options_.handler.work_dir));
  auto handle = [this](const bus::Message& message, const Delivery& delivery) {
    metrics_.inFlight(1);
    struct Done {
      BundlerMetrics& metrics;
      ~Done() { metrics.inFlight(-1); }
    } done{metrics_};
    return handler_.handle(message.data(), delivery);
  };
  consumer_ = std::make_unique<service::Consumer>(bus_.js, consumerOptions(), handle, metrics_.raw(),
                                                  service::TerminationReports{.status = bus_.status});
  stopping_ = false;
  // Know the clusters before the first commit is rendered, so per-cluster bundles get complete tables.
  FLOTILLA_TRY(loadClusters());
  FLOTILLA_TRY(consumer_->start());
  if (gc_) {
    gc_->start();
  }
  if (clusters_) {
    cluster_thread_ = std::thread([this] { clusterLoop(); });
    rerender_thread_ = std::thread([this] { rerenderLoop(); });
  }
  started_ = true;
  log::info("bundler consuming", {{"stream", options_.stream},
                                  {"consumer", options_.consumer},
                                  {"workers", static_cast<int64_t>(options_.workers)}});
  return {};
}

void Bundler::stop() {
  if (!started_.exchange(false)) {
    return;
  }
  {
    // Taking the lock orders the stop flag before the re-render thread's next predicate check (no lost wake-up).
    std::lock_guard<std::mutex> lock(rerender_mutex_);
    stopping_ = true;
  }
  rerender_cv_.notify_all();
  if (gc_) {
    gc_->stop();
  }
  consumer_->stop();
  if (cluster_thread_.joinable()) {
    cluster_thread_.join();
  }
  if (rerender_thread_.joinable()) {
    rerender_thread_.join();
  }
  cluster_watcher_.stop();
  log::info("bundler stopped");
}

bool Bundler::ready(std::string& why) const {
  if (!started_) {
    why = "not consuming";
    return false;
  }
  return consumer_->healthy(why);
}

Status Bundler::loadClusters() {
  if (!bus_.clusters) {
    return {};
  }
  clusters_ = std::make_shared<ClusterDirectory>();
  auto watcher = bus_.clusters->watch(">");
  if (!watcher.ok()) {
    return fail(watcher.error());
  }
  cluster_watcher_ = std::move(watcher).value();
  auto initial = cluster_watcher_.initialValues();
  if (!initial.ok()) {
    return fail(initial.error());
  }
  for (const auto& entry : *initial) {
    auto change = clusters_->apply(entry);
    metrics_.clusterRecord(change.invalid ? "invalid" : "applied");
    if (change.invalid) {
      log::warn("ignoring an unreadable clusters record", {{"key", entry.key}, {"error", change.problem}});
    }
  }
  handler_.setClusters(clusters_);
  // Clusters may have changed while no bundler ran: re-render the per-cluster bundles of every workspace once (a
  // table that comes out the same publishes nothing).
  {
    std::lock_guard<std::mutex> lock(rerender_mutex_);
    auto workspaces = clusters_->workspaces();
    rerender_pending_.insert(workspaces.begin(), workspaces.end());
  }
  log::info("clusters loaded for per-cluster rendering", {{"clusters", static_cast<int64_t>(clusters_->size())}});
  return {};
}

void Bundler::clusterLoop() {
  auto delay = std::chrono::milliseconds(500);
  while (!stopping_) {
    auto next = cluster_watcher_.next(std::chrono::milliseconds(500));
    if (!next.ok()) {
      if (stopping_) {
        return;
      }
      metrics_.raw()
          .counter("cluster_watch_errors_total", "Failures of the KV clusters watcher (re-opened)")
          .Increment();
      log::warn("the clusters watcher failed; re-opening it",
                {{"error", next.error().describe()}, {"retry_in_ms", static_cast<int64_t>(delay.count())}});
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, options_.handler.retry_max);
      auto reopened = bus_.clusters->watch(">", bus::KvWatchOptions{.updates_only = false});
      if (reopened.ok()) {
        cluster_watcher_ = std::move(reopened).value();
      }
      continue;
    }
    delay = std::chrono::milliseconds(500);
    if (!next->has_value()) {
      continue;
    }
    auto change = clusters_->apply(**next);
    metrics_.clusterRecord(change.invalid ? "invalid" : "applied");
    if (change.invalid) {
      log::warn("ignoring an unreadable clusters record", {{"key", (*next)->key}, {"error", change.problem}});
      continue;
    }
    if (change.workspaces.empty()) {
      continue;
    }
    Json names = Json::array();
    for (const auto& name : change.clusters) {
      names.push(name);
    }
    log::info("clusters changed; per-cluster bundles of their workspaces will be re-rendered", {{"clusters", names}});
    {
      std::lock_guard<std::mutex> lock(rerender_mutex_);
      rerender_pending_.insert(change.workspaces.begin(), change.workspaces.end());
    }
    rerender_cv_.notify_all();
  }
}

void Bundler::rerenderLoop() {
  auto delay = options_.handler.retry_base;
  while (true) {
    std::string workspace;
    {
      std::unique_lock<std::mutex> lock(rerender_mutex_);
      rerender_cv_.wait(lock, [&] { return stopping_ || !rerender_pending_.empty(); });
      if (stopping_) {
        return;
      }
      // Registrations come in bursts: a short pause lets one re-render cover several clusters.
      rerender_cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_.load(); });
      if (stopping_) {
        return;
      }
      workspace = *rerender_pending_.begin();
      rerender_pending_.erase(rerender_pending_.begin());
    }
    Status status;
    try {
      status = handler_.rerenderWorkspace(workspace);
    } catch (const std::exception& e) {
      metrics_.exception();
      status = fail(ErrorKind::kInternal, std::string("exception: ") + e.what());
    }
    if (status.ok()) {
      delay = options_.handler.retry_base;
      continue;
    }
    log::warn("re-rendering per-cluster bundles failed; will retry",
              {{"workspace", workspace},
               {"error", status.error().describe()},
               {"retry_in_ms", static_cast<int64_t>(delay.count())}});
    std::unique_lock<std::mutex> lock(rerender_mutex_);
    rerender_pending_.insert(workspace);
    rerender_cv_.wait_for(lock, delay, [&] { return stopping_.load(); });
    delay = std::min(delay * 2, options_.handler.retry_max);
  }
}

}  // namespace flotilla::bundler
