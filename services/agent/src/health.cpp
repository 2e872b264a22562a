#include "flotilla/agent/health.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace flotilla::agent {
namespace {

constexpr std::array<std::string_view, 22> kReadyOnceApplied = {
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "ResourceQuota",
    "LimitRange",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "PriorityClass",
    "StorageClass",
    "IngressClass",
    "Endpoints",
    "EndpointSlice",
    "RuntimeClass",
    "Lease",
    "PodTemplate",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "HorizontalPodAutoscaler",
};

Health ready() {
  return Health{true, {}};
}
Health notReady(std::string message) {
  return Health{false, std::move(message)};
}

int64_t intAt(const Json& object, std::initializer_list<std::string_view> path, int64_t fallback) {
  const Json* value = object.at(path);
  return value != nullptr && value->isNumber() ? value->asInt() : fallback;
}

//! The condition of `type` in status.conditions, or nullptr.
const Json* condition(const Json& live, std::string_view type) {
  const Json* conditions = live.at({"status", "conditions"});
  if (conditions == nullptr || !conditions->isArray()) {
    return nullptr;
  }
  for (const auto& item : conditions->asArray()) {
    if (item.getString("type") == type) {
      return &item;
    }
  }
  return nullptr;
}

std::string stringAt(const Json& object, std::initializer_list<std::string_view> path) {
  const Json* value = object.at(path);
  return value != nullptr && value->isString() ? value->asString() : std::string();
}

bool conditionTrue(const Json* c) {
  return c != nullptr && c->getString("status") == "True";
}

std::string conditionText(const Json& c) {
  std::string text = c.getString("type") + "=" + c.getString("status");
  std::string reason = c.getString("reason");
  std::string message = c.getString("message");
  if (!reason.empty()) {
    text += " (" + reason + ")";
  }
  if (!message.empty()) {
    text += ": " + message;
  }
  return text;
}

// Workload controllers report status.observedGeneration; until it reaches metadata.generation the counts below it
// describe an older spec.
std::optional<Health> generationLag(const Json& live) {
  int64_t generation = intAt(live, {"metadata", "generation"}, 0);
  const Json* observed = live.at({"status", "observedGeneration"});
  if (observed == nullptr || !observed->isNumber()) {
    return notReady("waiting for the controller to observe generation " + std::to_string(generation));
  }
  if (observed->asInt() < generation) {
    return notReady("waiting for the controller to observe generation " + std::to_string(generation) + " (at " +
                    std::to_string(observed->asInt()) + ")");
  }
  return std::nullopt;
}

//! A count that must reach its target, e.g. {available, replicas, "replicas available"}.
struct CountCheck {
  int64_t have;
  int64_t want;
  std::string_view what;
};

//! NotReady for the first check whose count falls short ("<have> of <want> <what>"), else Ready.
Health firstShortCount(std::initializer_list<CountCheck> checks) {
  for (const auto& check : checks) {
    if (check.have < check.want) {
      return notReady(std::to_string(check.have) + " of " + std::to_string(check.want) + " " + std::string(check.what));
    }
  }
  return ready();
}

Health deploymentHealth(const Json& live) {
  if (auto lag = generationLag(live)) {
    return *lag;
  }
  int64_t replicas = intAt(live, {"spec", "replicas"}, 1);
  int64_t updated = intAt(live, {"status", "updatedReplicas"}, 0);
  int64_t available = intAt(live, {"status", "availableReplicas"}, 0);
  int64_t total = intAt(live, {"status", "replicas"}, 0);
  const Json* progressing = condition(live, "Progressing");
  if (progressing != nullptr && progressing->getString("reason") == "ProgressDeadlineExceeded") {
    return notReady("progress deadline exceeded: " + progressing->getString("message"));
  }
  if (updated < replicas) {
    return firstShortCount({{updated, replicas, "replicas updated"}});
  }
  if (total > updated) {
    return notReady(std::to_string(total - updated) + " old replicas pending termination");
  }
  return firstShortCount({{available, replicas, "replicas available"}});
}

Health statefulSetHealth(const Json& live) {
  if (auto lag = generationLag(live)) {
    return *lag;
  }
  int64_t replicas = intAt(live, {"spec", "replicas"}, 1);
  int64_t ready_replicas = intAt(live, {"status", "readyReplicas"}, 0);
  // With the OnDelete strategy pods are updated only when deleted: not a reason to wait.
  int64_t updated = stringAt(live, {"spec", "updateStrategy", "type"}) == "OnDelete"
                        ? replicas
                        : intAt(live, {"status", "updatedReplicas"}, 0);
  return firstShortCount({{ready_replicas, replicas, "replicas ready"}, {updated, replicas, "replicas updated"}});
}

Health daemonSetHealth(const Json& live) {
  if (auto lag = generationLag(live)) {
    return *lag;
  }
  int64_t desired = intAt(live, {"status", "desiredNumberScheduled"}, 0);
  return firstShortCount({{intAt(live, {"status", "updatedNumberScheduled"}, 0), desired, "pods updated"},
                          {intAt(live, {"status", "numberAvailable"}, 0), desired, "pods available"}});
}

Health replicaSetHealth(const Json& live) {
  if (auto lag = generationLag(live)) {
    return *lag;
  }
  return firstShortCount(
      {{intAt(live, {"status", "availableReplicas"}, 0), intAt(live, {"spec", "replicas"}, 1), "replicas available"}});
}

Health jobHealth(const Json& live) {
  const Json* failed = condition(live, "Failed");
  if (conditionTrue(failed)) {
    return notReady("job failed: " + conditionText(*failed));
  }
  if (conditionTrue(condition(live, "Complete"))) {
    return ready();
  }
  return notReady("job has not completed (" + std::to_string(intAt(live, {"status", "succeeded"}, 0)) + " succeeded)");
}

Health podHealth(const Json& live) {
  std::string phase = stringAt(live, {"status", "phase"});
  if (phase == "Succeeded") {
    return ready();
  }
  if (phase == "Running" && conditionTrue(condition(live, "Ready"))) {
    return ready();
  }
  return notReady("pod is " + (phase.empty() ? std::string("not scheduled") : phase));
}

Health genericHealth(const Json& live) {
  const Json* status = live.find("status");
  if (status == nullptr || !status->isObject()) {
    return ready();
  }
  const Json* observed = status->find("observedGeneration");
  int64_t generation = intAt(live, {"metadata", "generation"}, 0);
  if (observed != nullptr && observed->isNumber() && observed->asInt() < generation) {
    return notReady("waiting for the controller to observe generation " + std::to_string(generation));
  }
  for (std::string_view type : {"Stalled", "Reconciling"}) {
    const Json* c = condition(live, type);
    if (conditionTrue(c)) {
      return notReady(conditionText(*c));
    }
  }
  for (std::string_view type : {"Ready", "Available"}) {
    if (const Json* c = condition(live, type)) {
      return conditionTrue(c) ? ready() : notReady(conditionText(*c));
    }
  }
  return ready();
}

}  // namespace

