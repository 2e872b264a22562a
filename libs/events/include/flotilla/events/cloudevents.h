// flotilla/events/cloudevents.h
//
// Public events for other systems, published on flotilla.events.<kind>.<...> (eventsSubject) in CloudEvents 1.0
// JSON format (structured mode): specversion "1.0", type, source, id, time, subject, datacontenttype
// "application/json" and data. Types are "io.flotilla.<object>.<what>" ("io.flotilla.bundle.ready",
// "io.flotilla.bundledeployment.errapplied"); data is the internal payload (or a summary) as JSON.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"

namespace flotilla::events {

inline constexpr std::string_view kCloudEventsSpecVersion = "1.0";
inline constexpr std::string_view kCloudEventTypePrefix = "io.flotilla.";

//! A CloudEvents 1.0 event (the attributes Flotilla sets, plus JSON data).
struct CloudEvent {
  std::string type;     //!< required: "io.flotilla.<object>.<what>"
  std::string source;   //!< required: URI-reference of the producer, e.g. "/flotilla/scheduler"
  std::string id;       //!< required: unique per source
  std::string time;     //!< RFC 3339
  std::string subject;  //!< the object within the source: "<workspace>/<bundle>", "<cluster>/<bundle>", ...
  Json data = Json::object();

  bool operator==(const CloudEvent&) const = default;
};

//! "io.flotilla." + object + "." + what, lower-cased ("Bundle", "Ready" -> "io.flotilla.bundle.ready").
std::string cloudEventType(std::string_view object, std::string_view what);

//! The structured-mode JSON of a CloudEvent.
Json encode(const CloudEvent& value);
//! Strict decoding: specversion must be "1.0", type/source/id required, datacontenttype (when present) must be
//! "application/json". Extension attributes (lower-case alphanumeric names, string values) are accepted and dropped.
Result<CloudEvent> decodeCloudEvent(const Json& json);

//! Builds a CloudEvent; `id` and `time` default to a new id and now.
CloudEvent toCloudEvent(std::string type, std::string source, std::string subject, Json data, std::string id = {},
                        std::string time = {});
//! io.flotilla.gitrepo.commit (.deleted for a deleted GitRepo's event), subject "<workspace>/<gitrepo>".
CloudEvent toCloudEvent(const CommitEvent& event, std::string_view source);
//! io.flotilla.bundle.rendered (.failed with an error, .deleted when deleted), subject "<workspace>/<bundle>".
CloudEvent toCloudEvent(const BundleEvent& event, std::string_view source);
//! io.flotilla.bundledeployment.scheduled (or .deleted), subject "<cluster>/<bundle>".
CloudEvent toCloudEvent(const DeployEvent& event, std::string_view source);
//! io.flotilla.bundledeployment.<state lower-cased>, subject "<cluster>/<bundle>".
CloudEvent toCloudEvent(const StatusEvent& event, std::string_view source);

}  // namespace flotilla::events
