// Decoding and encoding of the resource kinds and of fleet.yaml.
#include "decoder.h"
#include "flotilla/core/util.h"
#include "flotilla/model/codec.h"

namespace flotilla::model {

Duration GitRepoSpec::effectivePollingInterval() const {
  if (!polling_interval || polling_interval->count() == 0) {
    return kDefaultPollingInterval;
  }
  return *polling_interval;
}

std::string_view kindOf(const Resource& resource) {
  static constexpr std::string_view kKinds[] = {"GitRepo", "Cluster", "ClusterGroup", "Bundle", "BundleDeployment"};
  return kKinds[resource.index()];
}

const ObjectMeta& metaOf(const Resource& resource) {
  return std::visit([](const auto& r) -> const ObjectMeta& { return r.metadata; }, resource);
}

ObjectMeta& metaOf(Resource& resource) {
  return std::visit([](auto& r) -> ObjectMeta& { return r.metadata; }, resource);
}

namespace {

using detail::DecodeContext;
using detail::Fields;
using detail::Out;

// Records a nested decoder's error (whose message starts with the field path) at that path.
void failAtPath(DecodeContext& ctx, const std::string& message) {
  size_t colon = message.find(": ");
  if (colon == std::string::npos) {
    ctx.fail({}, message);
  } else {
    ctx.fail(message.substr(0, colon), message.substr(colon + 2));
  }
}

void summaryField(Fields& in, std::string_view key, StateSummary& out) {
  const Json* value = in.take(key);
  if (value == nullptr) {
    return;
  }
  auto decoded = decodeStateSummary(*value, in.pathOf(key));
  if (!decoded.ok()) {
    failAtPath(in.ctx(), decoded.error().message);
    return;
  }
  out = std::move(decoded).value();
}

void summaryOut(Out& out, std::string_view key, const StateSummary& summary) {
  if (!(summary == StateSummary{})) {
    out.set(key, encodeStateSummary(summary));
  }
}

// ---- shared pieces ----

void decodeMeta(Fields& in, ObjectMeta& out) {
  in.require("name");
  in.str("name", out.name);
  if (!out.name.empty() && !isDns1123Subdomain(out.name)) {
    in.ctx().fail(in.pathOf("name"), "invalid name \"" + out.name +
                                         "\": at most 253 lower-case letters, digits, '-' and '.', starting and "
                                         "ending with a letter or digit");
  }
  in.str("namespace", out.ns);
  if (out.ns.empty()) {
    out.ns = std::string(kDefaultNamespace);
  } else if (!isDns1123Label(out.ns)) {
    in.ctx().fail(in.pathOf("namespace"), "invalid namespace \"" + out.ns +
                                              "\": at most 63 lower-case letters, digits and '-', starting and "
                                              "ending with a letter or digit");
  }
  in.labels("labels", out.labels);
  in.stringMap("annotations", out.annotations);
  for (const auto& [key, value] : out.annotations) {
    if (auto s = validateLabelKey(key); !s.ok()) {
      in.ctx().fail(yamlKeyPath(in.pathOf("annotations"), key), "invalid annotation key: " + s.error().message);
    }
  }
  in.integer("generation", out.generation, 0);
  in.str("resourceVersion", out.resource_version);
  in.str("uid", out.uid);
  in.str("creationTimestamp", out.creation_timestamp);
  if (in.take("generateName") != nullptr) {
    in.ctx().fail(in.pathOf("generateName"), "generateName is not supported; set metadata.name");
  }
  // Populated by a Kubernetes API server; accepted so `kubectl get -o yaml` exports decode, then dropped.
  for (const char* key : {"managedFields", "ownerReferences", "finalizers", "selfLink", "deletionTimestamp",
                          "deletionGracePeriodSeconds"}) {
    in.skip(key);
  }
}

Json encodeMeta(const ObjectMeta& value) {
  Out out;
  out.str("name", value.name);
  out.str("namespace", value.ns);
  out.stringMap("labels", value.labels);
  out.stringMap("annotations", value.annotations);
  out.integer("generation", value.generation);
  out.str("resourceVersion", value.resource_version);
  out.str("uid", value.uid);
  out.str("creationTimestamp", value.creation_timestamp);
  return out.take();
}

void decodeConditions(Fields& in, std::vector<Condition>& out) {
  in.objects("conditions", out, [](Fields& f, Condition& c) {
    f.str("type", c.type);
    f.str("status", c.status);
    f.str("reason", c.reason);
    f.str("message", c.message);
    f.str("lastUpdateTime", c.last_update_time);
    f.str("lastTransitionTime", c.last_transition_time);
  });
}

void encodeConditions(Out& out, const std::vector<Condition>& value) {
  out.objects("conditions", value, [](const Condition& c) {
    Out o;
    o.str("type", c.type);
    o.str("status", c.status);
    o.str("reason", c.reason);
    o.str("message", c.message);
    o.str("lastUpdateTime", c.last_update_time);
    o.str("lastTransitionTime", c.last_transition_time);
    return o.take();
  });
}

void decodeResourceCounts(Fields& in, ResourceCounts& out) {
  in.plainObject("resourceCounts", out, [](Fields& f, ResourceCounts& c) {
    f.integer("ready", c.ready, 0);
    f.integer("desiredReady", c.desired_ready, 0);
    f.integer("waitApplied", c.wait_applied, 0);
    f.integer("modified", c.modified, 0);
    f.integer("orphaned", c.orphaned, 0);
    f.integer("missing", c.missing, 0);
    f.integer("unknown", c.unknown, 0);
    f.integer("notReady", c.not_ready, 0);
  });
}

void encodeResourceCounts(Out& out, const ResourceCounts& c) {
  Out o;
  o.integer("ready", c.ready);
  o.integer("desiredReady", c.desired_ready);
  o.integer("waitApplied", c.wait_applied);
  o.integer("modified", c.modified);
  o.integer("orphaned", c.orphaned);
  o.integer("missing", c.missing);
  o.integer("unknown", c.unknown);
  o.integer("notReady", c.not_ready);
  out.nonEmpty("resourceCounts", o.take());
}

// ---- GitRepo ----

void decodeGitRepoSpec(Fields& in, GitRepoSpec& out) {
  in.require("repo");
  in.str("repo", out.repo);
  in.str("branch", out.branch);
  in.str("revision", out.revision);
  in.strings("paths", out.paths);
  for (size_t i = 0; i < out.paths.size(); ++i) {
    if (out.paths[i].empty()) {
      in.ctx().fail(yamlIndexPath(in.pathOf("paths"), i), "must not be empty (use \"/\" for the repository root)");
    }
  }
  in.objects("bundles", out.bundles, [](Fields& f, GitRepoBundlePath& b) {
    f.str("base", b.base);
    f.str("options", b.options);
  });
  in.str("targetNamespace", out.target_namespace);
  if (!out.target_namespace.empty() && !isDns1123Label(out.target_namespace)) {
    in.ctx().fail(in.pathOf("targetNamespace"), "invalid namespace \"" + out.target_namespace + "\"");
  }
  in.objects("targets", out.targets, detail::decodeGitTargetInto);
  in.str("clientSecretName", out.client_secret_name);
  in.str("helmSecretName", out.helm_secret_name);
  in.str("helmSecretNameForPaths", out.helm_secret_name_for_paths);
  in.str("helmRepoURLRegex", out.helm_repo_url_regex);
  in.str("caBundle", out.ca_bundle);
  if (!out.ca_bundle.empty() && !base64Decode(out.ca_bundle).ok()) {
    in.ctx().fail(in.pathOf("caBundle"), "expected base64-encoded PEM data");
  }
  in.boolean("insecureSkipTLSVerify", out.insecure_skip_tls_verify);
  in.str("serviceAccount", out.service_account);
  in.boolean("paused", out.paused);
  in.integer("forceSyncGeneration", out.force_sync_generation, 0);
  in.boolean("keepResources", out.keep_resources);
  in.boolean("deleteNamespace", out.delete_namespace);
  in.object("correctDrift", out.correct_drift, detail::decodeCorrectDriftInto);
  in.str("ociRegistrySecret", out.oci_registry_secret);
  in.duration("pollingInterval", out.polling_interval);
  in.boolean("disablePolling", out.disable_polling);
  in.str("webhookSecret", out.webhook_secret);
  in.duration("imageScanInterval", out.image_scan_interval);
  in.object("imageScanCommit", out.image_scan_commit, [](Fields& f, CommitSpec& c) {
    f.str("authorName", c.author_name);
    f.str("authorEmail", c.author_email);
    f.str("messageTemplate", c.message_template);
  });
}

Json encodeGitRepoSpec(const GitRepoSpec& v) {
  Out out;
  out.str("repo", v.repo);
  out.str("branch", v.branch);
  out.str("revision", v.revision);
  out.strings("paths", v.paths);
  out.objects("bundles", v.bundles, [](const GitRepoBundlePath& b) {
    Out o;
    o.str("base", b.base);
    o.str("options", b.options);
    return o.take();
  });
  out.str("targetNamespace", v.target_namespace);
  out.objects("targets", v.targets, detail::encodeGitTargetJson);
  out.str("clientSecretName", v.client_secret_name);
  out.str("helmSecretName", v.helm_secret_name);
  out.str("helmSecretNameForPaths", v.helm_secret_name_for_paths);
  out.str("helmRepoURLRegex", v.helm_repo_url_regex);
  out.str("caBundle", v.ca_bundle);
  out.boolean("insecureSkipTLSVerify", v.insecure_skip_tls_verify);
  out.str("serviceAccount", v.service_account);
  out.boolean("paused", v.paused);
  out.integer("forceSyncGeneration", v.force_sync_generation);
  out.boolean("keepResources", v.keep_resources);
  out.boolean("deleteNamespace", v.delete_namespace);
  out.object("correctDrift", v.correct_drift, detail::encodeCorrectDriftJson);
  out.str("ociRegistrySecret", v.oci_registry_secret);
  out.duration("pollingInterval", v.polling_interval);
  out.boolean("disablePolling", v.disable_polling);
  out.str("webhookSecret", v.webhook_secret);
  out.duration("imageScanInterval", v.image_scan_interval);
  out.object("imageScanCommit", v.image_scan_commit, [](const CommitSpec& c) {
    Out o;
    o.str("authorName", c.author_name);
    o.str("authorEmail", c.author_email);
    o.str("messageTemplate", c.message_template);
    return o.take();
  });
  return out.take();
}

void decodeGitRepoStatus(Fields& in, GitRepoStatus& out) {
  in.integer("observedGeneration", out.observed_generation, 0);
  in.integer("updateGeneration", out.update_generation, 0);
  in.str("commit", out.commit);
  in.str("pollingCommit", out.polling_commit);
  in.str("webhookCommit", out.webhook_commit);
  in.str("lastPollingTriggered", out.last_polling_time);
  in.integer("readyClusters", out.ready_clusters, 0);
  in.integer("desiredReadyClusters", out.desired_ready_clusters, 0);
  summaryField(in, "summary", out.summary);
  in.plainObject("display", out.display, [](Fields& f, GitRepoDisplay& d) {
    f.str("readyBundleDeployments", d.ready_bundle_deployments);
    f.str("state", d.state);
    f.str("message", d.message);
    f.boolean("error", d.error);
  });
  decodeResourceCounts(in, out.resource_counts);
  decodeConditions(in, out.conditions);
}

Json encodeGitRepoStatus(const GitRepoStatus& v) {
  Out out;
  out.integer("observedGeneration", v.observed_generation);
  out.integer("updateGeneration", v.update_generation);
  out.str("commit", v.commit);
  out.str("pollingCommit", v.polling_commit);
  out.str("webhookCommit", v.webhook_commit);
  out.str("lastPollingTriggered", v.last_polling_time);
  out.integer("readyClusters", v.ready_clusters);
  out.integer("desiredReadyClusters", v.desired_ready_clusters);
  summaryOut(out, "summary", v.summary);
  Out display;
  display.str("readyBundleDeployments", v.display.ready_bundle_deployments);
  display.str("state", v.display.state);
  display.str("message", v.display.message);
  display.boolean("error", v.display.error);
  out.nonEmpty("display", display.take());
  encodeResourceCounts(out, v.resource_counts);
  encodeConditions(out, v.conditions);
  return out.take();
}

// ---- Cluster ----

void decodeClusterSpec(Fields& in, ClusterSpec& out) {
  in.boolean("paused", out.paused);
  in.str("clientID", out.client_id);
  in.str("kubeConfigSecret", out.kube_config_secret);
  in.str("kubeConfigSecretNamespace", out.kube_config_secret_namespace);
  in.integer("redeployAgentGeneration", out.redeploy_agent_generation, 0);
  in.str("agentNamespace", out.agent_namespace);
  in.str("privateRepoURL", out.private_repo_url);
  in.map("templateValues", out.template_values);
  in.list("agentEnvVars", out.agent_env_vars);
  in.list("agentTolerations", out.agent_tolerations);
  in.map("agentAffinity", out.agent_affinity);
  in.map("agentResources", out.agent_resources);
  in.map("agentSchedulingCustomization", out.agent_scheduling_customization);
  in.optBoolean("hostNetwork", out.host_network);
}

Json encodeClusterSpec(const ClusterSpec& v) {
  Out out;
  out.boolean("paused", v.paused);
  out.str("clientID", v.client_id);
  out.str("kubeConfigSecret", v.kube_config_secret);
  out.str("kubeConfigSecretNamespace", v.kube_config_secret_namespace);
  out.integer("redeployAgentGeneration", v.redeploy_agent_generation);
  out.str("agentNamespace", v.agent_namespace);
  out.str("privateRepoURL", v.private_repo_url);
  out.json("templateValues", v.template_values);
  out.json("agentEnvVars", v.agent_env_vars);
  out.json("agentTolerations", v.agent_tolerations);
  out.json("agentAffinity", v.agent_affinity);
  out.json("agentResources", v.agent_resources);
  out.json("agentSchedulingCustomization", v.agent_scheduling_customization);
  out.optBoolean("hostNetwork", v.host_network);
  return out.take();
}

void decodeClusterStatus(Fields& in, ClusterStatus& out) {
  summaryField(in, "summary", out.summary);
  decodeResourceCounts(in, out.resource_counts);
  in.integer("readyGitRepos", out.ready_git_repos, 0);
  in.integer("desiredReadyGitRepos", out.desired_ready_git_repos, 0);
  in.plainObject("display", out.display, [](Fields& f, ClusterDisplay& d) {
    f.str("readyBundles", d.ready_bundles);
    f.str("state", d.state);
    f.str("message", d.message);
  });
  in.plainObject("agent", out.agent, [](Fields& f, AgentStatus& a) {
    f.str("lastSeen", a.last_seen);
    f.str("version", a.version);
    f.str("kubernetesVersion", a.kubernetes_version);
  });
  decodeConditions(in, out.conditions);
}

Json encodeClusterStatus(const ClusterStatus& v) {
  Out out;
  summaryOut(out, "summary", v.summary);
  encodeResourceCounts(out, v.resource_counts);
  out.integer("readyGitRepos", v.ready_git_repos);
  out.integer("desiredReadyGitRepos", v.desired_ready_git_repos);
  Out display;
  display.str("readyBundles", v.display.ready_bundles);
  display.str("state", v.display.state);
  display.str("message", v.display.message);
  out.nonEmpty("display", display.take());
  Out agent;
  agent.str("lastSeen", v.agent.last_seen);
  agent.str("version", v.agent.version);
  agent.str("kubernetesVersion", v.agent.kubernetes_version);
  out.nonEmpty("agent", agent.take());
  encodeConditions(out, v.conditions);
  return out.take();
}

// ---- ClusterGroup ----

void decodeClusterGroupSpec(Fields& in, ClusterGroupSpec& out) {
  in.selector("selector", out.selector);
}

Json encodeClusterGroupSpec(const ClusterGroupSpec& v) {
  Out out;
  out.selector("selector", v.selector);
  return out.take();
}

void decodeClusterGroupStatus(Fields& in, ClusterGroupStatus& out) {
  in.integer("clusterCount", out.cluster_count, 0);
  in.integer("nonReadyClusterCount", out.non_ready_cluster_count, 0);
  in.strings("nonReadyClusters", out.non_ready_clusters);
  summaryField(in, "summary", out.summary);
  decodeResourceCounts(in, out.resource_counts);
  in.plainObject("display", out.display, [](Fields& f, ClusterGroupDisplay& d) {
    f.str("readyClusters", d.ready_clusters);
    f.str("readyBundles", d.ready_bundles);
    f.str("state", d.state);
  });
  decodeConditions(in, out.conditions);
}

Json encodeClusterGroupStatus(const ClusterGroupStatus& v) {
  Out out;
  out.integer("clusterCount", v.cluster_count);
  out.integer("nonReadyClusterCount", v.non_ready_cluster_count);
  out.strings("nonReadyClusters", v.non_ready_clusters);
  summaryOut(out, "summary", v.summary);
  encodeResourceCounts(out, v.resource_counts);
  Out display;
  display.str("readyClusters", v.display.ready_clusters);
  display.str("readyBundles", v.display.ready_bundles);
  display.str("state", v.display.state);
  out.nonEmpty("display", display.take());
  encodeConditions(out, v.conditions);
  return out.take();
}

// ---- Bundle ----

void decodeBundleStatus(Fields& in, BundleStatus& out) {
  decodeConditions(in, out.conditions);
  summaryField(in, "summary", out.summary);
  in.integer("newlyCreated", out.newly_created, 0);
  in.integer("unavailable", out.unavailable, 0);
  in.integer("unavailablePartitions", out.unavailable_partitions, 0);
  in.integer("maxUnavailable", out.max_unavailable, 0);
  in.integer("maxUnavailablePartitions", out.max_unavailable_partitions, 0);
  in.integer("maxNew", out.max_new, 0);
  in.objects("partitions", out.partitions, [](Fields& f, PartitionStatus& p) {
    f.str("name", p.name);
    f.integer("count", p.count, 0);
    f.integer("maxUnavailable", p.max_unavailable, 0);
    f.integer("unavailable", p.unavailable, 0);
    summaryField(f, "summary", p.summary);
  });
  in.plainObject("display", out.display, [](Fields& f, BundleDisplay& d) {
    f.str("readyClusters", d.ready_clusters);
    f.str("state", d.state);
  });
  in.objects("resourceKey", out.resource_key, [](Fields& f, ResourceKey& k) {
    f.str("kind", k.kind);
    f.str("apiVersion", k.api_version);
    f.str("namespace", k.ns);
    f.str("name", k.name);
  });
  in.integer("observedGeneration", out.observed_generation, 0);
  in.str("commit", out.commit);
  in.str("manifestID", out.manifest_id);
}

Json encodeBundleStatus(const BundleStatus& v) {
  Out out;
  encodeConditions(out, v.conditions);
  summaryOut(out, "summary", v.summary);
  out.integer("newlyCreated", v.newly_created);
  out.integer("unavailable", v.unavailable);
  out.integer("unavailablePartitions", v.unavailable_partitions);
  out.integer("maxUnavailable", v.max_unavailable);
  out.integer("maxUnavailablePartitions", v.max_unavailable_partitions);
  out.integer("maxNew", v.max_new);
  out.objects("partitions", v.partitions, [](const PartitionStatus& p) {
    Out o;
    o.str("name", p.name);
    o.integer("count", p.count);
    o.integer("maxUnavailable", p.max_unavailable);
    o.integer("unavailable", p.unavailable);
    summaryOut(o, "summary", p.summary);
    return o.take();
  });
  Out display;
  display.str("readyClusters", v.display.ready_clusters);
  display.str("state", v.display.state);
  out.nonEmpty("display", display.take());
  out.objects("resourceKey", v.resource_key, [](const ResourceKey& k) {
    Out o;
    o.str("kind", k.kind);
    o.str("apiVersion", k.api_version);
    o.str("namespace", k.ns);
    o.str("name", k.name);
    return o.take();
  });
  out.integer("observedGeneration", v.observed_generation);
  out.str("commit", v.commit);
  out.str("manifestID", v.manifest_id);
  return out.take();
}

// ---- BundleDeployment ----

void decodeBundleDeploymentSpec(Fields& in, BundleDeploymentSpec& out) {
  in.boolean("paused", out.paused);
  in.plainObject("stagedOptions", out.staged_options, detail::decodeOptionsInto);
  in.str("stagedDeploymentID", out.staged_deployment_id);
  in.plainObject("options", out.options, detail::decodeOptionsInto);
  in.str("deploymentID", out.deployment_id);
  in.objects("dependsOn", out.depends_on, detail::decodeBundleRefInto);
  in.object("correctDrift", out.correct_drift, detail::decodeCorrectDriftInto);
  in.boolean("ociContents", out.oci_contents);
  in.str("valuesHash", out.values_hash);
  in.boolean("offSchedule", out.off_schedule);
}

Json encodeBundleDeploymentSpec(const BundleDeploymentSpec& v) {
  Out out;
  out.boolean("paused", v.paused);
  out.nonEmpty("stagedOptions", detail::encodeOptionsJson(v.staged_options));
  out.str("stagedDeploymentID", v.staged_deployment_id);
  out.nonEmpty("options", detail::encodeOptionsJson(v.options));
  out.str("deploymentID", v.deployment_id);
  out.objects("dependsOn", v.depends_on, detail::encodeBundleRefJson);
  out.object("correctDrift", v.correct_drift, detail::encodeCorrectDriftJson);
  out.boolean("ociContents", v.oci_contents);
  out.str("valuesHash", v.values_hash);
  out.boolean("offSchedule", v.off_schedule);
  return out.take();
}

void decodeObjectRef(Fields& f, std::string& kind, std::string& api_version, std::string& ns, std::string& name) {
  f.str("kind", kind);
  f.str("apiVersion", api_version);
  f.str("namespace", ns);
  f.str("name", name);
}

void encodeObjectRef(Out& o, const std::string& kind, const std::string& api_version, const std::string& ns,
                     const std::string& name) {
  o.str("kind", kind);
  o.str("apiVersion", api_version);
  o.str("namespace", ns);
  o.str("name", name);
}

void decodeBundleDeploymentStatus(Fields& in, BundleDeploymentStatus& out) {
  decodeConditions(in, out.conditions);
  in.str("appliedDeploymentID", out.applied_deployment_id);
  in.str("release", out.release);
  in.boolean("ready", out.ready);
  in.boolean("nonModified", out.non_modified);
  in.objects("nonReadyStatus", out.non_ready_status, [](Fields& f, NonReadyStatus& s) {
    f.str("uid", s.uid);
    decodeObjectRef(f, s.kind, s.api_version, s.ns, s.name);
    f.plainObject("summary", s.summary, [](Fields& g, ObjectSummary& summary) {
      g.str("state", summary.state);
      g.boolean("error", summary.error);
      g.boolean("transitioning", summary.transitioning);
      g.strings("message", summary.message);
    });
  });
  in.objects("modifiedStatus", out.modified_status, [](Fields& f, ModifiedStatus& m) {
    decodeObjectRef(f, m.kind, m.api_version, m.ns, m.name);
    f.boolean("missing", m.missing);
    f.boolean("delete", m.deleted);
    f.boolean("exist", m.exist);
    f.str("patch", m.patch);
  });
  in.plainObject("display", out.display, [](Fields& f, BundleDeploymentDisplay& d) {
    f.str("deployed", d.deployed);
    f.str("monitored", d.monitored);
    f.str("state", d.state);
    f.str("reason", d.reason);
    f.str("message", d.message);
  });
  in.optInteger("syncGeneration", out.sync_generation, 0);
  in.objects("resources", out.resources, [](Fields& f, DeployedResource& r) {
    decodeObjectRef(f, r.kind, r.api_version, r.ns, r.name);
    f.str("createdAt", r.created_at);
  });
  in.boolean("incompleteState", out.incomplete_state);
}

Json encodeBundleDeploymentStatus(const BundleDeploymentStatus& v) {
  Out out;
  encodeConditions(out, v.conditions);
  out.str("appliedDeploymentID", v.applied_deployment_id);
  out.str("release", v.release);
  out.boolean("ready", v.ready);
  out.boolean("nonModified", v.non_modified);
  out.objects("nonReadyStatus", v.non_ready_status, [](const NonReadyStatus& s) {
    Out o;
    o.str("uid", s.uid);
    encodeObjectRef(o, s.kind, s.api_version, s.ns, s.name);
    Out summary;
    summary.str("state", s.summary.state);
    summary.boolean("error", s.summary.error);
    summary.boolean("transitioning", s.summary.transitioning);
    summary.strings("message", s.summary.message);
    o.nonEmpty("summary", summary.take());
    return o.take();
  });
  out.objects("modifiedStatus", v.modified_status, [](const ModifiedStatus& m) {
    Out o;
    encodeObjectRef(o, m.kind, m.api_version, m.ns, m.name);
    o.boolean("missing", m.missing);
    o.boolean("delete", m.deleted);
    o.boolean("exist", m.exist);
    o.str("patch", m.patch);
    return o.take();
  });
  Out display;
  display.str("deployed", v.display.deployed);
  display.str("monitored", v.display.monitored);
  display.str("state", v.display.state);
  display.str("reason", v.display.reason);
  display.str("message", v.display.message);
  out.nonEmpty("display", display.take());
  out.optInteger("syncGeneration", v.sync_generation);
  out.objects("resources", v.resources, [](const DeployedResource& r) {
    Out o;
    encodeObjectRef(o, r.kind, r.api_version, r.ns, r.name);
    o.str("createdAt", r.created_at);
    return o.take();
  });
  out.boolean("incompleteState", v.incomplete_state);
  return out.take();
}

// ---- dispatch ----

template <typename T, typename SpecFn, typename StatusFn>
T decodeKind(Fields& root, bool native, bool spec_required, SpecFn&& spec_fn, StatusFn&& status_fn) {
  T out{};
  root.require("metadata");
  root.plainObject("metadata", out.metadata, decodeMeta);
  if (spec_required) {
    root.require("spec");
  }
  root.plainObject("spec", out.spec, spec_fn);
  if (native) {
    root.plainObject("status", out.status, status_fn);
  } else {
    root.skip("status");  // Fleet's status describes a Fleet installation, not this one
  }
  return out;
}

Result<Resource> decodeDocument(const Json& document, std::string_view source, const YamlDocument* yaml) {
  DecodeContext ctx(source, yaml);
  Fields root(ctx, document, {});
  if (!root.ok()) {
    return fail(ctx.error());
  }
  std::string api_version;
  std::string kind;
  root.require("apiVersion");
  root.str("apiVersion", api_version);
  root.require("kind");
  root.str("kind", kind);
  if (ctx.failed()) {
    return fail(ctx.error());
  }
  if (api_version != kFleetApiVersion && api_version != kFlotillaApiVersion) {
    ctx.fail("apiVersion", "unsupported apiVersion \"" + api_version + "\" (expected " + std::string(kFleetApiVersion) +
                               " or " + std::string(kFlotillaApiVersion) + ")");
    return fail(ctx.error());
  }
  bool native = api_version == kFlotillaApiVersion;
  // Only GitRepo has a required spec field (repo); the other kinds may omit spec.
  std::optional<Resource> out;
  if (kind == "GitRepo") {
    out = decodeKind<GitRepo>(root, native, true, decodeGitRepoSpec, decodeGitRepoStatus);
  } else if (kind == "Cluster") {
    out = decodeKind<Cluster>(root, native, false, decodeClusterSpec, decodeClusterStatus);
  } else if (kind == "ClusterGroup") {
    out = decodeKind<ClusterGroup>(root, native, false, decodeClusterGroupSpec, decodeClusterGroupStatus);
  } else if (kind == "Bundle") {
    out = decodeKind<Bundle>(
        root, native, false, [](Fields& f, BundleSpec& s) { detail::decodeBundleSpecInto(f, s, true); },
        decodeBundleStatus);
  } else if (kind == "BundleDeployment") {
    out = decodeKind<BundleDeployment>(root, native, false, decodeBundleDeploymentSpec, decodeBundleDeploymentStatus);
  } else {
    ctx.fail("kind", "unsupported kind \"" + kind +
                         "\" (Flotilla reads GitRepo, Cluster, ClusterGroup, Bundle and BundleDeployment)");
    return fail(ctx.error());
  }
  root.finish();
  if (ctx.failed()) {
    return fail(ctx.error());
  }
  return std::move(*out);
}

template <typename T>
Result<T> decodeAs(const Json& document, std::string_view source, std::string_view expected_kind) {
  auto decoded = decodeDocument(document, source, nullptr);
  if (!decoded.ok()) {
    return fail(decoded.error());
  }
  if (!std::holds_alternative<T>(*decoded)) {
    DecodeContext ctx(source, nullptr);
    ctx.fail("kind", "expected kind " + std::string(expected_kind) + ", got " + std::string(kindOf(*decoded)));
    return fail(ctx.error());
  }
  return std::get<T>(std::move(decoded).value());
}

Json envelope(std::string_view api_version, std::string_view kind, const ObjectMeta& meta, Json spec, Json status) {
  Json out = Json::obj({{"apiVersion", std::string(api_version)},
                        {"kind", std::string(kind)},
                        {"metadata", encodeMeta(meta)},
                        {"spec", std::move(spec)}});
  if (!(status.isObject() && status.size() == 0)) {
    out["status"] = std::move(status);
  }
  return out;
}

// ---- fleet.yaml ----

void decodeFleetYamlInto(Fields& in, FleetYaml& out) {
  in.str("name", out.name);
  if (!out.name.empty() && !isDns1123Subdomain(out.name)) {
    in.ctx().fail(in.pathOf("name"), "invalid bundle name \"" + out.name +
                                         "\": lower-case letters, digits, '-' and '.', starting and ending with a "
                                         "letter or digit");
  }
  in.labels("labels", out.labels);
  detail::decodeBundleSpecInto(in, out.spec, false);
  in.objects("targetCustomizations", out.target_customizations, detail::decodeBundleTargetInto);
  in.objects("imageScans", out.image_scans, [](Fields& f, ImageScanYaml& scan) {
    f.str("name", scan.name);
    f.str("tagName", scan.tag_name);
    f.str("image", scan.image);
    f.duration("interval", scan.interval);
    std::optional<std::string> secret;
    f.object("secretRef", secret, [](Fields& g, std::string& name) { g.str("name", name); });
    scan.secret_ref_name = secret.value_or("");
    f.boolean("suspend", scan.suspend);
    struct Policy {
      std::string semver_range;
      std::string alphabetical_order;
    };
    std::optional<Policy> policy;
    f.object("policy", policy, [](Fields& g, Policy& p) {
      std::optional<std::string> range;
      g.object("semver", range, [](Fields& h, std::string& r) { h.str("range", r); });
      std::optional<std::string> order;
      g.object("alphabetical", order, [](Fields& h, std::string& o) { h.str("order", o); });
      p.semver_range = range.value_or("");
      p.alphabetical_order = order.value_or("");
    });
    if (policy) {
      scan.semver_range = policy->semver_range;
      scan.alphabetical_order = policy->alphabetical_order;
    }
    if (!scan.image.empty() && scan.tag_name.empty()) {
      f.ctx().fail(f.pathOf("tagName"), "required when image is set");
    }
  });
  in.optObjects("overrideTargets", out.override_targets, detail::decodeGitTargetInto);
}

Result<FleetYaml> decodeFleetYamlDocument(const Json& value, std::string_view source, const YamlDocument* yaml) {
  DecodeContext ctx(source, yaml);
  Fields root(ctx, value, {});
  FleetYaml out;
  if (root.ok()) {
    decodeFleetYamlInto(root, out);
    root.finish();
  }
  if (ctx.failed()) {
    return fail(ctx.error());
  }
  return out;
}

}  // namespace

Result<Resource> decodeResource(const Json& document, std::string_view source) {
  return decodeDocument(document, source, nullptr);
}

Result<Resource> decodeResource(const YamlDocument& document, std::string_view source) {
  return decodeDocument(document.value, source, &document);
}

Result<std::vector<Resource>> decodeResources(std::string_view yaml_text, std::string_view source) {
  auto documents = parseYamlDocuments(yaml_text, source, YamlLimits{.record_lines = true});
  if (!documents.ok()) {
    return fail(documents.error());
  }
  std::vector<Resource> out;
  out.reserve(documents->size());
  for (const auto& document : *documents) {
    auto decoded = decodeDocument(document.value, source, &document);
    if (!decoded.ok()) {
      return fail(decoded.error());
    }
    out.push_back(std::move(decoded).value());
  }
  return out;
}

Result<GitRepo> decodeGitRepo(const Json& document, std::string_view source) {
  return decodeAs<GitRepo>(document, source, "GitRepo");
}
Result<Cluster> decodeCluster(const Json& document, std::string_view source) {
  return decodeAs<Cluster>(document, source, "Cluster");
}
Result<ClusterGroup> decodeClusterGroup(const Json& document, std::string_view source) {
  return decodeAs<ClusterGroup>(document, source, "ClusterGroup");
}
Result<Bundle> decodeBundle(const Json& document, std::string_view source) {
  return decodeAs<Bundle>(document, source, "Bundle");
}
Result<BundleDeployment> decodeBundleDeployment(const Json& document, std::string_view source) {
  return decodeAs<BundleDeployment>(document, source, "BundleDeployment");
}

Json encode(const GitRepo& value, std::string_view api_version) {
  return envelope(api_version, "GitRepo", value.metadata, encodeGitRepoSpec(value.spec),
                  encodeGitRepoStatus(value.status));
}
Json encode(const Cluster& value, std::string_view api_version) {
  return envelope(api_version, "Cluster", value.metadata, encodeClusterSpec(value.spec),
                  encodeClusterStatus(value.status));
}
Json encode(const ClusterGroup& value, std::string_view api_version) {
  return envelope(api_version, "ClusterGroup", value.metadata, encodeClusterGroupSpec(value.spec),
                  encodeClusterGroupStatus(value.status));
}
Json encode(const Bundle& value, std::string_view api_version) {
  Out spec;
  detail::encodeBundleSpecInto(spec, value.spec, true);
  return envelope(api_version, "Bundle", value.metadata, spec.take(), encodeBundleStatus(value.status));
}
Json encode(const BundleDeployment& value, std::string_view api_version) {
  return envelope(api_version, "BundleDeployment", value.metadata, encodeBundleDeploymentSpec(value.spec),
                  encodeBundleDeploymentStatus(value.status));
}
Json encodeResource(const Resource& value, std::string_view api_version) {
  return std::visit([&](const auto& r) { return encode(r, api_version); }, value);
}

Result<FleetYaml> decodeFleetYaml(std::string_view yaml_text, std::string_view source) {
  auto documents = parseYamlDocuments(yaml_text, source, YamlLimits{.record_lines = true});
  if (!documents.ok()) {
    return fail(documents.error());
  }
  if (documents->empty()) {
    return FleetYaml{};
  }
  if (documents->size() > 1) {
    return fail(ErrorKind::kInvalid,
                std::string(source) + ":" + std::to_string((*documents)[1].line) +
                    ": fleet.yaml must hold one YAML document, found " + std::to_string(documents->size()),
                std::string(source) + ":" + std::to_string((*documents)[1].line));
  }
  return decodeFleetYamlDocument(documents->front().value, source, &documents->front());
}

Result<FleetYaml> decodeFleetYamlValue(const Json& value, std::string_view source) {
  return decodeFleetYamlDocument(value, source, nullptr);
}

Json encode(const FleetYaml& value) {
  Out out;
  out.str("name", value.name);
  out.stringMap("labels", value.labels);
  detail::encodeBundleSpecInto(out, value.spec, false);
  out.objects("targetCustomizations", value.target_customizations, detail::encodeBundleTargetJson);
  out.objects("imageScans", value.image_scans, [](const ImageScanYaml& scan) {
    Out o;
    o.str("name", scan.name);
    o.str("tagName", scan.tag_name);
    o.str("image", scan.image);
    o.duration("interval", scan.interval);
    if (!scan.secret_ref_name.empty()) {
      o.set("secretRef", Json::obj({{"name", scan.secret_ref_name}}));
    }
    o.boolean("suspend", scan.suspend);
    Out policy;
    if (!scan.semver_range.empty()) {
      policy.set("semver", Json::obj({{"range", scan.semver_range}}));
    }
    if (!scan.alphabetical_order.empty()) {
      policy.set("alphabetical", Json::obj({{"order", scan.alphabetical_order}}));
    }
    o.nonEmpty("policy", policy.take());
    return o.take();
  });
  out.optObjects("overrideTargets", value.override_targets, detail::encodeGitTargetJson);
  return out.take();
}

}  // namespace flotilla::model
