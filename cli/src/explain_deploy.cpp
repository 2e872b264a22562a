// `flotilla explain`'s last two stages (explain_records.h): deploy (released, or held by a pause or a rollout) and
// apply (each deployment's state on its cluster, offline agents, dependsOn waits, the first non-ready clusters).
#include <algorithm>

#include "explain_records.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::cli::detail {

namespace {

std::vector<std::string> distinctClusters(const std::vector<const events::DeploymentRecord*>& deployments) {
  std::vector<std::string> clusters;
  for (const auto* deployment : deployments) {
    if (std::find(clusters.begin(), clusters.end(), deployment->cluster) == clusters.end()) {
      clusters.push_back(deployment->cluster);
    }
  }
  return clusters;
}

//! Who paused the held deployments: the GitRepo, a cluster's document, or the bundle's fleet.yaml.
std::string pausedBy(const Snapshot& snapshot, const SubjectRecords& r, const ExplainSubject& subject,
                     const std::vector<std::string>& clusters) {
  if (r.gitrepo != nullptr && r.gitrepo->spec.paused) {
    return "set spec.paused: false on GitRepo " + subject.workspace + "/" + subject.gitrepo;
  }
  for (const auto& cluster : clusters) {
    auto spec = snapshot.cluster_specs.find(cluster);
    if (spec != snapshot.cluster_specs.end() && spec->second.spec.paused) {
      return "set spec.paused: false on cluster " + cluster;
    }
  }
  return "remove paused: true from the bundle's fleet.yaml";
}

//! The summary whose rollout holds deployments: a halted one first.
const events::BundleSummary* holdingRollout(const SubjectRecords& r) {
  const events::BundleSummary* progressing = nullptr;
  for (const auto* summary : r.summaries) {
    if (summary->rollout && summary->rollout->state == "Halted") {
      return summary;
    }
    if (summary->rollout && summary->rollout->state == "Progressing" && progressing == nullptr) {
      progressing = summary;
    }
  }
  return progressing;
}

Judged heldByRollout(const SubjectRecords& r, const std::vector<const events::DeploymentRecord*>& held) {
  const std::string held_text = countOf(held.size(), "deployment") + " held";
  const events::BundleSummary* summary = holdingRollout(r);
  if (summary == nullptr || summary->rollout->state != "Halted") {
    const std::string where = summary == nullptr ? "" : " at partition " + summary->rollout->partition;
    Judged judged =
        blockedAt("deploy", "Waiting", "rollout progressing" + where + ": " + held_text,
                  "rollout progressing" + where + ": " + held_text + " until the released clusters are Ready",
                  "wait: the rollout releases the held clusters as the released ones become Ready");
    judged.blockage->clusters = distinctClusters(held);
    return judged;
  }
  const events::RolloutStatus& rollout = *summary->rollout;
  std::string culprits;
  std::vector<std::string> clusters;
  bool needs_change = false;
  for (const auto& cluster : rollout.halted_by) {
    culprits += (culprits.empty() ? "" : ", ") + cluster.cluster + " (" + cluster.state +
                (cluster.message.empty() ? "" : ": " + cluster.message) + ")";
    clusters.push_back(cluster.cluster);
    needs_change = needs_change || cluster.state == "ErrApplied";
  }
  const std::string halted = "rollout halted at partition " + rollout.partition + ": " + culprits;
  Judged judged =
      blockedAt("deploy", needs_change ? "Failed" : "Waiting", halted + "; " + held_text, halted + "; " + held_text,
                halted +
                    "; it resumes when they are Ready: fix them with a new commit (it supersedes the halted "
                    "rollout)");
  judged.blockage->clusters = std::move(clusters);
  return judged;
}

//! A bundle whose last good render the scheduler has not placed yet (its summary names another commit): the
//! deployments still show the previous commit's placement.
const events::BundleRecord* notYetPlaced(const SubjectRecords& r) {
  for (const auto* bundle : r.bundles) {
    if (!bundle->last_good) {
      continue;
    }
    auto summary = std::find_if(r.summaries.begin(), r.summaries.end(),
                                [&](const auto* s) { return s->bundle == bundle->bundle; });
    if (summary == r.summaries.end() || (*summary)->commit != bundle->last_good->commit) {
      return bundle;
    }
  }
  return nullptr;
}

}  // namespace

