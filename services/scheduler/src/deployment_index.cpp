// The deployment records in memory and their two indexes (by bundle, by GitRepo). Every change of deployments_
// goes through here, so the indexes cannot drift from the records.
#include <algorithm>

#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler {

namespace {

void unindex(std::map<std::string, std::set<std::string>>& index, const std::string& group, const std::string& key) {
  auto it = index.find(group);
  if (it == index.end()) {
    return;
  }
  it->second.erase(key);
  if (it->second.empty()) {
    index.erase(it);
  }
}

}  // namespace

void Scheduler::storeDeploymentRecord(const std::string& key, DeploymentRecord record) {
  const std::string bundle_key = events::bundleKey(record.workspace, record.bundle);
  const std::string gitrepo_key = events::gitRepoKey(record.workspace, record.gitrepo);
  auto existing = deployments_.find(key);
  if (existing != deployments_.end()) {
    // The key fixes cluster, workspace and bundle; the GitRepo may change (a bundle moved to another GitRepo).
    const DeploymentRecord& old = existing->second;
    deleting_records_ -= old.deleting ? 1 : 0;
    if (old.gitrepo != record.gitrepo || old.workspace != record.workspace || old.bundle != record.bundle) {
      unindex(deployments_by_bundle_, events::bundleKey(old.workspace, old.bundle), key);
      unindex(deployments_by_gitrepo_, events::gitRepoKey(old.workspace, old.gitrepo), key);
    }
    deleting_records_ += record.deleting ? 1 : 0;
    existing->second = std::move(record);
  } else {
    deleting_records_ += record.deleting ? 1 : 0;
    deployments_.emplace(key, std::move(record));
  }
  deployments_by_bundle_[bundle_key].insert(key);
  deployments_by_gitrepo_[gitrepo_key].insert(key);
}

void Scheduler::eraseDeploymentRecord(const std::string& key) {
  auto existing = deployments_.find(key);
  if (existing == deployments_.end()) {
    return;
  }
  const DeploymentRecord& old = existing->second;
  deleting_records_ -= old.deleting ? 1 : 0;
  unindex(deployments_by_bundle_, events::bundleKey(old.workspace, old.bundle), key);
  unindex(deployments_by_gitrepo_, events::gitRepoKey(old.workspace, old.gitrepo), key);
  deployments_.erase(existing);
  unacked_deploys_.erase(key);
}

std::vector<DeploymentView> Scheduler::deploymentsOfBundle(const std::string& workspace,
                                                           const std::string& bundle) const {
  std::vector<DeploymentView> out;
  auto keys = deployments_by_bundle_.find(events::bundleKey(workspace, bundle));
  if (keys == deployments_by_bundle_.end()) {
    return out;
  }
  out.reserve(keys->second.size());
  for (const auto& key : keys->second) {
    const DeploymentRecord& record = deployments_.at(key);
    out.push_back(DeploymentView{&record, statusOf(record)});
  }
  return out;
}

size_t Scheduler::summaryVisits(const Affected& affected) const {
  auto sizeOf = [](const std::map<std::string, std::set<std::string>>& index, const std::string& key) {
    auto it = index.find(key);
    return it == index.end() ? size_t{0} : it->second.size();
  };
  size_t visits = 0;
  for (const auto& [workspace, bundle] : affected.bundles) {
    visits += sizeOf(deployments_by_bundle_, events::bundleKey(workspace, bundle));
  }
  for (const auto& [workspace, gitrepo] : affected.gitrepos) {
    visits += sizeOf(deployments_by_gitrepo_, events::gitRepoKey(workspace, gitrepo));
  }
  // A cluster's summary visits its own deployments: about the bundles per cluster.
  visits += affected.clusters.size() * (1 + deployments_.size() / std::max<size_t>(1, clusters_.size()));
  return visits;
}

std::vector<std::string> Scheduler::clustersOfBundle(const std::string& workspace, const std::string& bundle) const {
  std::vector<std::string> out;
  auto keys = deployments_by_bundle_.find(events::bundleKey(workspace, bundle));
  if (keys == deployments_by_bundle_.end()) {
    return out;
  }
  out.reserve(keys->second.size());
  for (const auto& key : keys->second) {
    out.push_back(deployments_.at(key).cluster);
  }
  return out;
}

}  // namespace flotilla::scheduler
