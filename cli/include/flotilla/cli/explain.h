// flotilla/cli/explain.h
//
// `flotilla explain` and `flotilla wait`: why a GitRepo, a bundle or a commit is not Ready yet, read from the
// records the stages keep in KV (a Snapshot; nothing is written, so the read-only identity can ask). The reasoning is
// a pure function, records in and explanation out, so each stuck kind is tested over hand-built records.
//
// The stages, in order (each judged from its own records, the first one not Ready is where it blocks):
//   poll    the poller's status/gitrepo.* (commit published, last error: credentials, unreachable host)
//   render  the bundler's bundles/* and status/bundle-render.* (render errors with file and line)
//   target  the scheduler's summaries and deployments/*, and Fleet's targeting (model::place over the last good
//           render, the registered clusters and the ClusterGroups): a targeted cluster without a deployment yet is
//           Pending, no cluster matching the targets Failed
//   deploy  deployments/* staged or held (paused, rollout progressing or halted: summary.bundle.*'s rollout)
//   apply   each deployment's state (events::deploymentState over status/bd.*), offline agents from
//           summary.cluster.*, dependsOn waits and cycles, ErrApplied messages; the first non-ready clusters named
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/cli/hub_reader.h"
#include "flotilla/core/result.h"

namespace flotilla::cli {

//! What an explanation is about: a GitRepo or one bundle of one, at a commit ("" = the GitRepo's current one).
struct ExplainSubject {
  enum class Kind { kGitRepo, kBundle };
  Kind kind = Kind::kGitRepo;
  std::string workspace;
  std::string name;     //!< the GitRepo's or the bundle's name
  std::string gitrepo;  //!< the GitRepo (for a bundle: the one its records name)
  std::string commit;   //!< the full commit asked about; "" = the current one
};

//! Stage states: Ready; Pending (on its way, nothing to do); Waiting (on something outside the subject: a
//! dependency, an agent, a rollout); Failed (only a change moves it on: a commit, the spec, credentials, labels).
struct StageReport {
  std::string stage;  //!< poll, render, target, deploy, apply
  std::string state;
  std::string detail;
};

//! Where it blocks and why.
struct Blockage {
  std::string stage;
  std::string reason;
  std::vector<std::string> clusters;  //!< the non-ready clusters of that stage, worst first (apply, deploy)
  bool needs_change = false;          //!< the stage is Failed: waiting longer does not help (`wait` exits 4)
};

struct Explanation {
  std::string subject;  //!< "gitrepo <ws>/<name>" or "bundle <ws>/<name>"
  std::string commit;
  std::vector<StageReport> stages;
  std::optional<Blockage> blocked;  //!< nullopt: Ready on every targeted cluster
  std::string next;                 //!< the next action, concrete
};

//! Finds what `argument` names: `gitrepo/[ws/]name`, `bundle/[ws/]name`, `commit/<sha>`, else `[ws/]name` as a
//! GitRepo, else a commit (hex, at least 7 characters, a prefix of a commit some record names), else a bundle.
//! `workspace` is -n ("" = any; it must agree with a `ws/` in the argument). kNotFound names what was tried;
//! kInvalid when the name is in several workspaces or a commit prefix is ambiguous.
Result<ExplainSubject> resolveSubject(const Snapshot& snapshot, std::string_view argument, std::string_view workspace);

//! The explanation of `subject` from `snapshot` (pure: reads only the snapshot).
Explanation explain(const Snapshot& snapshot, const ExplainSubject& subject);

//! `{subject, commit, ready, stages:[{stage,state,detail}], blocked:{stage,reason,clusters?,clustersTotal?,
//! needsChange}, next}` in at most `max_bytes` bytes: details, reasons and the cluster list are shortened (lists
//! with the total) until it fits, never exceeding it.
std::string explanationJson(const Explanation& explanation, size_t max_bytes = 1024);

//! A few lines for a person: the subject, one line per stage, where it blocks and the next action.
std::string explanationText(const Explanation& explanation);

//! A cluster as `wait` sees it: registered or not, Ready (every bundle Ready, agent online) or why not.
struct ClusterReadiness {
  bool exists = false;  //!< a registration, a Cluster document or a summary names it
  bool ready = false;
  std::string reason;  //!< why not (the summary's state and message, Offline since, WaitCheckIn)
};
ClusterReadiness clusterReadiness(const Snapshot& snapshot, const std::string& cluster);

}  // namespace flotilla::cli
