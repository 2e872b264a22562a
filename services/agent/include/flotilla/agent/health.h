// flotilla/agent/health.h
//
// Whether a live object is Ready, by kind, following kstatus' rules (sigs.k8s.io/cli-utils/pkg/kstatus) for
// what a cluster without running controllers can tell:
//   - being deleted (metadata.deletionTimestamp)                    -> NotReady
//   - ConfigMap, Secret, ServiceAccount, RBAC, quotas, policies ...  -> Ready once applied
//   - Namespace: phase Active; CRD: condition Established=True
//   - Service: Ready, except type LoadBalancer without an ingress address
//   - Deployment, StatefulSet, DaemonSet, ReplicaSet: the controller has observed the current generation and
//     the updated/available counts reach the desired replicas (without a kubelet they stay NotReady: correct)
//   - Job: Complete=True (Failed=True is NotReady with the failure message); Pod: Ready=True or Succeeded;
//     PersistentVolumeClaim: Bound
//   - anything else (custom resources): NotReady while status.observedGeneration lags metadata.generation or
//     a Stalled/Reconciling condition is True; then the Ready (else Available) condition decides; no such
//     condition (or no status at all) is Ready.
#pragma once

#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/model/labels.h"

namespace flotilla::agent {

struct Health {
  bool ready = false;
  std::string message;  //!< why it is not Ready ("1 of 3 replicas available"); "" when Ready
  bool operator==(const Health&) const = default;
};

//! The health of one live object (as returned by GET or by the apply call).
Health evaluateHealth(const Json& live);
//! The same with Fleet's ignore.conditions: a status.conditions entry that matches one of the maps (every key of
//! the map has that string value in the condition, e.g. {type: Ready, status: "False"}) is left out first, so it
//! never makes the object unhealthy.
Health evaluateHealth(const Json& live, const std::vector<model::Labels>& ignored_conditions);

//! Whether `condition` matches one of the ignore.conditions maps.
bool conditionIgnored(const Json& condition, const std::vector<model::Labels>& ignored);
//! `live` without the status.conditions that ignore.conditions names.
Json withoutIgnoredConditions(Json live, const std::vector<model::Labels>& ignored);

}  // namespace flotilla::agent
