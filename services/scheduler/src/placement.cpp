#include "flotilla/scheduler/placement.h"

#include <algorithm>

#include "flotilla/events/subjects.h"

namespace flotilla::scheduler {

namespace {

using Action = PlacementDecision::Action;

events::DeployEvent deployEvent(const PlacementInput& in, const Placement& want, int64_t generation) {
  return events::DeployEvent{.id = deployMsgId(in.cluster, in.bundle, want.deployment_id, generation),
                             .time = in.now,
                             .cluster = in.cluster,
                             .workspace = in.workspace,
                             .bundle = in.bundle,
                             .deployment_id = want.deployment_id,
                             .manifest_id = want.manifest_id,
                             .options = want.options,
                             .depends_on = in.targeting->depends_on,
                             .commit = in.targeting->commit,
                             .generation = generation,
                             .gitrepo = in.gitrepo,
                             .commit_sequence = in.targeting->commit_sequence,
                             .labels = in.targeting->labels};
}

//! Targeting wants the bundle on the cluster.
PlacementDecision decideWanted(const PlacementInput& in, const Placement& want) {
  const BundleTargeting& targeting = *in.targeting;
  const events::DeploymentRecord* record = in.record;
  // Labels travel with the release (dependsOn selectors on the cluster read them): new labels are a new release.
  bool same_release = record != nullptr && !record->deleting && record->deployment_id == want.deployment_id &&
                      record->depends_on == targeting.depends_on && record->labels == targeting.labels;
  PlacementDecision out{.record = record != nullptr ? *record : events::DeploymentRecord{}};
  events::DeploymentRecord& next = out.record;
  if (same_release && record->staged_deployment_id.empty()) {
    if (record->commit == targeting.commit || targeting.commit.empty()) {
      return out;
    }
    // The same content at a newer commit: nothing changes on the cluster (no DeployEvent), but the record
    // follows the commit, so "this cluster runs commit X" stays true for readers.
    next.commit = targeting.commit;
    next.updated = in.now;
    out.action = Action::kFollowCommit;
    return out;
  }
  next.cluster = in.cluster;
  next.workspace = in.workspace;
  next.bundle = in.bundle;
  next.gitrepo = in.gitrepo;
  next.target = want.target;
  next.customization = want.customization;
  next.updated = in.now;
  const bool paused = targeting.paused || in.cluster_paused;
  const bool held = paused || in.rollout_held;
  if (held || same_release) {
    // Fleet holds a paused bundle's (or cluster's) new deployments, and those its rollout has not released yet
    // (they show OutOfSync, or Pending where nothing was released): nothing goes to the agent, the record remembers
    // what is staged and why. Un-staging a deployment that equals the released one needs no DeployEvent either.
    const bool staged = held && !same_release;
    next.staged_deployment_id = staged ? want.deployment_id : std::string();
    next.staged_reason =
        staged ? std::string(paused ? events::kStagedByPause : events::kStagedByRollout) : std::string();
    bool unchanged = record != nullptr && next.staged_deployment_id == record->staged_deployment_id &&
                     next.staged_reason == record->staged_reason;
    out.action = unchanged ? Action::kNothing : Action::kStage;
    return out;
  }
  int64_t generation = nextGeneration(record != nullptr ? record->generation : 0, in.clock_ms);
  out.event = deployEvent(in, want, generation);
  next.commit = targeting.commit;
  next.deployment_id = want.deployment_id;
  next.manifest_id = want.manifest_id;
  next.options = want.options;
  next.depends_on = targeting.depends_on;
  next.staged_deployment_id.clear();
  next.staged_reason.clear();
  next.generation = generation;
  next.commit_sequence = targeting.commit_sequence;
  next.labels = targeting.labels;
  next.deleting = false;
  out.action = Action::kDeploy;
  return out;
}

//! The agent answered the delete of `record` with a failure (it could not prune everything).
bool deleteFailed(const PlacementInput& in) {
  return in.status != nullptr && in.status->generation >= in.record->generation && in.status->state == "ErrApplied";
}

//! Targeting does not want the bundle there (any more) and a record exists.
PlacementDecision decideRemoval(const PlacementInput& in) {
  const events::DeploymentRecord& gone = *in.record;
  if (gone.deleting && !deleteFailed(in)) {
    return {};  // the delete is out; the agent's report settles it
  }
  PlacementDecision out{.action = Action::kRemove, .record = gone};
  if (gone.deployment_id.empty()) {
    return out;  // nothing was released (paused from the start): only the record goes
  }
  int64_t generation = nextGeneration(gone.generation, in.clock_ms);
  out.event = events::DeployEvent{.id = deployMsgId(in.cluster, in.bundle, "", generation),
                                  .time = in.now,
                                  .cluster = in.cluster,
                                  .workspace = in.workspace,
                                  .bundle = in.bundle,
                                  .remove = true,
                                  // keepResources and deleteCRDResources decide what the agent removes
                                  .options = gone.options,
                                  .commit = gone.commit,
                                  .generation = generation,
                                  .gitrepo = gone.gitrepo,
                                  .commit_sequence = gone.commit_sequence,
                                  .labels = gone.labels};
  out.record.deleting = true;
  out.record.generation = generation;
  out.record.staged_deployment_id.clear();
  out.record.staged_reason.clear();
  out.record.updated = in.now;
  return out;
}

}  // namespace

std::string deployMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_id,
                        int64_t generation) {
  return events::deployMsgId(cluster, bundle, deployment_id.empty() ? std::string_view("deleted") : deployment_id,
                             generation);
}

int64_t nextGeneration(int64_t previous, int64_t clock_ms) {
  return std::max(previous + 1, clock_ms);
}

PlacementDecision decidePlacement(const PlacementInput& input) {
  if (input.want && input.want->hold) {
    return PlacementDecision{.action = Action::kHold};
  }
  if (input.want && input.targeting != nullptr) {
    return decideWanted(input, *input.want);
  }
  if (input.record != nullptr) {
    return decideRemoval(input);
  }
  return {};
}

}  // namespace flotilla::scheduler
