// flotilla/specs/store.h
//
// The specs users own, stored in the hub's KV buckets (docs/pipeline.md "KV records"): GitRepos in
// gitrepos/<ws>.<name>, ClusterGroups in clusters/group.<ws>.<name>, Cluster documents in clusters/spec.<name>.
// `flotilla apply` (KV mode) and the gateway (Kubernetes mode, the CRs being the source) both write through here.
//
// A store creates the key when absent, else updates it on the revision it read (retried on a race), keeping the
// stored creationTimestamp and uid and bumping metadata.generation when the spec, the namespace, the labels or the
// annotations changed; the status is never stored. It returns "created", "configured" or "unchanged".
#pragma once

#include <string>
#include <string_view>

#include "flotilla/bus/kv.h"
#include "flotilla/core/result.h"
#include "flotilla/model/resources.h"

namespace flotilla::specs {

Result<std::string> storeGitRepo(bus::KeyValue& gitrepos, model::GitRepo gitrepo);
Result<std::string> storeClusterGroup(bus::KeyValue& clusters, model::ClusterGroup group);
//! Also withdraws the cluster's deregistration (clusters/deregistered.<name>), if any, so its agent may register
//! again; the result then says so.
Result<std::string> storeClusterDocument(bus::KeyValue& clusters, const model::Cluster& cluster);

//! Removes a spec; absent is done. The poller and scheduler see the delete and cascade (docs/pipeline.md).
Status removeGitRepo(bus::KeyValue& gitrepos, std::string_view workspace, std::string_view name);
Status removeClusterGroup(bus::KeyValue& clusters, std::string_view workspace, std::string_view name);
//! Deregisters a cluster whose Cluster document was removed: writes the tombstone clusters/deregistered.<name>
//! unless one exists (the scheduler then removes the cluster's deployments and records, docs/pipeline.md "Deletes
//! that cascade"), then removes clusters/spec.<name>. Running it again after a partial failure finishes the job.
Status deregisterCluster(bus::KeyValue& clusters, std::string_view name, bool keep_resources);

//! Who writes the specs: kKv (`flotilla apply` into KV; the default) or kKubernetes (the gateway, from the CRs).
enum class HubMode { kKv, kKubernetes };

//! The hub's mode from clusters/hub.mode (absent: kKv).
Result<HubMode> hubMode(bus::KeyValue& clusters);
//! Marks the hub as in Kubernetes mode (the gateway, at start). Idempotent; the key stays when the gateway stops.
Status markKubernetesMode(bus::KeyValue& clusters);
//! kInvalid with what to do instead when the hub is in Kubernetes mode: `what` is the refused action ("apply").
Status requireKvMode(bus::KeyValue& clusters, std::string_view what);

}  // namespace flotilla::specs
