// flotilla/service/consumer.h
//
// The one consumer runtime every stage uses for its durable JetStream consumers (docs/pipeline.md, "Delivery
// policy"). A Consumer creates its durable (with a maximum delivery count) and binds it, then:
//
//   fetch    one thread pulls as many messages as there are free slots, waiting for the next message (no sleep
//            between fetches); a deleted durable is created and bound again
//   order    messages with the same key (by default the subject, e.g. one bundle or one cluster) are handled one
//            at a time in stream order; different keys run in parallel on `workers` threads
//   handle   the service's Handler returns an Outcome; an exception never leaves the runtime
//   settle   ack | nak with delay | wait (park, not a failure) | term, and metrics and a log line per message
//   keep     while a message is handled or parked, the runtime sends in-progress acks so JetStream neither
//            redelivers it nor counts a delivery
//   give up  a retry on the last allowed delivery, a handler that throws, or a handler that runs past its time
//            budget without calling Delivery::progress(): the message is terminated and reported (log line with
//            message id, subject, consumer and reason; messages_terminated_total; the CloudEvent
//            io.flotilla.message.terminated; the KV record status/terminated.<stream>.<consumer>.<sequence> that
//            `flotilla redrive` re-derives the work from)
//
// Waiting is not failing: Outcome::wait parks the message in this process (in-progress acks keep it) and runs
// the handler again after the delay, so a deploy waiting for a dependency never uses up its delivery count and
// never blocks the other keys; wakeParked() runs every parked message again at once (the agent calls it when a
// release or a bundle's new state may have met what they wait for). The time budget counts from the handler's start or
// its last progress() call, so an expected long wait (a health timeout) that calls progress() is not an overrun.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/events/terminated.h"

namespace flotilla::service {

//! What the runtime does with a message after the handler ran.
struct Outcome {
  enum class Action {
    kAck,     //!< done (its effects are durable)
    kRetry,   //!< failed for now: nak with `delay` (uses a delivery; the last one is terminated and reported)
    kWait,    //!< a precondition is not met yet: park for `delay`, then run again (uses no delivery)
    kReject,  //!< never redeliver (bad input the handler reported itself)
  };
  Action action = Action::kAck;
  std::chrono::milliseconds delay{0};  //!< for kRetry and kWait
  std::string result;                  //!< metrics label (rendered, stale, invalid, retry, ...)

