#include <algorithm>
#include <cctype>
#include <map>
#include <vector>

#include "flotilla/events/variants.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/bundle_spec.h"
#include "flotilla/render/external_renderers.h"
#include "render_steps.h"

namespace flotilla::render::detail {

namespace {

//! The "vMAJOR.MINOR.PATCH" prefix of a reported Kubernetes version ("v1.30.2+k3s1" -> "v1.30.2"), "" when it has
//! none: helm rejects versions it cannot parse, and a distribution's suffix must not fail the render.
std::string helmKubeVersion(std::string_view reported) {
  size_t i = reported.starts_with('v') ? 1 : 0;
  std::string out = "v";
  for (int part = 0; part < 3; ++part) {
    const size_t start = i;
    while (i < reported.size() && std::isdigit(static_cast<unsigned char>(reported[i])) != 0) {
      ++i;
    }
    if (i == start) {
      return part >= 2 ? out.substr(0, out.size() - 1) : std::string();
    }
    out += std::string(reported.substr(start, i - start));
    if (part < 2) {
      if (i >= reported.size() || reported[i] != '.') {
        return part == 1 ? out : std::string();
      }
      out += '.';
      ++i;
    }
  }
  return out;
}

}  // namespace

//! One render of the bundle with `options`, canonicalised.
Result<CanonicalManifest> renderOnce(const RenderContext& context, const BundleDir& dir, const std::string& bundle_id,
                                     const model::BundleDeploymentOptions& options, std::string& renderer_name,
                                     RenderNotes* notes, const ClusterFacts* cluster) {
  auto renderer = context.renderers.choose(context.root, dir.path, options);
  if (!renderer.ok()) {
    return fail(renderer.error());
  }
  renderer_name = std::string((*renderer)->name());
  RenderRequest request{context.root, dir.path, bundle_id, options, context.limits};
  request.helm_access = helmRepoAccessOf(context.gitrepo);
  request.notes = notes;
  if (cluster != nullptr) {
    request.kube_version = helmKubeVersion(cluster->kubernetes_version);
    request.api_versions = cluster->api_versions;
  }
  auto objects = (*renderer)->render(request);
  if (!objects.ok()) {
    return fail(objects.error());
  }
  return canonicalize(std::move(objects).value(), context.limits.max_output_bytes);
}

//! Whether the bundle must be rendered per cluster (see variants.h).
bool needsVariants(const RenderContext& context, const BundleDir& dir, const model::FleetYaml& fleet_yaml,
                   const model::BundleDeploymentOptions& defaults) {
  const auto all = customizations(fleet_yaml, defaults, context.gitrepo);
  if (fleet_yaml.spec.target_customization_mode == "AllMatches" && all.size() >= 2) {
    return true;
  }
  if (valuesNeedCluster(defaults)) {
    return true;
  }
  for (const auto& customization : all) {
    if (valuesNeedCluster(customization.options)) {
      return true;
    }
  }
  auto renderer = context.renderers.choose(context.root, dir.path, defaults);
  if (!renderer.ok() || (*renderer)->name() != "helm") {
    return false;
  }
  const std::string chart = defaults.helm && !defaults.helm->chart.empty() ? defaults.helm->chart : ".";
  return chartReadsCapabilities(context.root + "/" + dir.path + "/" + chart);
}

namespace {

//! What the per-cluster renders of one bundle share.
struct VariantRun {
  const RenderContext& context;
  const BundleDir& dir;
  RenderedBundle& out;
  std::string values_file;  //!< where templating errors point
  events::BundleVariants table;
  std::map<std::string, std::string> by_input;  //!< render input -> manifestID (this run)
  std::map<std::string, int64_t> by_variant;    //!< manifestID + options -> index in the table
  std::map<std::string, bool> kube_dependent;   //!< chart dir -> reads .Capabilities
};

//! The clusters of the commit's workspace, by name.
std::vector<const ClusterFacts*> workspaceClusters(const RenderContext& context) {
  std::vector<const ClusterFacts*> clusters;
  if (context.clusters != nullptr) {
    for (const auto& cluster : *context.clusters) {
      if (cluster.workspace == context.commit.workspace) {
        clusters.push_back(&cluster);
      }
    }
  }
  std::sort(clusters.begin(), clusters.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  return clusters;
}

//! The cluster's part of the render input: its Kubernetes and API versions (capabilitiesKey), only for charts that
//! read .Capabilities (clusters on different versions share the manifest otherwise).
std::string kubeInput(VariantRun& run, const ClusterFacts& cluster, const model::BundleDeploymentOptions& options) {
  if (run.out.renderer != "helm" || (cluster.kubernetes_version.empty() && cluster.api_versions.empty())) {
    return {};
  }
  const auto& helm = options.helm;
  const std::string chart_dir =
      run.context.root + "/" + run.dir.path + "/" + (helm && !helm->chart.empty() ? helm->chart : std::string("."));
  auto known = run.kube_dependent.find(chart_dir);
  if (known == run.kube_dependent.end()) {
    known = run.kube_dependent.emplace(chart_dir, chartReadsCapabilities(chart_dir)).first;
  }
  return known->second ? capabilitiesKey(cluster) : std::string();
}

//! The manifestID for a render input: rendered earlier in this run, cached from an earlier run, or rendered now.
Result<std::string> variantManifest(VariantRun& run, const ClusterFacts& cluster,
                                    const model::BundleDeploymentOptions& options, const std::string& render_input) {
  if (auto known = run.by_input.find(render_input); known != run.by_input.end()) {
    return known->second;
  }
  const auto& commit = run.context.commit;
  const std::string cache_key =
      commit.workspace + "|" + run.out.bundle + "|" + commit.commit + "|" + run.dir.path + "|" + render_input;
  auto cached = run.context.cache != nullptr ? run.context.cache->find(cache_key) : std::nullopt;
  if (cached) {
    ++run.out.variant_cache_hits;
    return run.by_input.emplace(render_input, *cached).first->second;
  }
  std::string renderer_name;
  // Always the cluster's version when known (helm's default otherwise); it is part of the input only for charts
  // that read .Capabilities, whose output it changes.
  auto rendered = renderOnce(run.context, run.dir, run.out.bundle, options, renderer_name, nullptr, &cluster);
  FLOTILLA_TRY(rendered);
  ++run.out.variant_renders;
  const std::string id = rendered->manifest_id;
  run.out.cache_entries.emplace_back(cache_key, id);  // cached once stored (the bundler's storeVariants)
  run.out.manifests.emplace(id, std::move(rendered).value());
  return run.by_input.emplace(render_input, id).first->second;
}

//! Places the bundle on one cluster and, when it deploys there, adds the cluster's variant to the table.
Status addCluster(VariantRun& run, const BundleTargetingInput& input, const ClusterFacts& cluster) {
  BundlePlacement placement = placeBundle(input, cluster);
  if (placement.decision != ClusterBundle::Decision::kDeploy) {
    run.out.placements.emplace(cluster.name, std::move(placement));
    return {};
  }
  FLOTILLA_TRY(preprocessValues(placement.options, cluster, run.values_file));
  auto renderer = run.context.renderers.choose(run.context.root, run.dir.path, placement.options);
  FLOTILLA_TRY(renderer);
  run.out.renderer = std::string((*renderer)->name());
  const std::string render_input = renderKey(placement.options) + "|" + kubeInput(run, cluster, placement.options);
  auto manifest_id = variantManifest(run, cluster, placement.options, render_input);
  FLOTILLA_TRY(manifest_id);
  events::Variant variant{.manifest_id = *manifest_id,
                          .options = model::encodeOptions(placement.options),
                          .customizations = placement.customizations};
  const std::string variant_key = variant.manifest_id + "|" + variant.options.dump();
  auto index = run.by_variant.find(variant_key);
  if (index == run.by_variant.end()) {
    index = run.by_variant.emplace(variant_key, static_cast<int64_t>(run.table.variants.size())).first;
    run.table.variants.push_back(std::move(variant));
  }
  run.table.clusters[cluster.name] = index->second;
  run.out.placements.emplace(cluster.name, std::move(placement));
  return {};
}

}  // namespace

Status renderVariants(const RenderContext& context, const BundleDir& dir, const model::FleetYaml& fleet_yaml,
                      RenderedBundle& out) {
  const auto& commit = context.commit;
  const auto input = targetingInput(fleet_yaml, context.gitrepo, commit.force_sync_generation);
  for (const auto& customization : input.customizations) {
    out.event.customizations.push_back(events::TargetManifest{.name = customization.name,
                                                              .target = targetMatcher(customization.target),
                                                              .options = model::encodeOptions(customization.options)});
  }
  VariantRun run{
      .context = context,
      .dir = dir,
      .out = out,
      .values_file = dir.fleet_yaml.empty() ? dir.path + "/fleet.yaml" : dir.fleet_yaml,
      .table = events::BundleVariants{.workspace = commit.workspace, .bundle = out.bundle, .commit = commit.commit}};
  for (const ClusterFacts* cluster : workspaceClusters(context)) {
    FLOTILLA_TRY(addCluster(run, input, *cluster));
  }
  out.variants_text = events::encode(run.table).dump();
  out.event.variants_object = events::variantsObjectName(out.variants_text);
  out.variants = std::move(run.table);
  return {};
}

}  // namespace flotilla::render::detail
