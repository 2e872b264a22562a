// flotilla/events/terminated.h
//
// A message a consumer gave up on (docs/pipeline.md "Delivery policy"): it used up its maximum delivery count,
// its handler threw, or it overran its time budget. The consumer terminates it (JetStream never redelivers it)
// and reports it three ways with this one record:
//   - KV `status` key terminatedKey(stream, consumer, streamSequence): what `flotilla redrive` re-derives from
//     (the message itself stays in its stream, found by sequence, until the stream's max age);
//   - the public CloudEvent io.flotilla.message.terminated on flotilla.events.message.<stream>.<consumer>
//     (data = this record, docs/events/terminated.md);
//   - a log line and the counter flotilla_<service>_messages_terminated_total{consumer,reason}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/cloudevents.h"

namespace flotilla::events {

//! Why a consumer terminated a message.
inline constexpr std::string_view kTerminatedExhausted = "MaxDeliveries";  //!< every delivery failed
inline constexpr std::string_view kTerminatedThrew = "HandlerThrew";       //!< the handler threw an exception
inline constexpr std::string_view kTerminatedOverBudget = "TimeBudget";    //!< the handler ran past its budget

struct MessageTerminated {
  static constexpr std::string_view kKind = "MessageTerminated";
  std::string id;
  std::string time;
  std::string service;   //!< "bundler", "scheduler", "agent"
  std::string stream;    //!< "FLOTILLA_COMMITS"
  std::string consumer;  //!< the durable ("bundler", "scheduler-status", "agent-<cluster>")
  std::string subject;   //!< the message's subject
  uint64_t stream_sequence = 0;
  std::string msg_id;  //!< its Nats-Msg-Id ("" when it had none)
  uint64_t deliveries = 0;
  std::string reason;   //!< kTerminated*
  std::string message;  //!< the last error, the exception text or the budget overrun
  bool operator==(const MessageTerminated&) const = default;
};

Json encode(const MessageTerminated& value);
//! Strict: apiVersion, kind, required fields (stream, consumer, subject, streamSequence, reason), no unknown ones.
Result<MessageTerminated> decodeMessageTerminated(const Json& json);

//! status: terminated.<stream>.<consumer>.<sequence> (written by the consumer, removed by `flotilla redrive`).
std::string terminatedKey(std::string_view stream, std::string_view consumer, uint64_t sequence);
//! status: terminated.> — every terminated message.
inline constexpr std::string_view kTerminatedFilter = "terminated.>";
//! flotilla.events.message.<stream>.<consumer>
std::string terminatedSubject(std::string_view stream, std::string_view consumer);
//! io.flotilla.message.terminated, subject "<stream>/<sequence>", data = encode(value).
CloudEvent toCloudEvent(const MessageTerminated& value, std::string_view source);

}  // namespace flotilla::events
