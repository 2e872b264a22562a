// The clusters and groups the gateway knows from the clusters bucket (cluster_registry.h).
#include "flotilla/gateway/cluster_registry.h"

#include "flotilla/model/cluster_document.h"

namespace flotilla::gateway {
namespace {

//! Only what membership and CR creation use: keeping the agent's API versions of 10,000 clusters would cost
//! megabytes for nothing.
std::optional<model::Cluster> metadataOnly(const std::optional<model::Cluster>& cluster) {
  if (!cluster) {
    return std::nullopt;
  }
  model::Cluster out;
  out.metadata = cluster->metadata;
  if (out.metadata.ns.empty()) {
    out.metadata.ns = std::string(model::kDefaultNamespace);
  }
  return out;
}

}  // namespace

void ClusterRegistry::refresh(const std::string& name) {
  auto found = clusters_.find(name);
  if (found == clusters_.end()) {
    return;
  }
  Entry& entry = found->second;
  if (!entry.registration && !entry.document && !entry.deregistered) {
    clusters_.erase(found);
    return;
  }
  entry.effective = entry.registration
                        ? model::effectiveCluster(*entry.registration, entry.document ? &*entry.document : nullptr)
                        : model::Cluster{};
}

void ClusterRegistry::setRegistration(const std::string& name, const std::optional<model::Cluster>& registration) {
  clusters_[name].registration = metadataOnly(registration);
  refresh(name);
}

void ClusterRegistry::setDocument(const std::string& name, const std::optional<model::Cluster>& document) {
  clusters_[name].document = metadataOnly(document);
  refresh(name);
}

void ClusterRegistry::setDeregistered(const std::string& name, bool deregistered) {
  clusters_[name].deregistered = deregistered;
  refresh(name);
}

void ClusterRegistry::setGroup(const std::string& workspace, const std::string& name,
                               const std::optional<model::ClusterGroup>& group) {
  const std::string key = workspace + "/" + name;
  if (group) {
    groups_[key] = model::groupInfoOf(*group);
  } else {
    groups_.erase(key);
  }
}

std::optional<std::vector<std::string>> ClusterRegistry::members(const std::string& workspace,
                                                                 const std::string& name) const {
  auto group = groups_.find(workspace + "/" + name);
  if (group == groups_.end()) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  if (!group->second.selector) {
    return out;  // a group without a selector has no members (targeting.h)
  }
  for (const auto& [cluster, entry] : clusters_) {
    if (entry.registration && entry.effective.metadata.ns == workspace &&
        group->second.selector->matches(entry.effective.metadata.labels)) {
      out.push_back(cluster);
    }
  }
  return out;
}

std::vector<std::string> ClusterRegistry::groupsOf(const std::string& workspace) const {
  std::vector<std::string> out;
  const std::string prefix = workspace + "/";
  for (auto it = groups_.lower_bound(prefix); it != groups_.end() && it->first.starts_with(prefix); ++it) {
    out.push_back(it->first);
  }
  return out;
}

std::string ClusterRegistry::workspaceOf(const std::string& name) const {
  auto found = clusters_.find(name);
  if (found == clusters_.end()) {
    return {};
  }
  if (found->second.document) {
    return found->second.document->metadata.ns;
  }
  return found->second.registration ? found->second.registration->metadata.ns : std::string();
}

bool ClusterRegistry::wantsCr(const std::string& name) const {
  auto found = clusters_.find(name);
  return found != clusters_.end() && found->second.registration && !found->second.deregistered;
}

std::vector<std::string> ClusterRegistry::registered() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : clusters_) {
    if (entry.registration) {
      out.push_back(name);
    }
  }
  return out;
}

}  // namespace flotilla::gateway
