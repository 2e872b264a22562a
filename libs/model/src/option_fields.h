// flotilla/model/src/option_fields.h
//
// The field lists of Fleet's shared structures (selectors, BundleDeploymentOptions, targets, dependsOn, rollout,
// BundleSpec): each struct's fields named once, for codec::Reader and codec::Writer alike. Overloads of
// fields(v, s) in this namespace are what detail::kFields passes to nested objects and lists.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "decoder.h"
#include "flotilla/model/identity.h"

namespace flotilla::model {

using detail::kFields;
using detail::Reader;
using detail::Writer;

//! A matchExpressions operator (In, NotIn, Exists, DoesNotExist).
struct OperatorCodec {
  bool read(Reader& in, std::string_view key, const Json& value, SelectorOperator& out) const {
    if (value.isString() && value.asString().empty()) {
      return false;  // an empty operator keeps the default, as it always has
    }
    return detail::readParsed(in, key, value, "a string", parseOperator, out);
  }
  Json write(SelectorOperator value) const { return std::string(operatorName(value)); }
};

template <typename V, Of<LabelSelector> S>
void fields(V& v, S& s) {
  v.stringMap("matchLabels", s.match_labels);
  v.objects("matchExpressions", s.match_expressions, [](auto& f, auto& req) {
    f.require("key");
    f.str("key", req.key);
    f.value("operator", req.op, OperatorCodec{}, true);
    f.strings("values", req.values);
  });
}

//! Helm's release name rule, ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$, scanned by hand
//! (std::regex backtracks recursively over user input): dot-separated segments of [a-z0-9-], each non-empty and
//! starting and ending with [a-z0-9].
inline bool isHelmReleaseName(std::string_view name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (name.empty()) {
    return false;
  }
  char previous = '.';
  for (char c : name) {
    if (c == '.' ? !alnum(previous) : !(alnum(c) || (c == '-' && previous != '.'))) {
      return false;
    }
    previous = c;
  }
  return alnum(previous);
}

inline constexpr auto kKeySelector = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.str("namespace", s.ns);
  v.str("key", s.key);
};

inline constexpr auto kValuesFrom = [](auto& v, auto& s) {
  v.object("configMapKeyRef", s.config_map_key_ref, kKeySelector);
  v.object("secretKeyRef", s.secret_key_ref, kKeySelector);
};

inline constexpr auto kHelm = [](auto& v, auto& s) {
  v.str("chart", s.chart);
  v.str("repo", s.repo);
  v.str("releaseName", s.release_name);
  v.validate([&](Reader& in) {
    if (!s.release_name.empty() &&
        (s.release_name.size() > kMaxHelmReleaseNameLength || !isHelmReleaseName(s.release_name))) {
      in.fail(in.pathOf("releaseName"),
              "invalid release name \"" + s.release_name +
                  "\": at most 53 lower-case letters, digits, '-' and '.', starting and ending alphanumeric");
    }
  });
  v.str("version", s.version);
  v.count("timeoutSeconds", s.timeout_seconds);
  v.map("values", s.values);
  v.strings("valuesFiles", s.values_files);
  v.objects("valuesFrom", s.values_from, kValuesFrom);
  v.optStringMap("templateValues", s.template_values);
  v.boolean("force", s.force);
  v.boolean("takeOwnership", s.take_ownership);
  v.count("maxHistory", s.max_history);
  v.boolean("waitForJobs", s.wait_for_jobs);
  v.boolean("atomic", s.atomic);
  v.boolean("disablePreProcess", s.disable_pre_process);
  v.boolean("disableDNS", s.disable_dns);
  v.boolean("skipSchemaValidation", s.skip_schema_validation);
  v.boolean("disableDependencyUpdate", s.disable_dependency_update);
};

inline constexpr auto kCompareOperation = [](auto& v, auto& s) {
  v.str("op", s.op);
  v.str("path", s.path);
  v.str("value", s.value);
};

