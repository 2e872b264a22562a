// flotilla/bus/jetstream.h
//
// JetStream on top of a Connection: idempotent stream and consumer setup, de-duplicated publishing
// (Nats-Msg-Id), durable pull consumers and direct message reads.
//
// The durable-consumer rule (gotcha G3): durables are created only with ensureConsumer() (js_AddConsumer) and
// then bound with bindPull(). libnats deletes a durable that a subscribe call created when that subscription
// unsubscribes, which would lose the consumer's position; a bound subscription never deletes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/connection.h"

namespace flotilla::bus {

//! Where a stream (or bucket) keeps its messages.
enum class StorageType { kFile, kMemory };

//! The settings ensureStream() applies; unset fields mean "no limit" / server defaults.
struct StreamConfig {
  std::string name;
  std::vector<std::string> subjects;
  StorageType storage = StorageType::kFile;
  std::chrono::milliseconds max_age{0};  //!< 0 = keep forever
  int64_t max_bytes = -1;                //!< -1 = unlimited
  int64_t max_msgs_per_subject = -1;     //!< -1 = unlimited; 1 keeps only the latest per subject
  int replicas = 1;
  std::chrono::milliseconds duplicate_window = std::chrono::minutes(2);  //!< Nats-Msg-Id de-duplication window
  bool allow_rollup = false;                                             //!< honour the Nats-Rollup header
  bool allow_direct = false;                                             //!< allow direct gets from any replica
  bool discard_new = false;  //!< at a limit, reject new messages instead of dropping old ones
  //! Consumers the stream allows; -1 = the server's default (nats-server 2.15: 1,000 per stream, unless the account
  //! sets a limit).
  int64_t max_consumers = -1;
};

//! Where a new consumer starts: the first message, only new ones, or the last message of each subject.
enum class DeliverPolicy { kAll, kNew, kLastPerSubject };

//! A durable pull consumer with explicit acks (the only kind Flotilla uses).
struct ConsumerConfig {
  std::string durable;
  std::string filter_subject;  //!< "" = every subject of the stream
  std::chrono::milliseconds ack_wait = std::chrono::seconds(30);
  int64_t max_deliver = -1;      //!< -1 = redeliver forever
  int64_t max_ack_pending = -1;  //!< -1 = server default
  DeliverPolicy deliver_policy = DeliverPolicy::kAll;
  //! Redelivery delays after an ack timeout (needs max_deliver > backoff.size()); empty = ack_wait each time.
  std::vector<std::chrono::milliseconds> backoff;
  std::string description;
};

//! The stream's answer to a publish.
struct PublishAck {
  std::string stream;
  uint64_t sequence = 0;
  bool duplicate = false;  //!< the server had already stored a message with this Nats-Msg-Id
};

//! A stream's counters.
struct StreamInfo {
  std::string name;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t first_sequence = 0;
  uint64_t last_sequence = 0;
  int64_t consumers = 0;
  int64_t max_bytes = -1;      //!< the size cap (-1 = none)
  bool discard_new = false;    //!< at the cap new messages are refused (else the oldest are dropped)
  int replicas = 1;            //!< copies kept on a JetStream cluster
  int64_t max_consumers = -1;  //!< as configured (-1 = the server's default)
  //! Messages per subject, filled only when streamInfo() was given a subjects filter.
  std::map<std::string, uint64_t> subjects;
};

//! A consumer's counters.
struct ConsumerInfo {
  std::string stream;
  std::string name;
  uint64_t num_pending = 0;     //!< not yet delivered
  int64_t num_ack_pending = 0;  //!< delivered, not yet acked
  int64_t num_redelivered = 0;
  uint64_t delivered_stream_sequence = 0;
  uint64_t ack_floor_stream_sequence = 0;
  //! The durable's settings as the server holds them: durable, filter_subject, ack_wait, max_deliver,
  //! max_ack_pending and description (a client that only binds learns them here).
  ConsumerConfig config;
};

class JetStream;

namespace detail {
struct PullConsumerImpl;
}  // namespace detail

//! A pull subscription bound to an existing durable consumer. Move-only; destroying it never deletes the
//! consumer. fetch() may be called from one thread at a time; on a default-constructed one it fails with kInvalid.
class PullConsumer : public detail::OwnedImpl<detail::PullConsumerImpl, std::shared_ptr<detail::PullConsumerImpl>> {
 public:
  using Impl = detail::PullConsumerImpl;
  using OwnedImpl::OwnedImpl;

