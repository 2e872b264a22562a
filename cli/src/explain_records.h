// cli/src/explain_records.h (private to the CLI)
//
// What the stages of `flotilla explain` share (explain.cpp: poll, render, target; explain_targets.cpp: the targeted
// clusters without a deployment; explain_deploy.cpp: deploy and apply): the records of one subject, picked out of
// the snapshot once, and a stage's judgement.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flotilla/cli/explain.h"

namespace flotilla::cli::detail {

//! The records an explanation reads, for a GitRepo or one of its bundles.
struct SubjectRecords {
  const model::GitRepo* gitrepo = nullptr;
  const events::PollStatus* poll = nullptr;
  const events::GitRepoSummary* gitrepo_summary = nullptr;  //!< GitRepo subjects only
  std::vector<const events::BundleRecord*> bundles;
  std::vector<const events::BundleSummary*> summaries;
  std::vector<const events::DeploymentRecord*> deployments;  //!< not being deleted
};

//! One stage: its report and, when it is not Ready, the blockage and the next action it gives.
struct Judged {
  StageReport report;
  std::optional<Blockage> blockage;
  std::string next;
};

SubjectRecords gather(const Snapshot& snapshot, const ExplainSubject& subject);

Judged readyAt(std::string stage, std::string detail);
//! A stage that is not Ready; `state` Failed means only a change moves it on (Blockage::needs_change).
Judged blockedAt(std::string stage, const std::string& state, std::string detail, std::string reason, std::string next);
//! "1 bundle", "2 bundles".
std::string countOf(size_t n, const std::string& word);
std::string shortCommit(const std::string& commit);

//! A cluster a bundle of the subject targets (Fleet's targeting over its last good render) with no deployment of
//! that bundle yet.
struct Unplaced {
  std::string bundle;
  std::string cluster;
};
//! Every such (bundle, cluster), over the registered clusters that are not being deregistered (explain_targets.cpp).
std::vector<Unplaced> targetedWithoutDeployment(const Snapshot& snapshot, const SubjectRecords& records);
//! The distinct clusters of `unplaced`, in order.
std::vector<std::string> clustersOf(const std::vector<Unplaced>& unplaced);

//! deploy: released, held by a pause or a rollout (explain_deploy.cpp).
Judged deployStage(const Snapshot& snapshot, const SubjectRecords& records, const ExplainSubject& subject);
//! apply: every deployment's state, offline agents, dependsOn (explain_deploy.cpp).
Judged applyStage(const Snapshot& snapshot, const SubjectRecords& records);

}  // namespace flotilla::cli::detail
