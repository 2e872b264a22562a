#include "flotilla/bus/connection.h"

#include <cstdlib>
#include <exception>

#include "event_loop_options.h"
#include "flotilla/core/log.h"
#include "nats_handles.h"

namespace flotilla::bus {

// ---------------------------------------------------------------------------------------------------------------
// Helpers shared by the library

Status setHeaders(natsMsg* msg, const Headers& headers, std::string_view where) {
  for (const auto& [name, value] : headers) {
    natsStatus s = natsMsgHeader_Set(msg, name.c_str(), value.c_str());
    if (s != NATS_OK) {
      return fail(lastNatsError(s, where));
    }
  }
  return {};
}

Result<NatsMsgPtr> makeMessage(std::string_view subject, std::string_view data, const Headers& headers,
                               std::string_view where, std::string_view reply) {
  natsMsg* raw = nullptr;
  std::string subj(subject);
  std::string inbox(reply);
  natsStatus s = natsMsg_Create(&raw, subj.c_str(), inbox.empty() ? nullptr : inbox.c_str(), data.data(),
                                static_cast<int>(data.size()));
  if (s != NATS_OK) {
    return fail(lastNatsError(s, where));
  }
  NatsMsgPtr msg(raw);
  FLOTILLA_TRY(setHeaders(msg.get(), headers, where));
  return msg;
}

// ---------------------------------------------------------------------------------------------------------------
// Message

template class detail::OwnedImpl<Message::Impl, std::unique_ptr<Message::Impl>>;

std::string_view Message::subject() const {
  const char* s = impl_ ? natsMsg_GetSubject(impl_->msg.get()) : nullptr;
  return s != nullptr ? s : "";
}

std::string_view Message::reply() const {
  const char* s = impl_ ? natsMsg_GetReply(impl_->msg.get()) : nullptr;
  return s != nullptr ? s : "";
}

std::string_view Message::data() const {
  if (!impl_) {
    return {};
  }
  const char* d = natsMsg_GetData(impl_->msg.get());
  return d != nullptr ? std::string_view(d, static_cast<size_t>(natsMsg_GetDataLength(impl_->msg.get())))
                      : std::string_view();
}

std::optional<std::string> Message::header(std::string_view name) const {
  if (!impl_) {
    return std::nullopt;
  }
  const char* value = nullptr;
  std::string key(name);
  if (natsMsgHeader_Get(impl_->msg.get(), key.c_str(), &value) != NATS_OK || value == nullptr) {
    return std::nullopt;
  }
  return std::string(value);
}

Headers Message::headers() const {
  Headers out;
  if (!impl_) {
    return out;
  }
  const char** keys = nullptr;
  int count = 0;
  if (natsMsgHeader_Keys(impl_->msg.get(), &keys, &count) != NATS_OK || keys == nullptr) {
    return out;
  }
  for (int i = 0; i < count; ++i) {
    const char* value = nullptr;
    if (natsMsgHeader_Get(impl_->msg.get(), keys[i], &value) == NATS_OK && value != nullptr) {
      out[keys[i]] = value;
    }
  }
  // libnats hands out the array (not the strings) for the caller to free.
  free(static_cast<void*>(keys));
  return out;
}

uint64_t Message::sequence() const {
  return impl_ ? natsMsg_GetSequence(impl_->msg.get()) : 0;
}

Result<MessageMetadata> Message::metadata() const {
  if (!impl_) {
    return fail(ErrorKind::kInvalid, "empty message", "natsMsg_GetMetaData");
  }
  jsMsgMetaData* raw = nullptr;
  natsStatus s = natsMsg_GetMetaData(&raw, impl_->msg.get());
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "natsMsg_GetMetaData");
    error.kind = ErrorKind::kInvalid;  // not a JetStream message: a caller mistake, not a bus failure
    return fail(std::move(error));
  }
  JsMetaPtr meta(raw);
  MessageMetadata out;
  out.stream = meta->Stream != nullptr ? meta->Stream : "";
  out.consumer = meta->Consumer != nullptr ? meta->Consumer : "";
  out.stream_sequence = meta->Sequence.Stream;
  out.consumer_sequence = meta->Sequence.Consumer;
  out.num_delivered = meta->NumDelivered;
  out.num_pending = meta->NumPending;
  out.timestamp_ns = meta->Timestamp;
  return out;
}

