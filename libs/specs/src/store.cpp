// Storing the specs users own (GitRepo, ClusterGroup, Cluster documents) in the hub's KV buckets: `flotilla apply`
// (KV mode) and the gateway (Kubernetes mode, where the CRs are the source) both write them through here, so a spec
// gets the same generation, uid and creationTimestamp rules whichever way it came.
#include "flotilla/specs/store.h"

#include <optional>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"

namespace flotilla::specs {

namespace {

//! The stored spec's generation, creationTimestamp and uid carried into `next`. Returns false when nothing the user
//! controls changed.
template <typename T>
bool carryOver(T& next, const std::optional<T>& stored) {
  if (!stored) {
    next.metadata.generation = 1;
    next.metadata.creation_timestamp = log::nowRfc3339();
    next.metadata.uid = randomHex(16);
    return true;
  }
  next.metadata.generation = stored->metadata.generation;
  next.metadata.creation_timestamp = stored->metadata.creation_timestamp;
  next.metadata.uid = stored->metadata.uid;
  // The namespace counts too: a Cluster's key is its name alone, so its document may move it to another workspace.
  if (next.spec == stored->spec && next.metadata.ns == stored->metadata.ns &&
      next.metadata.labels == stored->metadata.labels && next.metadata.annotations == stored->metadata.annotations) {
    return false;
  }
  next.metadata.generation = stored->metadata.generation + 1;
  return true;
}

template <typename T>
using Decoder = Result<T> (*)(const Json&, std::string_view);

//! The stored record, or nothing when it does not decode (it is then overwritten as if new, keeping its revision).
template <typename T>
std::optional<T> decodeStored(const std::string& value, const std::string& key, Decoder<T> decode) {
  auto json = Json::parse(value);
  if (!json.ok()) {
    return std::nullopt;
  }
  auto decoded = decode(*json, key);
  if (!decoded.ok()) {
    return std::nullopt;
  }
  return std::move(decoded).value();
}

//! Stores one spec: create when absent, else update on the revision read (retried on a race), keeping the stored
//! creationTimestamp and uid and bumping metadata.generation when spec, labels or annotations changed. Returns
//! "created", "configured" or "unchanged".
template <typename T>
Result<std::string> storeSpec(bus::KeyValue& kv, const std::string& key, const T& resource, Decoder<T> decode) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto entry = kv.get(key);
    if (!entry.ok() && entry.error().kind != ErrorKind::kNotFound) {
      return fail(entry.error());
    }
    std::optional<T> stored = entry.ok() ? decodeStored<T>(entry->value, key, decode) : std::nullopt;
    T next = resource;
    if (!carryOver(next, stored)) {
      return std::string("unchanged");
    }
    if (next.metadata.creation_timestamp.empty()) {
      next.metadata.creation_timestamp = log::nowRfc3339();
    }
    next.metadata.resource_version.clear();
    std::string value = model::encode(next).dump();
    auto written = entry.ok() ? kv.update(key, value, entry->revision) : kv.create(key, value);
    if (written.ok()) {
      return std::string(entry.ok() ? "configured" : "created");
    }
    if (written.error().kind != ErrorKind::kConflict) {
      return fail(written.error());
    }
    // Someone else wrote the key between our read and write: read again.
  }
  return fail(ErrorKind::kConflict, "the record " + key + " kept changing while it was being written; try again");
}

}  // namespace

//! Stores a Cluster document under clusters/spec.<name> and withdraws the cluster's deregistration, if any, so its
//! agent may register again. Returns "created", "configured" or "unchanged", and says when a tombstone went.
Result<std::string> storeClusterDocument(bus::KeyValue& kv, const model::Cluster& cluster) {
  auto stored = storeSpec<model::Cluster>(kv, events::clusterSpecKey(cluster.metadata.name), cluster,
                                          &model::decodeClusterDocument);
  FLOTILLA_TRY(stored);
  const std::string tombstone = events::clusterDeregisteredKey(cluster.metadata.name);
  auto existing = kv.get(tombstone);
  if (!existing.ok()) {
    if (existing.error().kind == ErrorKind::kNotFound) {
      return stored;
    }
    return fail(existing.error());
  }
  FLOTILLA_TRY(kv.remove(tombstone));
  return *stored + " (deregistration withdrawn: an agent may register under this name again)";
}

