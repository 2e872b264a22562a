// The consumer runtime (consumer.h): fetch, per-key dispatch, handle, settle, keep alive, give up.
#include "flotilla/service/consumer.h"

#include <algorithm>
#include <exception>
#include <optional>

#include "consumer_state.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"

namespace flotilla::service {

using detail::Clock;
using detail::Item;
using detail::ItemPtr;
using std::chrono::milliseconds;

namespace {

//! How often a held message gets an in-progress ack: well inside ack_wait.
milliseconds keepaliveInterval(const ConsumerOptions& options) {
  return std::max(milliseconds(100), options.config.ack_wait / 3);
}

//! One delivery more than the runtime allows: the extra one arrives only when a process died while handling the
//! last allowed delivery (a crash loop), and is terminated and reported without running the handler.
int64_t maxDeliverFor(int64_t max_deliveries) {
  return max_deliveries > 0 ? max_deliveries + 1 : -1;
}

Status bindDurable(Consumer::State& state) {
  bus::ConsumerConfig config = state.options.config;
  config.max_deliver = maxDeliverFor(state.options.max_deliveries);
  if (state.options.create) {
    FLOTILLA_TRY(state.js->ensureConsumer(state.options.stream, config));
  }
  auto bound = state.js->bindPull(state.options.stream, config.durable);
  FLOTILLA_TRY(bound);
  std::lock_guard lock(state.slots_mutex);  // stop() interrupts state.consumer under it
  state.consumer = std::move(bound).value();
  state.bound = true;
  return {};
}

ItemPtr itemOf(Consumer::State& state, bus::Message message) {
  auto item = std::make_shared<Item>();
  if (auto meta = message.metadata(); meta.ok()) {
    item->delivery.stream_sequence = meta->stream_sequence;
    item->delivery.delivery_count = std::max<uint64_t>(1, meta->num_delivered);
    item->delivery.timestamp_ms = meta->timestamp_ns / 1'000'000;
    item->delivery.pending = meta->num_pending;
  }
  item->delivery.subject = std::string(message.subject());
  item->delivery.msg_id = message.header("Nats-Msg-Id").value_or("");
  item->key = state.options.key ? state.options.key(message) : item->delivery.subject;
  item->message = std::move(message);
  item->last_keepalive = Clock::now();
  Item* raw = item.get();
  // The handler's "still working": a fresh budget, and an in-progress ack at most once a second.
  item->delivery.progress = [raw] {
    std::lock_guard lock(raw->mutex);
    auto now = Clock::now();
    raw->budget_start = now;
    if (!raw->settled && now - raw->last_keepalive >= std::chrono::seconds(1)) {
      (void)raw->message.inProgress();
      raw->last_keepalive = now;
    }
  };
  return item;
}

void enqueue(Consumer::State& state, ItemPtr item) {
  {
    std::lock_guard lock(state.slots_mutex);
    ++state.outstanding;
  }
  state.queue.push(std::move(item));
}

//! A fetch error: a deleted durable is created and bound again, anything else waits with backoff.
void recoverFetch(Consumer::State& state, const Error& error, uint64_t& failures) {
  state.fetch_ok = false;
  state.metrics
      .counter("fetch_errors_total", "Failed fetches from a durable consumer", {{"consumer", state.options.label}})
      .Increment();
  auto delay = state.options.fetch_backoff.delay(++failures);
  log::warn("fetch failed, retrying", {{"consumer", state.options.config.durable},
                                       {"retry_in_ms", static_cast<int64_t>(delay.count())},
                                       {"error", error.describe()}});
  std::unique_lock lock(state.slots_mutex);
  state.slots_cv.wait_for(lock, delay, [&] { return state.stopping.load(); });
  lock.unlock();
  if (error.kind == ErrorKind::kNotFound && !state.stopping) {
    state.bound = false;
    if (auto rebound = bindDurable(state); !rebound.ok()) {
      log::warn("cannot re-create the durable consumer",
                {{"consumer", state.options.config.durable}, {"error", rebound.error().describe()}});
    }
  }
}

//! The consumer's lag: what the stream still held for the durable when its latest message was delivered
//! (num_pending), 0 after a fetch that found nothing.
void notePending(Consumer::State& state, const std::vector<bus::Message>& batch) {
  uint64_t pending = 0;
  if (!batch.empty()) {
    if (auto meta = batch.back().metadata(); meta.ok()) {
      pending = meta->num_pending;
    }
  }
  state.metrics
      .gauge("consumer_pending_messages",
             "Messages the stream holds for this durable that it has not delivered yet (JetStream num_pending)",
             {{"consumer", state.options.label}, {"durable", state.options.config.durable}})
      .Set(static_cast<double>(pending));
}

bool idle(Consumer::State& state) {
  std::lock_guard lock(state.slots_mutex);
  return state.outstanding == 0;
}

void fetchLoop(Consumer::State& state) {
  const int capacity = std::max(1, state.options.workers * std::max(1, state.options.queue));
  uint64_t failures = 0;
  while (!state.stopping) {
    int free_slots = 0;
    {
      std::unique_lock lock(state.slots_mutex);
      state.slots_cv.wait(lock, [&] { return state.stopping || state.outstanding < capacity; });
      if (state.stopping) {
        return;
      }
      free_slots = capacity - state.outstanding;
    }
    auto batch = state.consumer.fetch(free_slots, state.options.fetch_timeout);
    if (!batch.ok()) {
      if (state.stopping) {
        return;  // stop() woke the fetch (PullConsumer::interrupt): not a failure
      }
      recoverFetch(state, batch.error(), failures);
      continue;
    }
    failures = 0;
    state.fetch_ok = true;
    notePending(state, *batch);
    if (batch->empty() && state.options.on_idle && idle(state)) {
      state.options.on_idle();
    }
    for (auto& message : *batch) {
      if (state.stopping) {
        (void)message.nak();  // fetched but not started: redelivered at once, here or to another replica
        continue;
      }
      enqueue(state, itemOf(state, std::move(message)));
    }
  }
}

//! Runs the handler; an exception becomes a termination (reason HandlerThrew), never a crash or a redelivery.
std::optional<Outcome> runHandler(Consumer::State& state, Item& item) {
  std::string problem;
  try {
    return state.handler(item.message, item.delivery);
  } catch (const std::exception& e) {
    problem = e.what();
  } catch (...) {
    problem = "a non-standard exception";
  }
  state.metrics
      .counter("handler_exceptions_total", "Handlers that threw (message terminated)",
               {{"consumer", state.options.label}})
      .Increment();
  std::lock_guard lock(item.mutex);
  if (!item.settled) {
    detail::terminate(state, item, events::kTerminatedThrew, "handler threw: " + problem);
  }
  return std::nullopt;
}

//! The message whose handler runs on this thread (a worker's), so wakeParked() called by a handler does not wake
//! that handler's own message.
struct RunningHere {
  const Consumer::State* state = nullptr;
  Item* item = nullptr;
};
thread_local RunningHere running_here;

prometheus::Counter& wakesCounter(Consumer::State& state) {
  return state.metrics.counter("wakes_total", "Parked messages run again early by wakeParked()",
                               {{"consumer", state.options.label}});
}

void park(Consumer::State& state, const ItemPtr& item, milliseconds delay) {
  {
    std::lock_guard lock(state.live_mutex);
    state.running.erase(item);
    item->due = Clock::now() + delay;
    if (item->woken) {
      // woken while its handler ran: what it waits for may have happened after the handler looked
      item->due = Clock::now();
      state.wake_requested = true;
      wakesCounter(state).Increment();
    }
    ++item->delivery.attempt;
    state.parked.push_back(item);
  }
  state.keeper_cv.notify_all();
}

//! Applies the outcome (item.mutex held); returns the settle action for metrics.
std::string settle(Consumer::State& state, const ItemPtr& item, const Outcome& outcome) {
  Item& it = *item;
  const bool last = state.options.max_deliveries > 0 &&
                    static_cast<int64_t>(it.delivery.delivery_count) >= state.options.max_deliveries;
  Status settled;
  std::string action;
  switch (outcome.action) {
    case Outcome::Action::kAck:
      settled = state.options.ack_sync ? it.message.ackSync() : it.message.ack();
      action = "ack";
      break;
    case Outcome::Action::kRetry:
      if (last) {
        detail::terminate(state, it, events::kTerminatedExhausted,
                          "gave up after " + std::to_string(it.delivery.delivery_count) +
                              " deliveries; last result: " + outcome.result);
        return "term";
      }
      settled = it.message.nakWithDelay(outcome.delay);
      action = "nak";
      break;
    case Outcome::Action::kWait:
      park(state, item, outcome.delay);
      return "wait";
    case Outcome::Action::kReject:
      settled = it.message.term();
      action = "term";
      break;
  }
  it.settled = true;
  if (!settled.ok()) {
    // The message comes back after ack_wait; handlers are idempotent.
    state.metrics
        .counter("ack_failures_total", "Acks, naks or terms the server did not confirm",
                 {{"consumer", state.options.label}})
        .Increment();
    log::warn("cannot settle a message", {{"consumer", state.options.config.durable},
                                          {"action", action},
                                          {"subject", it.delivery.subject},
                                          {"error", settled.error().describe()}});
  }
  return action;
}

void observe(Consumer::State& state, const Item& item, const Outcome& outcome, const std::string& action,
             double seconds) {
  const auto& label = state.options.label;
  state.metrics
      .counter("messages_total", "Messages handled, by consumer and outcome",
               {{"consumer", label}, {"outcome", outcome.result}})
      .Increment();
  state.metrics
      .counter("settled_total", "Messages settled, by consumer and action (ack, nak, wait, term)",
               {{"consumer", label}, {"action", action}})
      .Increment();
  state.metrics
      .histogram("handler_duration_seconds", "Time to handle one message", Metrics::durationBuckets(),
                 {{"consumer", label}})
      .Observe(seconds);
  log::debug("message handled", {{"consumer", state.options.config.durable},
                                 {"subject", item.delivery.subject},
                                 {"stream_sequence", static_cast<int64_t>(item.delivery.stream_sequence)},
                                 {"outcome", outcome.result},
                                 {"action", action}});
  if (state.options.on_handled) {
    state.options.on_handled(outcome, seconds);
  }
}

//! Handles one item: a delivery beyond the maximum (its process died on the last one) is terminated unrun.
void process(Consumer::State& state, const ItemPtr& item) {
  const auto max = state.options.max_deliveries;
  if (max > 0 && static_cast<int64_t>(item->delivery.delivery_count) > max) {
    std::lock_guard lock(item->mutex);
    detail::terminate(state, *item, events::kTerminatedExhausted,
                      "delivered " + std::to_string(item->delivery.delivery_count) +
                          " times; the handling process did not survive the last allowed delivery");
    return;
  }
  auto& in_flight =
      state.metrics.gauge("in_flight_messages", "Messages being handled", {{"consumer", state.options.label}});
  in_flight.Increment();
  const auto started = Clock::now();
  {
    std::lock_guard lock(item->mutex);
    item->budget_start = started;
  }
  {
    std::lock_guard lock(state.live_mutex);
    state.running.insert(item);
    item->woken = false;
  }
  running_here = RunningHere{&state, item.get()};
  auto outcome = runHandler(state, *item);
  running_here = RunningHere{};
  in_flight.Decrement();
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  // It leaves `running` only now (park() moves it to `parked` under the same lock), so a wakeParked() between
  // the handler's end and its parking still reaches it.
  auto finish = [&] {
    std::lock_guard live(state.live_mutex);
    state.running.erase(item);
  };
  std::unique_lock lock(item->mutex);
  if (!outcome) {
    lock.unlock();
    finish();
    observe(state, *item, Outcome::reject("exception"), "term", seconds);
    return;
  }
  if (item->settled) {
    lock.unlock();
    finish();
    log::warn("a handler finished after its message was terminated for its time budget",
              {{"consumer", state.options.config.durable}, {"subject", item->delivery.subject}});
    return;
  }
  auto action = settle(state, item, *outcome);
  lock.unlock();
  finish();
  observe(state, *item, *outcome, action, seconds);
}

void workerLoop(Consumer::State& state) {
  while (auto item = state.queue.pop()) {
    process(state, item);
    state.queue.done(item->key);
    {
      std::lock_guard lock(state.slots_mutex);
      --state.outstanding;
    }
    state.slots_cv.notify_all();
  }
}

//! Terminates a running item past its budget, else sends an in-progress ack when one is due (item.mutex held).
void keepItem(Consumer::State& state, Item& item, bool running, Clock::time_point now) {
  if (item.settled) {
    return;
  }
  const auto budget = state.options.budget;
  if (running && budget.count() > 0 && now - item.budget_start > budget) {
    detail::terminate(state, item, events::kTerminatedOverBudget,
                      "handler ran past its time budget of " + std::to_string(budget.count()) + " ms");
    return;
  }
  if (now - item.last_keepalive >= keepaliveInterval(state.options)) {
    (void)item.message.inProgress();
    item.last_keepalive = now;
  }
}

//! In-progress acks for held messages, the time budget of running ones, and parked ones that are due.
void keepItems(Consumer::State& state) {
  const auto now = Clock::now();
  std::vector<ItemPtr> running;
  std::vector<ItemPtr> waiting;
  std::vector<ItemPtr> due;
  {
    std::lock_guard lock(state.live_mutex);
    state.wake_requested = false;
    running.assign(state.running.begin(), state.running.end());
    auto split =
        std::stable_partition(state.parked.begin(), state.parked.end(), [&](const ItemPtr& p) { return p->due > now; });
    due.assign(split, state.parked.end());
    state.parked.erase(split, state.parked.end());
    waiting = state.parked;
  }
  // Messages of one key run in stream order, also when several become due at once (a wake).
  std::stable_sort(due.begin(), due.end(), [](const ItemPtr& a, const ItemPtr& b) {
    return a->delivery.stream_sequence < b->delivery.stream_sequence;
  });
  for (const auto& item : running) {
    std::lock_guard lock(item->mutex);
    keepItem(state, *item, true, now);
  }
  for (const auto& item : waiting) {
    std::lock_guard lock(item->mutex);
    keepItem(state, *item, false, now);
  }
  for (auto& item : due) {
    enqueue(state, std::move(item));
  }
}

void keeperLoop(Consumer::State& state) {
  const auto tick = std::min(milliseconds(100), keepaliveInterval(state.options));
  while (!state.stopping) {
    keepItems(state);
    std::unique_lock lock(state.live_mutex);
    state.keeper_cv.wait_for(lock, tick, [&] { return state.stopping.load() || state.wake_requested; });
  }
}

void handBack(const std::vector<ItemPtr>& items) {
  for (const auto& item : items) {
    std::lock_guard lock(item->mutex);
    if (!item->settled) {
      (void)item->message.nak();
      item->settled = true;
    }
  }
}

}  // namespace

bus::ConsumerConfig agentDeployConsumer(std::string_view cluster, std::chrono::milliseconds ack_wait,
                                        int64_t max_deliveries) {
  return bus::ConsumerConfig{.durable = "agent-" + events::escapeToken(cluster),
                             .filter_subject = events::deploySubject(cluster),
                             .ack_wait = ack_wait,
                             .max_deliver = maxDeliverFor(max_deliveries),
                             .description = "flotilla agent of cluster " + std::string(cluster)};
}

Consumer::Consumer(std::shared_ptr<bus::JetStream> js, ConsumerOptions options, Handler handler, Metrics& metrics,
                   TerminationReports reports)
    : state_(std::make_shared<State>(std::move(js), std::move(options), std::move(handler), metrics,
                                     std::move(reports))) {}

Consumer::~Consumer() {
  stop();
}

Status Consumer::start() {
  State& state = *state_;
  if (state.started) {
    return {};
  }
  if (!state.options.create) {
    // Before any thread runs: the runtime's ack_wait and delivery bound are the durable's.
    auto info = state.js->consumerInfo(state.options.stream, state.options.config.durable);
    FLOTILLA_TRY(info);
    state.options.config.ack_wait = info->config.ack_wait;
    const int64_t max_deliver = info->config.max_deliver;
    state.options.max_deliveries = max_deliver > 1 ? max_deliver - 1 : (max_deliver <= 0 ? 0 : 1);
  }
  FLOTILLA_TRY(bindDurable(state));
  state.started = true;
  state.stopping = false;
  state.queue.reopen();
  for (int i = 0; i < std::max(1, state.options.workers); ++i) {
    state.workers.emplace_back([&state] { workerLoop(state); });
  }
  state.keeper = std::thread([&state] { keeperLoop(state); });
  state.fetcher = std::thread([&state] { fetchLoop(state); });
  log::info("consuming", {{"stream", state.options.stream},
                          {"consumer", state.options.config.durable},
                          {"workers", static_cast<int64_t>(std::max(1, state.options.workers))},
                          {"max_deliveries", state.options.max_deliveries}});
  return {};
}

void Consumer::stop() {
  State& state = *state_;
  if (!state.started.exchange(false)) {
    return;
  }
  {
    std::lock_guard lock(state.slots_mutex);
    state.stopping = true;
    // A fetch may wait long (fetch_timeout): wake it rather than wait it out.
    state.consumer.interrupt();
  }
  state.slots_cv.notify_all();
  if (state.fetcher.joinable()) {
    state.fetcher.join();
  }
  handBack(state.queue.close());
  for (auto& worker : state.workers) {
    worker.join();
  }
  state.workers.clear();
  { std::lock_guard lock(state.live_mutex); }
  state.keeper_cv.notify_all();
  if (state.keeper.joinable()) {
    state.keeper.join();
  }
  handBack(state.parked);
  state.parked.clear();
  state.bound = false;
}

void Consumer::wakeParked() {
  State& state = *state_;
  {
    std::lock_guard lock(state.live_mutex);
    for (const auto& item : state.running) {
      // A handler's own call does not wake its message; the others run again if they park.
      if (running_here.state != &state || item.get() != running_here.item) {
        item->woken = true;
      }
    }
    const auto now = Clock::now();
    for (const auto& item : state.parked) {
      item->due = std::min(item->due, now);
    }
    wakesCounter(state).Increment(static_cast<double>(state.parked.size()));
    state.wake_requested = true;
  }
  state.keeper_cv.notify_all();
}

bool Consumer::healthy(std::string& why) const {
  if (!state_->bound) {
    why = "consumer " + state_->options.config.durable + " not bound";
    return false;
  }
  if (!state_->fetch_ok) {
    why = "cannot fetch from the " + state_->options.config.durable + " consumer";
    return false;
  }
  return true;
}

const ConsumerOptions& Consumer::options() const {
  return state_->options;
}

}  // namespace flotilla::service