uint64_t Message::deliveryCount() const {
  auto meta = metadata();
  return meta.ok() ? meta->num_delivered : 0;
}

namespace {

// One acknowledgement call on the message's libnats handle; on an empty message it is the caller's mistake.
template <typename Call>
Status settle(const std::unique_ptr<Message::Impl>& impl, std::string_view where, Call&& call) {
  if (!impl) {
    return fail(ErrorKind::kInvalid, "empty message", std::string(where));
  }
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = call(impl->msg.get(), &jerr);
  if (s != NATS_OK) {
    return fail(lastNatsError(s, where, jerr));
  }
  return {};
}

}  // namespace

Status Message::ack() {
  return settle(impl_, "natsMsg_Ack", [](natsMsg* msg, jsErrCode*) { return natsMsg_Ack(msg, nullptr); });
}

Status Message::ackSync(std::chrono::milliseconds timeout) {
  return settle(impl_, "natsMsg_AckSync", [&](natsMsg* msg, jsErrCode* jerr) {
    jsOptions opts;
    jsOptions_Init(&opts);
    opts.Wait = toMillis(timeout);
    return natsMsg_AckSync(msg, &opts, jerr);
  });
}

Status Message::nak() {
  return settle(impl_, "natsMsg_Nak", [](natsMsg* msg, jsErrCode*) { return natsMsg_Nak(msg, nullptr); });
}

Status Message::nakWithDelay(std::chrono::milliseconds delay) {
  return settle(impl_, "natsMsg_NakWithDelay",
                [&](natsMsg* msg, jsErrCode*) { return natsMsg_NakWithDelay(msg, toMillis(delay), nullptr); });
}

Status Message::term() {
  return settle(impl_, "natsMsg_Term", [](natsMsg* msg, jsErrCode*) { return natsMsg_Term(msg, nullptr); });
}

Status Message::inProgress() {
  return settle(impl_, "natsMsg_InProgress", [](natsMsg* msg, jsErrCode*) { return natsMsg_InProgress(msg, nullptr); });
}

// ---------------------------------------------------------------------------------------------------------------
// Subscription

namespace {

constexpr auto kCallbackDrainTimeout = std::chrono::seconds(10);

void onSubscriptionMessage(natsConnection* /*nc*/, natsSubscription* /*sub*/, natsMsg* msg, void* closure) {
  auto* dispatch = static_cast<SubscriptionDispatch*>(closure);
  std::shared_ptr<Subscription::State> owner = dispatch->owner.lock();
  if (!owner) {
    natsMsg_Destroy(msg);  // the Subscription is gone; nobody to deliver to
    return;
  }
  {
    std::lock_guard lock(dispatch->mutex);
    dispatch->delivering = std::this_thread::get_id();
  }
  try {
    dispatch->handler(wrapMessage(msg, owner));
  } catch (const std::exception& e) {
    log::error("subscription handler threw", {{"error", e.what()}});
  } catch (...) {
    log::error("subscription handler threw a non-exception");
  }
  std::lock_guard lock(dispatch->mutex);
  dispatch->delivering = std::thread::id();
}

// libnats calls this once the subscription is closed and its last callback has returned.
void onSubscriptionComplete(void* closure) {
  auto* holder = static_cast<std::shared_ptr<SubscriptionDispatch>*>(closure);
  {
    std::lock_guard lock((*holder)->mutex);
    (*holder)->complete = true;
  }
  (*holder)->cv.notify_all();
  delete holder;
}

}  // namespace

