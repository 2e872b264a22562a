// Publishing to JetStream: one message with its ack (publish), and a batch sent without waiting for each ack
// (publishEach, publishAll). Split from jetstream.cpp, which keeps streams and consumers.
#include <mutex>
#include <optional>
#include <unordered_map>

#include "flotilla/bus/jetstream.h"
#include "nats_handles.h"

namespace flotilla::bus {
namespace {
constexpr jsErrCode kNoJsError = static_cast<jsErrCode>(0);
}  // namespace

Result<PublishAck> JetStream::publish(std::string_view subject, std::string_view data, std::string_view msg_id,
                                      const Headers& headers) {
  auto msg = makeMessage(subject, data, headers, "js_PublishMsg");
  if (!msg.ok()) {
    return fail(msg.error());
  }
  std::string id(msg_id);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = toMillis(impl_->wait);
  if (!id.empty()) {
    po.MsgId = id.c_str();
  }
  jsPubAck* raw = nullptr;
  jsErrCode jerr = kNoJsError;
  natsStatus s = js_PublishMsg(&raw, impl_->js.get(), msg->get(), &po, &jerr);
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "js_PublishMsg", jerr);
    error.message += " [subject " + std::string(subject) + "]";
    if (error.kind == ErrorKind::kStoreFull) {
      error = storeFullInStream(std::move(error), streamOfSubject(subject));
    }
    return fail(std::move(error));
  }
  JsPubAckPtr ack(raw);
  return PublishAck{
      .stream = ack->Stream != nullptr ? ack->Stream : "", .sequence = ack->Sequence, .duplicate = ack->Duplicate};
}

namespace {

//! The acks of one publishAll call, filled by libnats' ack handler (its own thread).
struct BatchAcks {
  std::mutex mutex;
  std::unordered_map<const natsMsg*, size_t> index;  //!< message in flight -> its place in the batch
  std::vector<std::optional<Result<PublishAck>>> acks;
};

void onBatchAck(jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  auto* batch = static_cast<BatchAcks*>(closure);
  {
    std::lock_guard lock(batch->mutex);
    auto it = batch->index.find(msg);
    if (it != batch->index.end()) {
      if (pa != nullptr && pae == nullptr) {
        batch->acks[it->second] = Result<PublishAck>(PublishAck{
            .stream = pa->Stream != nullptr ? pa->Stream : "", .sequence = pa->Sequence, .duplicate = pa->Duplicate});
      } else {
        batch->acks[it->second] =
            Result<PublishAck>(fail(pae != nullptr ? natsError(pae->Err, "js_PublishMsgAsync", pae->ErrCode,
                                                               pae->ErrText != nullptr ? pae->ErrText : "")
                                                   : makeError(ErrorKind::kTransient, "no ack", "js_PublishMsgAsync")));
      }
      // Erased before the message is freed: a later message at the same address is a new entry.
      batch->index.erase(it);
    }
  }
  natsMsg_Destroy(msg);  // the ack handler owns the published message
}

//! Sends `messages` on the async context, each registered in `batch` for its ack; stops at the first one that
//! cannot be sent (`send_error`). Returns how many were sent.
size_t sendBatch(jsCtx* async_js, BatchAcks& batch, const std::vector<JetStream::Outgoing>& messages,
                 std::optional<Error>& send_error) {
  size_t sent = 0;
  for (; sent < messages.size(); ++sent) {
    const JetStream::Outgoing& m = messages[sent];
    Headers headers;
    if (!m.msg_id.empty()) {
      headers["Nats-Msg-Id"] = m.msg_id;
    }
    auto msg = makeMessage(m.subject, m.data, headers, "js_PublishMsgAsync");
    if (!msg.ok()) {
      send_error = msg.error();
      break;
    }
    natsMsg* pointer = msg->get();
    {
      std::lock_guard lock(batch.mutex);
      batch.index[pointer] = sent;
    }
    natsMsg* owned = msg->release();
    natsStatus s = js_PublishMsgAsync(async_js, &owned, nullptr);
    if (s != NATS_OK) {
      {
        std::lock_guard lock(batch.mutex);
        batch.index.erase(pointer);
      }
      natsMsg_Destroy(owned);  // not taken by the library on failure
      send_error = lastNatsError(s, "js_PublishMsgAsync");
      send_error->message += " [subject " + m.subject + "]";
      break;
    }
  }
  return sent;
}

}  // namespace

std::vector<Result<PublishAck>> JetStream::publishEach(const std::vector<Outgoing>& messages) {
  std::vector<Result<PublishAck>> out;
  if (messages.empty()) {
    return out;
  }
  // A context of its own per call: its ack handler writes into this call's BatchAcks, and destroying it after
  // the wait below leaves nothing of the call behind.
  BatchAcks batch;
  batch.acks.resize(messages.size());
  jsOptions opts = impl_->options();
  opts.PublishAsync.MaxPending = kPublishAllInFlight;
  opts.PublishAsync.AckHandler = onBatchAck;
  opts.PublishAsync.AckHandlerClosure = &batch;
  opts.PublishAsync.StallWait = toMillis(impl_->wait);
  jsCtx* raw = nullptr;
  if (natsStatus s = natsConnection_JetStream(&raw, connection()->impl().conn.get(), &opts); s != NATS_OK) {
    out.assign(messages.size(), Result<PublishAck>(fail(lastNatsError(s, "natsConnection_JetStream"))));
    return out;
  }
  JsCtxPtr async_js(raw);
  std::optional<Error> send_error;  // the message where sending stopped, and why
  const size_t sent = sendBatch(async_js.get(), batch, messages, send_error);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  // The API wait, and a millisecond more per message: 10,000 acks from a busy server take a while.
  po.MaxWait = toMillis(impl_->wait) + static_cast<int64_t>(sent);
  if (js_PublishAsyncComplete(async_js.get(), &po) != NATS_OK) {
    // No ack in time for some: take them back from the library (they are freed here, not by the handler).
    natsMsgList pending{};
    if (js_PublishAsyncGetPendingList(&pending, async_js.get()) == NATS_OK) {
      natsMsgList_Destroy(&pending);
    }
  }
  async_js.reset();
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i >= sent) {
      // Not sent: where sending stopped, and everything after it.
      Error error = send_error ? *send_error : makeError(ErrorKind::kInternal, "not sent", "js_PublishMsgAsync");
      out.emplace_back(fail(std::move(error)));
      continue;
    }
    auto& ack = batch.acks[i];
    if (!ack) {
      out.emplace_back(fail(makeError(
          ErrorKind::kTransient,
          "no ack within " + std::to_string(impl_->wait.count()) + " ms [subject " + messages[i].subject + "]",
          "js_PublishAsyncComplete")));
      continue;
    }
    if (!ack->ok()) {
      Error error = ack->error();
      error.message += " [subject " + messages[i].subject + "]";
      if (error.kind == ErrorKind::kStoreFull) {
        error = storeFullInStream(std::move(error), streamOfSubject(messages[i].subject));
      }
      out.emplace_back(fail(std::move(error)));
      continue;
    }
    out.push_back(std::move(*ack));
  }
  return out;
}

Result<std::vector<PublishAck>> JetStream::publishAll(const std::vector<Outgoing>& messages) {
  std::vector<PublishAck> out;
  out.reserve(messages.size());
  for (auto& result : publishEach(messages)) {
    FLOTILLA_TRY(result);
    out.push_back(*result);
  }
  return out;
}

}  // namespace flotilla::bus
