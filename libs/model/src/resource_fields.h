// flotilla/model/src/resource_fields.h
//
// The field lists of the resource kinds (metadata, spec, status) and of fleet.yaml, each an overload of
// fields(v, s) for codec::Reader and codec::Writer alike. Status is Flotilla's own shape, with Fleet's field names
// where they exist.
#pragma once

#include "flotilla/core/util.h"
#include "flotilla/model/resources.h"
#include "option_fields.h"

namespace flotilla::model {

// ---- metadata ----

template <typename V, Of<ObjectMeta> S>
void fields(V& v, S& s) {
  v.require("name");
  v.str("name", s.name);
  v.validate([&](Reader& in) {
    if (!s.name.empty() && !isDns1123Subdomain(s.name)) {
      in.fail(in.pathOf("name"), "invalid name \"" + s.name +
                                     "\": at most 253 lower-case letters, digits, '-' and '.', starting and ending "
                                     "with a letter or digit");
    }
  });
  v.str("namespace", s.ns);
  if constexpr (codec::kDecoding<V>) {
    if (s.ns.empty()) {
      s.ns = std::string(kDefaultNamespace);
    } else if (!isDns1123Label(s.ns)) {
      v.fail(v.pathOf("namespace"), "invalid namespace \"" + s.ns +
                                        "\": at most 63 lower-case letters, digits and '-', starting and ending "
                                        "with a letter or digit");
    }
  }
  detail::labels(v, "labels", s.labels);
  v.stringMap("annotations", s.annotations);
  v.validate([&](Reader& in) {
    for (const auto& [key, value] : s.annotations) {
      if (auto status = validateLabelKey(key); !status.ok()) {
        in.fail(yamlKeyPath(in.pathOf("annotations"), key), "invalid annotation key: " + status.error().message);
      }
    }
  });
  v.count("generation", s.generation);
  v.str("resourceVersion", s.resource_version);
  v.str("uid", s.uid);
  v.str("creationTimestamp", s.creation_timestamp);
  v.validate([](Reader& in) {
    if (in.take("generateName") != nullptr) {
      in.fail(in.pathOf("generateName"), "generateName is not supported; set metadata.name");
    }
    // Populated by a Kubernetes API server; accepted so `kubectl get -o yaml` exports decode, then dropped.
    for (const char* key : {"managedFields", "ownerReferences", "finalizers", "selfLink", "deletionTimestamp",
                            "deletionGracePeriodSeconds"}) {
      in.skip(key);
    }
  });
}

// ---- specs ----

template <typename V, Of<GitRepoSpec> S>
void fields(V& v, S& s) {
  v.require("repo");
  v.str("repo", s.repo);
  v.str("branch", s.branch);
  v.str("revision", s.revision);
  v.strings("paths", s.paths);
  v.validate([&](Reader& in) {
    for (size_t i = 0; i < s.paths.size(); ++i) {
      if (s.paths[i].empty()) {
        in.fail(yamlIndexPath(in.pathOf("paths"), i), "must not be empty (use \"/\" for the repository root)");
      }
    }
  });
  v.objects("bundles", s.bundles, [](auto& b, auto& o) {
    b.str("base", o.base);
    b.str("options", o.options);
  });
  v.str("targetNamespace", s.target_namespace);
  v.validate([&](Reader& in) {
    if (!s.target_namespace.empty() && !isDns1123Label(s.target_namespace)) {
      in.fail(in.pathOf("targetNamespace"), "invalid namespace \"" + s.target_namespace + "\"");
    }
  });
  v.objects("targets", s.targets, kFields);
  v.str("clientSecretName", s.client_secret_name);
  v.str("helmSecretName", s.helm_secret_name);
  v.str("helmSecretNameForPaths", s.helm_secret_name_for_paths);
  v.str("helmRepoURLRegex", s.helm_repo_url_regex);
  v.str("caBundle", s.ca_bundle);
  v.validate([&](Reader& in) {
    if (!s.ca_bundle.empty() && !base64Decode(s.ca_bundle).ok()) {
      in.fail(in.pathOf("caBundle"), "expected base64-encoded PEM data");
    }
  });
  v.boolean("insecureSkipTLSVerify", s.insecure_skip_tls_verify);
  v.boolean("insecureAllowHTTP", s.insecure_allow_http);  // Flotilla's own: credentials over http://
  v.str("serviceAccount", s.service_account);
  v.boolean("paused", s.paused);
  v.count("forceSyncGeneration", s.force_sync_generation);
  v.boolean("keepResources", s.keep_resources);
  v.boolean("deleteNamespace", s.delete_namespace);
  v.object("correctDrift", s.correct_drift, kFields);
  v.str("ociRegistrySecret", s.oci_registry_secret);
  v.value("pollingInterval", s.polling_interval, detail::kDuration);
  v.boolean("disablePolling", s.disable_polling);
  v.str("webhookSecret", s.webhook_secret);
  v.value("imageScanInterval", s.image_scan_interval, detail::kDuration);
  v.object("imageScanCommit", s.image_scan_commit, [](auto& c, auto& o) {
    c.str("authorName", o.author_name);
    c.str("authorEmail", o.author_email);
    c.str("messageTemplate", o.message_template);
  });
}

template <typename V, Of<ClusterSpec> S>
void fields(V& v, S& s) {
  v.boolean("paused", s.paused);
  v.str("clientID", s.client_id);
  v.str("kubeConfigSecret", s.kube_config_secret);
  v.str("kubeConfigSecretNamespace", s.kube_config_secret_namespace);
  v.count("redeployAgentGeneration", s.redeploy_agent_generation);
  v.str("agentNamespace", s.agent_namespace);
  v.str("privateRepoURL", s.private_repo_url);
  v.map("templateValues", s.template_values);
  v.list("agentEnvVars", s.agent_env_vars);
  v.list("agentTolerations", s.agent_tolerations);
  v.map("agentAffinity", s.agent_affinity);
  v.map("agentResources", s.agent_resources);
  v.map("agentSchedulingCustomization", s.agent_scheduling_customization);
  v.optBoolean("hostNetwork", s.host_network);
}

template <typename V, Of<BundleDeploymentSpec> S>
void fields(V& v, S& s) {
  v.boolean("paused", s.paused);
  v.plain("stagedOptions", s.staged_options, kFields);
  v.str("stagedDeploymentID", s.staged_deployment_id);
  v.plain("options", s.options, kFields);
  v.str("deploymentID", s.deployment_id);
  v.objects("dependsOn", s.depends_on, kFields);
  v.object("correctDrift", s.correct_drift, kFields);
  v.boolean("ociContents", s.oci_contents);
  v.str("valuesHash", s.values_hash);
  v.boolean("offSchedule", s.off_schedule);
}

// ---- fleet.yaml ----

// A string wrapped in a one-key object: secretRef {name}, policy.semver {range}, policy.alphabetical {order}.
struct WrappedString {
  std::string_view key;
  bool read(Reader& in, std::string_view field, const Json& value, std::string& out) const {
    Reader sub(in.problems(), value, in.pathOf(field));
    if (!sub.ok()) {
      return false;
    }
    sub.str(key, out);
    sub.finish();
    return true;
  }
  Json write(const std::string& value) const { return Json::obj({{std::string(key), value}}); }
};

inline constexpr auto kImageScan = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.str("tagName", s.tag_name);
  v.str("image", s.image);
  v.value("interval", s.interval, detail::kDuration);
  v.value("secretRef", s.secret_ref_name, WrappedString{"name"});
  v.boolean("suspend", s.suspend);
  v.nested("policy", s, [](auto& p, auto& o) {
    p.value("semver", o.semver_range, WrappedString{"range"});
    p.value("alphabetical", o.alphabetical_order, WrappedString{"order"});
  });
  v.validate([&](Reader& in) {
    if (!s.image.empty() && s.tag_name.empty()) {
      in.fail(in.pathOf("tagName"), "required when image is set");
    }
  });
};

template <typename V, Of<FleetYaml> S>
void fields(V& v, S& s) {
  v.str("name", s.name);
  v.validate([&](Reader& in) {
    if (!s.name.empty() && !isDns1123Subdomain(s.name)) {
      in.fail(in.pathOf("name"), "invalid bundle name \"" + s.name +
                                     "\": lower-case letters, digits, '-' and '.', starting and ending with a "
                                     "letter or digit");
    }
  });
  detail::labels(v, "labels", s.labels);
  bundleSpecFields(v, s.spec, false);
  v.objects("targetCustomizations", s.target_customizations, kFields);
  v.objects("imageScans", s.image_scans, kImageScan);
  v.optObjects("overrideTargets", s.override_targets, kFields);
}

template <typename V, Of<ClusterGroupSpec> S>
void fields(V& v, S& s) {
  v.value("selector", s.selector, detail::kSelector);
}

// ---- status ----

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
    a.strings("apiVersions", o.api_versions);
    detail::labels(a, "labels", o.labels);
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
