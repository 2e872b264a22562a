// JSON text -> Json (libs/core json.h, simdjson) -> every strict decoder of bus messages and KV records
// (libs/events) and the state summary (libs/model). Properties: Json's canonical text parses back to the same value,
// and whatever a decoder accepts, its encoder writes in a form the decoder reads back as the same value.
#include <cstddef>
#include <cstdint>

#include "flotilla/core/json.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"
#include "flotilla/events/terminated.h"
#include "flotilla/events/variants.h"
#include "flotilla/model/state.h"
#include "fuzz_support.h"

namespace {

using flotilla::Json;
using flotilla::fuzz::check;

//! decode -> encode -> decode gives the same value (when the first decode accepts the input).
template <typename T, typename Decode, typename Encode>
void roundTrip(const Json& json, const char* what, Decode decode, Encode encode) {
  auto decoded = decode(json);
  if (!decoded.ok()) {
    check(!decoded.error().message.empty(), what);
    return;
  }
  Json encoded = encode(*decoded);
  auto again = decode(encoded);
  check(again.ok(), what, again.ok() ? std::string() : again.error().message + "\n" + encoded.dump());
  check(*again == *decoded, what, encoded.dump());
}

template <typename T>
void payload(const Json& json) {
  roundTrip<T>(
      json, "event payload round trip", [](const Json& j) { return flotilla::events::decodePayload<T>(j); },
      [](const T& v) { return flotilla::events::encode(v); });
}

template <typename T>
void record(const Json& json) {
  roundTrip<T>(
      json, "KV record round trip", [](const Json& j) { return flotilla::events::decodeRecord<T>(j); },
      [](const T& v) { return flotilla::events::encode(v); });
}

//! payload<T> for each T.
template <typename... T>
void payloads(const Json& json) {
  (payload<T>(json), ...);
}

//! record<T> for each T.
template <typename... T>
void records(const Json& json) {
  (record<T>(json), ...);
}

void decodeEverything(const Json& json) {
  namespace ev = flotilla::events;
  payloads<ev::CommitEvent, ev::BundleEvent, ev::DeployEvent, ev::StatusEvent, ev::RegisterRequest, ev::RegisterReply,
           ev::Heartbeat>(json);
  (void)ev::payloadKind(json);
  records<ev::DeploymentRecord, ev::BdStatus, ev::BundleRecord, ev::RenderStatus, ev::BundleClaim, ev::PollStatus,
          ev::BundleSummary, ev::GitRepoSummary, ev::ClusterSummary, ev::ClusterDeregistration>(json);
  roundTrip<ev::CloudEvent>(json, "CloudEvent round trip", ev::decodeCloudEvent,
                            [](const ev::CloudEvent& v) { return ev::encode(v); });
  roundTrip<ev::BundleVariants>(json, "BundleVariants round trip", ev::decodeBundleVariants,
                                [](const ev::BundleVariants& v) { return ev::encode(v); });
  roundTrip<ev::MessageTerminated>(json, "MessageTerminated round trip", ev::decodeMessageTerminated,
                                   [](const ev::MessageTerminated& v) { return ev::encode(v); });
  roundTrip<flotilla::model::StateSummary>(
      json, "state summary round trip", [](const Json& j) { return flotilla::model::decodeStateSummary(j); },
      flotilla::model::encodeStateSummary);
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls, by this name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = Json::parse(flotilla::fuzz::asText(data, size));
  if (!json.ok()) {
    return 0;
  }
  std::string text = json->dump();
  auto reparsed = Json::parse(text);
  check(reparsed.ok() && *reparsed == *json, "Json::dump parses back to the same value", text);
  (void)json->pretty();
  decodeEverything(*json);
  return 0;
}
