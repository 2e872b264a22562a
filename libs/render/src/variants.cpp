#include "flotilla/render/variants.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "flotilla/core/lookup.h"
#include "flotilla/core/util.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/targeting.h"
#include "flotilla/template/template.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace {

Json labelsJson(const model::Labels& labels) {
  Json out = Json::object();
  for (const auto& [k, v] : labels) {
    out[k] = v;
  }
  return out;
}

std::string keyPath(const std::string& parent, const std::string& key) {
  bool plain = !key.empty();
  for (char c : key) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '-') {
      plain = false;
    }
  }
  return plain ? parent + "." + key : parent + "[" + jsonQuote(key) + "]";
}

//! Fleet's processLabelValues: strings "global.fleet.clusterLabels.<L>" in maps (also maps inside lists) become
//! the label's value, "" when the cluster has no such label.
void replaceLabelReferences(Json& value, const model::Labels& labels, int depth) {
  if (depth > 64) {
    return;  // YAML limits keep real values far shallower
  }
  if (value.isObject()) {
    for (auto& [key, item] : value.asObject()) {
      if (item.isString() && startsWith(item.asString(), kClusterLabelPrefix)) {
        auto found = labels.find(item.asString().substr(kClusterLabelPrefix.size()));
        item = found != labels.end() ? Json(found->second) : Json("");
      } else {
        replaceLabelReferences(item, labels, depth + 1);
      }
    }
  } else if (value.isArray()) {
    for (auto& item : value.asArray()) {
      if (item.isObject()) {
        replaceLabelReferences(item, labels, depth + 1);
      }
    }
  }
}

Status templateTree(Json& value, const Json& context, const std::string& path, const std::string& cluster,
                    const std::string& file, int depth) {
  auto problem = [&](const std::string& at, const Error& error) {
    return fail(ErrorKind::kInvalid,
                file + ": " + at + ": cannot template the value for cluster \"" + cluster + "\": " + error.message,
                file);
  };
  if (depth > 64) {
    return fail(ErrorKind::kInvalid, file + ": " + path + ": values nested too deeply to template", file);
  }
  if (value.isString()) {
    if (!templating::hasTemplate(value.asString())) {
      return {};
    }
    auto evaluated = templating::evaluateValue(value.asString(), context);
    if (!evaluated.ok()) {
      return problem(path, evaluated.error());
    }
    value = std::move(evaluated).value();
    return {};
  }
  if (value.isArray()) {
    auto& items = value.asArray();
    for (size_t i = 0; i < items.size(); ++i) {
      FLOTILLA_TRY(templateTree(items[i], context, path + "[" + std::to_string(i) + "]", cluster, file, depth + 1));
    }
    return {};
  }
  if (!value.isObject()) {
    return {};
  }
  Json::Object rebuilt;
  for (auto& [key, item] : value.asObject()) {
    const std::string item_path = keyPath(path, key);
    FLOTILLA_TRY(templateTree(item, context, item_path, cluster, file, depth + 1));
    std::string new_key = key;
    if (templating::hasTemplate(key)) {
      auto rendered = templating::render(key, context);
      if (!rendered.ok()) {
        return problem(item_path + " (key)", rendered.error());
      }
      new_key = std::move(rendered).value();
    }
    rebuilt[new_key] = std::move(item);
  }
  value = Json(std::move(rebuilt));
  return {};
}

