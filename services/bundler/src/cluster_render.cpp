#include "flotilla/bundler/cluster_render.h"

#include <filesystem>
#include <set>
#include <system_error>

#include <stdlib.h>

#include "flotilla/bundler/commit_handler.h"
#include "flotilla/bundler/discovery.h"
#include "flotilla/bundler/flags.h"
#include "flotilla/bundler/variants.h"
#include "flotilla/core/util.h"
#include "flotilla/model/codec.h"
#include "flotilla/scheduler/targeting.h"
#include "flotilla/template/template.h"

namespace flotilla::bundler {
namespace fs = std::filesystem;

namespace {

scheduler::Matcher matcherOf(const model::GitTarget& target) {
  return scheduler::Matcher{.name = target.name,
                            .cluster_name = target.cluster_name,
                            .cluster_selector = target.cluster_selector,
                            .cluster_group = target.cluster_group,
                            .cluster_group_selector = target.cluster_group_selector};
}

scheduler::Matcher matcherOf(const model::BundleTarget& target) {
  return scheduler::Matcher{.name = target.name,
                            .cluster_name = target.cluster_name,
                            .cluster_selector = target.cluster_selector,
                            .cluster_group = target.cluster_group,
                            .cluster_group_selector = target.cluster_group_selector,
                            .do_not_deploy = target.do_not_deploy};
}

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
      input.targets.push_back(std::move(decoded).value());
    }
  }
  input.mode = fleet_yaml.spec.target_customization_mode;
  input.forced_namespace = gitrepo.spec.target_namespace;
  return input;
}

BundlePlacement placeBundle(const BundleTargetingInput& input, const ClusterFacts& cluster) {
  BundlePlacement out;
  const scheduler::ClusterInfo info{.name = cluster.name, .workspace = cluster.workspace, .labels = cluster.labels};
  std::vector<scheduler::GroupInfo> groups;
  for (const auto& group : cluster.groups) {
    groups.push_back(scheduler::GroupInfo{.workspace = cluster.workspace, .name = group.name, .labels = group.labels});
  }
  if (cluster.implicit_default_group) {
    bool listed = false;
    for (const auto& group : cluster.groups) {
      listed = listed || group.name == scheduler::kDefaultGroup;
    }
    if (!listed) {
      groups.push_back(
          scheduler::GroupInfo{.workspace = cluster.workspace, .name = std::string(scheduler::kDefaultGroup)});
    }
  }
  // The allow-list.
  const model::GitTarget* admitted = nullptr;
  for (const auto& target : input.targets) {
    if (scheduler::matches(matcherOf(target), info, groups)) {
      admitted = &target;
      break;
    }
  }
  if (admitted == nullptr) {
    return out;
  }
  out.target = admitted->name;
  const bool all_matches = input.mode == "AllMatches";
  model::BundleDeploymentOptions combined;  // AllMatches: Merge({}, c1), then c2, ... (Fleet v0.16)
  bool any = false;
  for (const auto& customization : input.customizations) {
    if (!scheduler::matches(matcherOf(customization.target), info, groups)) {
      continue;
    }
    if (customization.target.do_not_deploy) {
      out.decision = ClusterBundle::Decision::kDoNotDeploy;
      out.customizations.push_back(customization.name);
      return out;
    }
    if (!all_matches) {
      out.customizations.push_back(customization.name);
      out.options = customization.options;
      out.decision = ClusterBundle::Decision::kDeploy;
      // FirstMatch: only the first; a later doNotDeploy match does not count (Fleet checks the first one only).
      return out;
    }
    out.customizations.push_back(customization.name);
    combined = mergeOptions(combined, customization.target.options);
    any = true;
  }
  out.decision = ClusterBundle::Decision::kDeploy;
  if (any) {
    out.options = mergeOptions(input.defaults, combined);
    // The GitRepo's targetNamespace wins over every customization (as customizations() does).
    if (!input.forced_namespace.empty()) {
      out.options.target_namespace = input.forced_namespace;
    }
  } else {
    out.options = input.defaults;
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

namespace {

//! Copies the checkout (without .git) into `into`: renderers write scratch files next to the checkout and
//! `helm dependency build` into charts/, neither of which may touch the user's directory.
Status copyCheckout(const fs::path& from, const fs::path& into) {
  std::error_code ec;
  fs::create_directories(into, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot create " + into.string() + ": " + ec.message(), "create_directories");
  }
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == ".git") {
      continue;
    }
    fs::copy(it->path(), into / it->path().filename(), fs::copy_options::recursive | fs::copy_options::copy_symlinks,
             ec);
    if (ec) {
      return fail(ErrorKind::kInternal, "cannot copy " + it->path().string() + ": " + ec.message(), "copy");
    }
  }
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot list " + from.string() + ": " + ec.message(), "directory_iterator");
  }
  return {};
}

}  // namespace

