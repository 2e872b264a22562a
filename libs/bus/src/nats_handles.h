// libs/bus/src/nats_handles.h
//
// Private to the bus library: RAII owners for every libnats handle and the Impl structs behind the public
// classes. Nothing outside libs/bus/src includes this, so nats.h stays out of the public headers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nats/nats.h>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/errors.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/core/c_handle.h"
#include "owned_impl_members.h"

namespace flotilla::bus {

using NatsOptionsPtr = CHandle<natsOptions, natsOptions_Destroy>;
using NatsConnectionPtr = CHandle<natsConnection, natsConnection_Destroy>;
using NatsSubscriptionPtr = CHandle<natsSubscription, natsSubscription_Destroy>;
using NatsMsgPtr = CHandle<natsMsg, natsMsg_Destroy>;
using JsCtxPtr = CHandle<jsCtx, jsCtx_Destroy>;
using JsStreamInfoPtr = CHandle<jsStreamInfo, jsStreamInfo_Destroy>;
using JsConsumerInfoPtr = CHandle<jsConsumerInfo, jsConsumerInfo_Destroy>;
using JsPubAckPtr = CHandle<jsPubAck, jsPubAck_Destroy>;
using JsMetaPtr = CHandle<jsMsgMetaData, jsMsgMetaData_Destroy>;
using KvStorePtr = CHandle<kvStore, kvStore_Destroy>;
using KvEntryPtr = CHandle<kvEntry, kvEntry_Destroy>;
using KvWatcherPtr = CHandle<kvWatcher, kvWatcher_Destroy>;

//! Owns a natsMsgList (a struct by value in libnats).
struct NatsMsgList {
  natsMsgList list{};
  NatsMsgList() = default;
  NatsMsgList(const NatsMsgList&) = delete;
  NatsMsgList& operator=(const NatsMsgList&) = delete;
  ~NatsMsgList() { natsMsgList_Destroy(&list); }
};

inline int64_t toMillis(std::chrono::milliseconds d) {
  return static_cast<int64_t>(d.count());
}
inline int64_t toNanos(std::chrono::milliseconds d) {
  return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

//! Copies headers onto a libnats message.
Status setHeaders(natsMsg* msg, const Headers& headers, std::string_view where);
//! A libnats message with subject, payload, headers and, when not empty, a reply subject.
Result<NatsMsgPtr> makeMessage(std::string_view subject, std::string_view data, const Headers& headers,
                               std::string_view where, std::string_view reply = {});

struct detail::MessageImpl {
  NatsMsgPtr msg;
  //! Keeps alive what the message's ack calls reach through (the subscription it came from).
  std::shared_ptr<void> keepalive;
};

//! Wraps an owned libnats message.
inline Message wrapMessage(natsMsg* msg, std::shared_ptr<void> keepalive = {}) {
  auto impl = std::make_unique<Message::Impl>();
  impl->msg.reset(msg);
  impl->keepalive = std::move(keepalive);
  return Message(std::move(impl));
}

// Callback context of a connection: lives until libnats reports the connection closed.
struct ConnectionCallbacks {
  std::string name;
  std::shared_ptr<Metrics> metrics;
  std::atomic<bool> closing{false};
};

struct Connection::Impl {
  std::shared_ptr<ConnectionCallbacks> callbacks;
  std::shared_ptr<EventLoop> event_loop;  //!< declared before conn: the loop outlives the connection's close
  NatsConnectionPtr conn;
};

// What a subscription's message callback reaches; freed by libnats' on-complete callback.
struct SubscriptionDispatch {
  MessageHandler handler;
  std::weak_ptr<Subscription::State> owner;
  std::mutex mutex;
  std::condition_variable cv;
  bool complete = false;
  std::thread::id delivering;  //!< the thread running the handler right now
};

struct Subscription::State {
  NatsSubscriptionPtr sub;
  std::shared_ptr<SubscriptionDispatch> dispatch;
};

struct JetStream::Impl {
  std::shared_ptr<Connection> connection;
  JsCtxPtr js;
  std::chrono::milliseconds wait{5000};

  //! jsOptions carrying our API timeout.
  [[nodiscard]] jsOptions options() const {
    jsOptions opts;
    jsOptions_Init(&opts);
    opts.Wait = toMillis(wait);
    return opts;
  }
};

struct detail::PullConsumerImpl {
  std::shared_ptr<JetStream> js;
  NatsSubscriptionPtr sub;
  std::string stream;
  std::string durable;
  std::atomic<bool> interrupted{false};  //!< PullConsumer::interrupt() closed the subscription
};

}  // namespace flotilla::bus