  static Outcome ack(std::string result) { return Outcome{Action::kAck, {}, std::move(result)}; }
  static Outcome retry(std::chrono::milliseconds delay, std::string result = "retry") {
    return Outcome{Action::kRetry, delay, std::move(result)};
  }
  static Outcome wait(std::chrono::milliseconds delay, std::string result = "waiting") {
    return Outcome{Action::kWait, delay, std::move(result)};
  }
  static Outcome reject(std::string result) { return Outcome{Action::kReject, {}, std::move(result)}; }
};

//! Exponential delays: base * 2^(attempt-1), capped at max (attempt 1 = the first delivery).
class Backoff {
 public:
  Backoff(std::chrono::milliseconds base, std::chrono::milliseconds max) : base_(base), max_(max) {}
  [[nodiscard]] std::chrono::milliseconds delay(uint64_t attempt) const;
  [[nodiscard]] std::chrono::milliseconds base() const { return base_; }
  [[nodiscard]] std::chrono::milliseconds max() const { return max_; }

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds max_;
};

//! The one mapping from a failure's kind to what happens to the message: kTransient and kConflict retry with
//! backoff (by delivery count), kWait and kStoreFull wait (by attempt, without using a delivery: a full store
//! never gets work terminated), everything else (kInvalid,
//! kNotFound, kPermanent, kInternal) is rejected, labelled with the kind's name.
Outcome outcomeFor(const Error& error, uint64_t delivery_count, uint64_t attempt, const Backoff& backoff);

//! Where a message came from, for ids, logs and backoff. The first three fields keep their order (tests build
//! `Delivery{sequence, count}`).
struct Delivery {
  uint64_t stream_sequence = 0;            //!< in the consumer's stream
  uint64_t delivery_count = 1;             //!< JetStream's count, 1 on the first delivery
  std::function<void()> progress = [] {};  //!< "still working": in-progress ack and a fresh time budget
  std::string subject;
  std::string msg_id;        //!< Nats-Msg-Id ("" when none)
  int64_t timestamp_ms = 0;  //!< when the stream stored it
  uint64_t attempt = 1;      //!< handler runs of this delivery (a parked message runs again with attempt + 1)
  //! Messages the stream still held for this consumer when this one was delivered (JetStream's num_pending):
  //! more than 0 means more work is on its way, e.g. to write derived records once for a burst.
  uint64_t pending = 0;
};

//! The service's handler: one message, one Outcome. May throw (the runtime terminates and reports the message).
using Handler = std::function<Outcome(const bus::Message& message, const Delivery& delivery)>;

//! Default of ConsumerOptions::max_deliveries (documented in docs/pipeline.md).
inline constexpr int64_t kDefaultMaxDeliveries = 10;

struct ConsumerOptions {
  std::string service;  //!< "bundler", "scheduler", "agent": logs, the record and the CloudEvent source
  std::string label;    //!< the `consumer` metrics label ("commits", "bundles", "status", "deploy")
  std::string stream;
  //! The durable (name, filter, ack_wait, description, ...); max_deliver is set from max_deliveries.
  bus::ConsumerConfig config;
  int64_t max_deliveries = kDefaultMaxDeliveries;
  int workers = 1;  //!< keys handled in parallel
  int queue = 2;    //!< messages fetched ahead per worker
  //! One fetch's wait for the first message. A fetch returns as soon as a message is there and stop() wakes a
  //! waiting one, so this costs neither latency nor shutdown time; it bounds how often an idle consumer pulls and,
  //! with on_idle, how soon an empty durable is noticed.
  std::chrono::milliseconds fetch_timeout{1000};
  Backoff fetch_backoff{std::chrono::milliseconds(500), std::chrono::milliseconds(10000)};
  //! Time a handler may run without calling progress(); 0 = no budget.
  std::chrono::milliseconds budget{std::chrono::minutes(10)};
  //! The ordering key; nullptr = the subject.
  std::function<std::string(const bus::Message&)> key;
  bool ack_sync = true;  //!< wait for the server to confirm acks
  //! Called after a fetch that found nothing (the backlog is handled).
  std::function<void()> on_idle;
  //! Called after every handled message with its outcome and the handler's seconds (service-specific metrics).
  std::function<void(const Outcome&, double)> on_handled;
  //! Called after a message was terminated and reported (e.g. an agent, which may write no KV, forwards the
  //! record to the hub on its status subject).
  std::function<void(const events::MessageTerminated&)> on_terminated;
  //! false: the durable is someone else's to create (an agent's: the scheduler creates it when the cluster
  //! registers). The runtime then only binds: a missing durable is kNotFound, and start() takes ack_wait and
  //! max_deliveries from the durable as the server holds it (config.ack_wait and max_deliveries are replaced).
  bool create = true;
};

//! Defaults of the agents' deploy durables (the scheduler's --agent-ack-wait, --agent-max-deliveries).
inline constexpr std::chrono::milliseconds kDefaultAgentAckWait = std::chrono::seconds(30);

//! The durable of one cluster's agent on FLOTILLA_DEPLOY: agent-<escaped cluster> (identity::agentConsumerName)
//! filtered to flotilla.deploy.<cluster>, with max_deliver one above `max_deliveries` like every durable of the
//! runtime. The scheduler creates it when the cluster registers and deletes it when the cluster is deregistered;
//! the agent only binds it (ConsumerOptions::create = false).
bus::ConsumerConfig agentDeployConsumer(std::string_view cluster,
                                        std::chrono::milliseconds ack_wait = kDefaultAgentAckWait,
                                        int64_t max_deliveries = kDefaultMaxDeliveries);

//! Where terminated messages are reported besides the log and the metrics.
struct TerminationReports {
  std::shared_ptr<bus::KeyValue> status;  //!< KV `status` for the record; nullptr = no record
  bool public_event = true;               //!< publish io.flotilla.message.terminated on flotilla.events.>
};

class Consumer {
 public:
  Consumer(std::shared_ptr<bus::JetStream> js, ConsumerOptions options, Handler handler, Metrics& metrics,
           TerminationReports reports = {});
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  //! Creates or updates the durable, binds it and starts the threads. Idempotent.
  Status start();
  //! Stops fetching, lets running handlers finish, hands queued and parked messages back (nak). Idempotent.
  void stop();
  //! Every message parked by Outcome::wait runs again now instead of at the end of its delay: in stream order,
  //! behind the messages already queued for its key; a handler that still has to wait parks it again. A message
  //! whose handler is running during the call runs again at once if it then parks, so no wake is lost. Thread-safe
  //! and callable from inside a handler: it only marks the parked messages due and wakes the keeper thread, which
  //! queues them (metric wakes_total{consumer}: messages woken this way).
  void wakeParked();
  //! Bound and the last fetch worked.
  [[nodiscard]] bool healthy(std::string& why) const;
  [[nodiscard]] const ConsumerOptions& options() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace flotilla::service
