#include "flotilla/bundler/bundler.h"

#include <exception>
#include <functional>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"

namespace flotilla::bundler {

Bundler::Bundler(HandlerBus bus, std::shared_ptr<const RendererSet> renderers, Metrics& metrics, BundlerOptions options)
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
  for (int i = 0; i < options_.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    Worker& ref = *worker;
    workers_.push_back(std::move(worker));
    ref.thread = std::thread([this, &ref] { workLoop(ref); });
  }
  fetcher_ = std::thread([this] { fetchLoop(); });
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
  if (fetcher_.joinable()) {
    fetcher_.join();
  }
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

}  // namespace flotilla::bundler
