#include "flotilla/bundler/cluster_directory.h"

#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"

namespace flotilla::bundler {

ClusterFacts factsOf(const model::Cluster& cluster, const std::map<std::string, model::ClusterGroup>& groups) {
  ClusterFacts facts;
  facts.name = cluster.metadata.name;
  facts.workspace = cluster.metadata.ns;
  facts.labels = cluster.metadata.labels;
  facts.annotations = cluster.metadata.annotations;
  if (cluster.spec.template_values && cluster.spec.template_values->isObject()) {
    facts.template_values = *cluster.spec.template_values;
  }
  facts.kubernetes_version = cluster.status.agent.kubernetes_version;
  for (const auto& [key, group] : groups) {
    if (group.metadata.ns != facts.workspace) {
      continue;
    }
    if (group.metadata.name == "default") {
      facts.implicit_default_group = false;
    }
    if (group.spec.selector && group.spec.selector->matches(facts.labels)) {
      facts.groups.push_back(ClusterGroupFacts{.name = group.metadata.name, .labels = group.metadata.labels});
    }
  }
  return facts;
}

ClusterDirectory::Change ClusterDirectory::apply(const bus::KvEntry& entry) {
  const bool deleted = entry.operation != bus::KvOperation::kPut;
  Change change;
  auto invalid = [&](const Error& error) {
    change.invalid = true;
    change.problem = error.describe();
    return change;
  };
  if (startsWith(entry.key, "group.")) {
    auto names = events::keyNames(entry.key, "group", 2);
    if (!names.ok()) {
      return invalid(names.error());
    }
    const std::string id = (*names)[0] + "/" + (*names)[1];
    std::lock_guard lock(mutex_);
    if (deleted) {
      groups_.erase(id);
    } else {
      auto parsed = Json::parse(entry.value);
      auto group = parsed.ok() ? model::decodeClusterGroup(*parsed, entry.key)
                               : Result<model::ClusterGroup>(fail(parsed.error()));
      if (!group.ok()) {
        return invalid(group.error());
      }
      group->metadata.ns = (*names)[0];  // the key is authoritative for identity
      group->metadata.name = (*names)[1];
      groups_[id] = std::move(group).value();
    }
    return recompute();
  }
  if (startsWith(entry.key, "cluster.")) {
    auto names = events::keyNames(entry.key, "cluster", 1);
    if (!names.ok()) {
      return invalid(names.error());
    }
    const std::string& name = (*names)[0];
    std::lock_guard lock(mutex_);
    if (deleted) {
      clusters_.erase(name);
    } else {
      auto parsed = Json::parse(entry.value);
      auto cluster =
          parsed.ok() ? model::decodeCluster(*parsed, entry.key) : Result<model::Cluster>(fail(parsed.error()));
      if (!cluster.ok()) {
        return invalid(cluster.error());
      }
      cluster->metadata.name = name;
      clusters_[name] = std::move(cluster).value();
    }
    return recompute();
  }
  return change;  // heartbeats and anything else
}

ClusterDirectory::Change ClusterDirectory::recompute() {
  Change change;
  std::map<std::string, ClusterFacts> next;
  for (const auto& [name, cluster] : clusters_) {
    next.emplace(name, factsOf(cluster, groups_));
  }
  for (const auto& [name, facts] : next) {
    auto old = facts_.find(name);
    if (old == facts_.end() || !(old->second == facts)) {
      change.clusters.insert(name);
      change.workspaces.insert(facts.workspace);
      if (old != facts_.end()) {
        change.workspaces.insert(old->second.workspace);
      }
    }
  }
  for (const auto& [name, facts] : facts_) {
    if (next.count(name) == 0) {
      change.clusters.insert(name);
      change.workspaces.insert(facts.workspace);
    }
  }
  facts_ = std::move(next);
  return change;
}

std::vector<ClusterFacts> ClusterDirectory::snapshot(std::string_view workspace) const {
  std::lock_guard lock(mutex_);
  std::vector<ClusterFacts> out;
  for (const auto& [name, facts] : facts_) {
    if (facts.workspace == workspace) {
      out.push_back(facts);
    }
  }
  return out;
}

std::set<std::string> ClusterDirectory::workspaces() const {
  std::lock_guard lock(mutex_);
  std::set<std::string> out;
  for (const auto& [name, facts] : facts_) {
    out.insert(facts.workspace);
  }
  return out;
}

size_t ClusterDirectory::size() const {
  std::lock_guard lock(mutex_);
  return facts_.size();
}

}  // namespace flotilla::bundler
