// flotilla/scheduler/placement.h
//
// Placement as a pure decision: from what targeting wants for one (bundle, cluster) pair and the deployment record
// that exists, what should happen there — nothing, hold (a per-cluster bundle not rendered for the cluster yet),
// move the record to a newer commit (same content), stage (bundle paused), deploy, or remove — with the record to
// write and the DeployEvent to publish first. Every DeployEvent carries the bundle's GitRepo, commitSequence and
// labels (the record keeps them, so a delete sends them too). A removal leaves the record `deleting` until the
// agent reports; it is sent again only when the agent reported that the delete failed. The scheduler carries the
// decision out (publish, then write the record: scheduler.h "Ordering"); this file touches no state, so every case is
// unit-tested.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"
#include "flotilla/scheduler/targeting.h"

namespace flotilla::scheduler {

//! Nats-Msg-Id of a DeployEvent: events::deployMsgId with "deleted" for a removal (empty deployment_id). A retry
//! after a crash recomputes the same id, so JetStream drops the duplicate.
std::string deployMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_id,
                        int64_t generation);

//! A generation that grows with every DeployEvent for a (cluster, bundle) and survives the record's removal:
//! at least the previous one + 1, and at least the cause's clock in ms (so a bundle deleted and re-added later
//! still gets a higher generation than anything the agent saw before).
int64_t nextGeneration(int64_t previous, int64_t clock_ms);

//! What the decision looks at, for one (bundle, cluster) pair.
struct PlacementInput {
  std::string workspace;
  std::string bundle;
  std::string cluster;
  std::string gitrepo;                         //!< the bundle's (the record's when the bundle is gone)
  const BundleTargeting* targeting = nullptr;  //!< the last good targeting (nullptr: deleted or never rendered)
  std::optional<Placement> want;               //!< targeting's answer here (nullopt: the bundle does not go there)
  const events::DeploymentRecord* record = nullptr;  //!< the deployment record, if one exists
  const events::BdStatus* status = nullptr;          //!< the agent's last report on it, if any
  bool cluster_paused = false;  //!< the cluster's Cluster document says spec.paused: hold like a paused bundle
  bool rollout_held = false;    //!< the bundle's rollout (rollout.h) does not release the wanted deployment yet
  int64_t clock_ms = 0;         //!< the cause's clock (generations, see nextGeneration)
  std::string now;              //!< RFC 3339, for `updated` and event times
};

//! What to do on the cluster.
struct PlacementDecision {
  enum class Action {
    kNothing,       //!< the record already says what targeting wants
    kHold,          //!< per-cluster bundle not rendered for this cluster yet: leave its deployment alone
    kFollowCommit,  //!< same content at a newer commit: write the record only (no DeployEvent)
    kStage,         //!< paused or held by the rollout (or un-staging what runs already): write the record only
    kDeploy,        //!< publish `event`, then write `record`
    //! With `event`: publish the delete, then write `record` (marked `deleting`; it and its status stay until the
    //! agent reports on that generation). Without: nothing was released, delete the record and its status.
    kRemove,
  };
  Action action = Action::kNothing;
  events::DeploymentRecord record;           //!< to write (kFollowCommit, kStage, kDeploy)
  std::optional<events::DeployEvent> event;  //!< to publish before the record
};

PlacementDecision decidePlacement(const PlacementInput& input);

}  // namespace flotilla::scheduler