Subscription::Subscription() = default;
Subscription::Subscription(std::shared_ptr<State> state) : state_(std::move(state)) {}
Subscription::Subscription(Subscription&&) noexcept = default;
Subscription& Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    unsubscribe();
    state_ = std::move(other.state_);
  }
  return *this;
}
Subscription::~Subscription() {
  unsubscribe();
}

void Subscription::unsubscribe() {
  if (!state_) {
    return;
  }
  std::shared_ptr<State> state = std::move(state_);
  // Fails harmlessly when the connection is already closed: the subscription is then closed too.
  natsSubscription_Unsubscribe(state->sub.get());
  auto& dispatch = *state->dispatch;
  std::unique_lock lock(dispatch.mutex);
  if (dispatch.delivering != std::this_thread::get_id()) {
    if (!dispatch.cv.wait_for(lock, kCallbackDrainTimeout, [&] { return dispatch.complete; })) {
      log::warn("subscription callback still running after unsubscribe", {{"waited_ms", 10000}});
    }
  }
}

int64_t Subscription::dropped() const {
  int64_t dropped = 0;
  if (state_) {
    natsSubscription_GetDropped(state_->sub.get(), &dropped);
  }
  return dropped;
}

// ---------------------------------------------------------------------------------------------------------------
// Connection