Result<std::vector<ClusterBundle>> renderForCluster(const fs::path& checkout, const ClusterFacts& cluster,
                                                    const RenderTools& tools, const RepoInput& repo) {
  std::error_code ec;
  const fs::path source = fs::absolute(checkout, ec).lexically_normal();
  if (ec || !fs::is_directory(source, ec)) {
    return fail(ErrorKind::kNotFound, checkout.string() + ": not a directory", checkout.string());
  }
  std::string temp = (fs::temp_directory_path(ec) / "flotilla-render-XXXXXX").string();
  if (::mkdtemp(temp.data()) == nullptr) {
    return fail(ErrorKind::kInternal, "cannot create a temporary directory", "mkdtemp");
  }
  Checkout work(temp);  // removed on return
  const std::string root = temp + "/src";
  FLOTILLA_TRY(copyCheckout(source, root));

  model::GitRepo gitrepo = repo.gitrepo;
  if (gitrepo.metadata.name.empty()) {
    std::string name = source.filename().string();
    gitrepo.metadata.name = name.empty() ? std::string("local") : name;
  }
  if (gitrepo.metadata.ns.empty()) {
    gitrepo.metadata.ns = cluster.workspace;
  }
  RendererBinaries binaries;
  binaries.helm = tools.helm_binary == "none" ? std::string() : tools.helm_binary;
  binaries.kustomize = tools.kustomize_binary == "none" ? std::string() : tools.kustomize_binary;
  auto renderers = makeRenderers(binaries);

  events::CommitEvent commit;
  commit.workspace = cluster.workspace;
  commit.gitrepo = gitrepo.metadata.name;
  commit.commit = "local";
  commit.paths = gitrepo.spec.paths;
  commit.force_sync_generation = gitrepo.spec.force_sync_generation;

  auto dirs = discoverBundles(root, gitrepo.spec.paths);
  if (!dirs.ok()) {
    return fail(dirs.error());
  }
  const std::map<std::string, std::string> no_previous_ids;
  const std::vector<ClusterFacts> clusters = {cluster};
  RenderContext context{root, commit, gitrepo, *renderers, tools.limits, no_previous_ids};
  context.clusters = &clusters;
  context.force_variants = true;

  std::vector<ClusterBundle> out;
  for (const auto& dir : *dirs) {
    auto rendered = renderBundle(context, dir);
    if (!rendered.ok()) {
      return fail(rendered.error());
    }
    ClusterBundle bundle;
    bundle.bundle = rendered->bundle;
    bundle.path = rendered->path;
    bundle.renderer = rendered->renderer;
    if (rendered->error) {
      bundle.decision = ClusterBundle::Decision::kError;
      bundle.error = rendered->error;
      out.push_back(std::move(bundle));
      continue;
    }
    auto placement = rendered->placements.find(cluster.name);
    if (placement != rendered->placements.end()) {
      bundle.decision = placement->second.decision;
      bundle.target = placement->second.target;
      bundle.customizations = placement->second.customizations;
      bundle.options = placement->second.options;
    }
    if (bundle.decision == ClusterBundle::Decision::kDeploy && rendered->variants) {
      auto index = rendered->variants->clusters.find(cluster.name);
      if (index != rendered->variants->clusters.end()) {
        const auto& variant = rendered->variants->variants[static_cast<size_t>(index->second)];
        auto manifest = rendered->manifests.find(variant.manifest_id);
        if (manifest != rendered->manifests.end()) {
          bundle.manifest = manifest->second;
        }
      }
    }
    out.push_back(std::move(bundle));
  }
  return out;
}

}  // namespace flotilla::bundler

namespace flotilla::bundler {

std::optional<std::string> VariantCache::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return std::nullopt;
  }
  return it->second;
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

size_t VariantCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace flotilla::bundler