// kind, apiVersion, namespace and name of one Kubernetes object.
inline constexpr auto kObjectRef = [](auto& v, auto& s) {
  v.str("kind", s.kind);
  v.str("apiVersion", s.api_version);
  v.str("namespace", s.ns);
  v.str("name", s.name);
};

inline constexpr auto kComparePatch = [](auto& v, auto& s) {
  kObjectRef(v, s);
  v.objects("operations", s.operations, kCompareOperation);
  v.strings("jsonPointers", s.json_pointers);
};

// ignore.conditions is a list of string maps: [{type: Ready, status: "False"}].
struct ConditionsCodec {
  bool read(Reader& in, std::string_view key, const Json& value, std::vector<Labels>& out) const {
    if (!value.isArray()) {
      in.fail(in.pathOf(key), "expected a list of maps, got " + codec::typeName(value));
      return false;
    }
    for (size_t i = 0; i < value.asArray().size(); ++i) {
      readCondition(in, yamlIndexPath(in.pathOf(key), i), value.asArray()[i], out);
    }
    return true;
  }
  static void readCondition(Reader& in, const std::string& path, const Json& element, std::vector<Labels>& out) {
    if (!element.isObject()) {
      in.fail(path, "expected a map of strings, got " + codec::typeName(element));
      return;
    }
    Labels condition;
    for (const auto& [k, v] : element.asObject()) {
      if (!v.isString()) {
        in.fail(yamlKeyPath(path, k), "expected a string, got " + codec::typeName(v) + " (quote it: \"...\")");
        continue;
      }
      condition.emplace(k, v.asString());
    }
    out.push_back(std::move(condition));
  }
  Json write(const std::vector<Labels>& conditions) const {
    Json list = Json::array();
    for (const auto& condition : conditions) {
      list.push(Writer::stringMapJson(condition));
    }
    return list;
  }
};

inline constexpr auto kDownstreamResource = [](auto& v, auto& s) {
  v.require("kind");
  v.str("kind", s.kind);
  v.require("name");
  v.str("name", s.name);
};

template <typename V, Of<BundleDeploymentOptions> S>
void fields(V& v, S& s) {
  v.str("defaultNamespace", s.default_namespace);
  v.str("namespace", s.target_namespace);
  v.validate([&](Reader& in) {
    for (const auto& [key, ns] :
         {std::pair{"defaultNamespace", &s.default_namespace}, {"namespace", &s.target_namespace}}) {
      if (!ns->empty() && !isDns1123Label(*ns)) {
        in.fail(in.pathOf(key), "invalid namespace \"" + *ns + "\": at most 63 lower-case letters, digits and '-'");
      }
    }
  });
  v.object("kustomize", s.kustomize, [](auto& k, auto& o) { k.str("dir", o.dir); });
  v.object("helm", s.helm, kHelm);
  v.str("serviceAccount", s.service_account);
  v.count("forceSyncGeneration", s.force_sync_generation);
  v.object("yaml", s.yaml, [](auto& y, auto& o) { y.strings("overlays", o.overlays); });
  v.object("diff", s.diff, [](auto& d, auto& o) { d.objects("comparePatches", o.compare_patches, kComparePatch); });
  v.boolean("keepResources", s.keep_resources);
  v.boolean("deleteCRDResources", s.delete_crd_resources);
  v.boolean("deleteNamespace", s.delete_namespace);
  v.boolean("createNamespace", s.create_namespace);
  v.object("ignore", s.ignore, [](auto& i, auto& o) { i.value("conditions", o.conditions, ConditionsCodec{}); });
  v.object("correctDrift", s.correct_drift, kFields);
  v.optStringMap("namespaceLabels", s.namespace_labels);
  v.optStringMap("namespaceAnnotations", s.namespace_annotations);
  v.objects("downstreamResources", s.downstream_resources, kDownstreamResource);
}

// The matcher fields GitTarget, BundleTarget and rollout partitions share.
template <typename V, typename S>
void matcherFields(V& v, S& s) {
  v.str("clusterName", s.cluster_name);
  v.value("clusterSelector", s.cluster_selector, detail::kSelector);
  v.str("clusterGroup", s.cluster_group);
  v.value("clusterGroupSelector", s.cluster_group_selector, detail::kSelector);
}

