#include "status_log.h"

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"

namespace flotilla::e2e {

uint64_t StatusLog::mark() {
  refresh();
  return read_up_to_;
}

void StatusLog::refresh() {
  auto js = hub_.js();
  if (!js.ok()) {
    return;
  }
  auto info = (*js)->streamInfo(events::kStatusStream);
  if (!info.ok()) {
    return;
  }
  for (uint64_t sequence = read_up_to_ + 1; sequence <= info->last_sequence; ++sequence) {
    auto message = (*js)->getMessage(events::kStatusStream, sequence);
    if (!message.ok()) {
      if (message.error().kind == ErrorKind::kNotFound) {
        continue;  // removed by the stream's limits: nothing to record
      }
      return;  // read again on the next call
    }
    read_up_to_ = sequence;
    auto json = Json::parse(message->data());
    if (!json.ok() || json->getString("kind") != events::StatusEvent::kKind) {
      continue;  // heartbeats and terminated-message records share the subjects
    }
    // Decoded as the scheduler decodes it: a report it would refuse is no evidence of what an agent applied.
    auto event = events::decodePayload<events::StatusEvent>(*json);
    if (!event.ok()) {
      log::warn("status stream message is not a valid StatusEvent",
                {{"sequence", static_cast<int64_t>(sequence)}, {"error", event.error().describe()}});
      continue;
    }
    events_.push_back({.sequence = sequence, .event = std::move(event).value()});
  }
  read_up_to_ = std::max(read_up_to_, info->last_sequence);
}

std::vector<RecordedStatus> StatusLog::of(const std::string& cluster, const std::string& bundle, uint64_t after) {
  refresh();
  std::vector<RecordedStatus> out;
  for (const auto& recorded : events_) {
    if (recorded.sequence > after && recorded.event.cluster == cluster && recorded.event.bundle == bundle) {
      out.push_back(recorded);
    }
  }
  return out;
}

std::string StatusLog::describe(const std::string& cluster, const std::string& bundle, uint64_t after) {
  std::string out = bundle + " on " + cluster + ": [";
  bool first_item = true;
  for (const auto& recorded : of(cluster, bundle, after)) {
    out += (first_item ? "" : ", ") + recorded.event.state;
    if (!recorded.event.reason.empty() || !recorded.event.message.empty()) {
      out += "(" + recorded.event.reason + ": " + recorded.event.message + ")";
    }
    first_item = false;
  }
  return out + "]";
}

bool StatusLog::saw(const std::string& cluster, const std::string& bundle, const std::string& state, uint64_t after) {
  return first(cluster, bundle, state, after).ok();
}

Result<RecordedStatus> StatusLog::first(const std::string& cluster, const std::string& bundle, const std::string& state,
                                        uint64_t after) {
  for (auto& recorded : of(cluster, bundle, after)) {
    if (recorded.event.state == state) {
      return std::move(recorded);
    }
  }
  return fail(ErrorKind::kNotFound, "no " + state + " report of " + bundle + " on " + cluster);
}

SystemTime reportedAt(const events::StatusEvent& event) {
  return parseRfc3339(event.time).value_or(SystemTime{});
}

}  // namespace flotilla::e2e
