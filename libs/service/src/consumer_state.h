// flotilla/service/src/consumer_state.h
//
// The inside of a Consumer (consumer.h): the messages it holds and the per-key queue its workers take them from.
// Private to libs/service.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/service/consumer.h"

namespace flotilla::service::detail {

using Clock = std::chrono::steady_clock;

//! A message the runtime holds: queued, running, or parked (Outcome::wait).
struct Item {
  bus::Message message;
  Delivery delivery;
  std::string key;
  //! Serialises the calls on `message` (the handler's progress(), the keeper's in-progress acks, settling).
  std::mutex mutex;
  Clock::time_point budget_start;    //!< the handler's start or its last progress()
  Clock::time_point last_keepalive;  //!< the last in-progress ack (or the fetch)
  Clock::time_point due;             //!< when a parked message runs again
  bool woken = false;    //!< wakeParked() ran while its handler ran: if it parks, it runs again at once (live_mutex)
  bool settled = false;  //!< acked, nak'd or terminated: no more calls on `message`
};
using ItemPtr = std::shared_ptr<Item>;

//! Items by key: one key is handed to one worker at a time, in arrival order; other keys run in parallel.
class KeyedQueue {
 public:
  void push(ItemPtr item);
  //! The oldest item of a key no worker holds; waits. nullptr once closed.
  ItemPtr pop();
  //! The worker finished an item of `key`; the key's next item becomes available.
  void done(const std::string& key);
  //! Wakes every pop() with nullptr and returns the items still queued.
  std::vector<ItemPtr> close();
  //! Accepts items again after close() (a restarted Consumer).
  void reopen();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<ItemPtr>> waiting_;
  std::set<std::string> busy_;
  std::deque<std::string> ready_;  //!< keys with waiting items and no worker
  bool closed_ = false;
};

}  // namespace flotilla::service::detail

namespace flotilla::service {

struct Consumer::State {
  State(std::shared_ptr<bus::JetStream> js_in, ConsumerOptions options_in, Handler handler_in, Metrics& metrics_in,
        TerminationReports reports_in)
      : js(std::move(js_in)),
        options(std::move(options_in)),
        handler(std::move(handler_in)),
        metrics(metrics_in),
        reports(std::move(reports_in)) {}

  std::shared_ptr<bus::JetStream> js;
  ConsumerOptions options;
  Handler handler;
  Metrics& metrics;
  TerminationReports reports;

  bus::PullConsumer consumer;
  detail::KeyedQueue queue;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::atomic<bool> bound{false};
  std::atomic<bool> fetch_ok{false};

  std::mutex slots_mutex;
  std::condition_variable slots_cv;
  int outstanding = 0;  //!< queued + running (parked ones do not hold a slot)

  std::mutex live_mutex;
  std::condition_variable keeper_cv;
  std::set<detail::ItemPtr> running;
  std::vector<detail::ItemPtr> parked;
  bool wake_requested = false;  //!< parked messages were made due: the keeper queues them now (live_mutex)

  std::thread fetcher;
  std::thread keeper;
  std::vector<std::thread> workers;
};

namespace detail {
//! Terminates the message (term) and reports it: log line, metric, KV record, public CloudEvent. Call with
//! item.mutex held.
void terminate(Consumer::State& state, Item& item, std::string_view reason, const std::string& message);
}  // namespace detail

}  // namespace flotilla::service