Judged deployStage(const Snapshot& snapshot, const SubjectRecords& r, const ExplainSubject& subject) {
  if (const auto* bundle = notYetPlaced(r); bundle != nullptr && !r.deployments.empty()) {
    const std::string what = "bundle " + bundle->bundle + " at " + shortCommit(bundle->last_good->commit);
    return blockedAt("deploy", "Pending", what + " not placed yet", "the scheduler has not placed " + what + " yet",
                     "wait for the scheduler");
  }
  std::vector<const events::DeploymentRecord*> paused;
  std::vector<const events::DeploymentRecord*> by_rollout;
  size_t released = 0;
  for (const auto* deployment : r.deployments) {
    if (!deployment->staged_deployment_id.empty() && deployment->staged_deployment_id != deployment->deployment_id) {
      (deployment->staged_reason == events::kStagedByPause ? paused : by_rollout).push_back(deployment);
    } else if (!deployment->deployment_id.empty()) {
      ++released;
    }
  }
  if (!paused.empty()) {
    auto clusters = distinctClusters(paused);
    const std::string unpause = pausedBy(snapshot, r, subject, clusters);
    const std::string held = countOf(paused.size(), "deployment") + " held: paused";
    Judged judged = blockedAt("deploy", "Failed", held, held, "unpause: " + unpause);
    judged.blockage->clusters = std::move(clusters);
    return judged;
  }
  if (!by_rollout.empty()) {
    return heldByRollout(r, by_rollout);
  }
  if (released == 0 || released < r.deployments.size()) {
    return blockedAt("deploy", "Pending", countOf(released, "deployment") + " released",
                     "not every deployment is released yet", "wait for the scheduler");
  }
  return readyAt("deploy", countOf(released, "deployment") + " released");
}

