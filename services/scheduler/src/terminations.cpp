#include "flotilla/scheduler/terminations.h"

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"

namespace flotilla::scheduler {

namespace {

//! The cluster of a status subject (flotilla.status.<cluster>.<bundle>); nullopt for any other shape.
std::optional<std::string> subjectCluster(std::string_view subject) {
  auto tokens = events::subjectTokens(subject, "flotilla.status");
  if (!tokens.ok() || tokens->size() != 2) {
    return std::nullopt;
  }
  return (*tokens)[0];
}

//! The record names the durable of the subject's cluster ("agent-<escaped cluster>") on FLOTILLA_DEPLOY.
bool fromOwnAgent(const std::optional<std::string>& cluster, const events::MessageTerminated& record) {
  return cluster && record.stream == events::kDeployStream &&
         record.consumer == "agent-" + events::escapeToken(*cluster);
}

}  // namespace

std::optional<service::Outcome> forwardAgentTermination(std::string_view subject, std::string_view data,
                                                        bus::KeyValue& status, bus::JetStream& js, bool public_events,
                                                        const Partition& partition) {
  if (data.find(events::MessageTerminated::kKind) == std::string_view::npos) {
    return std::nullopt;
  }
  auto json = Json::parse(data);
  if (!json.ok() || !json->isObject() || json->getString("kind") != events::MessageTerminated::kKind) {
    return std::nullopt;
  }
  const auto cluster = subjectCluster(subject);
  if (cluster && !partition.ownsCluster(*cluster)) {
    return service::Outcome::ack("other-partition");  // the cluster's partition judges, stores and announces it
  }
  auto record = events::decodeMessageTerminated(*json);
  if (!record.ok()) {
    log::warn("rejecting an unreadable terminated-message report", {{"error", record.error().describe()}});
    return service::Outcome::reject("invalid");
  }
  if (!fromOwnAgent(cluster, *record)) {
    log::warn("rejecting a terminated-message report for another cluster's consumer",
              {{"subject", subject}, {"consumer", record->consumer}});
    return service::Outcome::reject("spoofed");
  }
  auto put = status.put(events::terminatedKey(record->stream, record->consumer, record->stream_sequence), data);
  if (!put.ok()) {
    return service::Outcome::retry(std::chrono::seconds(1));
  }
  if (public_events) {
    auto event = events::toCloudEvent(*record, "/flotilla/agent");
    auto sent = js.publish(
        events::terminatedSubject(record->stream, record->consumer), events::encode(event).dump(),
        "terminated/" + record->stream + "/" + record->consumer + "/" + std::to_string(record->stream_sequence));
    if (!sent.ok()) {
      return service::Outcome::retry(std::chrono::seconds(1));
    }
  }
  log::error("an agent terminated a deploy message; `flotilla redrive` can re-derive it",
             {{"consumer", record->consumer},
              {"subject", record->subject},
              {"msg_id", record->msg_id},
              {"reason", record->reason},
              {"error", record->message}});
  return service::Outcome::ack("terminated-reported");
}

}  // namespace flotilla::scheduler
