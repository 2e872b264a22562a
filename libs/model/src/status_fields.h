// flotilla/model/src/status_fields.h
//
// The field lists of the resource kinds' status structs: Flotilla's own shape, with Fleet's field names where
// they exist. Each is an overload of fields(v, s), for codec::Reader and codec::Writer alike.
#pragma once

#include "decoder.h"
#include "flotilla/model/resources.h"

namespace flotilla::model {

inline constexpr auto kCondition = [](auto& v, auto& s) {
  v.str("type", s.type);
  v.str("status", s.status);
  v.str("reason", s.reason);
  v.str("message", s.message);
  v.str("lastUpdateTime", s.last_update_time);
  v.str("lastTransitionTime", s.last_transition_time);
};

inline constexpr auto kResourceCounts = [](auto& v, auto& s) {
  v.count("ready", s.ready);
  v.count("desiredReady", s.desired_ready);
  v.count("waitApplied", s.wait_applied);
  v.count("modified", s.modified);
  v.count("orphaned", s.orphaned);
  v.count("missing", s.missing);
  v.count("unknown", s.unknown);
  v.count("notReady", s.not_ready);
};

// kind, apiVersion, namespace and name of one Kubernetes object.
inline constexpr auto kObjectRef = [](auto& v, auto& s) {
  v.str("kind", s.kind);
  v.str("apiVersion", s.api_version);
  v.str("namespace", s.ns);
  v.str("name", s.name);
};

template <typename V, Of<GitRepoStatus> S>
void fields(V& v, S& s) {
  v.count("observedGeneration", s.observed_generation);
  v.count("updateGeneration", s.update_generation);
  v.str("commit", s.commit);
  v.str("pollingCommit", s.polling_commit);
  v.str("webhookCommit", s.webhook_commit);
  v.str("lastPollingTriggered", s.last_polling_time);
  v.count("readyClusters", s.ready_clusters);
  v.count("desiredReadyClusters", s.desired_ready_clusters);
  v.value("summary", s.summary, detail::kSummary);
  v.plain("display", s.display, [](auto& d, auto& o) {
    d.str("readyBundleDeployments", o.ready_bundle_deployments);
    d.str("state", o.state);
    d.str("message", o.message);
    d.boolean("error", o.error);
  });
  v.plain("resourceCounts", s.resource_counts, kResourceCounts);
  v.objects("conditions", s.conditions, kCondition);
}

template <typename V, Of<ClusterStatus> S>
void fields(V& v, S& s) {
  v.value("summary", s.summary, detail::kSummary);
  v.plain("resourceCounts", s.resource_counts, kResourceCounts);
  v.count("readyGitRepos", s.ready_git_repos);
  v.count("desiredReadyGitRepos", s.desired_ready_git_repos);
  v.plain("display", s.display, [](auto& d, auto& o) {
    d.str("readyBundles", o.ready_bundles);
    d.str("state", o.state);
    d.str("message", o.message);
  });
  v.plain("agent", s.agent, [](auto& a, auto& o) {
    a.str("lastSeen", o.last_seen);
    a.str("version", o.version);
    a.str("kubernetesVersion", o.kubernetes_version);
  });
  v.objects("conditions", s.conditions, kCondition);
}

template <typename V, Of<ClusterGroupStatus> S>
void fields(V& v, S& s) {
  v.count("clusterCount", s.cluster_count);
  v.count("nonReadyClusterCount", s.non_ready_cluster_count);
  v.strings("nonReadyClusters", s.non_ready_clusters);
  v.value("summary", s.summary, detail::kSummary);
  v.plain("resourceCounts", s.resource_counts, kResourceCounts);
  v.plain("display", s.display, [](auto& d, auto& o) {
    d.str("readyClusters", o.ready_clusters);
    d.str("readyBundles", o.ready_bundles);
    d.str("state", o.state);
  });
  v.objects("conditions", s.conditions, kCondition);
}

inline constexpr auto kPartitionStatus = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.count("count", s.count);
  v.count("maxUnavailable", s.max_unavailable);
  v.count("unavailable", s.unavailable);
  v.value("summary", s.summary, detail::kSummary);
};

template <typename V, Of<BundleStatus> S>
void fields(V& v, S& s) {
  v.objects("conditions", s.conditions, kCondition);
  v.value("summary", s.summary, detail::kSummary);
  v.count("newlyCreated", s.newly_created);
  v.count("unavailable", s.unavailable);
  v.count("unavailablePartitions", s.unavailable_partitions);
  v.count("maxUnavailable", s.max_unavailable);
  v.count("maxUnavailablePartitions", s.max_unavailable_partitions);
  v.count("maxNew", s.max_new);
  v.objects("partitions", s.partitions, kPartitionStatus);
  v.plain("display", s.display, [](auto& d, auto& o) {
    d.str("readyClusters", o.ready_clusters);
    d.str("state", o.state);
  });
  v.objects("resourceKey", s.resource_key, kObjectRef);
  v.count("observedGeneration", s.observed_generation);
  v.str("commit", s.commit);
  v.str("manifestID", s.manifest_id);
}

inline constexpr auto kNonReadyStatus = [](auto& v, auto& s) {
  v.str("uid", s.uid);
  kObjectRef(v, s);
  v.plain("summary", s.summary, [](auto& g, auto& o) {
    g.str("state", o.state);
    g.boolean("error", o.error);
    g.boolean("transitioning", o.transitioning);
    g.strings("message", o.message);
  });
};

inline constexpr auto kModifiedStatus = [](auto& v, auto& s) {
  kObjectRef(v, s);
  v.boolean("missing", s.missing);
  v.boolean("delete", s.deleted);
  v.boolean("exist", s.exist);
  v.str("patch", s.patch);
};

inline constexpr auto kDeployedResource = [](auto& v, auto& s) {
  kObjectRef(v, s);
  v.str("createdAt", s.created_at);
};

template <typename V, Of<BundleDeploymentStatus> S>
void fields(V& v, S& s) {
  v.objects("conditions", s.conditions, kCondition);
  v.str("appliedDeploymentID", s.applied_deployment_id);
  v.str("release", s.release);
  v.boolean("ready", s.ready);
  v.boolean("nonModified", s.non_modified);
  v.objects("nonReadyStatus", s.non_ready_status, kNonReadyStatus);
  v.objects("modifiedStatus", s.modified_status, kModifiedStatus);
  v.plain("display", s.display, [](auto& d, auto& o) {
    d.str("deployed", o.deployed);
    d.str("monitored", o.monitored);
    d.str("state", o.state);
    d.str("reason", o.reason);
    d.str("message", o.message);
  });
  v.optCount("syncGeneration", s.sync_generation);
  v.objects("resources", s.resources, kDeployedResource);
  v.boolean("incompleteState", s.incomplete_state);
}

}  // namespace flotilla::model
