// The clusters bucket -> the gateway: each record updates the cluster registry (cluster_registry.h), which decides
// ClusterGroup membership and which registered clusters still need a Cluster CR. Like Fleet, the hub makes a
// Cluster CR for every cluster that registers, so `kubectl get clusters -A` lists them all and an admin labels,
// pauses or deletes (deregisters) a cluster on its CR.
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/kube/errors.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"
#include "gateway_core.h"

namespace flotilla::gateway {
namespace {

//! The key prefix and name count of each record.
std::pair<std::string, size_t> keyShape(ClusterRecord record) {
  switch (record) {
    case ClusterRecord::kRegistration:
      return {"cluster", 1};
    case ClusterRecord::kDocument:
      return {"spec", 1};
    case ClusterRecord::kGroup:
      return {"group", 2};
    case ClusterRecord::kDeregistration:
      return {"deregistered", 1};
  }
  return {"", 0};
}

//! The record of a put decoded by `decode`; nullopt for a delete. An unreadable record is logged and treated as
//! absent (so a broken registration counts in no group).
template <typename T, typename Decode>
std::optional<T> decodedRecord(const bus::KvEntry& entry, Decode decode) {
  if (entry.operation != bus::KvOperation::kPut) {
    return std::nullopt;
  }
  auto json = Json::parse(entry.value);
  auto decoded = json.ok() ? decode(*json) : Result<T>(fail(json.error()));
  if (!decoded.ok()) {
    log::warn("ignoring an unreadable record", {{"key", entry.key}, {"error", decoded.error().describe()}});
    return std::nullopt;
  }
  return std::move(decoded).value();
}

}  // namespace

void Gateway::Core::applyClusterRecord(const bus::KvEntry& entry, ClusterRecord record) {
  const auto [prefix, count] = keyShape(record);
  auto names = events::keyNames(entry.key, prefix, count);
  if (!names.ok()) {
    return;
  }
  std::vector<std::string> writes;
  std::set<std::string> workspaces;
  {
    std::lock_guard lock(mutex);
    if (record == ClusterRecord::kGroup) {
      registry.setGroup(names->at(0), names->at(1), decodedRecord<model::ClusterGroup>(entry, [](const Json& json) {
                          return model::decodeClusterGroup(json);
                        }));
      writes.push_back(writeKey(kClusterGroupWrite, names->at(0) + "/" + names->at(1)));
    } else {
      const std::string& name = names->at(0);
      workspaces.insert(registry.workspaceOf(name));
      if (record == ClusterRecord::kRegistration) {
        auto registration = decodedRecord<model::Cluster>(entry, [](const Json& j) { return model::decodeCluster(j); });
        if (!registration) {
          deleted_cluster_crs.erase(name);  // deregistered: a later registration gets a CR again
        }
        registry.setRegistration(name, registration);
      } else if (record == ClusterRecord::kDocument) {
        registry.setDocument(
            name, decodedRecord<model::Cluster>(entry, [](const Json& j) { return model::decodeClusterDocument(j); }));
      } else {
        registry.setDeregistered(name, entry.operation == bus::KvOperation::kPut);
      }
      workspaces.insert(registry.workspaceOf(name));
      writes.push_back(writeKey(kClusterWrite, name));  // its CR to make, or its status
    }
  }
  for (const auto& write : writes) {
    queueWrite(write);
  }
  queueGroupsOf(workspaces);
}

void Gateway::Core::queueGroupsOf(const std::set<std::string>& workspaces) {
  std::vector<std::string> groups_to_write;
  {
    std::lock_guard lock(mutex);
    for (const auto& workspace : workspaces) {
      if (workspace.empty()) {
        continue;
      }
      for (const auto& group : registry.groupsOf(workspace)) {
        groups_to_write.push_back(writeKey(kClusterGroupWrite, group));
      }
    }
  }
  for (const auto& write : groups_to_write) {
    queueWrite(write);
  }
}

std::optional<Json> Gateway::Core::missingClusterCr(const std::string& name) {
  std::lock_guard lock(mutex);
  // Before the Cluster CRs were listed, a missing one may only not be known yet.
  if (!listed.count("Cluster") || deleted_cluster_crs.count(name) || !registry.wantsCr(name)) {
    return std::nullopt;
  }
  if (auto facts = clusters.find(name); facts != clusters.end() && !facts->second.ns.empty()) {
    return std::nullopt;
  }
  // No labels: the agent's allowed labels stay on its registration and the CR's are the admin's, merged per key
  // (model::effectiveCluster), so an agent dropping a label is not overridden by a copy kept here.
  return Json::obj({{"apiVersion", Json(std::string(kFleetApiVersion))},
                    {"kind", Json("Cluster")},
                    {"metadata", Json::obj({{"name", Json(name)}, {"namespace", Json(registry.workspaceOf(name))}})},
                    {"spec", Json::object()}});
}

void Gateway::Core::createClusterCr(const std::string& name, const Json& cr, WriterState& writer) {
  if (!spendToken(writer.bucket)) {
    return;
  }
  const std::string ns = cr.at({"metadata", "namespace"})->asString();
  auto created = kube->request("POST", fleetPath(ns, "clusters"), cr.dump(), "application/json");
  const bool exists = !created.ok() && kube::httpStatusOf(created.error()) == 409;
  if (!created.ok() && !exists) {
    metrics.clusterCr("failed");
    retryLater(writeKey(kClusterWrite, name), writer, created.error());
    return;
  }
  metrics.clusterCr(exists ? "exists" : "created");
  writer.retries.succeeded(writeKey(kClusterWrite, name));
  if (!exists) {
    log::info("Cluster CR created for a registered cluster", {{"cluster", name}, {"namespace", ns}});
  }
  // Its status is written once the spec mirror sees the CR; until then no second CR is tried.
  std::lock_guard lock(mutex);
  clusters[name].ns = ns;
}

}  // namespace flotilla::gateway
