// The one rule for the state a BundleDeployment counts as (records.h deploymentState), and the codec helpers the
// record files share (record_codec.h).
#include <algorithm>
#include <array>

#include "flotilla/events/records.h"
#include "record_codec.h"

namespace flotilla::events {
namespace {

// Best first, so the index is the rank (model::BundleState; a test linking both checks they agree).
constexpr std::array<std::string_view, 7> kStatesBestFirst = {"Ready",    "NotReady",    "Pending",   "OutOfSync",
                                                              "Modified", "WaitApplied", "ErrApplied"};

//! 0 (Ready) .. 6 (ErrApplied); -1 for anything else.
int rankOf(std::string_view state) {
  auto it = std::find(kStatesBestFirst.begin(), kStatesBestFirst.end(), state);
  return it == kStatesBestFirst.end() ? -1 : static_cast<int>(it - kStatesBestFirst.begin());
}

std::string shortId(std::string_view deployment_id) {
  // "manifest:options" -> the first 12 characters of each half, enough to tell deployments apart in a message.
  auto colon = deployment_id.find(':');
  if (colon == std::string_view::npos) {
    return std::string(deployment_id.substr(0, 12));
  }
  return std::string(deployment_id.substr(0, std::min<size_t>(colon, 12))) + ":" +
         std::string(deployment_id.substr(colon + 1, 12));
}

void appendMessage(std::string& message, std::string_view more) {
  if (!message.empty()) {
    message += "; ";
  }
  message += more;
}

DeploymentState reportedState(const DeploymentRecord& record, const BdStatus& status) {
  if (status.deployment_id != record.deployment_id) {
    if (status.state == "ErrApplied" && status.generation >= record.generation) {
      return {"ErrApplied", status.reason, status.message};
    }
    return {"WaitApplied", "WaitingForAgent",
            "agent reports deployment " +
                (status.deployment_id.empty() ? std::string("none") : shortId(status.deployment_id)) + " (" +
                status.state + "); waiting for " + shortId(record.deployment_id)};
  }
  if (rankOf(status.state) < 0) {
    return {"ErrApplied", "InvalidStatus", "the agent reported an unknown state \"" + status.state + "\""};
  }
  return {status.state, status.reason, status.message};
}

}  // namespace

DeploymentState releasedState(const DeploymentRecord& record, const BdStatus* status) {
  if (record.deleting) {
    // A failed delete (the agent could not prune everything) is the agent's word on this generation.
    if (status != nullptr && status->generation >= record.generation && status->state == "ErrApplied") {
      return {"ErrApplied", status->reason, status->message};
    }
    return {"WaitApplied", "Deleting", "delete sent; waiting for the agent to remove the bundle"};
  }
  const bool by_rollout = record.staged_reason == kStagedByRollout;
  if (record.deployment_id.empty()) {
    if (by_rollout) {
      return {"Pending", "Rollout", "the rollout has not reached this cluster yet: nothing released to it"};
    }
    return {"Pending", "Paused", "bundle paused: nothing released to this cluster yet"};
  }
  return status == nullptr
             ? DeploymentState{"WaitApplied", "WaitingForAgent",
                               "deployment " + shortId(record.deployment_id) + " sent; no status from the agent yet"}
             : reportedState(record, *status);
}

DeploymentState deploymentState(const DeploymentRecord& record, const BdStatus* status) {
  DeploymentState out = releasedState(record, status);
  if (record.deleting || record.deployment_id.empty()) {
    return out;
  }
  const bool by_rollout = record.staged_reason == kStagedByRollout;
  if (!record.staged_deployment_id.empty() && record.staged_deployment_id != record.deployment_id) {
    if (rankOf(out.state) < rankOf("OutOfSync")) {
      out.state = "OutOfSync";
      out.reason = by_rollout ? "Rollout" : "Paused";
    }
    appendMessage(out.message, (by_rollout ? "held by the rollout: deployment " : "bundle paused: deployment ") +
                                   shortId(record.staged_deployment_id) + " waits" +
                                   (by_rollout ? " for its partition" : ""));
  }
  return out;
}

namespace detail {

Status problemsStatus(const std::vector<std::string>& problems, std::string_view kind) {
  if (problems.empty()) {
    return okStatus();
  }
  std::string message;
  for (const auto& problem : problems) {
    message += (message.empty() ? "" : "; ") + problem;
  }
  return fail(ErrorKind::kInvalid, message, "decode " + std::string(kind));
}

void recordEnvelope(Reader& in, std::string_view api_version, std::string_view kind) {
  std::string actual_api_version;
  std::string actual_kind;
  in.str("apiVersion", actual_api_version, true);
  in.str("kind", actual_kind, true);
  if (!actual_api_version.empty() && actual_api_version != api_version) {
    in.fail(in.pathOf("apiVersion"), "expected " + std::string(api_version) + ", got \"" + actual_api_version + "\"");
  }
  if (!actual_kind.empty() && actual_kind != kind) {
    in.fail(in.pathOf("kind"), "expected " + std::string(kind) + ", got \"" + actual_kind + "\"");
  }
}

void checkState(Reader& in, std::string_view key, const std::string& state) {
  if (!state.empty() && rankOf(state) < 0) {
    in.fail(in.pathOf(key), "unknown bundle state \"" + state +
                                "\" (one of Ready, NotReady, Pending, OutOfSync, Modified, WaitApplied, ErrApplied)");
  }
}

bool Uint64Codec::read(Reader& in, std::string_view key, const Json& raw, uint64_t& out) const {
  if (!raw.isInt()) {
    in.fail(in.pathOf(key), "expected an integer, got " + codec::typeName(raw));
    return false;
  }
  if (raw.asInt() < 0) {
    in.fail(in.pathOf(key), "must be at least 0, got " + std::to_string(raw.asInt()));
    return false;
  }
  out = static_cast<uint64_t>(raw.asInt());
  return true;
}

}  // namespace detail
}  // namespace flotilla::events