bool treeNeedsCluster(const Json& value, bool templates, int depth) {
  if (depth > 64) {
    return false;
  }
  if (value.isString()) {
    return startsWith(value.asString(), kClusterLabelPrefix) ||
           (templates && templating::hasTemplate(value.asString()));
  }
  if (value.isArray()) {
    for (const auto& item : value.asArray()) {
      if (treeNeedsCluster(item, templates, depth + 1)) {
        return true;
      }
    }
  }
  if (value.isObject()) {
    for (const auto& [key, item] : value.asObject()) {
      if ((templates && templating::hasTemplate(key)) || treeNeedsCluster(item, templates, depth + 1)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

BundleTargetingInput targetingInput(const model::FleetYaml& fleet_yaml, const model::GitRepo& gitrepo,
                                    int64_t force_sync_generation) {
  BundleTargetingInput input;
  input.defaults = defaultOptions(fleet_yaml, gitrepo, force_sync_generation);
  input.customizations = customizations(fleet_yaml, input.defaults, gitrepo);
  const Json targets = bundleTargets(fleet_yaml, gitrepo);
  for (const auto& target : targets.asArray()) {
    auto decoded = model::decodeGitTarget(target, "targets");
    if (decoded.ok()) {
      input.rules.targets.push_back(model::matcherOf(*decoded));
    }
  }
  for (const auto& customization : input.customizations) {
    input.rules.customizations.push_back(model::matcherOf(customization.target));
  }
  input.rules.mode = fleet_yaml.spec.target_customization_mode;
  input.forced_namespace = gitrepo.spec.target_namespace;
  return input;
}

BundlePlacement placeBundle(const BundleTargetingInput& input, const ClusterFacts& cluster) {
  BundlePlacement out;
  const model::TargetRules& rules = input.rules;
  const auto decision = model::place(rules, cluster);
  if (decision.kind == model::TargetDecision::Kind::kNotTargeted) {
    return out;
  }
  out.target = rules.targets[*decision.target].name;
  for (size_t index : decision.customizations) {
    out.customizations.push_back(input.customizations[index].name);
  }
  if (decision.kind == model::TargetDecision::Kind::kDoNotDeploy) {
    out.decision = ClusterBundle::Decision::kDoNotDeploy;
    return out;
  }
  out.decision = ClusterBundle::Decision::kDeploy;
  if (decision.customizations.empty()) {
    out.options = input.defaults;
  } else if (rules.mode != "AllMatches") {
    out.options = input.customizations[decision.customizations.front()].options;
  } else {
    model::BundleDeploymentOptions combined;  // Merge({}, c1), then c2, ... (Fleet v0.16)
    for (size_t index : decision.customizations) {
      combined = mergeOptions(combined, input.customizations[index].target.options);
    }
    out.options = mergeOptions(input.defaults, combined);
    // The GitRepo's targetNamespace wins over every customization (as customizations() does).
    if (!input.forced_namespace.empty()) {
      out.options.target_namespace = input.forced_namespace;
    }
  }
  return out;
}

bool valuesNeedCluster(const model::BundleDeploymentOptions& options) {
  if (!options.helm) {
    return false;
  }
  const bool templates = !options.helm->disable_pre_process;
  if (templates && options.helm->template_values && !options.helm->template_values->empty()) {
    return true;
  }
  return options.helm->values && treeNeedsCluster(*options.helm->values, templates, 0);
}

Json templateContext(const ClusterFacts& cluster) {
  return Json::obj({{"ClusterName", cluster.name},
                    {"ClusterNamespace", cluster.workspace},
                    {"ClusterLabels", labelsJson(cluster.labels)},
                    {"ClusterAnnotations", labelsJson(cluster.annotations)},
                    {"ClusterValues", cluster.template_values.isObject() ? cluster.template_values : Json::object()}});
}

Status preprocessValues(model::BundleDeploymentOptions& options, const ClusterFacts& cluster, const std::string& file) {
  if (!options.helm) {
    return {};
  }
  auto& helm = *options.helm;
  Json values = helm.values && helm.values->isObject() ? *helm.values : Json::object();
  replaceLabelReferences(values, cluster.labels, 0);
  if (!helm.disable_pre_process) {
    const Json context = templateContext(cluster);
    FLOTILLA_TRY(templateTree(values, context, "helm.values", cluster.name, file, 0));
    if (helm.template_values) {
      for (const auto& [key, text] : *helm.template_values) {
        auto evaluated = templating::evaluateValue(text, context);
        if (!evaluated.ok()) {
          return fail(ErrorKind::kInvalid,
                      file + ": " + keyPath("helm.templateValues", key) + ": cannot template the value for cluster \"" +
                          cluster.name + "\": " + evaluated.error().message,
                      file);
        }
        values[key] = std::move(evaluated).value();
      }
    }
  }
  if (helm.values || !values.asObject().empty()) {
    helm.values = std::move(values);
  }
  return {};
}

std::string capabilitiesKey(const ClusterFacts& cluster) {
  if (cluster.kubernetes_version.empty() && cluster.api_versions.empty()) {
    return {};
  }
  std::vector<std::string> apis = cluster.api_versions;
  std::sort(apis.begin(), apis.end());
  apis.erase(std::unique(apis.begin(), apis.end()), apis.end());
  std::string joined;
  for (const auto& api : apis) {
    joined += api;
    joined += '\n';
  }
  return "kube=" + cluster.kubernetes_version +
         ";apis=" + (apis.empty() ? std::string() : sha256Hex(joined).substr(0, 16));
}

bool chartReadsCapabilities(const std::string& chart_dir) {
  std::error_code ec;
  if (!fs::is_directory(chart_dir, ec)) {
    return false;
  }
  for (fs::recursive_directory_iterator it(chart_dir, fs::directory_options::none, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_symlink(ec) || !it->is_regular_file(ec)) {
      continue;
    }
    const std::string name = it->path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".tgz") {
      return true;  // a packaged sub-chart: not inspected
    }
    const std::string relative = it->path().lexically_relative(chart_dir).string();
    const bool is_template = relative.find("templates/") != std::string::npos || name.ends_with(".tpl");
    if (!is_template || it->file_size(ec) > (4u << 20)) {
      continue;
    }
    auto text = readFile(it->path().string());
    if (text.ok() && text->find("Capabilities") != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> VariantCache::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return valueAt(entries_, key);
}

void VariantCache::put(const std::string& key, const std::string& manifest_id) {
  std::lock_guard lock(mutex_);
  if (entries_.emplace(key, manifest_id).second) {
    order_.push_back(key);
  }
  while (entries_.size() > capacity_ && !order_.empty()) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

std::set<std::string> VariantCache::manifestIds() const {
  std::lock_guard lock(mutex_);
  std::set<std::string> ids;
  for (const auto& [key, manifest_id] : entries_) {
    ids.insert(manifest_id);
  }
  return ids;
}

size_t VariantCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace flotilla::render
