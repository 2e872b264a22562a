// flotilla/bus/connection.h
//
// A NATS connection (libnats 3.4.1) with reconnect, plus core messaging: publish, request/reply and async
// subscriptions. Every libnats handle is owned by an RAII object; failures come back as flotilla::Error
// (see errors.h). JetStream, KV and the object store build on a Connection (jetstream.h, kv.h,
// object_store.h).
//
// Threading: a Connection is safe to use from many threads. Subscription callbacks run on a libnats delivery
// thread (one per subscription, or a shared pool with ConnectOptions::global_message_delivery); messages of one
// subscription are delivered in order, one at a time. Connection state callbacks (disconnect, reconnect) run on
// libnats' own callback thread and only log and count.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/event_loop.h"
#include "flotilla/bus/owned_impl.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::bus {

//! NATS message headers. One value per name (enough for Nats-Msg-Id, Nats-Rollup and our own headers).
using Headers = std::map<std::string, std::string>;

//! How to reach and authenticate to NATS. TLS turns on for tls:// URLs, tls_required, or a CA/cert file.
struct ConnectOptions {
  std::vector<std::string> servers = {"nats://127.0.0.1:4222"};  //!< URLs; several for a cluster
  std::string name;                                              //!< client name shown by the server
  std::string user;
  std::string password;
  std::string token;
  std::string creds_file;  //!< a .creds file (JWT + NKey seed)
  std::string ca_file;     //!< PEM CA bundle to verify the server
  std::string cert_file;   //!< client certificate (mutual TLS), with key_file
  std::string key_file;
  bool tls_required = false;  //!< insist on TLS even for nats:// URLs
  //! Prefix of the reply subjects this client subscribes to ("" = libnats' "_INBOX"). A restricted identity may
  //! only subscribe under its own prefix (identity::Role::inbox_prefix: "_INBOX.agent-<cluster>",
  //! "_INBOX.readonly"), so it must connect with it or it never sees a reply.
  std::string inbox_prefix;
  int max_reconnect = -1;  //!< reconnect attempts per server after a disconnect; -1 = forever
  std::chrono::milliseconds reconnect_wait = std::chrono::seconds(1);
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(2);
  std::chrono::milliseconds ping_interval = std::chrono::seconds(30);  //!< how soon a dead server is noticed
  //! Deliver async subscription callbacks on libnats' shared thread pool instead of one thread per
  //! subscription (G4). Saves threads with many subscriptions; a slow callback then delays the others.
  bool global_message_delivery = false;
  //! If set, the connection's socket is read and written on this loop's thread (event_loop.h): no reader or flusher
  //! thread of its own, and every publish is sent at once. For processes that hold thousands of connections.
  std::shared_ptr<EventLoop> event_loop;
  //! If set, counts nats_disconnects_total, nats_reconnects_total, nats_async_errors_total and
  //! nats_connect_retries_total.
  std::shared_ptr<Metrics> metrics;
};

//! How many times Connection::connect logs in with a .creds file before a refusal is final (see connect()).
inline constexpr int kCredsLoginAttempts = 4;

//! JetStream delivery metadata of a message (zero for core NATS messages).
struct MessageMetadata {
  std::string stream;
  std::string consumer;
  uint64_t stream_sequence = 0;
  uint64_t consumer_sequence = 0;
  uint64_t num_delivered = 0;  //!< 1 on first delivery, 2+ on redelivery
  uint64_t num_pending = 0;    //!< messages left for the consumer after this one
  int64_t timestamp_ns = 0;    //!< when the stream stored it (ns since the epoch)
};

namespace detail {
struct MessageImpl;
}  // namespace detail

//! A received message. Owns the libnats message; move-only; empty when default-constructed (valid() is false).
//! The JetStream acknowledgement calls need the subscription it came from, which the message keeps alive.
class Message : public detail::OwnedImpl<detail::MessageImpl, std::unique_ptr<detail::MessageImpl>> {
 public:
  using Impl = detail::MessageImpl;
  using OwnedImpl::OwnedImpl;

  [[nodiscard]] bool valid() const { return impl_ != nullptr; }
  [[nodiscard]] std::string_view subject() const;
  //! The reply subject of a request ("" if none); answer with Connection::publish(msg.reply(), ...).
  [[nodiscard]] std::string_view reply() const;
  //! The payload; valid while the Message lives.
  [[nodiscard]] std::string_view data() const;
  //! A header's value, nullopt if absent.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
  [[nodiscard]] Headers headers() const;
  //! The stream sequence of a message read with JetStream::getLastMessage / getMessage (0 otherwise).
  [[nodiscard]] uint64_t sequence() const;