  //! Up to `batch` messages, waiting at most `timeout` for the first: returns as soon as the durable has any (what
  //! it holds then, up to `batch`), so a long timeout costs no latency. No messages in time is an empty vector,
  //! not an error. Each message must be acked, nak'd or term'd (or it is redelivered after ack_wait).
  Result<std::vector<Message>> fetch(int batch, std::chrono::milliseconds timeout);
  //! Wakes a fetch() waiting on another thread (it fails with kTransient) and makes every later fetch fail: for
  //! stopping a consumer that waits long. Idempotent; the durable is kept.
  void interrupt();
  //! The consumer's counters as the server sees them.
  Result<ConsumerInfo> info();
};

//! Options of a JetStream context.
struct JetStreamOptions {
  std::chrono::milliseconds api_timeout = std::chrono::seconds(5);  //!< wait for JetStream API replies and acks
};

//! A JetStream context on a Connection, shared through shared_ptr (KeyValue, ObjectStore and PullConsumer keep it
//! alive). Safe to use from many threads.
class JetStream : public std::enable_shared_from_this<JetStream> {
 public:
  struct Impl;
  //! A JetStream context on `connection` (no server round trip).
  static Result<std::shared_ptr<JetStream>> create(std::shared_ptr<Connection> connection,
                                                   JetStreamOptions options = {});

  //! Internal: objects are made by the bus library (connect, create, subscribe, ...).
  explicit JetStream(std::unique_ptr<Impl> impl);
  JetStream(const JetStream&) = delete;
  JetStream& operator=(const JetStream&) = delete;
  ~JetStream();

  //! Creates the stream, or updates it to `config` if it exists (idempotent). An update the server refuses
  //! (e.g. changing storage) is kInvalid.
  Result<StreamInfo> ensureStream(const StreamConfig& config);
  //! Current counters; with `subjects_filter` (e.g. "$O.b.C.>") also the per-subject counts. Missing -> kNotFound.
  //! Sets an existing stream's size cap and discard policy (at the cap: refuse new messages, or drop the oldest),
  //! keeping the rest of its configuration; no change when they already match. For KV buckets and object stores,
  //! whose streams libnats or other clients created.
  //! `replicas` > 0 also brings the stream's replica count to it (a JetStream cluster moves the data; 0 = leave).
  Status applyLimits(std::string_view stream, int64_t max_bytes, bool discard_new, int replicas = 0);
  //! The stream that captures `subject` ("" when none, or the server cannot be asked): names the store in a
  //! kStoreFull error.
  std::string streamOfSubject(std::string_view subject);
  Result<StreamInfo> streamInfo(std::string_view stream, std::string_view subjects_filter = {});
  Status deleteStream(std::string_view stream);
  //! Removes every message on `subject` (wildcards allowed) from the stream.
  Status purgeSubject(std::string_view stream, std::string_view subject);

  //! Publishes and waits for the stream's ack. A non-empty `msg_id` is sent as Nats-Msg-Id: a second publish with
  //! the same id inside the duplicate window is dropped and the ack says duplicate. No stream for the subject, or
  //! no ack in time -> kTransient.
  Result<PublishAck> publish(std::string_view subject, std::string_view data, std::string_view msg_id = {},
                             const Headers& headers = {});

  //! One message of publishAll.
  struct Outgoing {
    std::string subject;
    std::string data;
    std::string msg_id;  //!< Nats-Msg-Id ("" = none)
  };
  //! Publishes every message without waiting for each one's ack, then waits for all the acks (apiTimeout() after
  //! the last message is sent): a batch costs about one round trip, not one per message. The acks are returned in
  //! the order of `messages`. A message not stored (refused, or no ack in time: kTransient) fails the call with the
  //! first such error, after every ack was waited for; others of the batch may be stored, so a caller redoes the
  //! whole batch (with Nats-Msg-Ids, or idempotent writes such as KV puts, a redo is harmless). At most
  //! kPublishAllInFlight messages are unacknowledged at a time.
  Result<std::vector<PublishAck>> publishAll(const std::vector<Outgoing>& messages);
  //! publishAll with one result per message, in the batch's order: which messages were stored and which not, so a
  //! caller records what was stored and redoes only the rest.
  std::vector<Result<PublishAck>> publishEach(const std::vector<Outgoing>& messages);
  static constexpr int kPublishAllInFlight = 4096;

  //! Creates the durable consumer, or updates the settings the server allows to change (idempotent).
  //! Changing what the server cannot change (deliver policy, ack policy) is kConflict.
  Result<ConsumerInfo> ensureConsumer(std::string_view stream, const ConsumerConfig& config);
  Result<ConsumerInfo> consumerInfo(std::string_view stream, std::string_view durable);
  Status deleteConsumer(std::string_view stream, std::string_view durable);
  //! Binds a pull subscription to an existing durable (never creates one; missing -> kNotFound).
  Result<PullConsumer> bindPull(std::string_view stream, std::string_view durable);

  //! The last message stored on `subject`; none -> kNotFound.
  Result<Message> getLastMessage(std::string_view stream, std::string_view subject);
  //! The message at `sequence`; none -> kNotFound.
  Result<Message> getMessage(std::string_view stream, uint64_t sequence);

  //! The connection this context publishes on.
  [[nodiscard]] const std::shared_ptr<Connection>& connection() const;
  //! How long JetStream API calls wait for the server.
  [[nodiscard]] std::chrono::milliseconds apiTimeout() const;
  //! Internal: the libnats handles, for the rest of the bus library.
  [[nodiscard]] Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::bus
