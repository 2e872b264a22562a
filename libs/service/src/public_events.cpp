#include "flotilla/service/public_events.h"

#include <chrono>
#include <utility>

#include "flotilla/core/log.h"

namespace flotilla::service {

namespace {

//! How long the thread waits between batches when nothing wakes it: a bound, not a delay (send() wakes it).
constexpr std::chrono::milliseconds kIdleWait{1000};

void countDropped(Metrics& metrics, std::string_view reason, size_t events) {
  metrics
      .counter("public_event_failures_total", "Public CloudEvents dropped because they could not be published",
               {{"reason", std::string(reason)}})
      .Increment(static_cast<double>(events));
}

}  // namespace

PublicEvents::PublicEvents(std::shared_ptr<bus::JetStream> js, Metrics& metrics, size_t max_queued)
    : js_(std::move(js)), metrics_(metrics), max_queued_(max_queued) {
  countDropped(metrics_, "publish", 0);  // exported from the start, so a dashboard sees 0 rather than nothing
  countDropped(metrics_, "queue-full", 0);
  thread_.start([this] {
    while (thread_.sleepFor(kIdleWait)) {
      flush();
    }
  });
}

PublicEvents::~PublicEvents() {
  thread_.stop();
  flush();
}

void PublicEvents::send(const events::CloudEvent& event, std::string subject) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() < max_queued_) {
      queue_.push_back(bus::JetStream::Outgoing{.subject = std::move(subject),
                                                .data = events::encode(event).dump(),
                                                .msg_id = "event/" + event.type + "/" + event.id});
      types_.push_back(event.type);
      thread_.wake();
      return;
    }
  }
  countDropped(metrics_, "queue-full", 1);
  log::warn("public event dropped: too many are waiting to be published",
            {{"type", event.type}, {"subject", event.subject}, {"queued", static_cast<int64_t>(max_queued_)}});
}

void PublicEvents::flush() {
  std::lock_guard publishing(publish_mutex_);
  std::vector<bus::JetStream::Outgoing> batch;
  std::vector<std::string> types;
  {
    std::lock_guard lock(mutex_);
    batch.swap(queue_);
    types.swap(types_);
  }
  if (batch.empty()) {
    return;
  }
  auto stored = js_ ? js_->publishAll(batch)
                    : Result<std::vector<bus::PublishAck>>(fail(ErrorKind::kInvalid, "no JetStream connection"));
  if (!stored.ok()) {
    // Informational events: the work they announce is done and recorded; a retry could hold up the next batch.
    countDropped(metrics_, "publish", batch.size());
    log::warn("cannot publish public events; they are dropped", {{"events", static_cast<int64_t>(batch.size())},
                                                                 {"first_subject", batch.front().subject},
                                                                 {"error", stored.error().describe()}});
    return;
  }
  for (const auto& type : types) {
    metrics_.counter("public_events_total", "Public CloudEvents published on flotilla.events.>", {{"type", type}})
        .Increment();
  }
}

}  // namespace flotilla::service
