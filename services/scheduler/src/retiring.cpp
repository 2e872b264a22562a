// Which bundles a DeployEvent may take objects from (docs/pipeline.md "Ownership handover", rule `retiring`): the
// bundles of the same workspace on the same cluster that are being deleted — their deployment there is `deleting`,
// or their GitRepo's spec is gone from the gitrepos bucket (a GitRepo deleted whose cascade has not reached the
// scheduler yet). A GitRepo renamed the way KV mode allows (the new one created, the old one deleted) is then a
// handover on the first apply, even when the new GitRepo's deployment reaches the agent before the old one's delete.
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler {

bool Scheduler::gitRepoGone(const std::string& workspace, const std::string& gitrepo) {
  const std::string key = events::gitRepoKey(workspace, gitrepo);
  if (auto cached = gitrepo_gone_.find(key); cached != gitrepo_gone_.end()) {
    return cached->second;
  }
  if (!hub_.gitrepos) {
    return false;
  }
  auto entry = hub_.gitrepos->get(key);
  // Unreadable proves nothing: the bundle is not treated as retiring (a claim then waits for the release).
  const bool gone = !entry.ok() && entry.error().kind == ErrorKind::kNotFound;
  if (!entry.ok() && !gone) {
    metrics_.counter("gitrepo_reads_failed_total", "GitRepo specs that could not be read to find retiring bundles")
        .Increment();
    log::warn("cannot read a GitRepo spec to find retiring bundles; its bundles are not handed over early",
              {{"gitrepo", gitrepo}, {"workspace", workspace}, {"error", entry.error().message}});
    return false;
  }
  gitrepo_gone_[key] = gone;
  return gone;
}

void Scheduler::addRetiring(events::DeployEvent& event) {
  if (event.remove) {
    return;
  }
  event.retiring.clear();
  const std::string prefix = events::escapeToken(event.cluster) + "." + events::escapeToken(event.workspace) + ".";
  // Partitioned, the other partitions' records count too (a GitRepo renamed lands in another partition).
  for (const auto* records : {&deployments_, &other_deployments_}) {
    for (auto it = records->lower_bound(prefix); it != records->end() && it->first.starts_with(prefix); ++it) {
      const DeploymentRecord& record = it->second;
      if (record.bundle == event.bundle) {
        continue;
      }
      const bool other_gitrepo = !record.gitrepo.empty() && record.gitrepo != event.gitrepo;
      if (record.deleting || (other_gitrepo && gitRepoGone(record.workspace, record.gitrepo))) {
        event.retiring.push_back(record.bundle);
      }
    }
  }
}

}  // namespace flotilla::scheduler
