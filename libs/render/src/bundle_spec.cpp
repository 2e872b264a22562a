#include "flotilla/render/bundle_spec.h"

#include <cstdio>
#include <functional>

#include "flotilla/core/ascii.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/targeting.h"

namespace flotilla::render {
namespace {

//! Fleet's string override: a set custom value wins, "-" clears.
void overrideString(std::string& result, const std::string& custom) {
  if (custom == "-") {
    result.clear();
  } else if (!custom.empty()) {
    result = custom;
  }
}

//! Deep merge of maps (wrangler data.MergeMaps): nested maps merge, anything else from `custom` replaces.
void deepMerge(Json& base, const Json& custom) {
  if (!base.isObject() || !custom.isObject()) {
    base = custom;
    return;
  }
  for (const auto& [key, value] : custom.asObject()) {
    Json* existing = base.find(key);
    if (existing != nullptr && existing->isObject() && value.isObject()) {
      deepMerge(*existing, value);
    } else {
      base[key] = value;
    }
  }
}

//! merge.ByKey: entries of `custom` replace base entries with the same key (in place), new ones are appended;
//! entries without a key are always appended.
template <typename T>
void mergeByKey(std::vector<T>& base, const std::vector<T>& custom, const std::function<std::string(const T&)>& key) {
  for (const auto& item : custom) {
    const std::string k = key(item);
    bool replaced = false;
    if (!k.empty()) {
      for (auto& existing : base) {
        if (key(existing) == k) {
          existing = item;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) {
      base.push_back(item);
    }
  }
}

std::string valuesFromKey(const model::ValuesFrom& v) {
  if (v.config_map_key_ref) {
    return "configmap|" + v.config_map_key_ref->ns + "|" + v.config_map_key_ref->name + "|" + v.config_map_key_ref->key;
  }
  if (v.secret_key_ref) {
    return "secret|" + v.secret_key_ref->ns + "|" + v.secret_key_ref->name + "|" + v.secret_key_ref->key;
  }
  return {};
}

void mergeHelm(model::HelmOptions& result, const model::HelmOptions& custom) {
  if (custom.timeout_seconds > 0) {
    result.timeout_seconds = custom.timeout_seconds;
  } else if (custom.timeout_seconds < 0) {
    result.timeout_seconds = 0;
  }
  if (!result.values) {
    result.values = custom.values;
  } else if (custom.values) {
    deepMerge(*result.values, *custom.values);
  }
  if (!result.template_values) {
    result.template_values = custom.template_values;
  } else if (custom.template_values) {
    for (const auto& [k, v] : *custom.template_values) {
      (*result.template_values)[k] = v;
    }
  }
  if (!custom.values_from.empty()) {
    mergeByKey<model::ValuesFrom>(result.values_from, custom.values_from, valuesFromKey);
  }
  overrideString(result.repo, custom.repo);
  overrideString(result.chart, custom.chart);
  overrideString(result.version, custom.version);
  overrideString(result.release_name, custom.release_name);
  // Fleet does not merge valuesFiles at targeting time (they are read into values at bundling time); a target's
  // own valuesFiles replace the defaults' so the render for that target reads them.
  if (!custom.values_files.empty()) {
    result.values_files = custom.values_files;
  }
  result.force = result.force || custom.force;
  result.atomic = result.atomic || custom.atomic;
  result.take_ownership = result.take_ownership || custom.take_ownership;
  result.disable_pre_process = result.disable_pre_process || custom.disable_pre_process;
  result.wait_for_jobs = result.wait_for_jobs || custom.wait_for_jobs;
  result.disable_dns = result.disable_dns || custom.disable_dns;
}

}  // namespace

model::BundleDeploymentOptions mergeOptions(const model::BundleDeploymentOptions& base,
                                            const model::BundleDeploymentOptions& custom) {
  model::BundleDeploymentOptions result = base;
  overrideString(result.default_namespace, custom.default_namespace);
  overrideString(result.target_namespace, custom.target_namespace);
  overrideString(result.service_account, custom.service_account);
  if (custom.helm) {
    if (!result.helm) {
      result.helm = model::HelmOptions{};
    }
    mergeHelm(*result.helm, *custom.helm);
  }
  if (custom.kustomize) {
    if (!result.kustomize) {
      result.kustomize = model::KustomizeOptions{};
    }
    overrideString(result.kustomize->dir, custom.kustomize->dir);
  }
  if (custom.diff) {
    if (!result.diff) {
      result.diff = model::DiffOptions{};
    }
    mergeByKey<model::ComparePatch>(
        result.diff->compare_patches, custom.diff->compare_patches,
        [](const model::ComparePatch& p) { return p.api_version + "|" + p.kind + "|" + p.ns + "|" + p.name; });
  }
  if (custom.yaml) {
    if (!result.yaml) {
      result.yaml = model::YamlOptions{};
    }
    result.yaml->overlays.insert(result.yaml->overlays.end(), custom.yaml->overlays.begin(),
                                 custom.yaml->overlays.end());
  }
  if (custom.force_sync_generation > 0) {
    result.force_sync_generation = custom.force_sync_generation;
  }
  result.keep_resources = result.keep_resources || custom.keep_resources;
  if (custom.correct_drift) {
    result.correct_drift = custom.correct_drift;
  }
  if (!custom.downstream_resources.empty()) {
    mergeByKey<model::DownstreamResource>(
        result.downstream_resources, custom.downstream_resources,
        [](const model::DownstreamResource& r) { return toLowerAscii(r.kind) + "|" + r.name; });
  }
  if (custom.namespace_labels && !custom.namespace_labels->empty()) {
    if (!result.namespace_labels) {
      result.namespace_labels = model::Labels{};
    }
    for (const auto& [k, v] : *custom.namespace_labels) {
      (*result.namespace_labels)[k] = v;
    }
  }
  if (custom.namespace_annotations && !custom.namespace_annotations->empty()) {
    if (!result.namespace_annotations) {
      result.namespace_annotations = model::Labels{};
    }
    for (const auto& [k, v] : *custom.namespace_annotations) {
      (*result.namespace_annotations)[k] = v;
    }
  }
  return result;
}

model::BundleDeploymentOptions defaultOptions(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo,
                                              int64_t force_sync_generation) {
  model::BundleDeploymentOptions options = fleet_yaml.spec.options;
  const auto& spec = gitrepo.spec;
  if (!spec.service_account.empty()) {
    options.service_account = spec.service_account;
  }
  options.force_sync_generation = force_sync_generation;
  if (!spec.target_namespace.empty()) {
    options.target_namespace = spec.target_namespace;
  }
  if (spec.keep_resources) {
    options.keep_resources = true;
  }
  if (spec.delete_namespace) {
    options.delete_namespace = true;
  }
  if (spec.correct_drift && spec.correct_drift->enabled) {
    options.correct_drift = spec.correct_drift;
  }
  return options;
}

std::vector<Customization> customizations(const model::FleetYaml& fleet_yaml,
                                          const model::BundleDeploymentOptions& defaults,
                                          const model::GitRepo& gitrepo) {
  std::vector<model::BundleTarget> targets = fleet_yaml.spec.targets;
  targets.insert(targets.end(), fleet_yaml.target_customizations.begin(), fleet_yaml.target_customizations.end());
  std::vector<Customization> out;
  for (size_t i = 0; i < targets.size(); ++i) {
    Customization c;
    c.target = targets[i];
    if (c.target.name.empty()) {
      char name[32];
      std::snprintf(name, sizeof(name), "target%03zu", i);
      c.target.name = name;
    }
    c.name = c.target.name;
    c.options = mergeOptions(defaults, c.target.options);
    if (!gitrepo.spec.target_namespace.empty()) {
      c.options.target_namespace = gitrepo.spec.target_namespace;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Json targetMatcher(const model::BundleTarget& target) {
  model::BundleTarget matcher = target;
  matcher.options = {};
  matcher.name.clear();
  return model::encodeBundleTarget(matcher);
}

model::Labels bundleLabels(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo) {
  model::Labels labels = gitrepo.metadata.labels;
  labels[std::string(kRepoNameLabel)] = gitrepo.metadata.name;
  for (const auto& [k, v] : fleet_yaml.labels) {
    labels[k] = v;
  }
  return labels;
}

Json bundleTargets(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo) {
  Json targets = Json::array();
  const std::vector<model::GitTarget>& source =
      fleet_yaml.override_targets ? *fleet_yaml.override_targets : gitrepo.spec.targets;
  for (const auto& target : source) {
    targets.push(model::encodeGitTarget(target));
  }
  if (targets.size() == 0 && !fleet_yaml.override_targets) {
    targets.push(model::encodeGitTarget(model::defaultGitTarget()));
  }
  return targets;
}

std::string renderKey(const model::BundleDeploymentOptions& options) {
  model::BundleDeploymentOptions relevant;
  relevant.helm = options.helm;
  relevant.kustomize = options.kustomize;
  relevant.yaml = options.yaml;
  // An empty overlay list renders like no yaml options at all.
  if (relevant.yaml && relevant.yaml->overlays.empty()) {
    relevant.yaml.reset();
  }
  if (relevant.kustomize && relevant.kustomize->dir.empty()) {
    relevant.kustomize.reset();
  }
  // defaultNamespace becomes the namespace Helm renders into, so it changes Helm output.
  if (relevant.helm) {
    relevant.default_namespace = options.default_namespace;
    relevant.target_namespace = options.target_namespace;
  }
  return model::encodeOptions(relevant).dump();
}

}  // namespace flotilla::render
