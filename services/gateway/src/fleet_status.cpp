// A GitRepo CR's status in Fleet's shape (fleet_status.h).
#include "flotilla/gateway/fleet_status.h"

#include "flotilla/core/time.h"
#include "flotilla/model/state.h"

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

namespace {

//! A member counts as ready when its roll-up says Ready and it is not Offline (as the Cluster CR's Ready).
bool memberReady(const GroupMember& member) {
  return member.summary && member.summary->state == "Ready" && !member.summary->offline;
}

void addMembers(Json& status, Json& conditions, const std::vector<GroupMember>& members, const std::string& now) {
  model::StateSummary bundles;
  std::vector<std::string> not_ready;
  for (const auto& member : members) {
    if (!memberReady(member)) {
      not_ready.push_back(member.name);
    }
    if (member.summary) {
      // A roll-up the scheduler wrote is well formed; one that is not leaves the counts without it.
      if (auto summary = model::decodeStateSummary(member.summary->summary); summary.ok()) {
        bundles.merge(*summary);
      }
    }
  }
  const auto count = static_cast<int64_t>(members.size());
  const auto non_ready = static_cast<int64_t>(not_ready.size());
  status["clusterCount"] = Json(count);
  status["nonReadyClusterCount"] = Json(non_ready);
  Json names = Json::array();
  for (size_t i = 0; i < not_ready.size() && i < model::StateSummary::kMaxNonReadyDetails; ++i) {
    names.push(Json(not_ready[i]));
  }
  status["nonReadyClusters"] = std::move(names);
  status["summary"] = model::encodeStateSummary(bundles);
  const std::string state = non_ready == 0 ? "Ready" : "NotReady";
  status["display"] =
      Json::obj({{"readyClusters", Json(std::to_string(count - non_ready) + "/" + std::to_string(count))},
                 {"readyBundles", Json(std::to_string(bundles.ready()) + "/" + std::to_string(bundles.desired_ready))},
                 {"state", Json(state)}});
  if (non_ready == 0) {
    conditions.push(condition("Ready", "True", "Ready", "", now));
    return;
  }
  std::string message = std::to_string(non_ready) + " of " + std::to_string(count) + " clusters not ready:";
  for (size_t i = 0; i < not_ready.size() && i < model::StateSummary::kMaxNonReadyDetails; ++i) {
    message += (i == 0 ? " " : ", ") + not_ready[i];
  }
  if (not_ready.size() > model::StateSummary::kMaxNonReadyDetails) {
    message += ", ...";
  }
  conditions.push(condition("Ready", "False", "NotReady", message, now));
}

}  // namespace

Json clusterGroupStatus(const ClusterGroupFacts& facts, const std::string& now) {
  Json status = Json::object();
  Json conditions = Json::array();
  addAcceptance(status, conditions, facts.acceptance, now);
  if (facts.members) {
    addMembers(status, conditions, *facts.members, now);
  } else if (facts.acceptance && !facts.acceptance->accepted) {
    conditions.push(condition("Ready", "False", "InvalidSpec", facts.acceptance->message, now));
  } else {
    conditions.push(condition("Ready", "Unknown", "Pending", "the group's spec is not stored yet", now));
  }
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

namespace {

const Json* atPath(const Json& json, const std::vector<std::string>& path) {
  const Json* at = &json;
  for (const auto& key : path) {
    at = at->isObject() ? at->find(key) : nullptr;
    if (at == nullptr) {
      return nullptr;
    }
  }
  return at;
}

}  // namespace

bool onlyLivenessTimesMoved(const Json& status, const Json& previous) {
  if (!previous.isObject()) {
    return false;
  }
  Json with_previous = status;
  for (const std::vector<std::string>& path :
       {std::vector<std::string>{"lastPollingTriggered"}, std::vector<std::string>{"agent", "lastSeen"}}) {
    const Json* now_text = atPath(status, path);
    const Json* then_text = atPath(previous, path);
    if (now_text == nullptr || then_text == nullptr || !now_text->isString() || !then_text->isString()) {
      continue;
    }
    const auto now = parseRfc3339(now_text->asString());
    const auto then = parseRfc3339(then_text->asString());
    if (!now || !then || *now < *then || *now - *then >= kLivenessRefresh) {
      return false;
    }
    Json* target = &with_previous;
    for (const auto& key : path) {
      target = &(*target)[key];
    }
    *target = *then_text;
  }
  return sameStatus(with_previous, previous);
}

bool sameStatus(const Json& a, const Json& b) {
  return withoutTimes(a) == withoutTimes(b);
}

}  // namespace flotilla::gateway
