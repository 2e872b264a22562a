#include "flotilla/events/terminated.h"

#include "flotilla/events/subjects.h"
#include "record_codec.h"

namespace flotilla::events {

namespace {

constexpr auto kMessageTerminatedFields = [](auto& v, auto& s) {
  v.str("service", s.service);
  v.str("stream", s.stream, true);
  v.str("consumer", s.consumer, true);
  v.str("subject", s.subject, true);
  v.value("streamSequence", s.stream_sequence, detail::kUint64, true);
  v.str("msgId", s.msg_id);
  v.value("deliveries", s.deliveries, detail::kUint64);
  v.str("reason", s.reason, true);
  v.str("message", s.message);
};

}  // namespace

Json encode(const MessageTerminated& value) {
  return detail::encodeWith(value, kMessageTerminatedFields);
}

Result<MessageTerminated> decodeMessageTerminated(const Json& json) {
  return detail::decodeWith<MessageTerminated>(json, kMessageTerminatedFields);
}

std::string terminatedKey(std::string_view stream, std::string_view consumer, uint64_t sequence) {
  return "terminated." + escapeToken(stream) + "." + escapeToken(consumer) + "." + std::to_string(sequence);
}

std::string terminatedSubject(std::string_view stream, std::string_view consumer) {
  return eventsSubject("message", {stream, consumer});
}

CloudEvent toCloudEvent(const MessageTerminated& value, std::string_view source) {
  return toCloudEvent(cloudEventType("message", "terminated"), std::string(source),
                      value.stream + "/" + std::to_string(value.stream_sequence), encode(value));
}

}  // namespace flotilla::events