Health evaluateHealth(const Json& live) {
  if (!stringAt(live, {"metadata", "deletionTimestamp"}).empty()) {
    return notReady("being deleted");
  }
  std::string kind = live.getString("kind");
  std::string api_version = live.getString("apiVersion");
  for (auto k : kReadyOnceApplied) {
    if (kind == k) {
      return ready();
    }
  }
  if (kind == "Namespace" && api_version == "v1") {
    const Json* phase = live.at({"status", "phase"});
    if (phase == nullptr || !phase->isString() || phase->asString() == "Active") {
      return ready();
    }
    return notReady("namespace is " + phase->asString());
  }
  if (kind == "CustomResourceDefinition") {
    const Json* established = condition(live, "Established");
    if (conditionTrue(established)) {
      return ready();
    }
    return notReady(established == nullptr ? std::string("not established yet") : conditionText(*established));
  }
  if (kind == "Service" && api_version == "v1") {
    if (stringAt(live, {"spec", "type"}) == "LoadBalancer") {
      const Json* ingress = live.at({"status", "loadBalancer", "ingress"});
      if (ingress == nullptr || !ingress->isArray() || ingress->asArray().empty()) {
        return notReady("waiting for a load balancer address");
      }
    }
    return ready();
  }
  if (kind == "PersistentVolumeClaim" && api_version == "v1") {
    std::string phase = stringAt(live, {"status", "phase"});
    if (phase == "Bound") {
      return ready();
    }
    return notReady("claim is " + (phase.empty() ? std::string("Pending") : phase));
  }
  if (kind == "Pod" && api_version == "v1") {
    return podHealth(live);
  }
  if (api_version == "apps/v1") {
    if (kind == "Deployment") {
      return deploymentHealth(live);
    }
    if (kind == "StatefulSet") {
      return statefulSetHealth(live);
    }
    if (kind == "DaemonSet") {
      return daemonSetHealth(live);
    }
    if (kind == "ReplicaSet") {
      return replicaSetHealth(live);
    }
  }
  if (kind == "Job" && api_version == "batch/v1") {
    return jobHealth(live);
  }
  return genericHealth(live);
}

Health evaluateHealth(const Json& live, const std::vector<model::Labels>& ignored_conditions) {
  if (ignored_conditions.empty()) {
    return evaluateHealth(live);
  }
  return evaluateHealth(withoutIgnoredConditions(live, ignored_conditions));
}

bool conditionIgnored(const Json& condition, const std::vector<model::Labels>& ignored) {
  return std::any_of(ignored.begin(), ignored.end(), [&](const model::Labels& match) {
    return !match.empty() && std::all_of(match.begin(), match.end(), [&](const auto& key_value) {
      const Json* value = condition.find(key_value.first);
      return value != nullptr && value->isString() && value->asString() == key_value.second;
    });
  });
}

Json withoutIgnoredConditions(Json live, const std::vector<model::Labels>& ignored) {
  if (ignored.empty()) {
    return live;
  }
  Json* status = live.find("status");
  Json* conditions = status != nullptr ? status->find("conditions") : nullptr;
  if (conditions == nullptr || !conditions->isArray()) {
    return live;
  }
  std::erase_if(conditions->asArray(), [&](const Json& condition) { return conditionIgnored(condition, ignored); });
  return live;
}

}  // namespace flotilla::agent