template <typename V, typename S>
void targetFields(V& v, S& s) {
  v.str("name", s.name);
  matcherFields(v, s);
}

template <typename V, Of<GitTarget> S>
void fields(V& v, S& s) {
  targetFields(v, s);
}

template <typename V, Of<BundleTarget> S>
void fields(V& v, S& s) {
  targetFields(v, s);
  v.boolean("doNotDeploy", s.do_not_deploy);
  fields(v, s.options);  // inline: a target customization carries the options at its top level
}

template <typename V, Of<BundleRef> S>
void fields(V& v, S& s) {
  v.str("name", s.name);
  v.value("selector", s.selector, detail::kSelector);
  v.strings("acceptedStates", s.accepted_states);
  v.validate([&](Reader& in) {
    for (size_t i = 0; i < s.accepted_states.size(); ++i) {
      if (auto state = parseState(s.accepted_states[i]); !state.ok()) {
        in.fail(yamlIndexPath(in.pathOf("acceptedStates"), i), state.error().message);
      }
    }
    if (s.name.empty() && !s.selector) {
      in.fail(in.path(), "a dependsOn entry needs a name or a selector");
    }
  });
}

inline constexpr auto kPartition = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.value("maxUnavailable", s.max_unavailable, detail::kIntOrPercent);
  matcherFields(v, s);
};

template <typename V, Of<RolloutStrategy> S>
void fields(V& v, S& s) {
  v.value("maxUnavailable", s.max_unavailable, detail::kIntOrPercent);
  v.value("maxUnavailablePartitions", s.max_unavailable_partitions, detail::kIntOrPercent);
  v.value("autoPartitionSize", s.auto_partition_size, detail::kIntOrPercent);
  v.optCount("autoPartitionThreshold", s.auto_partition_threshold);
  v.optCount("maxNew", s.max_new);
  v.objects("partitions", s.partitions, kPartition);
}

template <typename V, Of<CorrectDrift> S>
void fields(V& v, S& s) {
  v.boolean("enabled", s.enabled);
  v.boolean("force", s.force);
  v.boolean("keepFailHistory", s.keep_fail_history);
}

inline constexpr auto kBundleResource = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.str("content", s.content);
  v.str("encoding", s.encoding);
  v.validate([&](Reader& in) {
    if (!s.encoding.empty() && s.encoding != "base64+gz") {
      in.fail(in.pathOf("encoding"), "expected \"\" or \"base64+gz\", got \"" + s.encoding + "\"");
    }
  });
};

//! BundleSpec's fields. `internal` (a stored Bundle) also has resources, targetRestrictions, contentsId and
//! valuesHash, which fleet.yaml must not set.
template <typename V, Of<BundleSpec> S>
void bundleSpecFields(V& v, S& s, bool internal) {
  fields(v, s.options);
  v.boolean("paused", s.paused);
  v.object("rolloutStrategy", s.rollout_strategy, kFields);
  v.objects("targets", s.targets, kFields);
  v.objects("dependsOn", s.depends_on, kFields);
  v.str("targetCustomizationMode", s.target_customization_mode);
  v.validate([&](Reader& in) {
    const std::string& mode = s.target_customization_mode;
    if (!mode.empty() && mode != "FirstMatch" && mode != "AllMatches") {
      in.fail(in.pathOf("targetCustomizationMode"), "expected FirstMatch or AllMatches, got \"" + mode + "\"");
    }
  });
  if (!internal) {
    return;  // fleet.yaml: resources, targetRestrictions, contentsId and valuesHash stay unknown fields
  }
  v.objects("resources", s.resources, kBundleResource);
  v.objects("targetRestrictions", s.target_restrictions, kFields);
  v.str("contentsId", s.contents_id);
  v.str("valuesHash", s.values_hash);
}

}  // namespace flotilla::model
