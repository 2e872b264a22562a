#include "flotilla/bus/stream_reader.h"

#include "nats_handles.h"

namespace flotilla::bus {

struct detail::StreamReaderImpl {
  std::shared_ptr<JetStream> js;
  //! Destroyed without an unsubscribe: the consumer is ephemeral, and the server drops it once nobody listens,
  //! while an unsubscribe would ask to delete it — which a readonly user may not, and would wait for the refusal.
  NatsSubscriptionPtr sub;
  bool started_empty = false;
};

template class detail::OwnedImpl<StreamReader::Impl, std::unique_ptr<StreamReader::Impl>>;

namespace {

constexpr jsErrCode kNoJsError = static_cast<jsErrCode>(0);

//! Whether the new consumer holds nothing: not one message delivered or pending.
Result<bool> consumerEmpty(natsSubscription* sub, JetStream& js) {
  jsOptions opts = js.impl().options();
  jsConsumerInfo* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  natsStatus s = natsSubscription_GetConsumerInfo(&raw, sub, &opts, &jerr);
  if (s != NATS_OK) {
    return fail(lastNatsError(s, "natsSubscription_GetConsumerInfo", jerr));
  }
  JsConsumerInfoPtr info(raw);
  return info->NumPending == 0 && info->Delivered.Consumer == 0;
}

}  // namespace

Result<StreamReader> StreamReader::open(const std::shared_ptr<JetStream>& js, const StreamReaderOptions& options) {
  FLOTILLA_TRY(js->streamInfo(options.stream));  // kNotFound naming the stream, before a consumer is asked for
  jsOptions opts = js->impl().options();
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = options.stream.c_str();
  so.Ordered = true;
  if (options.start_time_ns) {
    so.Config.DeliverPolicy = js_DeliverByStartTime;
    so.Config.OptStartTime = *options.start_time_ns;
  } else {
    so.Config.DeliverPolicy = js_DeliverAll;
  }
  if (options.subject.empty()) {
    return fail(ErrorKind::kInvalid, "a stream reader needs a subject", "StreamReader::open");
  }
  const std::string& subject = options.subject;
  natsSubscription* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  natsStatus s = js_SubscribeSync(&raw, js->impl().js.get(), subject.c_str(), &opts, &so, &jerr);
  if (s != NATS_OK) {
    return fail(lastNatsError(s, "js_SubscribeSync " + options.stream, jerr));
  }
  auto impl = std::make_unique<Impl>();
  impl->js = js;
  impl->sub.reset(raw);
  auto empty = consumerEmpty(impl->sub.get(), *js);
  FLOTILLA_TRY(empty);
  impl->started_empty = *empty;
  return StreamReader(std::move(impl));
}

Result<std::optional<Message>> StreamReader::next(std::chrono::milliseconds timeout) {
  if (!impl_) {
    return fail(ErrorKind::kInvalid, "next on an empty stream reader", "StreamReader::next");
  }
  natsMsg* raw = nullptr;
  natsStatus s = natsSubscription_NextMsg(&raw, impl_->sub.get(), toMillis(timeout));
  if (s == NATS_TIMEOUT) {
    return std::optional<Message>();
  }
  if (s != NATS_OK) {
    return fail(lastNatsError(s, "natsSubscription_NextMsg"));
  }
  return std::optional<Message>(wrapMessage(raw));
}

bool StreamReader::startedEmpty() const {
  return impl_ && impl_->started_empty;
}

}  // namespace flotilla::bus
