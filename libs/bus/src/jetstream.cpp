#include "flotilla/bus/jetstream.h"

#include <algorithm>

#include "flotilla/core/log.h"
#include "nats_handles.h"

namespace flotilla::bus {
namespace {

constexpr jsErrCode kNoJsError = static_cast<jsErrCode>(0);
// Below this, a pull request is not worth sending (the server needs a little time to answer one).
constexpr auto kMinFetchWait = std::chrono::milliseconds(20);

Status check(natsStatus s, std::string_view where, jsErrCode jerr = kNoJsError) {
  if (s != NATS_OK) {
    return fail(lastNatsError(s, where, jerr));
  }
  return {};
}

StreamInfo toStreamInfo(const jsStreamInfo& si) {
  StreamInfo out;
  out.name = si.Config != nullptr && si.Config->Name != nullptr ? si.Config->Name : "";
  out.messages = si.State.Msgs;
  out.bytes = si.State.Bytes;
  out.first_sequence = si.State.FirstSeq;
  out.last_sequence = si.State.LastSeq;
  out.consumers = si.State.Consumers;
  if (si.Config != nullptr) {
    out.max_bytes = si.Config->MaxBytes;
    out.discard_new = si.Config->Discard == js_DiscardNew;
    out.replicas = static_cast<int>(si.Config->Replicas);
    out.max_consumers = si.Config->MaxConsumers;
  }
  if (si.State.Subjects != nullptr) {
    for (int i = 0; i < si.State.Subjects->Count; ++i) {
      const auto& subject = si.State.Subjects->List[i];
      out.subjects[subject.Subject != nullptr ? subject.Subject : ""] = subject.Msgs;
    }
  }
  return out;
}

ConsumerInfo toConsumerInfo(const jsConsumerInfo& ci) {
  ConsumerInfo out;
  out.stream = ci.Stream != nullptr ? ci.Stream : "";
  out.name = ci.Name != nullptr ? ci.Name : "";
  out.num_pending = ci.NumPending;
  out.num_ack_pending = ci.NumAckPending;
  out.num_redelivered = ci.NumRedelivered;
  out.delivered_stream_sequence = ci.Delivered.Stream;
  out.ack_floor_stream_sequence = ci.AckFloor.Stream;
  if (const jsConsumerConfig* config = ci.Config; config != nullptr) {
    out.config.durable = config->Durable != nullptr ? config->Durable : "";
    out.config.filter_subject = config->FilterSubject != nullptr ? config->FilterSubject : "";
    out.config.ack_wait = std::chrono::milliseconds(config->AckWait / 1'000'000);  // nanoseconds on the wire
    out.config.max_deliver = config->MaxDeliver;
    out.config.max_ack_pending = config->MaxAckPending;
    out.config.description = config->Description != nullptr ? config->Description : "";
  }
  return out;
}

jsDeliverPolicy toDeliverPolicy(DeliverPolicy policy) {
  switch (policy) {
    case DeliverPolicy::kNew:
      return js_DeliverNew;
    case DeliverPolicy::kLastPerSubject:
      return js_DeliverLastPerSubject;
    case DeliverPolicy::kAll:
      break;
  }
  return js_DeliverAll;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// PullConsumer

template class detail::OwnedImpl<PullConsumer::Impl, std::shared_ptr<PullConsumer::Impl>>;

namespace {

//! One pull request that the server answers at once with what the durable has (up to `batch`) or, when it has
//! nothing, with the first messages to arrive within `wait` (no_wait with expires). natsSubscription_Fetch with a
//! batch above one instead holds a message that arrives during its wait until the batch is full or the wait is
//! over, so a deploy would wait out the whole fetch timeout.
natsStatus pullOnce(natsMsgList& list, natsSubscription* sub, int batch, std::chrono::milliseconds wait) {
  jsFetchRequest request;
  jsFetchRequest_Init(&request);
  request.Batch = batch;
  request.NoWait = true;
  request.Expires = std::max<int64_t>(1, wait.count()) * 1'000'000;  // nanoseconds on the wire
  return natsSubscription_FetchRequest(&list, sub, &request);
}

}  // namespace

Result<std::vector<Message>> PullConsumer::fetch(int batch, std::chrono::milliseconds timeout) {
  if (!impl_) {
    return fail(ErrorKind::kInvalid, "fetch on an unbound consumer", "natsSubscription_FetchRequest");
  }
  if (batch <= 0 || timeout.count() <= 0) {
    return fail(ErrorKind::kInvalid, "batch and timeout must be positive", "natsSubscription_FetchRequest");
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Message> out;
  while (true) {
    NatsMsgList list;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const auto wait = std::max(left, std::chrono::milliseconds(1));
    const auto sent = std::chrono::steady_clock::now();
    natsStatus s = pullOnce(list.list, impl_->sub.get(), batch, wait);
    if (s == NATS_NOT_FOUND && list.list.Count == 0 && wait >= kMinFetchWait * 5 &&
        std::chrono::steady_clock::now() - sent < kMinFetchWait) {
      // "No messages" at once although the request asked to wait: a server that does not wait on no_wait with
      // expires. Wait for one message with a plain pull request instead.
      s = natsSubscription_Fetch(&list.list, impl_->sub.get(), 1, toMillis(wait), nullptr);
    }
    out.reserve(static_cast<size_t>(list.list.Count));
    for (int i = 0; i < list.list.Count; ++i) {
      // Take ownership; natsMsgList_Destroy skips the NULLs left behind.
      out.push_back(wrapMessage(list.list.Msgs[i], impl_));
      list.list.Msgs[i] = nullptr;
    }
    if (!out.empty() || s == NATS_OK) {
      return out;
    }
    if (impl_->interrupted.load()) {
      return fail(ErrorKind::kTransient, "fetch interrupted: the consumer is stopping",
                  "natsSubscription_FetchRequest");
    }
    // NATS_NOT_FOUND: the server's "no messages" for a request that found the durable empty when it had to answer
    // (e.g. the end of its wait); NATS_TIMEOUT: no answer before our deadline. Either way nothing came: pull again
    // until the deadline. libnats 3.4 can also end a fetch early on the server's late notice for the previous pull.
    if (s != NATS_TIMEOUT && s != NATS_NOT_FOUND) {
      Error error = lastNatsError(s, "natsSubscription_FetchRequest");
      error.message += " [consumer " + impl_->stream + "/" + impl_->durable + "]";
      return fail(std::move(error));
    }
    if (deadline - std::chrono::steady_clock::now() < kMinFetchWait) {
      return out;
    }
  }
}

void PullConsumer::interrupt() {
  if (!impl_ || impl_->interrupted.exchange(true)) {
    return;
  }
  // Closing the subscription wakes a fetch waiting in libnats (it returns NATS_INVALID_SUBSCRIPTION). The durable
  // stays (it is bound, not created, by this subscription). A message the server sends to the closed inbox before
  // the pull request expires is redelivered after the durable's ack wait.
  natsSubscription_Unsubscribe(impl_->sub.get());
}

Result<ConsumerInfo> PullConsumer::info() {
  if (!impl_) {
    return fail(ErrorKind::kInvalid, "info on an unbound consumer", "js_GetConsumerInfo");
  }
  // By name rather than natsSubscription_GetConsumerInfo, which libnats 3.4.1 refuses for bound pull subscriptions.
  return impl_->js->consumerInfo(impl_->stream, impl_->durable);
}

// ---------------------------------------------------------------------------------------------------------------
// JetStream

Result<std::shared_ptr<JetStream>> JetStream::create(std::shared_ptr<Connection> connection, JetStreamOptions options) {
  if (!connection) {
    return fail(ErrorKind::kInvalid, "no connection", "natsConnection_JetStream");
  }
  auto impl = std::make_unique<Impl>();
  impl->connection = std::move(connection);
  impl->wait = options.api_timeout;
  jsOptions opts = impl->options();
  jsCtx* raw = nullptr;
  FLOTILLA_TRY(
      check(natsConnection_JetStream(&raw, impl->connection->impl().conn.get(), &opts), "natsConnection_JetStream"));
  impl->js.reset(raw);
  return std::make_shared<JetStream>(std::move(impl));
}

JetStream::JetStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JetStream::~JetStream() = default;

const std::shared_ptr<Connection>& JetStream::connection() const {
  return impl_->connection;
}
std::chrono::milliseconds JetStream::apiTimeout() const {
  return impl_->wait;
}

Result<StreamInfo> JetStream::ensureStream(const StreamConfig& config) {
  if (config.name.empty() || config.subjects.empty()) {
    return fail(ErrorKind::kInvalid, "a stream needs a name and subjects", "js_AddStream");
  }
  std::vector<const char*> subjects;
  for (const auto& subject : config.subjects) {
    subjects.push_back(subject.c_str());
  }
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = config.name.c_str();
  cfg.Subjects = subjects.data();
  cfg.SubjectsLen = static_cast<int>(subjects.size());
  cfg.Storage = config.storage == StorageType::kMemory ? js_MemoryStorage : js_FileStorage;
  cfg.MaxAge = toNanos(config.max_age);
  cfg.MaxBytes = config.max_bytes;
  cfg.MaxMsgsPerSubject = config.max_msgs_per_subject;
  cfg.Replicas = config.replicas;
  cfg.Duplicates = toNanos(config.duplicate_window);
  cfg.AllowRollup = config.allow_rollup;
  cfg.AllowDirect = config.allow_direct;
  cfg.Discard = config.discard_new ? js_DiscardNew : js_DiscardOld;
  cfg.MaxConsumers = config.max_consumers;

  jsOptions opts = impl_->options();
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  natsStatus s = js_AddStream(&raw, impl_->js.get(), &cfg, &opts, &jerr);
  if (s == NATS_OK) {
    JsStreamInfoPtr si(raw);
    return toStreamInfo(*si);
  }
  if (jerr != JSStreamNameExistErr) {
    return fail(lastNatsError(s, "js_AddStream", jerr));
  }
  // It exists with another configuration: bring it to ours.
  jerr = kNoJsError;
  s = js_UpdateStream(&raw, impl_->js.get(), &cfg, &opts, &jerr);
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "js_UpdateStream", jerr);
    if (error.kind != ErrorKind::kTransient) {
      error.kind = ErrorKind::kInvalid;  // the server refused the change (e.g. storage type): fix the config
    }
    return fail(std::move(error));
  }
  JsStreamInfoPtr si(raw);
  log::info("jetstream stream updated", {{"stream", config.name}});
  return toStreamInfo(*si);
}

Status JetStream::applyLimits(std::string_view stream, int64_t max_bytes, bool discard_new, int replicas) {
  std::string name(stream);
  jsOptions opts = impl_->options();
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  FLOTILLA_TRY(check(js_GetStreamInfo(&raw, impl_->js.get(), name.c_str(), &opts, &jerr), "js_GetStreamInfo", jerr));
  JsStreamInfoPtr si(raw);
  jsStreamConfig* cfg = si->Config;
  const jsDiscardPolicy discard = discard_new ? js_DiscardNew : js_DiscardOld;
  const int64_t want_replicas = replicas > 0 ? replicas : (cfg != nullptr ? cfg->Replicas : 0);
  if (cfg == nullptr || (cfg->MaxBytes == max_bytes && cfg->Discard == discard && cfg->Replicas == want_replicas)) {
    return {};
  }
  const int64_t before = cfg->MaxBytes;
  const int64_t replicas_before = cfg->Replicas;
  cfg->MaxBytes = max_bytes;
  cfg->Discard = discard;
  cfg->Replicas = want_replicas;
  jsStreamInfo* updated = nullptr;
  jerr = kNoJsError;
  natsStatus s = js_UpdateStream(&updated, impl_->js.get(), cfg, &opts, &jerr);
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "js_UpdateStream", jerr);
    error.message += " [setting max_bytes and replicas of stream " + name + "]";
    return fail(std::move(error));
  }
  JsStreamInfoPtr after(updated);
  log::info("jetstream stream limits updated", {{"stream", name},
                                                {"max_bytes", max_bytes},
                                                {"previous_max_bytes", before},
                                                {"replicas", want_replicas},
                                                {"previous_replicas", replicas_before},
                                                {"discard", discard_new ? "new" : "old"}});
  return {};
}

