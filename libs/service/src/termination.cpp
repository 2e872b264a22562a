// Backoff, the ErrorKind mapping, the per-key queue and the termination report of the consumer runtime.
#include <algorithm>

#include "consumer_state.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"

namespace flotilla::service {

std::chrono::milliseconds Backoff::delay(uint64_t attempt) const {
  std::chrono::milliseconds delay = base_;
  for (uint64_t i = 1; i < attempt && delay < max_; ++i) {
    delay *= 2;
  }
  return std::min(delay, max_);
}

Outcome outcomeFor(const Error& error, uint64_t delivery_count, uint64_t attempt, const Backoff& backoff) {
  switch (error.kind) {
    case ErrorKind::kTransient:
    case ErrorKind::kConflict:
      return Outcome::retry(backoff.delay(delivery_count));
    case ErrorKind::kWait:
    case ErrorKind::kStoreFull:  // parked, so a full store never uses up deliveries: nothing is terminated
      return Outcome::wait(backoff.delay(attempt));
    case ErrorKind::kInvalid:
    case ErrorKind::kNotFound:
    case ErrorKind::kPermanent:
    case ErrorKind::kInternal:
      break;
  }
  return Outcome::reject(std::string(errorKindName(error.kind)));
}

namespace detail {

void KeyedQueue::push(ItemPtr item) {
  {
    std::lock_guard lock(mutex_);
    std::string key = item->key;
    auto& line = waiting_[key];
    line.push_back(std::move(item));
    if (line.size() == 1 && busy_.count(key) == 0) {
      ready_.push_back(std::move(key));
    }
  }
  cv_.notify_one();
}

ItemPtr KeyedQueue::pop() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return closed_ || !ready_.empty(); });
  if (closed_) {
    return nullptr;
  }
  std::string key = std::move(ready_.front());
  ready_.pop_front();
  auto found = waiting_.find(key);
  ItemPtr item = std::move(found->second.front());
  found->second.pop_front();
  if (found->second.empty()) {
    waiting_.erase(found);
  }
  busy_.insert(key);
  return item;
}

void KeyedQueue::done(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    busy_.erase(key);
    if (waiting_.count(key) != 0) {
      ready_.push_back(key);
    }
  }
  cv_.notify_one();
}

std::vector<ItemPtr> KeyedQueue::close() {
  std::vector<ItemPtr> left;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    for (auto& [key, line] : waiting_) {
      left.insert(left.end(), line.begin(), line.end());
    }
    waiting_.clear();
    ready_.clear();
  }
  cv_.notify_all();
  return left;
}

void KeyedQueue::reopen() {
  std::lock_guard lock(mutex_);
  closed_ = false;
}

namespace {

events::MessageTerminated recordOf(const Consumer::State& state, const Item& item, std::string_view reason,
                                   const std::string& message) {
  return events::MessageTerminated{.id = events::newEventId(),
                                   .time = log::nowRfc3339(),
                                   .service = state.options.service,
                                   .stream = state.options.stream,
                                   .consumer = state.options.config.durable,
                                   .subject = item.delivery.subject,
                                   .stream_sequence = item.delivery.stream_sequence,
                                   .msg_id = item.delivery.msg_id,
                                   .deliveries = item.delivery.delivery_count,
                                   .reason = std::string(reason),
                                   .message = message};
}

void publishReport(Consumer::State& state, const events::MessageTerminated& record) {
  const std::string text = events::encode(record).dump();
  if (state.reports.status) {
    auto key = events::terminatedKey(record.stream, record.consumer, record.stream_sequence);
    if (auto put = state.reports.status->put(key, text); !put.ok()) {
      log::warn("cannot store the record of a terminated message", {{"key", key}, {"error", put.error().describe()}});
    }
  }
  if (!state.reports.public_event) {
    return;
  }
  auto event = events::toCloudEvent(record, "/flotilla/" + record.service);
  auto msg_id = "terminated/" + record.stream + "/" + record.consumer + "/" + std::to_string(record.stream_sequence);
  auto sent = state.js->publish(events::terminatedSubject(record.stream, record.consumer), events::encode(event).dump(),
                                msg_id);
  if (!sent.ok()) {
    log::warn("cannot publish the event of a terminated message", {{"error", sent.error().describe()}});
  }
}

}  // namespace

void terminate(Consumer::State& state, Item& item, std::string_view reason, const std::string& message) {
  if (auto termed = item.message.term(); !termed.ok()) {
    state.metrics
        .counter("ack_failures_total", "Acks, naks or terms the server did not confirm",
                 {{"consumer", state.options.label}})
        .Increment();
  }
  item.settled = true;
  auto record = recordOf(state, item, reason, message);
  state.metrics
      .counter("messages_terminated_total", "Messages terminated and reported, by consumer and reason",
               {{"consumer", state.options.label}, {"reason", std::string(reason)}})
      .Increment();
  log::error("message terminated; `flotilla redrive` can re-derive it",
             {{"consumer", record.consumer},
              {"stream", record.stream},
              {"subject", record.subject},
              {"msg_id", record.msg_id},
              {"stream_sequence", static_cast<int64_t>(record.stream_sequence)},
              {"deliveries", static_cast<int64_t>(record.deliveries)},
              {"reason", record.reason},
              {"error", message}});
  publishReport(state, record);
  if (state.options.on_terminated) {
    state.options.on_terminated(record);
  }
}

}  // namespace detail
}  // namespace flotilla::service
