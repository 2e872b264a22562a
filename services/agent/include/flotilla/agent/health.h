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

#include "flotilla/core/json.h"

namespace flotilla::agent {

struct Health {
  bool ready = false;
  std::string message;  //!< why it is not Ready ("1 of 3 replicas available"); "" when Ready
};

//! The health of one live object (as returned by GET or by the apply call).
Health evaluateHealth(const Json& live);

}  // namespace flotilla::agent