std::string JetStream::streamOfSubject(std::string_view subject) {
  // KV and object store subjects name their bucket; no need to ask the server.
  for (auto [prefix, stream_prefix] : {std::pair<std::string_view, std::string_view>{"$KV.", "KV_"}, {"$O.", "OBJ_"}}) {
    if (subject.substr(0, prefix.size()) == prefix) {
      const std::string_view rest = subject.substr(prefix.size());
      return std::string(stream_prefix) + std::string(rest.substr(0, rest.find('.')));
    }
  }
  std::string filter(subject);
  jsOptions opts = impl_->options();
  opts.Stream.Info.SubjectsFilter = filter.c_str();
  jsStreamNamesList* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  if (js_StreamNames(&raw, impl_->js.get(), &opts, &jerr) != NATS_OK || raw == nullptr) {
    return {};
  }
  std::string name = raw->Count > 0 && raw->List[0] != nullptr ? raw->List[0] : "";
  jsStreamNamesList_Destroy(raw);
  return name;
}

Result<StreamInfo> JetStream::streamInfo(std::string_view stream, std::string_view subjects_filter) {
  std::string name(stream);
  std::string filter(subjects_filter);
  jsOptions opts = impl_->options();
  if (!filter.empty()) {
    opts.Stream.Info.SubjectsFilter = filter.c_str();
  }
  jsStreamInfo* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  FLOTILLA_TRY(check(js_GetStreamInfo(&raw, impl_->js.get(), name.c_str(), &opts, &jerr), "js_GetStreamInfo", jerr));
  JsStreamInfoPtr si(raw);
  return toStreamInfo(*si);
}

