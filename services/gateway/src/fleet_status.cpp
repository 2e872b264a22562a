// A GitRepo CR's status in Fleet's shape (fleet_status.h).
#include "flotilla/gateway/fleet_status.h"

namespace flotilla::gateway {
namespace {

Json condition(const std::string& type, const std::string& status, const std::string& reason,
               const std::string& message, const std::string& now) {
  return Json::obj({{"type", Json(type)},
                    {"status", Json(status)},
                    {"reason", Json(reason)},
                    {"message", Json(message)},
                    {"lastTransitionTime", Json(now)}});
}

void addAcceptance(Json& status, Json& conditions, const std::optional<Acceptance>& acceptance,
                   const std::string& now) {
  if (!acceptance) {
    return;
  }
  status["observedGeneration"] = Json(acceptance->generation);
  conditions.push(acceptance->accepted ? condition("Accepted", "True", "Accepted", "", now)
                                       : condition("Accepted", "False", "InvalidSpec", acceptance->message, now));
}

//! Ready: False while the spec is refused; from the roll-up once there is one; Unknown before.
Json readyCondition(const GitRepoFacts& facts, const std::string& now) {
  if (facts.acceptance && !facts.acceptance->accepted) {
    return condition("Ready", "False", "InvalidSpec", facts.acceptance->message, now);
  }
  if (!facts.summary) {
    return condition("Ready", "Unknown", "Pending", "waiting for the first commit to be rendered and deployed", now);
  }
  const events::GitRepoSummary& summary = *facts.summary;
  if (summary.state == "Ready" && !summary.error) {
    return condition("Ready", "True", "Ready", "", now);
  }
  return condition("Ready", "False", summary.state.empty() ? "NotReady" : summary.state, summary.message, now);
}

void addPoll(Json& status, Json& conditions, const events::PollStatus& poll, const std::string& now) {
  status["commit"] = Json(poll.commit);
  status["pollingCommit"] = Json(poll.polling_commit);
  if (!poll.webhook_commit.empty()) {
    status["webhookCommit"] = Json(poll.webhook_commit);
  }
  if (!poll.last_poll_time.empty()) {
    status["lastPollingTriggered"] = Json(poll.last_poll_time);
  }
  if (poll.last_error.empty()) {
    conditions.push(condition("GitPolling", "True", "Polled", "", now));
  } else {
    conditions.push(condition("GitPolling", "False", poll.last_error_kind.empty() ? "Failed" : poll.last_error_kind,
                              poll.last_error, now));
  }
}

void addSummary(Json& status, const events::GitRepoSummary& summary) {
  status["readyClusters"] = Json(summary.ready_clusters);
  status["desiredReadyClusters"] = Json(summary.desired_ready_clusters);
  status["summary"] = summary.summary;
  status["display"] = Json::obj({{"readyBundleDeployments", Json(summary.ready_bundle_deployments)},
                                 {"state", Json(summary.state)},
                                 {"message", Json(summary.message)},
                                 {"error", Json(summary.error)}});
}

}  // namespace

Json gitRepoStatus(const GitRepoFacts& facts, const std::string& now) {
  Json status = Json::object();
  Json conditions = Json::array();
  addAcceptance(status, conditions, facts.acceptance, now);
  if (facts.poll) {
    addPoll(status, conditions, *facts.poll, now);
  }
  if (facts.summary) {
    addSummary(status, *facts.summary);
  }
  conditions.push(readyCondition(facts, now));
  status["conditions"] = std::move(conditions);
  return status;
}

Json clusterStatus(const ClusterFacts& facts, const std::string& now) {
  Json status = Json::object();
  Json conditions = Json::array();
  addAcceptance(status, conditions, facts.acceptance, now);
  if (!facts.summary) {
    conditions.push(condition("Ready", "Unknown", "Pending", "no agent has registered this cluster yet", now));
  } else {
    const events::ClusterSummary& summary = *facts.summary;
    status["display"] = Json::obj({{"readyBundles", Json(summary.ready_bundles)}, {"state", Json(summary.state)}});
    status["agent"] = Json::obj({{"lastSeen", Json(summary.last_seen)}});
    status["readyGitRepos"] = Json(summary.ready_git_repos);
    status["desiredReadyGitRepos"] = Json(summary.desired_ready_git_repos);
    status["summary"] = summary.summary;
    const bool ready = summary.state == "Ready" && !summary.offline;
    conditions.push(
        ready ? condition("Ready", "True", "Ready", "", now)
              : condition("Ready", "False", summary.state.empty() ? "NotReady" : summary.state, summary.message, now));
  }
  status["conditions"] = std::move(conditions);
  return status;
}

Json clusterGroupStatus(const ClusterGroupFacts& facts, const std::string& now) {
  Json status = Json::object();
  Json conditions = Json::array();
  addAcceptance(status, conditions, facts.acceptance, now);
  status["conditions"] = std::move(conditions);
  return status;
}

namespace {

//! A condition without its lastTransitionTime, for comparing.
Json withoutTime(Json condition) {
  if (condition.isObject()) {
    condition.erase("lastTransitionTime");
  }
  return condition;
}

//! The status with every condition withoutTime.
Json withoutTimes(const Json& status) {
  Json out = status;
  if (Json* conditions = out.find("conditions"); conditions != nullptr && conditions->isArray()) {
    for (auto& item : conditions->asArray()) {
      item = withoutTime(std::move(item));
    }
  }
  return out;
}

}  // namespace

void keepTransitionTimes(Json& status, const Json& previous) {
  Json* conditions = status.find("conditions");
  const Json* before = previous.isObject() ? previous.find("conditions") : nullptr;
  if (conditions == nullptr || !conditions->isArray() || before == nullptr || !before->isArray()) {
    return;
  }
  for (auto& item : conditions->asArray()) {
    for (const auto& old : before->asArray()) {
      if (!item.isObject() || !old.isObject() || old.getString("type") != item.getString("type")) {
        continue;
      }
      if (withoutTime(item) == withoutTime(old) && old.contains("lastTransitionTime")) {
        item["lastTransitionTime"] = *old.find("lastTransitionTime");
      }
    }
  }
}

bool sameStatus(const Json& a, const Json& b) {
  return withoutTimes(a) == withoutTimes(b);
}

}  // namespace flotilla::gateway
