#include "flotilla/scheduler/scheduler.h"

#include <algorithm>
#include <ctime>
#include <exception>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "times.h"

namespace flotilla::scheduler {

using std::chrono::milliseconds;

namespace detail {

std::string formatTime(std::chrono::system_clock::time_point at) {
  auto ms = std::chrono::duration_cast<milliseconds>(at.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace detail

// ---- construction and start-up --------------------------------------------------------------------------------

Result<std::unique_ptr<Scheduler>> Scheduler::create(service::Hub hub, Metrics& metrics, SchedulerOptions options) {
  if (!hub.connection || !hub.js || !hub.clusters || !hub.bundles || !hub.deployments || !hub.status) {
    return fail(ErrorKind::kInvalid,
                "the scheduler needs the hub's connection, JetStream and the clusters, bundles, "
                "deployments and status buckets");
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(hub), metrics, options));
}

Scheduler::Scheduler(service::Hub hub, Metrics& metrics, SchedulerOptions options)
    : hub_(std::move(hub)), metrics_(metrics), options_(options) {}

Scheduler::~Scheduler() {
  stop();
}

Status Scheduler::start() {
  if (started_.exchange(true)) {
    return {};
  }
  FLOTILLA_TRY(loadState());
  FLOTILLA_TRY(setUpConsumers());
  FLOTILLA_TRY(subscribeRegistrations());
  enqueueReconcile("");
  bundle_thread_ = std::thread([this] {
    consumeLoop(bundle_consumer_, "bundles", [this](bus::Message& message) {
      auto meta = message.metadata();
      int64_t clock_ms = meta.ok() ? meta->timestamp_ns / 1'000'000 : 0;
      return handleBundle(message.data(), clock_ms, std::max<uint64_t>(1, message.deliveryCount()));
    });
  });
  status_thread_ = std::thread([this] {
    consumeLoop(status_consumer_, "status", [this](bus::Message& message) {
      return handleStatus(message.subject(), message.data(), std::max<uint64_t>(1, message.deliveryCount()));
    });
  });
  watch_thread_ = std::thread([this] { watchLoop(); });
  reconcile_thread_ = std::thread([this] { reconcileLoop(); });
  std::lock_guard lock(mutex_);
  log::info("scheduler started", {{"clusters", static_cast<int64_t>(clusters_.size())},
                                  {"bundles", static_cast<int64_t>(bundles_.size())},
                                  {"deployments", static_cast<int64_t>(deployments_.size())}});
  return {};
}

void Scheduler::stop() {
  if (stopping_.exchange(true)) {
    return;
  }
  { std::lock_guard lock(wake_mutex_); }
  wake_.notify_all();
  register_subscription_ = bus::Subscription();
  for (auto* thread : {&bundle_thread_, &status_thread_, &watch_thread_, &reconcile_thread_}) {
    if (thread->joinable()) {
      thread->join();
    }
  }
  clusters_watcher_.stop();
}

bool Scheduler::ready(std::string& why) const {
  if (!hub_.connection->connected()) {
    why = "not connected to NATS";
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    if (!loaded_) {
      why = "state not loaded from KV yet";
      return false;
    }
  }
  if (!bound_) {
    why = "durable consumers not bound yet";
    return false;
  }
  if (!subscribed_) {
    why = "not subscribed to registrations yet";
    return false;
  }
  return true;
}

Status Scheduler::setUpConsumers() {
  auto bind = [&](const char* stream, std::string_view durable, std::string_view filter,
                  bus::PullConsumer& out) -> Status {
    bus::ConsumerConfig config{.durable = std::string(durable),
                               .filter_subject = std::string(filter),
                               .ack_wait = options_.ack_wait,
                               .description = "flotilla scheduler"};
    auto ensured = hub_.js->ensureConsumer(stream, config);
    FLOTILLA_TRY(ensured);
    auto bound = hub_.js->bindPull(stream, durable);
    FLOTILLA_TRY(bound);
    out = std::move(bound).value();
    return {};
  };
  FLOTILLA_TRY(bind(service::kBundlesStream, kBundleConsumer, events::kBundleFilter, bundle_consumer_));
  FLOTILLA_TRY(bind(service::kStatusStream, kStatusConsumer, events::kStatusFilter, status_consumer_));
  bound_ = true;
  return {};
}

// ---- loops ----------------------------------------------------------------------------------------------------

bool Scheduler::sleepFor(milliseconds duration) {
  std::unique_lock lock(wake_mutex_);
  return !wake_.wait_for(lock, duration, [this] { return stopping_.load(); });
}

std::chrono::milliseconds Scheduler::backoff(uint64_t delivery_count) const {
  milliseconds delay = options_.retry_base;
  for (uint64_t i = 1; i < delivery_count && delay < options_.retry_max; ++i) {
    delay *= 2;
  }
  return std::min(delay, options_.retry_max);
}

void Scheduler::consumeLoop(bus::PullConsumer& consumer, const std::string& name,
                            const std::function<Outcome(bus::Message&)>& handle) {
  milliseconds error_delay = options_.retry_base;
  while (!stopping_) {
    auto batch = consumer.fetch(options_.fetch_batch, options_.fetch_timeout);
    if (!batch.ok()) {
      metrics_.counter("fetch_errors_total", "Failed fetches from a durable consumer", {{"consumer", name}})
          .Increment();
      log::warn("fetch failed, retrying", {{"consumer", name},
                                           {"retry_in_ms", static_cast<int64_t>(error_delay.count())},
                                           {"error", batch.error().describe()}});
      if (!sleepFor(error_delay)) {
        break;
      }
      error_delay = std::min(error_delay * 2, options_.retry_max);
      continue;
    }
    error_delay = options_.retry_base;
    if (batch->empty()) {
      if (name == "bundles" && !caught_up_.exchange(true)) {
        log::info("bundle backlog handled", {});
        wake_.notify_all();
      }
      continue;
    }
    for (auto& message : *batch) {
      if (stopping_) {
        // Fetched but not started: hand it back for immediate redelivery (to this or another replica).
        (void)message.nak();
        continue;
      }
      runOne(message, name, handle);
    }
  }
}

void Scheduler::runOne(bus::Message& message, const std::string& name,
                       const std::function<Outcome(bus::Message&)>& handle) {
  auto started = std::chrono::steady_clock::now();
  auto& in_flight = metrics_.gauge("in_flight_messages", "Messages being handled", {{"consumer", name}});
  in_flight.Increment();
  Outcome outcome;
  try {
    outcome = handle(message);
  } catch (const std::exception& e) {
    metrics_.counter("handler_exceptions_total", "Handlers that threw (message nak'd)", {{"consumer", name}})
        .Increment();
    log::error("handler threw; the message will be redelivered", {{"consumer", name}, {"error", e.what()}});
    outcome = Outcome::retry(backoff(message.deliveryCount()), "exception");
  }
  Status acted;
  switch (outcome.action) {
    case Outcome::Action::kAck:
      acted = message.ackSync();
      break;
    case Outcome::Action::kRetry:
      acted = message.nakWithDelay(outcome.delay);
      break;
    case Outcome::Action::kReject:
      acted = message.term();
      break;
  }
  if (!acted.ok()) {
    // The message comes back after ack_wait; handlers are idempotent.
    metrics_.counter("ack_failures_total", "Acks, naks or terms the server did not confirm", {{"consumer", name}})
        .Increment();
    log::warn("cannot acknowledge a message", {{"consumer", name}, {"error", acted.error().describe()}});
  }
  metrics_
      .counter("messages_total", "Messages handled, by consumer and result",
               {{"consumer", name}, {"result", outcome.result}})
      .Increment();
  metrics_
      .histogram("handler_duration_seconds", "Time to handle one message", Metrics::durationBuckets(),
                 {{"consumer", name}})
      .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  in_flight.Decrement();
}

// ---- introspection ---------------------------------------------------------------------------------------------

std::optional<model::Cluster> Scheduler::cluster(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = clusters_.find(name);
  if (it == clusters_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<DeploymentRecord> Scheduler::deployment(const std::string& cluster, const std::string& workspace,
                                                      const std::string& bundle) const {
  std::lock_guard lock(mutex_);
  auto it = deployments_.find(events::deploymentKey(cluster, workspace, bundle));
  if (it == deployments_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::string Scheduler::lastHeartbeat(const std::string& cluster) const {
  std::lock_guard lock(mutex_);
  auto it = last_heartbeat_.find(cluster);
  return it == last_heartbeat_.end() ? std::string() : it->second;
}

}  // namespace flotilla::scheduler