Status JetStream::deleteStream(std::string_view stream) {
  std::string name(stream);
  jsOptions opts = impl_->options();
  jsErrCode jerr = kNoJsError;
  return check(js_DeleteStream(impl_->js.get(), name.c_str(), &opts, &jerr), "js_DeleteStream", jerr);
}

Status JetStream::purgeSubject(std::string_view stream, std::string_view subject) {
  std::string name(stream);
  std::string subj(subject);
  jsOptions opts = impl_->options();
  opts.Stream.Purge.Subject = subj.c_str();
  jsErrCode jerr = kNoJsError;
  return check(js_PurgeStream(impl_->js.get(), name.c_str(), &opts, &jerr), "js_PurgeStream", jerr);
}

Result<ConsumerInfo> JetStream::ensureConsumer(std::string_view stream, const ConsumerConfig& config) {
  if (config.durable.empty()) {
    return fail(ErrorKind::kInvalid, "a durable consumer needs a name", "js_AddConsumer");
  }
  std::string name(stream);
  std::vector<int64_t> backoff;
  for (auto delay : config.backoff) {
    backoff.push_back(toNanos(delay));
  }
  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = config.durable.c_str();
  cc.Description = config.description.empty() ? nullptr : config.description.c_str();
  cc.AckPolicy = js_AckExplicit;
  cc.AckWait = toNanos(config.ack_wait);
  cc.MaxDeliver = config.max_deliver;
  if (config.max_ack_pending > 0) {
    cc.MaxAckPending = config.max_ack_pending;
  }
  cc.DeliverPolicy = toDeliverPolicy(config.deliver_policy);
  cc.FilterSubject = config.filter_subject.empty() ? nullptr : config.filter_subject.c_str();
  if (!backoff.empty()) {
    cc.BackOff = backoff.data();
    cc.BackOffLen = static_cast<int>(backoff.size());
  }

  jsOptions opts = impl_->options();
  jsConsumerInfo* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  natsStatus s = js_GetConsumerInfo(&raw, impl_->js.get(), name.c_str(), config.durable.c_str(), &opts, &jerr);
  JsConsumerInfoPtr existing(raw);
  raw = nullptr;
  if (s == NATS_NOT_FOUND) {
    jerr = kNoJsError;
    FLOTILLA_TRY(check(js_AddConsumer(&raw, impl_->js.get(), name.c_str(), &cc, &opts, &jerr), "js_AddConsumer", jerr));
    JsConsumerInfoPtr ci(raw);
    log::info("jetstream consumer created", {{"stream", name}, {"consumer", config.durable}});
    return toConsumerInfo(*ci);
  }
  FLOTILLA_TRY(check(s, "js_GetConsumerInfo", jerr));
  jerr = kNoJsError;
  s = js_UpdateConsumer(&raw, impl_->js.get(), name.c_str(), &cc, &opts, &jerr);
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "js_UpdateConsumer", jerr);
    if (error.kind != ErrorKind::kTransient) {
      // Deliver policy, ack policy and the like are fixed once a durable exists.
      error.kind = ErrorKind::kConflict;
      error.message = "consumer " + config.durable + " exists with settings that cannot change: " + error.message;
    }
    return fail(std::move(error));
  }
  JsConsumerInfoPtr ci(raw);
  return toConsumerInfo(*ci);
}