namespace {

void countEvent(const ConnectionCallbacks& callbacks, std::string_view name, std::string_view help) {
  if (callbacks.metrics) {
    callbacks.metrics->counter(name, help, {{"client", callbacks.name}}).Increment();
  }
}

std::string currentUrl(natsConnection* nc) {
  char buffer[256] = {0};
  if (natsConnection_GetConnectedUrl(nc, buffer, sizeof(buffer)) != NATS_OK) {
    return {};
  }
  return buffer;
}

void onDisconnected(natsConnection* /*nc*/, void* closure) {
  auto& callbacks = **static_cast<std::shared_ptr<ConnectionCallbacks>*>(closure);
  if (callbacks.closing) {
    return;  // our own close, not an outage
  }
  log::warn("nats disconnected, reconnecting", {{"client", callbacks.name}});
  countEvent(callbacks, "nats_disconnects_total", "Times the NATS connection was lost");
}

void onReconnected(natsConnection* nc, void* closure) {
  auto& callbacks = **static_cast<std::shared_ptr<ConnectionCallbacks>*>(closure);
  log::info("nats reconnected", {{"client", callbacks.name}, {"url", currentUrl(nc)}});
  countEvent(callbacks, "nats_reconnects_total", "Times the NATS connection was re-established");
}

void onClosed(natsConnection* nc, void* closure) {
  auto* holder = static_cast<std::shared_ptr<ConnectionCallbacks>*>(closure);
  if (!(*holder)->closing) {
    // Reconnect attempts exhausted, or the server closed it for a reason libnats does not retry (e.g. "User
    // Authentication Revoked": the credentials were revoked, docs/pipeline.md "Revocation").
    const char* last = nullptr;
    natsConnection_GetLastError(nc, &last);
    log::error("nats connection closed for good",
               {{"client", (*holder)->name}, {"error", std::string(last != nullptr ? last : "")}});
  }
  delete holder;  // the last callback libnats makes for this connection
}

void onAsyncError(natsConnection* nc, natsSubscription* sub, natsStatus err, void* closure) {
  auto& callbacks = **static_cast<std::shared_ptr<ConnectionCallbacks>*>(closure);
  const char* last = nullptr;
  natsConnection_GetLastError(nc, &last);
  const char* subject = sub != nullptr ? natsSubscription_GetSubject(sub) : nullptr;
  log::warn("nats async error", {{"client", callbacks.name},
                                 {"error", natsStatus_GetText(err)},
                                 {"detail", last != nullptr ? last : ""},
                                 {"subject", subject != nullptr ? subject : ""}});
  countEvent(callbacks, "nats_async_errors_total", "Asynchronous NATS errors (slow consumer, permissions)");
}

Status check(natsStatus s, std::string_view where) {
  if (s != NATS_OK) {
    return fail(lastNatsError(s, where));
  }
  return {};
}

Result<NatsOptionsPtr> buildOptions(const ConnectOptions& options, void* closure) {
  natsOptions* raw = nullptr;
  FLOTILLA_TRY(check(natsOptions_Create(&raw), "natsOptions_Create"));
  NatsOptionsPtr opts(raw);
  std::vector<const char*> servers;
  for (const auto& server : options.servers) {
    servers.push_back(server.c_str());
  }
  if (servers.empty()) {
    return fail(ErrorKind::kInvalid, "no NATS server URL given", "Connection::connect");
  }
  FLOTILLA_TRY(
      check(natsOptions_SetServers(raw, servers.data(), static_cast<int>(servers.size())), "natsOptions_SetServers"));
  if (!options.name.empty()) {
    FLOTILLA_TRY(check(natsOptions_SetName(raw, options.name.c_str()), "natsOptions_SetName"));
  }
  if (!options.user.empty()) {
    FLOTILLA_TRY(
        check(natsOptions_SetUserInfo(raw, options.user.c_str(), options.password.c_str()), "natsOptions_SetUserInfo"));
  }
  if (!options.token.empty()) {
    FLOTILLA_TRY(check(natsOptions_SetToken(raw, options.token.c_str()), "natsOptions_SetToken"));
  }
  if (!options.creds_file.empty()) {
    FLOTILLA_TRY(check(natsOptions_SetUserCredentialsFromFiles(raw, options.creds_file.c_str(), nullptr),
                       "natsOptions_SetUserCredentialsFromFiles"));
  }
  if (!options.inbox_prefix.empty()) {
    FLOTILLA_TRY(
        check(natsOptions_SetCustomInboxPrefix(raw, options.inbox_prefix.c_str()), "natsOptions_SetCustomInboxPrefix"));
  }
  if (options.tls_required) {
    FLOTILLA_TRY(check(natsOptions_SetSecure(raw, true), "natsOptions_SetSecure"));
  }
  if (!options.ca_file.empty()) {
    FLOTILLA_TRY(check(natsOptions_LoadCATrustedCertificates(raw, options.ca_file.c_str()),
                       "natsOptions_LoadCATrustedCertificates"));
  }
  if (!options.cert_file.empty()) {
    FLOTILLA_TRY(check(natsOptions_LoadCertificatesChain(raw, options.cert_file.c_str(), options.key_file.c_str()),
                       "natsOptions_LoadCertificatesChain"));
  }
  FLOTILLA_TRY(check(natsOptions_SetAllowReconnect(raw, true), "natsOptions_SetAllowReconnect"));
  FLOTILLA_TRY(check(natsOptions_SetMaxReconnect(raw, options.max_reconnect), "natsOptions_SetMaxReconnect"));
  FLOTILLA_TRY(
      check(natsOptions_SetReconnectWait(raw, toMillis(options.reconnect_wait)), "natsOptions_SetReconnectWait"));
  FLOTILLA_TRY(check(natsOptions_SetTimeout(raw, toMillis(options.connect_timeout)), "natsOptions_SetTimeout"));
  FLOTILLA_TRY(check(natsOptions_SetPingInterval(raw, toMillis(options.ping_interval)), "natsOptions_SetPingInterval"));
  // A request made while disconnected fails at once (kTransient) instead of waiting out its timeout.
  FLOTILLA_TRY(check(natsOptions_SetFailRequestsOnDisconnect(raw, true), "natsOptions_SetFailRequestsOnDisconnect"));
  FLOTILLA_TRY(check(natsOptions_UseGlobalMessageDelivery(raw, options.global_message_delivery),
                     "natsOptions_UseGlobalMessageDelivery"));
  if (options.event_loop) {
    FLOTILLA_TRY(useEventLoop(raw, *options.event_loop));
  }
  FLOTILLA_TRY(check(natsOptions_SetDisconnectedCB(raw, onDisconnected, closure), "natsOptions_SetDisconnectedCB"));
  FLOTILLA_TRY(check(natsOptions_SetReconnectedCB(raw, onReconnected, closure), "natsOptions_SetReconnectedCB"));
  FLOTILLA_TRY(check(natsOptions_SetClosedCB(raw, onClosed, closure), "natsOptions_SetClosedCB"));
  FLOTILLA_TRY(check(natsOptions_SetErrorHandler(raw, onAsyncError, closure), "natsOptions_SetErrorHandler"));
  return opts;
}

std::string joinServers(const std::vector<std::string>& servers) {
  std::string out;
  for (const auto& server : servers) {
    out += (out.empty() ? "" : ",") + server;
  }
  return out;
}

}  // namespace

