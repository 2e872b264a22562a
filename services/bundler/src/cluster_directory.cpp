#include "flotilla/bundler/cluster_directory.h"

#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"

namespace flotilla::bundler {

namespace {

//! A JSON record decoded strictly with `decode`.
template <typename T, typename Decode>
Result<T> decodeRecord(const bus::KvEntry& entry, Decode decode) {
  auto parsed = Json::parse(entry.value);
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, entry.key + ": " + parsed.error().message);
  }
  return decode(*parsed, entry.key);
}

}  // namespace

ClusterDirectory::Change ClusterDirectory::apply(const bus::KvEntry& entry) {
  if (startsWith(entry.key, "group.")) {
    return applyGroup(entry);
  }
  if (startsWith(entry.key, "cluster.") || startsWith(entry.key, "spec.")) {
    return applyCluster(entry);
  }
  if (startsWith(entry.key, "deregistered.")) {
    return applyTombstone(entry);
  }
  return {};  // heartbeats and anything else
}

ClusterDirectory::Change ClusterDirectory::invalid(const Error& error) {
  Change change;
  change.invalid = true;
  change.problem = error.describe();
  return change;
}

ClusterDirectory::Change ClusterDirectory::applyGroup(const bus::KvEntry& entry) {
  auto names = events::keyNames(entry.key, "group", 2);
  if (!names.ok()) {
    return invalid(names.error());
  }
  const std::string id = (*names)[0] + "/" + (*names)[1];
  std::lock_guard lock(mutex_);
  if (entry.operation != bus::KvOperation::kPut) {
    groups_.erase(id);
  } else {
    auto group = decodeRecord<model::ClusterGroup>(
        entry, [](const Json& json, const std::string& where) { return model::decodeClusterGroup(json, where); });
    if (!group.ok()) {
      return invalid(group.error());
    }
    group->metadata.ns = (*names)[0];  // the key is authoritative for identity
    group->metadata.name = (*names)[1];
    groups_[id] = std::move(group).value();
  }
  return recompute();
}

ClusterDirectory::Change ClusterDirectory::applyCluster(const bus::KvEntry& entry) {
  // cluster.<name>: the agent's registration; spec.<name>: the hub admin's Cluster document overlaid on it.
  const bool document = startsWith(entry.key, "spec.");
  auto names = events::keyNames(entry.key, document ? "spec" : "cluster", 1);
  if (!names.ok()) {
    return invalid(names.error());
  }
  const std::string& name = (*names)[0];
  auto& records = document ? documents_ : registrations_;
  std::lock_guard lock(mutex_);
  if (entry.operation != bus::KvOperation::kPut) {
    records.erase(name);
  } else {
    auto cluster = document ? decodeRecord<model::Cluster>(entry,
                                                           [](const Json& json, const std::string& where) {
                                                             return model::decodeClusterDocument(json, where);
                                                           })
                            : decodeRecord<model::Cluster>(entry, [](const Json& json, const std::string& where) {
                                return model::decodeCluster(json, where);
                              });
    if (!cluster.ok()) {
      return invalid(cluster.error());
    }
    cluster->metadata.name = name;
    records[name] = std::move(cluster).value();
  }
  // Only this cluster's facts can change (a group record changes everyone's: applyGroup recomputes all). Recomputing
  // every cluster here made 10,000 registrations 10,000 x 10,000 fact computations (bench_fleet_scale 10000x1).
  return recomputeCluster(name);
}

ClusterDirectory::Change ClusterDirectory::applyTombstone(const bus::KvEntry& entry) {
  // A deregistered cluster gets no more renders.
  auto names = events::keyNames(entry.key, "deregistered", 1);
  if (!names.ok()) {
    return invalid(names.error());
  }
  std::lock_guard lock(mutex_);
  if (entry.operation == bus::KvOperation::kPut) {
    deregistered_.insert((*names)[0]);
  } else {
    deregistered_.erase((*names)[0]);
  }
  return recomputeCluster((*names)[0]);
}

std::vector<model::GroupInfo> ClusterDirectory::groupInfos() const {
  std::vector<model::GroupInfo> groups;
  groups.reserve(groups_.size());
  for (const auto& [id, group] : groups_) {
    groups.push_back(model::groupInfoOf(group));
  }
  return groups;
}

std::optional<ClusterFacts> ClusterDirectory::factsOf(const std::string& name,
                                                      const std::vector<model::GroupInfo>& groups) const {
  auto registration = registrations_.find(name);
  if (registration == registrations_.end() || deregistered_.contains(name)) {
    return std::nullopt;
  }
  auto document = documents_.find(name);
  ClusterFacts facts = model::clusterFactsOf(
      model::effectiveCluster(registration->second, document == documents_.end() ? nullptr : &document->second));
  model::resolveGroups(facts, groups);
  return facts;
}

void ClusterDirectory::store(const std::string& name, std::optional<ClusterFacts> facts, Change& change) {
  auto old = facts_.find(name);
  if (!facts) {
    if (old != facts_.end()) {
      change.clusters.insert(name);
      change.workspaces.insert(old->second.workspace);
      facts_.erase(old);
    }
    return;
  }
  if (old != facts_.end() && old->second == *facts) {
    return;
  }
  change.clusters.insert(name);
  change.workspaces.insert(facts->workspace);
  if (old != facts_.end()) {
    change.workspaces.insert(old->second.workspace);
  }
  facts_.insert_or_assign(name, std::move(*facts));
}

ClusterDirectory::Change ClusterDirectory::recomputeCluster(const std::string& name) {
  Change change;
  store(name, factsOf(name, groupInfos()), change);
  return change;
}

ClusterDirectory::Change ClusterDirectory::recompute() {
  Change change;
  const std::vector<model::GroupInfo> groups = groupInfos();
  std::set<std::string> names;
  for (const auto& [name, registration] : registrations_) {
    names.insert(name);
  }
  for (const auto& [name, facts] : facts_) {
    names.insert(name);
  }
  for (const auto& name : names) {
    store(name, factsOf(name, groups), change);
  }
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