Result<std::string> storeGitRepo(bus::KeyValue& gitrepos, model::GitRepo gitrepo) {
  gitrepo.status = {};
  return storeSpec<model::GitRepo>(gitrepos, events::gitRepoKey(gitrepo.metadata.ns, gitrepo.metadata.name), gitrepo,
                                   &model::decodeGitRepo);
}

Result<std::string> storeClusterGroup(bus::KeyValue& clusters, model::ClusterGroup group) {
  group.status = {};
  return storeSpec<model::ClusterGroup>(clusters, events::clusterGroupKey(group.metadata.ns, group.metadata.name),
                                        group, &model::decodeClusterGroup);
}

namespace {

//! Removes a key; one that is not there is done already.
Status removeKey(bus::KeyValue& kv, const std::string& key) {
  auto removed = kv.remove(key);
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  return {};
}

}  // namespace

Status removeGitRepo(bus::KeyValue& gitrepos, std::string_view workspace, std::string_view name) {
  return removeKey(gitrepos, events::gitRepoKey(workspace, name));
}

Status removeClusterGroup(bus::KeyValue& clusters, std::string_view workspace, std::string_view name) {
  return removeKey(clusters, events::clusterGroupKey(workspace, name));
}

Status deregisterCluster(bus::KeyValue& clusters, std::string_view name, bool keep_resources) {
  const events::ClusterDeregistration tombstone{
      .cluster = std::string(name), .time = log::nowRfc3339(), .keep_resources = keep_resources};
  auto existing = clusters.find(events::clusterDeregisteredKey(name));
  FLOTILLA_TRY(existing);
  if (!existing->has_value()) {
    auto created = clusters.create(events::clusterDeregisteredKey(name), events::encode(tombstone).dump());
    // kConflict: another writer's tombstone arrived in between, which is as good as ours.
    if (!created.ok() && created.error().kind != ErrorKind::kConflict) {
      return fail(created.error());
    }
  }
  return removeKey(clusters, events::clusterSpecKey(name));
}

Result<HubMode> hubMode(bus::KeyValue& clusters) {
  auto entry = clusters.find(events::kHubModeKey);
  FLOTILLA_TRY(entry);
  if (!entry->has_value()) {
    return HubMode::kKv;
  }
  auto json = Json::parse((*entry)->value);
  if (json.ok() && json->getString("mode") == "kubernetes") {
    return HubMode::kKubernetes;
  }
  return HubMode::kKv;
}

Status markKubernetesMode(bus::KeyValue& clusters) {
  auto mode = hubMode(clusters);
  FLOTILLA_TRY(mode);
  if (*mode == HubMode::kKubernetes) {
    return {};
  }
  auto written = clusters.put(events::kHubModeKey,
                              Json::obj({{"mode", Json("kubernetes")}, {"since", Json(log::nowRfc3339())}}).dump());
  FLOTILLA_TRY(written);
  return {};
}

Status requireKvMode(bus::KeyValue& clusters, std::string_view what) {
  auto mode = hubMode(clusters);
  FLOTILLA_TRY(mode);
  if (*mode == HubMode::kKubernetes) {
    return fail(ErrorKind::kInvalid,
                "this hub is in Kubernetes mode (its gateway mirrors the GitRepo, ClusterGroup and Cluster CRs of the "
                "hub cluster, and they are the one source of truth): " +
                    std::string(what) +
                    " them with kubectl, or with flotilla apply --kubeconfig <the hub cluster's kubeconfig>");
  }
  return {};
}

}  // namespace flotilla::specs
