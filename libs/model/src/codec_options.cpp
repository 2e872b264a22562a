// Decoding and encoding of Fleet's shared option structures (BundleDeploymentOptions, targets, rollout, ...).
#include <regex>

#include "decoder.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "flotilla/model/state.h"

namespace flotilla::model {

std::string IntOrPercent::toString() const {
  return std::to_string(value) + (percent ? "%" : "");
}

int64_t IntOrPercent::scaled(int64_t total, bool round_up) const {
  if (!percent) {
    return value;
  }
  int64_t product = total * value;
  return round_up ? (product + 99) / 100 : product / 100;
}

namespace detail {
namespace {

bool isHelmReleaseName(const std::string& name) {
  static const std::regex kPattern(R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
  return std::regex_match(name, kPattern);
}

void decodeKeySelector(Fields& in, KeySelector& out) {
  in.str("name", out.name);
  in.str("namespace", out.ns);
  in.str("key", out.key);
}

Json encodeKeySelector(const KeySelector& value) {
  Out out;
  out.str("name", value.name);
  out.str("namespace", value.ns);
  out.str("key", value.key);
  return out.take();
}

void decodeHelm(Fields& in, HelmOptions& out) {
  in.str("chart", out.chart);
  in.str("repo", out.repo);
  in.str("releaseName", out.release_name);
  if (!out.release_name.empty() &&
      (out.release_name.size() > kMaxHelmReleaseNameLength || !isHelmReleaseName(out.release_name))) {
    in.ctx().fail(in.pathOf("releaseName"),
                  "invalid release name \"" + out.release_name +
                      "\": at most 53 lower-case letters, digits, '-' and '.', starting and ending alphanumeric");
  }
  in.str("version", out.version);
  in.integer("timeoutSeconds", out.timeout_seconds, 0);
  in.map("values", out.values);
  in.strings("valuesFiles", out.values_files);
  in.objects("valuesFrom", out.values_from, [](Fields& f, ValuesFrom& v) {
    f.object("configMapKeyRef", v.config_map_key_ref, decodeKeySelector);
    f.object("secretKeyRef", v.secret_key_ref, decodeKeySelector);
  });
  in.optStringMap("templateValues", out.template_values);
  in.boolean("force", out.force);
  in.boolean("takeOwnership", out.take_ownership);
  in.integer("maxHistory", out.max_history, 0);
  in.boolean("waitForJobs", out.wait_for_jobs);
  in.boolean("atomic", out.atomic);
  in.boolean("disablePreProcess", out.disable_pre_process);
  in.boolean("disableDNS", out.disable_dns);
  in.boolean("skipSchemaValidation", out.skip_schema_validation);
  in.boolean("disableDependencyUpdate", out.disable_dependency_update);
}

Json encodeHelm(const HelmOptions& value) {
  Out out;
  out.str("chart", value.chart);
  out.str("repo", value.repo);
  out.str("releaseName", value.release_name);
  out.str("version", value.version);
  out.integer("timeoutSeconds", value.timeout_seconds);
  out.json("values", value.values);
  out.strings("valuesFiles", value.values_files);
  out.objects("valuesFrom", value.values_from, [](const ValuesFrom& v) {
    Out item;
    item.object("configMapKeyRef", v.config_map_key_ref, encodeKeySelector);
    item.object("secretKeyRef", v.secret_key_ref, encodeKeySelector);
    return item.take();
  });
  out.optStringMap("templateValues", value.template_values);
  out.boolean("force", value.force);
  out.boolean("takeOwnership", value.take_ownership);
  out.integer("maxHistory", value.max_history);
  out.boolean("waitForJobs", value.wait_for_jobs);
  out.boolean("atomic", value.atomic);
  out.boolean("disablePreProcess", value.disable_pre_process);
  out.boolean("disableDNS", value.disable_dns);
  out.boolean("skipSchemaValidation", value.skip_schema_validation);
  out.boolean("disableDependencyUpdate", value.disable_dependency_update);
  return out.take();
}

void decodeComparePatch(Fields& in, ComparePatch& out) {
  in.str("kind", out.kind);
  in.str("apiVersion", out.api_version);
  in.str("namespace", out.ns);
  in.str("name", out.name);
  in.objects("operations", out.operations, [](Fields& f, CompareOperation& op) {
    f.str("op", op.op);
    f.str("path", op.path);
    f.str("value", op.value);
  });
  in.strings("jsonPointers", out.json_pointers);
}

Json encodeComparePatch(const ComparePatch& value) {
  Out out;
  out.str("kind", value.kind);
  out.str("apiVersion", value.api_version);
  out.str("namespace", value.ns);
  out.str("name", value.name);
  out.objects("operations", value.operations, [](const CompareOperation& op) {
    Out item;
    item.str("op", op.op);
    item.str("path", op.path);
    item.str("value", op.value);
    return item.take();
  });
  out.strings("jsonPointers", value.json_pointers);
  return out.take();
}

void decodeIgnoreConditions(Fields& in, IgnoreOptions& out) {
  const Json* value = in.take("conditions");
  if (value == nullptr) {
    return;
  }
  if (!value->isArray()) {
    in.ctx().fail(in.pathOf("conditions"), "expected a list of maps, got " + typeName(*value));
    return;
  }
  for (size_t i = 0; i < value->asArray().size(); ++i) {
    Labels condition;
    const Json& element = value->asArray()[i];
    std::string path = yamlIndexPath(in.pathOf("conditions"), i);
    if (!element.isObject()) {
      in.ctx().fail(path, "expected a map of strings, got " + typeName(element));
      continue;
    }
    for (const auto& [k, v] : element.asObject()) {
      if (!v.isString()) {
        in.ctx().fail(yamlKeyPath(path, k), "expected a string, got " + typeName(v) + " (quote it: \"...\")");
        continue;
      }
      condition.emplace(k, v.asString());
    }
    out.conditions.push_back(std::move(condition));
  }
}

}  // namespace

void decodeCorrectDriftInto(Fields& in, CorrectDrift& out) {
  in.boolean("enabled", out.enabled);
  in.boolean("force", out.force);
  in.boolean("keepFailHistory", out.keep_fail_history);
}

Json encodeCorrectDriftJson(const CorrectDrift& value) {
  Out out;
  out.boolean("enabled", value.enabled);
  out.boolean("force", value.force);
  out.boolean("keepFailHistory", value.keep_fail_history);
  return out.take();
}

void decodeOptionsInto(Fields& in, BundleDeploymentOptions& out) {
  in.str("defaultNamespace", out.default_namespace);
  in.str("namespace", out.target_namespace);
  for (auto* ns : {&out.default_namespace, &out.target_namespace}) {
    if (!ns->empty() && !isDns1123Label(*ns)) {
      in.ctx().fail(in.pathOf(ns == &out.default_namespace ? "defaultNamespace" : "namespace"),
                    "invalid namespace \"" + *ns + "\": at most 63 lower-case letters, digits and '-'");
    }
  }
  in.object("kustomize", out.kustomize, [](Fields& f, KustomizeOptions& k) { f.str("dir", k.dir); });
  in.object("helm", out.helm, decodeHelm);
  in.str("serviceAccount", out.service_account);
  in.integer("forceSyncGeneration", out.force_sync_generation, 0);
  in.object("yaml", out.yaml, [](Fields& f, YamlOptions& y) { f.strings("overlays", y.overlays); });
  in.object("diff", out.diff,
            [](Fields& f, DiffOptions& d) { f.objects("comparePatches", d.compare_patches, decodeComparePatch); });
  in.boolean("keepResources", out.keep_resources);
  in.boolean("deleteCRDResources", out.delete_crd_resources);
  in.boolean("deleteNamespace", out.delete_namespace);
  in.boolean("createNamespace", out.create_namespace);
  in.object("ignore", out.ignore, decodeIgnoreConditions);
  in.object("correctDrift", out.correct_drift, decodeCorrectDriftInto);
  in.optStringMap("namespaceLabels", out.namespace_labels);
  in.optStringMap("namespaceAnnotations", out.namespace_annotations);
  in.objects("downstreamResources", out.downstream_resources, [](Fields& f, DownstreamResource& r) {
    f.require("kind");
    f.str("kind", r.kind);
    f.require("name");
    f.str("name", r.name);
  });
}

Json encodeOptionsJson(const BundleDeploymentOptions& value) {
  Out out;
  out.str("defaultNamespace", value.default_namespace);
  out.str("namespace", value.target_namespace);
  out.object("kustomize", value.kustomize, [](const KustomizeOptions& k) {
    Out o;
    o.str("dir", k.dir);
    return o.take();
  });
  out.object("helm", value.helm, encodeHelm);
  out.str("serviceAccount", value.service_account);
  out.integer("forceSyncGeneration", value.force_sync_generation);
  out.object("yaml", value.yaml, [](const YamlOptions& y) {
    Out o;
    o.strings("overlays", y.overlays);
    return o.take();
  });
  out.object("diff", value.diff, [](const DiffOptions& d) {
    Out o;
    o.objects("comparePatches", d.compare_patches, encodeComparePatch);
    return o.take();
  });
  out.boolean("keepResources", value.keep_resources);
  out.boolean("deleteCRDResources", value.delete_crd_resources);
  out.boolean("deleteNamespace", value.delete_namespace);
  out.boolean("createNamespace", value.create_namespace);
  out.object("ignore", value.ignore, [](const IgnoreOptions& ignore) {
    Out o;
    o.objects("conditions", ignore.conditions, [](const Labels& c) { return Out::stringMapJson(c); });
    return o.take();
  });
  out.object("correctDrift", value.correct_drift, encodeCorrectDriftJson);
  out.optStringMap("namespaceLabels", value.namespace_labels);
  out.optStringMap("namespaceAnnotations", value.namespace_annotations);
  out.objects("downstreamResources", value.downstream_resources, [](const DownstreamResource& r) {
    return Json::obj({{"kind", r.kind}, {"name", r.name}});
  });
  return out.take();
}

void decodeGitTargetInto(Fields& in, GitTarget& out) {
  in.str("name", out.name);
  in.str("clusterName", out.cluster_name);
  in.selector("clusterSelector", out.cluster_selector);
  in.str("clusterGroup", out.cluster_group);
  in.selector("clusterGroupSelector", out.cluster_group_selector);
}

Json encodeGitTargetJson(const GitTarget& value) {
  Out out;
  out.str("name", value.name);
  out.str("clusterName", value.cluster_name);
  out.selector("clusterSelector", value.cluster_selector);
  out.str("clusterGroup", value.cluster_group);
  out.selector("clusterGroupSelector", value.cluster_group_selector);
  return out.take();
}

void decodeBundleTargetInto(Fields& in, BundleTarget& out) {
  in.str("name", out.name);
  in.str("clusterName", out.cluster_name);
  in.selector("clusterSelector", out.cluster_selector);
  in.str("clusterGroup", out.cluster_group);
  in.selector("clusterGroupSelector", out.cluster_group_selector);
  in.boolean("doNotDeploy", out.do_not_deploy);
  decodeOptionsInto(in, out.options);
}

Json encodeBundleTargetJson(const BundleTarget& value) {
  Out out;
  out.inlineAll(encodeOptionsJson(value.options));
  out.str("name", value.name);
  out.str("clusterName", value.cluster_name);
  out.selector("clusterSelector", value.cluster_selector);
  out.str("clusterGroup", value.cluster_group);
  out.selector("clusterGroupSelector", value.cluster_group_selector);
  out.boolean("doNotDeploy", value.do_not_deploy);
  return out.take();
}

void decodeBundleRefInto(Fields& in, BundleRef& out) {
  in.str("name", out.name);
  in.selector("selector", out.selector);
  in.strings("acceptedStates", out.accepted_states);
  for (size_t i = 0; i < out.accepted_states.size(); ++i) {
    if (auto state = parseState(out.accepted_states[i]); !state.ok()) {
      in.ctx().fail(yamlIndexPath(in.pathOf("acceptedStates"), i), state.error().message);
    }
  }
  if (out.name.empty() && !out.selector) {
    in.ctx().fail(in.path(), "a dependsOn entry needs a name or a selector");
  }
}

Json encodeBundleRefJson(const BundleRef& value) {
  Out out;
  out.str("name", value.name);
  out.selector("selector", value.selector);
  out.strings("acceptedStates", value.accepted_states);
  return out.take();
}

void decodeRolloutInto(Fields& in, RolloutStrategy& out) {
  in.intOrPercent("maxUnavailable", out.max_unavailable);
  in.intOrPercent("maxUnavailablePartitions", out.max_unavailable_partitions);
  in.intOrPercent("autoPartitionSize", out.auto_partition_size);
  in.optInteger("autoPartitionThreshold", out.auto_partition_threshold, 0);
  in.optInteger("maxNew", out.max_new, 0);
  in.objects("partitions", out.partitions, [](Fields& f, Partition& p) {
    f.str("name", p.name);
    f.intOrPercent("maxUnavailable", p.max_unavailable);
    f.str("clusterName", p.cluster_name);
    f.selector("clusterSelector", p.cluster_selector);
    f.str("clusterGroup", p.cluster_group);
    f.selector("clusterGroupSelector", p.cluster_group_selector);
  });
}

Json encodeRolloutJson(const RolloutStrategy& value) {
  Out out;
  out.intOrPercent("maxUnavailable", value.max_unavailable);
  out.intOrPercent("maxUnavailablePartitions", value.max_unavailable_partitions);
  out.intOrPercent("autoPartitionSize", value.auto_partition_size);
  out.optInteger("autoPartitionThreshold", value.auto_partition_threshold);
  out.optInteger("maxNew", value.max_new);
  out.objects("partitions", value.partitions, [](const Partition& p) {
    Out o;
    o.str("name", p.name);
    o.intOrPercent("maxUnavailable", p.max_unavailable);
    o.str("clusterName", p.cluster_name);
    o.selector("clusterSelector", p.cluster_selector);
    o.str("clusterGroup", p.cluster_group);
    o.selector("clusterGroupSelector", p.cluster_group_selector);
    return o.take();
  });
  return out.take();
}

void decodeBundleSpecInto(Fields& in, BundleSpec& out, bool internal) {
  decodeOptionsInto(in, out.options);
  in.boolean("paused", out.paused);
  in.object("rolloutStrategy", out.rollout_strategy, decodeRolloutInto);
  in.objects("targets", out.targets, decodeBundleTargetInto);
  in.objects("dependsOn", out.depends_on, decodeBundleRefInto);
  in.str("targetCustomizationMode", out.target_customization_mode);
  if (!out.target_customization_mode.empty() && out.target_customization_mode != "FirstMatch" &&
      out.target_customization_mode != "AllMatches") {
    in.ctx().fail(in.pathOf("targetCustomizationMode"),
                  "expected FirstMatch or AllMatches, got \"" + out.target_customization_mode + "\"");
  }
  if (!internal) {
    return;  // fleet.yaml: resources, targetRestrictions, contentsId and valuesHash stay unknown fields
  }
  in.objects("resources", out.resources, [](Fields& f, BundleResource& r) {
    f.str("name", r.name);
    f.str("content", r.content);
    f.str("encoding", r.encoding);
    if (!r.encoding.empty() && r.encoding != "base64+gz") {
      f.ctx().fail(f.pathOf("encoding"), "expected \"\" or \"base64+gz\", got \"" + r.encoding + "\"");
    }
  });
  in.objects("targetRestrictions", out.target_restrictions, decodeGitTargetInto);
  in.str("contentsId", out.contents_id);
  in.str("valuesHash", out.values_hash);
}

void encodeBundleSpecInto(Out& out, const BundleSpec& value, bool internal) {
  out.inlineAll(encodeOptionsJson(value.options));
  out.boolean("paused", value.paused);
  out.object("rolloutStrategy", value.rollout_strategy, encodeRolloutJson);
  out.objects("targets", value.targets, encodeBundleTargetJson);
  out.objects("dependsOn", value.depends_on, encodeBundleRefJson);
  out.str("targetCustomizationMode", value.target_customization_mode);
  if (!internal) {
    return;
  }
  out.objects("resources", value.resources, [](const BundleResource& r) {
    Out o;
    o.str("name", r.name);
    o.str("content", r.content);
    o.str("encoding", r.encoding);
    return o.take();
  });
  out.objects("targetRestrictions", value.target_restrictions, encodeGitTargetJson);
  out.str("contentsId", value.contents_id);
  out.str("valuesHash", value.values_hash);
}

}  // namespace detail

Result<BundleDeploymentOptions> decodeOptions(const Json& value, std::string_view path) {
  return detail::decodeRoot<BundleDeploymentOptions>(value, path, detail::decodeOptionsInto);
}
Json encodeOptions(const BundleDeploymentOptions& value) {
  return detail::encodeOptionsJson(value);
}

Result<BundleTarget> decodeBundleTarget(const Json& value, std::string_view path) {
  return detail::decodeRoot<BundleTarget>(value, path, detail::decodeBundleTargetInto);
}
Json encodeBundleTarget(const BundleTarget& value) {
  return detail::encodeBundleTargetJson(value);
}

Result<GitTarget> decodeGitTarget(const Json& value, std::string_view path) {
  return detail::decodeRoot<GitTarget>(value, path, detail::decodeGitTargetInto);
}
Json encodeGitTarget(const GitTarget& value) {
  return detail::encodeGitTargetJson(value);
}

Result<BundleRef> decodeBundleRef(const Json& value, std::string_view path) {
  return detail::decodeRoot<BundleRef>(value, path, detail::decodeBundleRefInto);
}
Json encodeBundleRef(const BundleRef& value) {
  return detail::encodeBundleRefJson(value);
}

Result<RolloutStrategy> decodeRolloutStrategy(const Json& value, std::string_view path) {
  return detail::decodeRoot<RolloutStrategy>(value, path, detail::decodeRolloutInto);
}
Json encodeRolloutStrategy(const RolloutStrategy& value) {
  return detail::encodeRolloutJson(value);
}

Result<LabelSelector> decodeSelector(const Json& value, std::string_view path) {
  auto decoded = detail::decodeRoot<LabelSelector>(value, path, detail::decodeSelectorInto);
  if (!decoded.ok()) {
    return decoded;
  }
  if (auto s = validateSelector(*decoded, path); !s.ok()) {
    return fail(s.error());
  }
  return decoded;
}

}  // namespace flotilla::model
