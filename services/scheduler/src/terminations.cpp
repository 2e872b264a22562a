#include "flotilla/scheduler/terminations.h"

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"

namespace flotilla::scheduler {

namespace {

//! The record names the durable of the subject's cluster ("agent-<escaped cluster>") on FLOTILLA_DEPLOY.
bool fromOwnAgent(std::string_view subject, const events::MessageTerminated& record) {
  auto tokens = events::subjectTokens(subject, "flotilla.status");
  if (!tokens.ok() || tokens->size() != 2) {
    return false;
  }
  return record.stream == events::kDeployStream && record.consumer == "agent-" + events::escapeToken((*tokens)[0]);
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
  auto record = events::decodeMessageTerminated(*json);
  if (!record.ok()) {
    log::warn("rejecting an unreadable terminated-message report", {{"error", record.error().describe()}});
    return service::Outcome::reject("invalid");
  }
  if (!fromOwnAgent(subject, *record)) {
    log::warn("rejecting a terminated-message report for another cluster's consumer",
              {{"subject", subject}, {"consumer", record->consumer}});
    return service::Outcome::reject("spoofed");
  }
  if (auto tokens = events::subjectTokens(subject, "flotilla.status");
      tokens.ok() && !tokens->empty() && !partition.ownsCluster((*tokens)[0])) {
    return service::Outcome::ack("other-partition");  // the cluster's partition stores and announces it
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