  //! JetStream delivery metadata parsed from the reply subject; kInvalid for a non-JetStream message.
  [[nodiscard]] Result<MessageMetadata> metadata() const;
  //! How many times JetStream delivered this message (1 = first time); 0 for a non-JetStream message.
  [[nodiscard]] uint64_t deliveryCount() const;

  //! Acknowledges without waiting for the server (fast; the ack can be lost with the connection).
  Status ack();
  //! Acknowledges and waits for the server to confirm. Use this when the effect must not run twice for a
  //! reason other than idempotency, or before reporting progress to someone else.
  Status ackSync(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  //! Asks for redelivery now.
  Status nak();
  //! Asks for redelivery after `delay` (the backoff for kTransient failures).
  Status nakWithDelay(std::chrono::milliseconds delay);
  //! Never redeliver this message (a poison message; the handler reports it).
  Status term();
  //! Resets the ack timer for a long-running handler.
  Status inProgress();
};

//! An async subscription. Destroying it (or unsubscribe()) removes interest and waits until a callback that is
//! running has returned, so state captured by the callback may be freed right after; called from inside the
//! callback it does not wait.
class Subscription {
 public:
  struct State;
  //! No subscription (unsubscribe() does nothing).
  Subscription();
  //! Internal: objects are made by the bus library (connect, create, subscribe, ...).
  explicit Subscription(std::shared_ptr<State> state);
  Subscription(Subscription&&) noexcept;
  Subscription& operator=(Subscription&&) noexcept;
  ~Subscription();

  //! Removes interest and waits for a running callback (see class comment).
  void unsubscribe();
  //! Messages dropped for this subscription because its callback fell behind (slow consumer).
  [[nodiscard]] int64_t dropped() const;

 private:
  std::shared_ptr<State> state_;
};

//! Receives each message of an async subscription (on a libnats thread, see the file comment).
using MessageHandler = std::function<void(Message)>;

//! A NATS connection shared by everything that talks to the bus (through shared_ptr). Reconnects on its own;
//! destroying the last reference closes it.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Impl;
  //! Connects to the first reachable server. The connection then reconnects by itself (logging each
  //! disconnect and reconnect). Nothing reachable -> kTransient; bad credentials -> kPermanent. A .creds login the
  //! server refuses is tried kCredsLoginAttempts times (libnats 3.4.1 signs about one nonce in 256 wrongly; logged
  //! and counted as nats_connect_retries_total).
  static Result<std::shared_ptr<Connection>> connect(const ConnectOptions& options);

  //! Internal: objects are made by the bus library (connect, create, subscribe, ...).
  explicit Connection(std::unique_ptr<Impl> impl);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  //! Closes the connection; subscriptions and JetStream objects made from it stop working.
  ~Connection();

  //! Closes the connection now; the object stays, and its subscriptions and JetStream calls fail at once from then
  //! on. Destroying a watcher afterwards then skips deleting its consumer on the server (the server removes an
  //! ephemeral consumer whose connection is gone), which a client that may not delete consumers (the readonly
  //! role) would otherwise wait a whole request timeout for.
  void close();

  //! True while connected (false while reconnecting or after close).
  [[nodiscard]] bool connected() const;
  //! The URL of the server currently connected to ("" if none).
  [[nodiscard]] std::string connectedUrl() const;
  //! The largest message payload the connected server accepts (its max_payload; 0 while not connected).
  [[nodiscard]] int64_t maxPayload() const;

  //! Core NATS publish (no persistence, no ack). With headers when `headers` is not empty.
  Status publish(std::string_view subject, std::string_view data, const Headers& headers = {});
  //! Core NATS publish with a reply subject, without waiting: the answers arrive on the caller's own subscription
  //! of `reply` (e.g. a JetStream pull request whose messages come to an inbox, or many requests in flight on one
  //! connection).
  Status publishRequest(std::string_view subject, std::string_view reply, std::string_view data,
                        const Headers& headers = {});
  //! Sends a request and waits for the first reply. No responder or no reply in time -> kTransient.
  Result<Message> request(std::string_view subject, std::string_view data, std::chrono::milliseconds timeout,
                          const Headers& headers = {});
  //! Subscribes; with a non-empty `queue`, subscribers in the same queue group share the messages. The callback
  //! runs on a libnats delivery thread (see the file comment) and must not throw.
  Result<Subscription> subscribe(std::string_view subject, std::string_view queue, MessageHandler handler);
  //! Waits until the server has processed everything sent so far (e.g. that a subscription is registered).
  Status flush(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  //! Internal: the libnats handles, for the rest of the bus library.
  [[nodiscard]] Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::bus
