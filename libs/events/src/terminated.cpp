#include "flotilla/events/terminated.h"

#include "flotilla/events/subjects.h"
#include "reader.h"

namespace flotilla::events {

Json encode(const MessageTerminated& v) {
  return Json::obj({{"apiVersion", std::string(kApiVersion)},
                    {"kind", std::string(MessageTerminated::kKind)},
                    {"id", v.id},
                    {"time", v.time},
                    {"service", v.service},
                    {"stream", v.stream},
                    {"consumer", v.consumer},
                    {"subject", v.subject},
                    {"streamSequence", static_cast<int64_t>(v.stream_sequence)},
                    {"msgId", v.msg_id},
                    {"deliveries", static_cast<int64_t>(v.deliveries)},
                    {"reason", v.reason},
                    {"message", v.message}});
}

Result<MessageTerminated> decodeMessageTerminated(const Json& json) {
  detail::PayloadReader reader(json, MessageTerminated::kKind);
  MessageTerminated out;
  reader.header(out.id, out.time);
  if (reader.fields().ok()) {
    auto& in = reader.fields();
    int64_t sequence = 0;
    int64_t deliveries = 0;
    in.str("service", out.service);
    in.str("stream", out.stream, true);
    in.str("consumer", out.consumer, true);
    in.str("subject", out.subject, true);
    in.integer("streamSequence", sequence, true);
    in.str("msgId", out.msg_id);
    in.integer("deliveries", deliveries);
    in.str("reason", out.reason, true);
    in.str("message", out.message);
    if (sequence < 0 || deliveries < 0) {
      in.fail("MessageTerminated", "streamSequence and deliveries must not be negative");
    }
    out.stream_sequence = static_cast<uint64_t>(sequence);
    out.deliveries = static_cast<uint64_t>(deliveries);
  }
  if (auto status = reader.finish(); !status.ok()) {
    return fail(status.error());
  }
  return out;
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