namespace {

// The libnats consumer info of an existing durable (never creates one).
Result<JsConsumerInfoPtr> lookupConsumer(const JetStream::Impl& impl, const std::string& stream,
                                         const std::string& durable) {
  jsOptions opts = impl.options();
  jsConsumerInfo* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  FLOTILLA_TRY(check(js_GetConsumerInfo(&raw, impl.js.get(), stream.c_str(), durable.c_str(), &opts, &jerr),
                     "js_GetConsumerInfo", jerr));
  return JsConsumerInfoPtr(raw);
}

}  // namespace

Result<ConsumerInfo> JetStream::consumerInfo(std::string_view stream, std::string_view durable) {
  auto ci = lookupConsumer(*impl_, std::string(stream), std::string(durable));
  FLOTILLA_TRY(ci);
  return toConsumerInfo(**ci);
}

Status JetStream::deleteConsumer(std::string_view stream, std::string_view durable) {
  std::string name(stream);
  std::string consumer(durable);
  jsOptions opts = impl_->options();
  jsErrCode jerr = kNoJsError;
  return check(js_DeleteConsumer(impl_->js.get(), name.c_str(), consumer.c_str(), &opts, &jerr), "js_DeleteConsumer",
               jerr);
}

Result<PullConsumer> JetStream::bindPull(std::string_view stream, std::string_view durable) {
  std::string name(stream);
  std::string consumer(durable);
  // Look the consumer up first: binding must never create one (G3), and its filter is the subject to pass.
  auto info = lookupConsumer(*impl_, name, consumer);
  FLOTILLA_TRY(info);
  const jsConsumerConfig* config = (*info)->Config;
  std::string subject = config != nullptr && config->FilterSubject != nullptr ? config->FilterSubject : "";
  jsOptions opts = impl_->options();
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = name.c_str();
  so.Consumer = consumer.c_str();
  natsSubscription* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  FLOTILLA_TRY(check(js_PullSubscribe(&raw, impl_->js.get(), subject.empty() ? nullptr : subject.c_str(),
                                      consumer.c_str(), &opts, &so, &jerr),
                     "js_PullSubscribe", jerr));
  auto impl = std::make_shared<PullConsumer::Impl>();
  impl->js = shared_from_this();
  impl->sub.reset(raw);
  impl->stream = name;
  impl->durable = consumer;
  return PullConsumer(std::move(impl));
}

Result<Message> JetStream::getLastMessage(std::string_view stream, std::string_view subject) {
  std::string name(stream);
  std::string subj(subject);
  jsOptions opts = impl_->options();
  natsMsg* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  FLOTILLA_TRY(
      check(js_GetLastMsg(&raw, impl_->js.get(), name.c_str(), subj.c_str(), &opts, &jerr), "js_GetLastMsg", jerr));
  return wrapMessage(raw);
}

Result<Message> JetStream::getMessage(std::string_view stream, uint64_t sequence) {
  std::string name(stream);
  jsOptions opts = impl_->options();
  natsMsg* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  FLOTILLA_TRY(check(js_GetMsg(&raw, impl_->js.get(), name.c_str(), sequence, &opts, &jerr), "js_GetMsg", jerr));
  return wrapMessage(raw);
}

}  // namespace flotilla::bus
