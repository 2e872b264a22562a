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
//! Ids of the scheduler's events that announce a change of its own records, derived from what they say: the same
//! fact announced again (a summary write that failed and is redone, a deregistration finished twice) carries the
//! same id, so its Nats-Msg-Id `event/<type>/<id>` is dropped by JetStream and a subscriber can key on it, as for
//! the poller's and the bundler's events. `digest16` is 16 hex digits of sha256 over the data's JSON.
//! summary/bundle/<ws>/<bundle>/<state>/<replaced revision>/<digest16>: a bundle's rolled-up state changed to
//! `state`; `replaced_revision` is the KV revision of the summary record it changed from (0: none), so the same
//! state reached again later (Ready, NotReady, Ready) is a new event.
std::string bundleStateEventId(std::string_view workspace, std::string_view bundle, std::string_view state,
                               uint64_t replaced_revision, const Json& data);
//! cluster/<ws>/<cluster>/<what>/<digest16>: `what` is registered or updated (data: the RegisterRequest, whose own id
//! and time make each registration distinct) or deregistered (data: the ClusterDeregistration tombstone).
std::string clusterEventId(std::string_view workspace, std::string_view cluster, std::string_view what,
                           const Json& data);

//! io.flotilla.gitrepo.commit (.deleted for a deleted GitRepo's event), subject "<workspace>/<gitrepo>".
CloudEvent toCloudEvent(const CommitEvent& event, std::string_view source);
//! io.flotilla.bundle.rendered (.failed with an error, .deleted when deleted), subject "<workspace>/<bundle>".
CloudEvent toCloudEvent(const BundleEvent& event, std::string_view source);
//! io.flotilla.bundledeployment.scheduled (or .deleted), subject "<cluster>/<bundle>".
CloudEvent toCloudEvent(const DeployEvent& event, std::string_view source);
//! io.flotilla.bundledeployment.<state lower-cased>, subject "<cluster>/<bundle>".
CloudEvent toCloudEvent(const StatusEvent& event, std::string_view source);

}  // namespace flotilla::events