namespace {

//! Connects once; the caller owns `options`' retry policy.
Result<std::shared_ptr<Connection>> connectOnce(const ConnectOptions& options) {
  auto callbacks = std::make_shared<ConnectionCallbacks>();
  callbacks->name = options.name;
  callbacks->metrics = options.metrics;
  // libnats keeps this pointer for its callbacks; onClosed frees it after the last one.
  auto* holder = new std::shared_ptr<ConnectionCallbacks>(callbacks);
  auto opts = buildOptions(options, holder);
  if (!opts.ok()) {
    delete holder;
    return fail(opts.error());
  }
  natsConnection* raw = nullptr;
  natsStatus s = natsConnection_Connect(&raw, opts->get());
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "natsConnection_Connect");
    error.message += " [servers " + joinServers(options.servers) + "]";
    if (s == NATS_PROTOCOL_ERROR && options.cert_file.empty() && !options.ca_file.empty()) {
      // What libnats reports when a server with mutual TLS drops the handshake: name the likely cause.
      error.message +=
          "; a server that requires mutual TLS closes the connection of a client without a client "
          "certificate (set one with its key)";
    }
    // A connection that never came up makes no callbacks, so the holder is ours to free.
    delete holder;
    return fail(std::move(error));
  }
  auto impl = std::make_unique<Connection::Impl>();
  impl->callbacks = std::move(callbacks);
  impl->event_loop = options.event_loop;
  impl->conn.reset(raw);
  log::info("nats connected", {{"client", options.name}, {"url", currentUrl(raw)}});
  return std::make_shared<Connection>(std::move(impl));
}

}  // namespace

Result<std::shared_ptr<Connection>> Connection::connect(const ConnectOptions& options) {
  // libnats 3.4.1 answers about one server nonce in 256 so that the server refuses valid credentials
  // ("Authorization Violation"; measured: 6 of 1,500 connects with one unchanged .creds file, each with a new nonce).
  // A new connection gets a new nonce, so a refusal of a .creds login is tried again; credentials that are really
  // refused fail every attempt and are reported as before.
  for (int attempt = 1;; ++attempt) {
    auto connected = connectOnce(options);
    const bool refused =
        !connected.ok() && connected.error().message.find("Authorization Violation") != std::string::npos;
    if (connected.ok() || !refused || options.creds_file.empty() || attempt == kCredsLoginAttempts) {
      return connected;
    }
    if (options.metrics) {
      options.metrics
          ->counter("nats_connect_retries_total", "Connects tried again after the server refused a .creds login",
                    {{"reason", "authorization"}})
          .Increment();
    }
    log::warn("the NATS server refused the login; trying again with a new nonce",
              {{"client", options.name}, {"attempt", attempt}, {"error", connected.error().describe()}});
  }
}

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Connection::~Connection() {
  impl_->callbacks->closing = true;
  impl_->conn.reset();
}