namespace {

//! One released deployment as the apply stage ranks it (lower is worse; kReady last).
enum class Rank { kOffline, kErrApplied, kNotReady, kDependency, kWaitApplied, kOther, kReady };

struct ClusterItem {
  const events::DeploymentRecord* deployment = nullptr;
  events::DeploymentState state;
  Rank rank = Rank::kOther;
  std::string last_seen;  //!< kOffline: the agent's last sign of life
};

ClusterItem rankItem(const Snapshot& snapshot, const events::DeploymentRecord& deployment) {
  auto bd =
      snapshot.bd_statuses.find(events::deploymentKey(deployment.cluster, deployment.workspace, deployment.bundle));
  ClusterItem item{
      .deployment = &deployment,
      .state = events::releasedState(deployment, bd == snapshot.bd_statuses.end() ? nullptr : &bd->second)};
  const std::string& state = item.state.state;
  auto summary = snapshot.cluster_summaries.find(events::clusterSummaryKey(deployment.cluster));
  if (state == "Ready") {
    item.rank = Rank::kReady;
  } else if (summary != snapshot.cluster_summaries.end() && summary->second.offline) {
    item.rank = Rank::kOffline;
    item.last_seen = summary->second.last_seen;
  } else if (state == "ErrApplied") {
    item.rank = Rank::kErrApplied;
  } else if (state == "NotReady" || state == "Modified") {
    item.rank = Rank::kNotReady;
  } else if (state == "WaitApplied" && item.state.reason == "DependenciesNotReady") {
    item.rank = Rank::kDependency;
  } else if (state == "WaitApplied") {
    item.rank = Rank::kWaitApplied;
  }
  return item;
}

//! "waiting for dependencies: bundle db is NotReady (accepted: Ready)" -> "bundle db (dependsOn): it is NotReady".
std::string dependencyText(const ClusterItem& item) {
  constexpr std::string_view kPrefix = "waiting for dependencies: ";
  std::string unmet = item.state.message;
  if (startsWith(unmet, kPrefix)) {
    unmet = unmet.substr(kPrefix.size());
  }
  unmet = unmet.substr(0, unmet.find(';'));
  if (startsWith(unmet, "bundle ")) {
    const auto is = unmet.find(" is ");
    if (is != std::string::npos) {
      return unmet.substr(0, is) + " (dependsOn): it is " + unmet.substr(is + 4);
    }
  }
  return "dependsOn: " + unmet;
}

Judged blockedByItem(const ClusterItem& item, const std::string& detail) {
  const std::string& cluster = item.deployment->cluster;
  const std::string& bundle = item.deployment->bundle;
  const std::string& message = item.state.message;
  switch (item.rank) {
    case Rank::kOffline:
      return blockedAt(
          "apply", "Waiting", detail, "agent of " + cluster + " offline since " + item.last_seen,
          "agent of " + cluster + " offline since " + item.last_seen + ": start it, or check its connection to NATS");
    case Rank::kErrApplied:
      if (item.state.reason == "DependencyCycle") {
        return blockedAt("apply", "Failed", detail, "cluster " + cluster + ": " + message,
                         "break the dependsOn cycle with a new commit: " + message);
      }
      return blockedAt("apply", "Failed", detail,
                       "cluster " + cluster + ": bundle " + bundle + " ErrApplied: " + message,
                       "cluster " + cluster + ": " + message + " (fix it with a new commit)");
    case Rank::kNotReady:
      return blockedAt("apply", "Waiting", detail,
                       "cluster " + cluster + ": bundle " + bundle + " " + item.state.state + ": " + message,
                       "cluster " + cluster + ": " + message);
    case Rank::kDependency:
      return blockedAt("apply", "Waiting", detail, "cluster " + cluster + ": waiting on " + dependencyText(item),
                       "waiting on " + dependencyText(item) + " on cluster " + cluster);
    default:
      return blockedAt("apply", "Pending", detail,
                       "cluster " + cluster + ": bundle " + bundle + " " + item.state.state + ": " + message,
                       "wait for the agent of " + cluster);
  }
}

}  // namespace

Judged applyStage(const Snapshot& snapshot, const SubjectRecords& r) {
  std::vector<ClusterItem> items;
  for (const auto* deployment : r.deployments) {
    if (!deployment->deployment_id.empty()) {
      items.push_back(rankItem(snapshot, *deployment));
    }
  }
  if (items.empty()) {
    return blockedAt("apply", "Pending", "nothing released yet", "nothing released yet", "wait for the scheduler");
  }
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  std::vector<std::string> all_clusters;
  std::vector<std::string> not_ready;
  size_t ready = 0;
  for (const auto& item : items) {
    const std::string& cluster = item.deployment->cluster;
    if (std::find(all_clusters.begin(), all_clusters.end(), cluster) == all_clusters.end()) {
      all_clusters.push_back(cluster);
    }
    if (item.rank == Rank::kReady) {
      ++ready;
    } else if (std::find(not_ready.begin(), not_ready.end(), cluster) == not_ready.end()) {
      not_ready.push_back(cluster);
    }
  }
  if (not_ready.empty()) {
    return readyAt("apply", "Ready on " + countOf(all_clusters.size(), "cluster") + " (" +
                                countOf(items.size(), "deployment") + ")");
  }
  const std::string detail =
      std::to_string(ready) + "/" + std::to_string(items.size()) + " Ready; " + items.front().deployment->cluster +
      " " + (items.front().rank == Rank::kOffline ? std::string("Offline") : items.front().state.state);
  Judged judged = blockedByItem(items.front(), detail);
  judged.blockage->clusters = std::move(not_ready);
  return judged;
}

}  // namespace flotilla::cli::detail
