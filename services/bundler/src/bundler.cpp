#include "flotilla/bundler/bundler.h"

#include <exception>
#include <functional>

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
}

Bundler::~Bundler() {
  stop();
}

Status Bundler::start() {
  FLOTILLA_TRY(prepareWorkDir(options_.handler.work_dir));
  bus::ConsumerConfig config;
  config.durable = options_.consumer;
  config.filter_subject = std::string(events::kCommitFilter);
  config.ack_wait = options_.ack_wait;
  config.max_ack_pending = std::max<int64_t>(64, static_cast<int64_t>(options_.workers) * 4);
  config.description = "flotilla bundler: renders commits into bundles";
  auto info = bus_.js->ensureConsumer(options_.stream, config);
  if (!info.ok()) {
    return fail(info.error());
  }
  auto consumer = bus_.js->bindPull(options_.stream, options_.consumer);
  if (!consumer.ok()) {
    return fail(consumer.error());
  }
  consumer_ = std::move(consumer).value();
  stopping_ = false;
  // Know the clusters before the first commit is rendered, so per-cluster bundles get complete tables.
  FLOTILLA_TRY(loadClusters());
  for (int i = 0; i < options_.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    Worker& ref = *worker;
    workers_.push_back(std::move(worker));
    ref.thread = std::thread([this, &ref] { workLoop(ref); });
  }
  fetcher_ = std::thread([this] { fetchLoop(); });
  if (clusters_) {
    cluster_thread_ = std::thread([this] { clusterLoop(); });
    rerender_thread_ = std::thread([this] { rerenderLoop(); });
  }
  started_ = true;
  log::info("bundler consuming", {{"stream", options_.stream},
                                  {"consumer", options_.consumer},
                                  {"workers", static_cast<int64_t>(options_.workers)},
                                  {"pending", static_cast<int64_t>(info->num_pending)}});
  return {};
}

void Bundler::stop() {
  if (!started_.exchange(false)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(slots_mutex_);
    stopping_ = true;
  }
  slots_cv_.notify_all();
  {
    // Taking the lock orders the stop flag before the re-render thread's next predicate check (no lost wake-up).
    std::lock_guard<std::mutex> lock(rerender_mutex_);
  }
  rerender_cv_.notify_all();
  if (fetcher_.joinable()) {
    fetcher_.join();
  }
  if (cluster_thread_.joinable()) {
    cluster_thread_.join();
  }
  if (rerender_thread_.joinable()) {
    rerender_thread_.join();
  }
  cluster_watcher_.stop();
  for (auto& worker : workers_) {
    {
      std::lock_guard<std::mutex> lock(worker->mutex);
      // Queued messages are handed back now rather than after ack_wait.
      for (auto& message : worker->queue) {
        if (auto status = message.nak(); !status.ok()) {
          log::warn("cannot hand back a queued commit", {{"error", status.error().describe()}});
        }
      }
      worker->queue.clear();
    }
    worker->cv.notify_all();
  }
  for (auto& worker : workers_) {
    if (worker->thread.joinable()) {
      worker->thread.join();
    }
  }
  workers_.clear();
  log::info("bundler stopped");
}

bool Bundler::ready(std::string& why) const {
  if (!started_) {
    why = "not consuming";
    return false;
  }
  if (!fetch_healthy_) {
    why = "cannot fetch from the " + options_.consumer + " consumer";
    return false;
  }
  return true;
}

void Bundler::fetchLoop() {
  const int capacity = options_.workers * 2;
  while (!stopping_) {
    int free_slots = 0;
    {
      std::unique_lock<std::mutex> lock(slots_mutex_);
      slots_cv_.wait(lock, [&] { return stopping_ || busy_ < capacity; });
      if (stopping_) {
        return;
      }
      free_slots = capacity - busy_;
    }
    auto batch = consumer_.fetch(free_slots, options_.fetch_timeout);
    if (!batch.ok()) {
      fetch_healthy_ = false;
      metrics_.fetchError();
      log::warn("fetching commits failed", {{"error", batch.error().describe()}});
      std::this_thread::sleep_for(options_.fetch_error_backoff);
      continue;
    }
    fetch_healthy_ = true;
    for (auto& message : *batch) {
      if (stopping_) {
        (void)message.nak();
        continue;
      }
      const size_t index = std::hash<std::string_view>{}(message.subject()) % workers_.size();
      Worker& worker = *workers_[index];
      {
        std::lock_guard<std::mutex> lock(slots_mutex_);
        ++busy_;
      }
      {
        std::lock_guard<std::mutex> lock(worker.mutex);
        worker.queue.push_back(std::move(message));
      }
      worker.cv.notify_one();
    }
  }
}

void Bundler::workLoop(Worker& worker) {
  while (true) {
    bus::Message message;
    {
      std::unique_lock<std::mutex> lock(worker.mutex);
      worker.cv.wait(lock, [&] { return stopping_ || !worker.queue.empty(); });
      if (worker.queue.empty()) {
        return;  // stopping
      }
      message = std::move(worker.queue.front());
      worker.queue.pop_front();
    }
    process(message);
    {
      std::lock_guard<std::mutex> lock(slots_mutex_);
      --busy_;
    }
    slots_cv_.notify_all();
  }
}

void Bundler::process(bus::Message& message) {
  const auto start = std::chrono::steady_clock::now();
  metrics_.inFlight(1);
  Delivery delivery;
  if (auto meta = message.metadata(); meta.ok()) {
    delivery.stream_sequence = meta->stream_sequence;
    delivery.delivery_count = meta->num_delivered;
  }
  delivery.progress = [&message] { (void)message.inProgress(); };
  Outcome outcome;
  try {
    outcome = handler_.handle(message.data(), delivery);
  } catch (const std::exception& e) {
    metrics_.exception();
    log::error("commit handler threw", {{"error", e.what()}, {"subject", message.subject()}});
    outcome = Outcome::retry(handler_.backoff(delivery.delivery_count));
  } catch (...) {
    metrics_.exception();
    log::error("commit handler threw a non-exception", {{"subject", message.subject()}});
    outcome = Outcome::retry(handler_.backoff(delivery.delivery_count));
  }
  Status settled;
  switch (outcome.action) {
    case Outcome::Action::kAck:
      settled = message.ackSync();
      break;
    case Outcome::Action::kRetry:
      settled = message.nakWithDelay(outcome.delay);
      break;
    case Outcome::Action::kReject:
      settled = message.term();
      break;
  }
  if (!settled.ok()) {
    metrics_.stepFailure("settle");
    log::warn("cannot settle a commit message; it will be redelivered",
              {{"subject", message.subject()}, {"result", outcome.result}, {"error", settled.error().describe()}});
  }
  metrics_.inFlight(-1);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.commitHandled(outcome.result, seconds);
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