void Connection::close() {
  impl_->callbacks->closing = true;
  natsConnection_Close(impl_->conn.get());
}

bool Connection::connected() const {
  return natsConnection_Status(impl_->conn.get()) == NATS_CONN_STATUS_CONNECTED;
}

std::string Connection::connectedUrl() const {
  return currentUrl(impl_->conn.get());
}

int64_t Connection::maxPayload() const {
  return natsConnection_GetMaxPayload(impl_->conn.get());
}

Status Connection::publish(std::string_view subject, std::string_view data, const Headers& headers) {
  if (headers.empty()) {
    std::string subj(subject);
    return check(natsConnection_Publish(impl_->conn.get(), subj.c_str(), data.data(), static_cast<int>(data.size())),
                 "natsConnection_Publish");
  }
  auto msg = makeMessage(subject, data, headers, "natsConnection_PublishMsg");
  if (!msg.ok()) {
    return fail(msg.error());
  }
  return check(natsConnection_PublishMsg(impl_->conn.get(), msg->get()), "natsConnection_PublishMsg");
}

Status Connection::publishRequest(std::string_view subject, std::string_view reply, std::string_view data,
                                  const Headers& headers) {
  if (reply.empty()) {
    return fail(ErrorKind::kInvalid, "publishRequest: no reply subject");
  }
  auto msg = makeMessage(subject, data, headers, "natsConnection_PublishMsg", reply);
  if (!msg.ok()) {
    return fail(msg.error());
  }
  return check(natsConnection_PublishMsg(impl_->conn.get(), msg->get()), "natsConnection_PublishMsg");
}

Result<Message> Connection::request(std::string_view subject, std::string_view data, std::chrono::milliseconds timeout,
                                    const Headers& headers) {
  auto msg = makeMessage(subject, data, headers, "natsConnection_RequestMsg");
  if (!msg.ok()) {
    return fail(msg.error());
  }
  natsMsg* reply = nullptr;
  natsStatus s = natsConnection_RequestMsg(&reply, impl_->conn.get(), msg->get(), toMillis(timeout));
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "natsConnection_RequestMsg");
    error.message += " [subject " + std::string(subject) + "]";
    return fail(std::move(error));
  }
  return wrapMessage(reply);
}

Result<Subscription> Connection::subscribe(std::string_view subject, std::string_view queue, MessageHandler handler) {
  auto dispatch = std::make_shared<SubscriptionDispatch>();
  dispatch->handler = std::move(handler);
  auto state = std::make_shared<Subscription::State>();
  state->dispatch = dispatch;
  dispatch->owner = state;
  std::string subj(subject);
  std::string group(queue);
  natsSubscription* raw = nullptr;
  natsStatus s = group.empty() ? natsConnection_Subscribe(&raw, impl_->conn.get(), subj.c_str(), onSubscriptionMessage,
                                                          dispatch.get())
                               : natsConnection_QueueSubscribe(&raw, impl_->conn.get(), subj.c_str(), group.c_str(),
                                                               onSubscriptionMessage, dispatch.get());
  if (s != NATS_OK) {
    return fail(lastNatsError(s, group.empty() ? "natsConnection_Subscribe" : "natsConnection_QueueSubscribe"));
  }
  state->sub.reset(raw);
  auto* holder = new std::shared_ptr<SubscriptionDispatch>(dispatch);
  s = natsSubscription_SetOnCompleteCB(raw, onSubscriptionComplete, holder);
  if (s != NATS_OK) {
    delete holder;
    natsSubscription_Unsubscribe(raw);
    return fail(lastNatsError(s, "natsSubscription_SetOnCompleteCB"));
  }
  return Subscription(std::move(state));
}

Status Connection::flush(std::chrono::milliseconds timeout) {
  return check(natsConnection_FlushTimeout(impl_->conn.get(), toMillis(timeout)), "natsConnection_FlushTimeout");
}

}  // namespace flotilla::bus
