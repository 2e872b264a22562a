// Decoding and encoding of the resource kinds and of fleet.yaml.
#include "flotilla/core/util.h"
#include "flotilla/model/codec.h"
#include "option_fields.h"
#include "status_fields.h"

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

// ---- metadata ----

template <typename V, typename S>
void metaFields(V& v, S& s) {
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

constexpr auto kMeta = [](auto& v, auto& s) { metaFields(v, s); };

// ---- specs ----

template <typename V, typename S>
void gitRepoSpecFields(V& v, S& s) {
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

template <typename V, typename S>
void clusterSpecFields(V& v, S& s) {
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

template <typename V, typename S>
void bundleDeploymentSpecFields(V& v, S& s) {
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

// The spec field list of each kind, and whether the spec is required (only GitRepo has a required spec field).
constexpr auto kGitRepoSpec = [](auto& v, auto& s) { gitRepoSpecFields(v, s); };
constexpr auto kClusterSpec = [](auto& v, auto& s) { clusterSpecFields(v, s); };
constexpr auto kClusterGroupSpec = [](auto& v, auto& s) { v.value("selector", s.selector, detail::kSelector); };
constexpr auto kBundleSpec = [](auto& v, auto& s) { bundleSpecFields(v, s, true); };
constexpr auto kBundleDeploymentSpec = [](auto& v, auto& s) { bundleDeploymentSpecFields(v, s); };

// ---- dispatch ----

template <typename T, typename SpecFn>
Resource readKind(Reader& root, bool native, bool spec_required, SpecFn&& spec) {
  T out{};
  root.require("metadata");
  root.plain("metadata", out.metadata, kMeta);
  if (spec_required) {
    root.require("spec");
  }
  root.plain("spec", out.spec, spec);
  if (native) {
    root.plain("status", out.status, kFields);
  } else {
    root.skip("status");  // Fleet's status describes a Fleet installation, not this one
  }
  return out;
}

std::optional<Resource> readByKind(Reader& root, std::string_view kind, bool native) {
  if (kind == "GitRepo") {
    return readKind<GitRepo>(root, native, true, kGitRepoSpec);
  }
  if (kind == "Cluster") {
    return readKind<Cluster>(root, native, false, kClusterSpec);
  }
  if (kind == "ClusterGroup") {
    return readKind<ClusterGroup>(root, native, false, kClusterGroupSpec);
  }
  if (kind == "Bundle") {
    return readKind<Bundle>(root, native, false, kBundleSpec);
  }
  if (kind == "BundleDeployment") {
    return readKind<BundleDeployment>(root, native, false, kBundleDeploymentSpec);
  }
  root.fail("kind", "unsupported kind \"" + std::string(kind) +
                        "\" (Flotilla reads GitRepo, Cluster, ClusterGroup, Bundle and BundleDeployment)");
  return std::nullopt;
}

Result<Resource> decodeDocument(const Json& document, std::string_view source, const YamlDocument* yaml) {
  codec::Problems problems(source, yaml);
  Reader root(problems, document, {});
  if (!root.ok()) {
    return fail(problems.error());
  }
  std::string api_version;
  std::string kind;
  root.require("apiVersion");
  root.str("apiVersion", api_version);
  root.require("kind");
  root.str("kind", kind);
  if (problems.failed()) {
    return fail(problems.error());
  }
  if (api_version != kFleetApiVersion && api_version != kFlotillaApiVersion) {
    root.fail("apiVersion", "unsupported apiVersion \"" + api_version + "\" (expected " +
                                std::string(kFleetApiVersion) + " or " + std::string(kFlotillaApiVersion) + ")");
    return fail(problems.error());
  }
  std::optional<Resource> out = readByKind(root, kind, api_version == kFlotillaApiVersion);
  if (!out) {
    return fail(problems.error());
  }
  root.finish();
  if (problems.failed()) {
    return fail(problems.error());
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
    codec::Problems problems(source);
    problems.fail("kind", "expected kind " + std::string(expected_kind) + ", got " + std::string(kindOf(*decoded)));
    return fail(problems.error());
  }
  return std::get<T>(std::move(decoded).value());
}

template <typename T, typename SpecFn>
Json encodeKind(const T& value, std::string_view api_version, std::string_view kind, SpecFn&& spec) {
  Json out = Json::obj({{"apiVersion", std::string(api_version)},
                        {"kind", std::string(kind)},
                        {"metadata", codec::encode(value.metadata, kMeta)},
                        {"spec", codec::encode(value.spec, spec)}});
  Json status = codec::encode(value.status, kFields);
  if (status.size() != 0) {
    out["status"] = std::move(status);
  }
  return out;
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

constexpr auto kImageScan = [](auto& v, auto& s) {
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

template <typename V, typename S>
void fleetYamlFields(V& v, S& s) {
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

constexpr auto kFleetYaml = [](auto& v, auto& s) { fleetYamlFields(v, s); };

Result<FleetYaml> decodeFleetYamlDocument(const Json& value, std::string_view source, const YamlDocument* yaml) {
  codec::Problems problems(source, yaml);
  Reader root(problems, value, {});
  FleetYaml out;
  if (root.ok()) {
    kFleetYaml(root, out);
    root.finish();
  }
  if (problems.failed()) {
    return fail(problems.error());
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
  return encodeKind(value, api_version, "GitRepo", kGitRepoSpec);
}
Json encode(const Cluster& value, std::string_view api_version) {
  return encodeKind(value, api_version, "Cluster", kClusterSpec);
}
Json encode(const ClusterGroup& value, std::string_view api_version) {
  return encodeKind(value, api_version, "ClusterGroup", kClusterGroupSpec);
}
Json encode(const Bundle& value, std::string_view api_version) {
  return encodeKind(value, api_version, "Bundle", kBundleSpec);
}
Json encode(const BundleDeployment& value, std::string_view api_version) {
  return encodeKind(value, api_version, "BundleDeployment", kBundleDeploymentSpec);
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
  return codec::encode(value, kFleetYaml);
}

}  // namespace flotilla::model
