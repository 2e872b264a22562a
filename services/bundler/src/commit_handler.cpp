#include "flotilla/bundler/commit_handler.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>

#include <stdlib.h>

#include "flotilla/bundler/external_renderers.h"
#include "flotilla/bundler/render_pool.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"

namespace flotilla::bundler {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string gitrepoName(const events::CommitEvent& event) {
  return event.workspace + "/" + event.gitrepo;
}

//! The `name:` of a fleet.yaml that does not decode strictly, if it parses at all.
std::string lenientName(std::string_view text, const std::string& source) {
  auto parsed = parseYaml(text, source);
  if (!parsed.ok() || !parsed->isObject()) {
    return {};
  }
  std::string name = parsed->getString("name");
  return model::isDns1123Subdomain(name) ? name : std::string();
}

//! Reads a fleet.yaml named by a relative path (size-limited, inside the checkout).
Result<std::string> readFleetYaml(const std::string& root, const std::string& relative, uint64_t max_bytes) {
  auto resolved = source::resolveInside(root, relative);
  if (!resolved.ok()) {
    return fail(ErrorKind::kInvalid, relative + ": resolves outside the repository checkout", relative);
  }
  std::error_code ec;
  auto size = fs::file_size(*resolved, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot stat " + relative + ": " + ec.message(), "file_size");
  }
  if (size > max_bytes) {
    return fail(ErrorKind::kInvalid,
                relative + ": file is " + std::to_string(size) + " bytes, more than the limit of " +
                    std::to_string(max_bytes) + " bytes",
                relative);
  }
  auto text = readFile(*resolved);
  if (!text.ok()) {
    return fail(ErrorKind::kInternal, "cannot read " + relative + ": " + text.error().message, "readFile");
  }
  return std::move(text).value();
}

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

//! One render of the bundle with `options`, canonicalised.
Result<CanonicalManifest> renderOnce(const RenderContext& context, const BundleDir& dir, const std::string& bundle_id,
                                     const model::BundleDeploymentOptions& options, std::string& renderer_name,
                                     RenderNotes* notes = nullptr, const ClusterFacts* cluster = nullptr) {
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

bool isUserError(const Error& error) {
  return error.kind == ErrorKind::kInvalid;
}

}  // namespace

Checkout& Checkout::operator=(Checkout&& other) noexcept {
  if (this != &other) {
    if (!root_.empty()) {
      removeAll(root_);
    }
    root_ = std::exchange(other.root_, {});
  }
  return *this;
}

Checkout::~Checkout() {
  if (!root_.empty()) {
    removeAll(root_);
  }
}

Status prepareWorkDir(const std::string& work_dir) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot create the work dir " + work_dir + ": " + ec.message(),
                "create_directories");
  }
  size_t removed = 0;
  for (fs::directory_iterator it(work_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (startsWith(it->path().filename().string(), "commit-")) {
      removeAll(it->path().string());
      ++removed;
    }
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot list the work dir " + work_dir + ": " + ec.message(),
                "directory_iterator");
  }
  const std::string probe = work_dir + "/.write-probe-" + randomHex(4);
  if (auto written = writeFile(probe, "ok"); !written.ok()) {
    return fail(ErrorKind::kPermanent, "the work dir " + work_dir + " is not writable: " + written.error().message,
                "writeFile");
  }
  removeAll(probe);
  if (removed > 0) {
    log::info("removed checkouts left by an earlier run",
              {{"work_dir", work_dir}, {"count", static_cast<int64_t>(removed)}});
  }
  return {};
}

Result<Checkout> extractCheckout(const source::Archive& archive, const std::string& work_dir) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot create the work dir " + work_dir + ": " + ec.message(),
                "create_directories");
  }
  std::string pattern = work_dir + "/commit-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return fail(ErrorKind::kInternal,
                "cannot create a directory in " + work_dir + ": " + std::generic_category().message(errno), "mkdtemp");
  }
  Checkout checkout(pattern);
  const std::string root = pattern + "/src";
  if (auto status = source::extract(archive, root); !status.ok()) {
    return fail(status.error().kind == ErrorKind::kInvalid ? ErrorKind::kInvalid : ErrorKind::kInternal,
                "cannot extract the source archive: " + status.error().message, "extract");
  }
  return checkout;
}

events::RenderError renderErrorOf(const Error& error, std::string_view fallback_file) {
  auto [file, line] = splitWhere(error.where);
  events::RenderError out;
  out.file = file.empty() ? std::string(fallback_file) : file;
  out.line = line;
  out.message = error.message;
  if (!startsWith(out.message, out.file)) {
    out.message = (line > 0 ? out.file + ":" + std::to_string(line) : out.file) + ": " + out.message;
  }
  return out;
}

namespace {

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

//! Renders the bundle for every cluster of the workspace (variants.h): place, pre-process the values, render once
//! per distinct input, and build the BundleVariants table. Fills out.event (manifestID stays "", customizations
//! carry their options only), out.manifests, out.variants and out.placements.
Status renderVariants(const RenderContext& context, const BundleDir& dir, const model::FleetYaml& fleet_yaml,
                      RenderedBundle& out) {
  const auto& commit = context.commit;
  const auto input = targetingInput(fleet_yaml, context.gitrepo, commit.force_sync_generation);
  const std::string values_file = dir.fleet_yaml.empty() ? dir.path + "/fleet.yaml" : dir.fleet_yaml;
  for (const auto& customization : input.customizations) {
    events::TargetManifest target;
    target.name = customization.name;
    target.target = targetMatcher(customization.target);
    target.options = model::encodeOptions(customization.options);
    out.event.customizations.push_back(std::move(target));
  }
  events::BundleVariants table;
  table.workspace = commit.workspace;
  table.bundle = out.bundle;
  table.commit = commit.commit;
  std::map<std::string, std::string> by_input;  // render input -> manifestID (this run)
  std::map<std::string, int64_t> by_variant;    // manifestID + options -> index
  std::map<std::string, bool> kube_dependent;   // chart dir -> reads .Capabilities
  std::vector<const ClusterFacts*> clusters;
  if (context.clusters != nullptr) {
    for (const auto& cluster : *context.clusters) {
      if (cluster.workspace == commit.workspace) {
        clusters.push_back(&cluster);
      }
    }
  }
  std::sort(clusters.begin(), clusters.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  for (const ClusterFacts* cluster : clusters) {
    BundlePlacement placement = placeBundle(input, *cluster);
    if (placement.decision != ClusterBundle::Decision::kDeploy) {
      out.placements.emplace(cluster->name, std::move(placement));
      continue;
    }
    FLOTILLA_TRY(preprocessValues(placement.options, *cluster, values_file));
    auto renderer = context.renderers.choose(context.root, dir.path, placement.options);
    if (!renderer.ok()) {
      return fail(renderer.error());
    }
    out.renderer = std::string((*renderer)->name());
    // The cluster's Kubernetes version matters only to charts that read .Capabilities; it stays out of the render
    // input otherwise, so clusters on different versions share the manifest.
    std::string kube;
    if (out.renderer == "helm" && !cluster->kubernetes_version.empty()) {
      const auto& helm = placement.options.helm;
      const std::string chart_dir =
          context.root + "/" + dir.path + "/" + (helm && !helm->chart.empty() ? helm->chart : std::string("."));
      auto known = kube_dependent.find(chart_dir);
      if (known == kube_dependent.end()) {
        known = kube_dependent.emplace(chart_dir, chartReadsCapabilities(chart_dir)).first;
      }
      if (known->second) {
        kube = cluster->kubernetes_version;
        for (const auto& api : cluster->api_versions) {
          kube += "," + api;
        }
      }
    }
    const std::string render_input = renderKey(placement.options) + "|" + kube;
    auto manifest_id = by_input.find(render_input);
    if (manifest_id == by_input.end()) {
      const std::string cache_key =
          commit.workspace + "|" + out.bundle + "|" + commit.commit + "|" + dir.path + "|" + render_input;
      std::optional<std::string> cached = context.cache != nullptr ? context.cache->find(cache_key) : std::nullopt;
      if (cached) {
        ++out.variant_cache_hits;
        manifest_id = by_input.emplace(render_input, *cached).first;
      } else {
        std::string renderer_name;
        // Always the cluster's version when known (helm's default otherwise); it is part of the input only for
        // charts that read .Capabilities, whose output it changes.
        auto rendered = renderOnce(context, dir, out.bundle, placement.options, renderer_name, nullptr, cluster);
        if (!rendered.ok()) {
          return fail(rendered.error());
        }
        ++out.variant_renders;
        const std::string id = rendered->manifest_id;
        out.cache_entries.emplace_back(cache_key, id);  // cached once stored (CommitHandler::storeVariants)
        out.manifests.emplace(id, std::move(rendered).value());
        manifest_id = by_input.emplace(render_input, id).first;
      }
    }
    events::Variant variant{.manifest_id = manifest_id->second,
                            .options = model::encodeOptions(placement.options),
                            .customizations = placement.customizations};
    const std::string variant_key = variant.manifest_id + "|" + variant.options.dump();
    auto index = by_variant.find(variant_key);
    if (index == by_variant.end()) {
      index = by_variant.emplace(variant_key, static_cast<int64_t>(table.variants.size())).first;
      table.variants.push_back(std::move(variant));
    }
    table.clusters[cluster->name] = index->second;
    out.placements.emplace(cluster->name, std::move(placement));
  }
  out.variants_text = events::encode(table).dump();
  out.event.variants_object = events::variantsObjectName(out.variants_text);
  out.variants = std::move(table);
  return {};
}

}  // namespace

Result<RenderedBundle> renderBundle(const RenderContext& context, const BundleDir& dir) {
  auto start = Clock::now();
  const auto& commit = context.commit;
  RenderedBundle out;
  out.path = dir.path;
  out.renderer = "raw";
  out.source_object = context.commit.source_object;
  const std::string id_path = dir.path == "." ? std::string() : dir.path;

  auto failWith = [&](const Error& error, std::string_view fallback_file) -> Result<RenderedBundle> {
    if (!isUserError(error)) {
      return fail(error);
    }
    out.error = renderErrorOf(error, fallback_file);
    out.event.error = out.error;
    out.seconds = secondsSince(start);
    return std::move(out);
  };

  // 1. fleet.yaml (optional).
  model::FleetYaml fleet_yaml;
  std::optional<Error> fleet_yaml_error;
  if (!dir.fleet_yaml.empty()) {
    auto text = readFleetYaml(context.root, dir.fleet_yaml, context.limits.max_file_bytes);
    if (!text.ok()) {
      fleet_yaml_error = text.error();
    } else {
      auto decoded = model::decodeFleetYaml(*text, dir.fleet_yaml);
      if (decoded.ok()) {
        fleet_yaml = std::move(decoded).value();
      } else {
        fleet_yaml_error = decoded.error();
        fleet_yaml.name = lenientName(*text, dir.fleet_yaml);
      }
    }
  }

  // 2. Identity (Fleet's naming). A broken fleet.yaml keeps the bundle's recorded identity.
  if (fleet_yaml_error && fleet_yaml.name.empty()) {
    if (auto previous = context.previous_ids.find(dir.path); previous != context.previous_ids.end()) {
      fleet_yaml.name = previous->second;
    }
  }
  out.bundle = model::bundleID(commit.gitrepo, id_path, fleet_yaml.name);
  out.event.workspace = commit.workspace;
  out.event.gitrepo = commit.gitrepo;
  out.event.bundle = out.bundle;
  out.event.path = dir.path;
  out.event.commit = commit.commit;
  out.event.force_sync_generation = commit.force_sync_generation;
  if (fleet_yaml_error) {
    return failWith(*fleet_yaml_error, dir.fleet_yaml);
  }

  // 3. Per-cluster variants when the output depends on the cluster (variants.h); otherwise 3a-4: the default
  //    render and one render per distinct customization.
  const auto defaults = defaultOptions(fleet_yaml, context.gitrepo, commit.force_sync_generation);
  if (context.force_variants || needsVariants(context, dir, fleet_yaml, defaults)) {
    if (auto variants = renderVariants(context, dir, fleet_yaml, out); !variants.ok()) {
      return failWith(variants.error(), dir.fleet_yaml.empty() ? dir.path : dir.fleet_yaml);
    }
  } else {
    // 3a. The default render.
    auto manifest = renderOnce(context, dir, out.bundle, defaults, out.renderer, &out.notes);
    if (!manifest.ok()) {
      return failWith(manifest.error(), dir.path);
    }
    const std::string default_key = renderKey(defaults);
    std::map<std::string, std::string> by_key = {{default_key, manifest->manifest_id}};
    out.event.manifest_id = manifest->manifest_id;
    out.manifests.emplace(out.event.manifest_id, std::move(manifest).value());

    // 4. Customizations: rendered once per distinct render key.
    for (const auto& customization : customizations(fleet_yaml, defaults, context.gitrepo)) {
      events::TargetManifest target;
      target.name = customization.name;
      target.target = targetMatcher(customization.target);
      target.options = model::encodeOptions(customization.options);
      if (!customization.target.do_not_deploy) {
        const std::string key = renderKey(customization.options);
        auto known = by_key.find(key);
        if (known == by_key.end()) {
          std::string renderer_name;
          auto rendered = renderOnce(context, dir, out.bundle, customization.options, renderer_name);
          if (!rendered.ok()) {
            return failWith(rendered.error(), dir.path);
          }
          const std::string id = rendered->manifest_id;
          known = by_key.emplace(key, id).first;
          out.manifests.emplace(id, std::move(rendered).value());
        }
        target.manifest_id = known->second;
      }
      out.event.customizations.push_back(std::move(target));
    }
  }

  // 5. The rest of the event.
  out.event.options = model::encodeOptions(defaults);
  out.event.customization_mode = fleet_yaml.spec.target_customization_mode;
  out.event.targets = bundleTargets(fleet_yaml, context.gitrepo);
  out.event.depends_on = Json::array();
  for (const auto& ref : fleet_yaml.spec.depends_on) {
    out.event.depends_on.push(model::encodeBundleRef(ref));
  }
  if (fleet_yaml.spec.rollout_strategy) {
    out.event.rollout_strategy = model::encodeRolloutStrategy(*fleet_yaml.spec.rollout_strategy);
  }
  out.event.paused = fleet_yaml.spec.paused || context.gitrepo.spec.paused;
  for (const auto& [k, v] : bundleLabels(fleet_yaml, context.gitrepo)) {
    out.event.labels[k] = v;
  }
  out.seconds = secondsSince(start);
  return out;
}

CommitHandler::CommitHandler(HandlerBus bus, std::shared_ptr<const RendererSet> renderers, BundlerMetrics& metrics,
                             HandlerOptions options)
    : bus_(std::move(bus)), renderers_(std::move(renderers)), metrics_(metrics), options_(std::move(options)) {}

std::chrono::milliseconds CommitHandler::backoff(uint64_t delivery_count) const {
  auto delay = options_.retry_base;
  for (uint64_t i = 1; i < delivery_count && delay < options_.retry_max; ++i) {
    delay *= 2;
  }
  return std::min(delay, options_.retry_max);
}

Outcome CommitHandler::handle(std::string_view data, const Delivery& delivery) {
  auto event = events::parsePayload<events::CommitEvent>(data);
  if (!event.ok()) {
    log::warn("rejecting a malformed CommitEvent",
              {{"error", event.error().describe()}, {"sequence", static_cast<int64_t>(delivery.stream_sequence)}});
    return Outcome::reject("invalid");
  }
  return handleEvent(*event, delivery);
}

Outcome CommitHandler::transient(const events::CommitEvent& event, const Delivery& delivery, std::string_view step,
                                 const Error& error) {
  auto delay = backoff(delivery.delivery_count);
  metrics_.stepFailure(step);
  log::warn("commit handling failed, will retry", {{"gitrepo", gitrepoName(event)},
                                                   {"commit", event.commit},
                                                   {"step", step},
                                                   {"error", error.describe()},
                                                   {"delivery", static_cast<int64_t>(delivery.delivery_count)},
                                                   {"retry_in_ms", static_cast<int64_t>(delay.count())}});
  return Outcome::retry(delay);
}

Result<std::optional<model::GitRepo>> CommitHandler::loadGitRepo(std::string_view workspace, std::string_view name) {
  auto entry = bus_.gitrepos->get(events::gitRepoKey(workspace, name));
  if (!entry.ok()) {
    if (entry.error().kind == ErrorKind::kNotFound) {
      return std::optional<model::GitRepo>();
    }
    return fail(entry.error());
  }
  auto json = Json::parse(entry->value);
  if (!json.ok()) {
    return fail(ErrorKind::kInvalid, "gitrepos/" + entry->key + ": " + json.error().message);
  }
  auto gitrepo = model::decodeGitRepo(*json, "gitrepos/" + entry->key);
  if (!gitrepo.ok()) {
    return fail(gitrepo.error());
  }
  return std::optional<model::GitRepo>(std::move(gitrepo).value());
}

Result<std::vector<BundleRecord>> CommitHandler::recordsOf(std::string_view workspace, std::string_view gitrepo) {
  auto keys = bus_.bundles->keys(events::keyFilter({workspace}));
  if (!keys.ok()) {
    if (keys.error().kind == ErrorKind::kNotFound) {
      return std::vector<BundleRecord>{};
    }
    return fail(keys.error());
  }
  std::vector<BundleRecord> records;
  for (const auto& key : *keys) {
    auto entry = bus_.bundles->get(key);
    if (!entry.ok()) {
      if (entry.error().kind == ErrorKind::kNotFound) {
        continue;  // removed meanwhile
      }
      return fail(entry.error());
    }
    auto json = Json::parse(entry->value);
    auto record = json.ok() ? decodeBundleRecord(*json) : Result<BundleRecord>(fail(json.error()));
    if (!record.ok()) {
      log::warn("ignoring an unreadable bundle record", {{"key", key}, {"error", record.error().describe()}});
      continue;
    }
    if (record->gitrepo == gitrepo && record->workspace == workspace) {
      records.push_back(std::move(record).value());
    }
  }
  return records;
}

Result<source::Archive> CommitHandler::loadSource(const events::CommitEvent& event) {
  if (event.source_object.empty()) {
    return fail(ErrorKind::kInvalid, "the CommitEvent names no source object");
  }
  auto data = bus_.sources->get(event.source_object);
  if (!data.ok()) {
    return fail(data.error());
  }
  auto archive = source::decode(*data);
  if (!archive.ok()) {
    return fail(ErrorKind::kInvalid, "source object " + event.source_object + ": " + archive.error().message);
  }
  if (archive->commit != event.commit) {
    log::warn("source archive names another commit than its event",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"archive_commit", archive->commit}});
  }
  return archive;
}

Status CommitHandler::storeVariants(const RenderedBundle& rendered) {
  if (rendered.variants_text.empty() || rendered.error) {
    return {};
  }
  // Called after the bundle's manifests were stored: only now may later renders take them from the cache.
  for (const auto& [key, manifest_id] : rendered.cache_entries) {
    variant_cache_.put(key, manifest_id);
  }
  const std::string& name = rendered.event.variants_object;
  auto info = bus_.manifests->info(name);
  if (info.ok()) {
    return {};
  }
  if (info.error().kind != ErrorKind::kNotFound) {
    return fail(info.error());
  }
  auto stored = bus_.manifests->put(name, rendered.variants_text);
  if (!stored.ok()) {
    return fail(stored.error());
  }
  return {};
}

Status CommitHandler::storeManifest(const CanonicalManifest& manifest) {
  const std::string name = events::manifestObjectName(manifest.manifest_id);
  auto info = bus_.manifests->info(name);
  if (info.ok()) {
    metrics_.manifest(manifest.text.size(), false);
    return {};
  }
  if (info.error().kind != ErrorKind::kNotFound) {
    return fail(info.error());
  }
  auto stored = bus_.manifests->put(name, manifest.text);
  if (!stored.ok()) {
    return fail(stored.error());
  }
  metrics_.manifest(manifest.text.size(), true);
  return {};
}

Status CommitHandler::publish(events::BundleEvent& event) {
  stampEvent(event);
  auto ack = bus_.js->publish(events::bundleSubject(event.workspace, event.bundle), events::encode(event).dump(),
                              bundleMsgId(event));
  if (!ack.ok()) {
    return fail(ack.error());
  }
  metrics_.published(ack->duplicate);
  if (ack->duplicate) {
    log::info("bundle event was already published (duplicate dropped)",
              {{"gitrepo", event.workspace + "/" + event.gitrepo},
               {"bundle", event.bundle},
               {"commit", event.commit},
               {"state", eventState(event)}});
  }
  return {};
}

Status CommitHandler::commitBundle(RenderedBundle& rendered, const std::optional<BundleRecord>& previous,
                                   uint64_t sequence) {
  auto& event = rendered.event;
  BundleRecord record;
  record.workspace = event.workspace;
  record.gitrepo = event.gitrepo;
  record.bundle = event.bundle;
  record.path = event.path;
  record.commit = event.commit;
  record.commit_sequence = sequence;
  record.source_object = rendered.source_object;
  RenderStatus status;
  status.workspace = event.workspace;
  status.gitrepo = event.gitrepo;
  status.bundle = event.bundle;
  status.path = event.path;
  status.commit = event.commit;
  status.time = log::nowRfc3339();
  if (rendered.error) {
    record.last_good = previous ? previous->last_good : std::nullopt;
    record.error = rendered.error;
    status.error = rendered.error;
    status.last_good_manifest_id = !record.last_good                       ? std::string()
                                   : record.last_good->manifest_id.empty() ? record.last_good->variants_object
                                                                           : record.last_good->manifest_id;
    stampEvent(event);
  } else {
    stampEvent(event);
    record.last_good = event;
    // A bundle rendered per cluster has no single manifest: its status names the variants table.
    status.manifest_id = event.manifest_id.empty() ? event.variants_object : event.manifest_id;
    status.last_good_manifest_id = status.manifest_id;
    status.chart = rendered.notes.chart;
    status.chart_version = rendered.notes.chart_version;
    status.chart_digest = rendered.notes.chart_digest;
  }
  auto put = bus_.bundles->put(events::bundleKey(event.workspace, event.bundle), encode(record).dump());
  if (!put.ok()) {
    return fail(put.error());
  }
  auto status_put = bus_.status->put(renderStatusKey(event.workspace, event.bundle), encode(status).dump());
  if (!status_put.ok()) {
    return fail(status_put.error());
  }
  FLOTILLA_TRY(publish(event));
  if (rendered.error) {
    metrics_.bundle("error");
    log::warn("bundle failed to render; the last good deployment stays",
              {{"gitrepo", event.workspace + "/" + event.gitrepo},
               {"bundle", event.bundle},
               {"commit", event.commit},
               {"path", event.path},
               {"file", rendered.error->file},
               {"line", rendered.error->line},
               {"error", rendered.error->message},
               {"last_good_manifest", status.last_good_manifest_id}});
  } else {
    metrics_.bundle("ok");
    log::info("bundle rendered",
              {{"gitrepo", event.workspace + "/" + event.gitrepo},
               {"bundle", event.bundle},
               {"commit", event.commit},
               {"path", event.path},
               {"renderer", rendered.renderer},
               {"chart", rendered.notes.chart},
               {"chart_version", rendered.notes.chart_version},
               {"manifest", event.manifest_id},
               {"objects", static_cast<int64_t>(rendered.manifests.count(event.manifest_id) > 0
                                                    ? rendered.manifests.at(event.manifest_id).objects
                                                    : 0)},
               {"variants_object", event.variants_object},
               {"variant_clusters", static_cast<int64_t>(rendered.variants ? rendered.variants->clusters.size() : 0)},
               {"customizations", static_cast<int64_t>(event.customizations.size())}});
  }
  return {};
}

Status CommitHandler::deleteBundle(const BundleRecord& record, const events::CommitEvent& event) {
  events::BundleEvent deleted;
  deleted.workspace = record.workspace;
  deleted.gitrepo = record.gitrepo;
  deleted.bundle = record.bundle;
  deleted.path = record.path;
  deleted.commit = event.commit;
  deleted.force_sync_generation = event.force_sync_generation;
  deleted.deleted = true;
  FLOTILLA_TRY(publish(deleted));
  if (auto removed = bus_.bundles->remove(events::bundleKey(record.workspace, record.bundle));
      !removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  if (auto removed = bus_.status->remove(renderStatusKey(record.workspace, record.bundle));
      !removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  metrics_.bundle("deleted");
  log::info("bundle removed from the repository; deletion published",
            {{"gitrepo", record.workspace + "/" + record.gitrepo},
             {"bundle", record.bundle},
             {"commit", event.commit},
             {"path", record.path}});
  return {};
}

Outcome CommitHandler::handleEvent(const events::CommitEvent& event, const Delivery& delivery) {
  log::info("commit received", {{"gitrepo", gitrepoName(event)},
                                {"commit", event.commit},
                                {"changed", event.changed},
                                {"source_object", event.source_object},
                                {"delivery", static_cast<int64_t>(delivery.delivery_count)}});
  if (event.source_object.empty()) {
    log::warn("rejecting a CommitEvent without a source object",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}});
    return Outcome::reject("invalid");
  }
  // A cluster-triggered re-render of this GitRepo's bundles must not interleave with its commits.
  auto gitrepo_lock = gitrepoLock(event.workspace, event.gitrepo);
  std::lock_guard gitrepo_guard(*gitrepo_lock);

  // 2. The GitRepo.
  auto gitrepo = loadGitRepo(event.workspace, event.gitrepo);
  if (!gitrepo.ok()) {
    if (gitrepo.error().kind == ErrorKind::kInvalid) {
      log::warn("rejecting a commit: its GitRepo in KV does not decode",
                {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"error", gitrepo.error().describe()}});
      return Outcome::reject("invalid");
    }
    return transient(event, delivery, "gitrepo", gitrepo.error());
  }
  if (!gitrepo->has_value()) {
    log::warn("skipping a commit: its GitRepo no longer exists",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}});
    return Outcome::ack("gitrepo_missing");
  }
  const model::GitRepo& repo = **gitrepo;

  // 3. Records; a newer commit already applied makes this one stale.
  auto records = recordsOf(event.workspace, event.gitrepo);
  if (!records.ok()) {
    return transient(event, delivery, "records", records.error());
  }
  for (const auto& record : *records) {
    if (record.commit_sequence > delivery.stream_sequence) {
      log::info("skipping a stale commit: a newer one was already rendered",
                {{"gitrepo", gitrepoName(event)},
                 {"commit", event.commit},
                 {"newer_commit", record.commit},
                 {"sequence", static_cast<int64_t>(delivery.stream_sequence)},
                 {"newer_sequence", static_cast<int64_t>(record.commit_sequence)}});
      return Outcome::ack("stale");
    }
  }
  std::map<std::string, std::string> previous_ids;
  std::map<std::string, const BundleRecord*> by_bundle;
  for (const auto& record : *records) {
    previous_ids[record.path] = record.bundle;
    by_bundle[record.bundle] = &record;
  }

  // 4-5. Source and checkout.
  auto archive = loadSource(event);
  if (!archive.ok()) {
    if (archive.error().kind == ErrorKind::kInvalid || archive.error().kind == ErrorKind::kNotFound) {
      log::error("rejecting a commit: its source archive is missing or unreadable",
                 {{"gitrepo", gitrepoName(event)},
                  {"commit", event.commit},
                  {"source_object", event.source_object},
                  {"error", archive.error().describe()}});
      return Outcome::reject("invalid");
    }
    return transient(event, delivery, "source", archive.error());
  }
  auto checkout = extractCheckout(*archive, options_.work_dir);
  if (!checkout.ok()) {
    if (checkout.error().kind == ErrorKind::kInvalid) {
      log::error("rejecting a commit: its source archive cannot be extracted",
                 {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"error", checkout.error().describe()}});
      return Outcome::reject("invalid");
    }
    return transient(event, delivery, "checkout", checkout.error());
  }
  const std::string root = checkout->root() + "/src";

  // 6. Discovery.
  auto dirs = discoverBundles(root, event.paths);
  if (!dirs.ok()) {
    return transient(event, delivery, "discover", dirs.error());
  }
  if (dirs->empty()) {
    Json paths = Json::array();
    for (const auto& path : event.paths) {
      paths.push(path);
    }
    log::warn("no bundles found under the GitRepo's paths",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"paths", paths}});
  }

  // 7. Render (bounded parallelism), then store, record, publish — bundle by bundle in discovery order.
  RenderContext context{root, event, repo, *renderers_, options_.limits, previous_ids};
  const std::vector<ClusterFacts> workspace_clusters =
      clusters_ ? clusters_->snapshot(event.workspace) : std::vector<ClusterFacts>{};
  context.clusters = &workspace_clusters;
  context.cache = &variant_cache_;
  std::set<std::string> present;
  std::optional<Outcome> failed;
  auto consume = [&](size_t index, Result<RenderedBundle>& rendered) -> Status {
    const auto& dir = (*dirs)[index];
    if (!rendered.ok()) {
      failed = transient(event, delivery, "render", rendered.error());
      return fail(rendered.error());
    }
    metrics_.renderDuration(rendered->renderer, rendered->seconds);
    metrics_.variants(rendered->variant_renders, rendered->variant_cache_hits);
    if (!rendered->notes.chart_source.empty()) {
      metrics_.remoteChart(rendered->notes.chart_source);
    }
    if (!present.insert(rendered->bundle).second) {
      metrics_.bundle("conflict");
      log::warn("two directories of one commit claim the same bundle name; ignoring the second",
                {{"gitrepo", gitrepoName(event)},
                 {"bundle", rendered->bundle},
                 {"commit", event.commit},
                 {"path", dir.path}});
      return {};
    }
    std::optional<BundleRecord> previous;
    if (auto it = by_bundle.find(rendered->bundle); it != by_bundle.end()) {
      previous = *it->second;
    } else {
      // Not this GitRepo's yet: make sure no other GitRepo of the workspace owns the name.
      auto entry = bus_.bundles->get(events::bundleKey(event.workspace, rendered->bundle));
      if (entry.ok()) {
        auto json = Json::parse(entry->value);
        auto other = json.ok() ? decodeBundleRecord(*json) : Result<BundleRecord>(fail(json.error()));
        if (other.ok() && other->gitrepo != event.gitrepo) {
          metrics_.bundle("conflict");
          log::warn("bundle name is already used by another GitRepo of the workspace; skipping it",
                    {{"gitrepo", gitrepoName(event)},
                     {"bundle", rendered->bundle},
                     {"commit", event.commit},
                     {"path", dir.path},
                     {"owner", other->gitrepo}});
          return {};
        }
      } else if (entry.error().kind != ErrorKind::kNotFound) {
        failed = transient(event, delivery, "records", entry.error());
        return fail(entry.error());
      }
    }
    for (const auto& [id, manifest] : rendered->manifests) {
      if (auto stored = storeManifest(manifest); !stored.ok()) {
        failed = transient(event, delivery, "store", stored.error());
        return stored;
      }
    }
    if (auto stored = storeVariants(*rendered); !stored.ok()) {
      failed = transient(event, delivery, "store", stored.error());
      return stored;
    }
    if (auto committed = commitBundle(*rendered, previous, delivery.stream_sequence); !committed.ok()) {
      failed = transient(event, delivery, "publish", committed.error());
      return committed;
    }
    return {};
  };
  auto rendered_all = renderInOrder(
      dirs->size(), RenderPoolOptions{.parallelism = options_.render_parallelism},
      [&](size_t index) { return renderBundle(context, (*dirs)[index]); }, consume, [&] { delivery.progress(); });
  if (!rendered_all.ok()) {
    return failed ? *failed : transient(event, delivery, "render", rendered_all.error());
  }

  // 8. Bundles that left the repository.
  for (const auto& record : *records) {
    if (present.count(record.bundle) > 0) {
      continue;
    }
    delivery.progress();
    if (auto deleted = deleteBundle(record, event); !deleted.ok()) {
      return transient(event, delivery, "delete", deleted.error());
    }
  }
  log::info(
      "commit rendered",
      {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"bundles", static_cast<int64_t>(present.size())}});
  return Outcome::ack("rendered");
}

std::shared_ptr<std::mutex> CommitHandler::gitrepoLock(std::string_view workspace, std::string_view gitrepo) {
  std::lock_guard lock(locks_mutex_);
  auto& slot = gitrepo_locks_[std::string(workspace) + "/" + std::string(gitrepo)];
  if (!slot) {
    slot = std::make_shared<std::mutex>();
  }
  return slot;
}

Status CommitHandler::rerenderWorkspace(std::string_view workspace) {
  auto keys = bus_.bundles->keys(events::keyFilter({workspace}));
  if (!keys.ok()) {
    if (keys.error().kind == ErrorKind::kNotFound) {
      return {};
    }
    return fail(keys.error());
  }
  std::optional<Error> first_failure;
  size_t republished = 0;
  for (const auto& key : *keys) {
    auto entry = bus_.bundles->get(key);
    if (!entry.ok()) {
      if (entry.error().kind != ErrorKind::kNotFound && !first_failure) {
        first_failure = entry.error();
      }
      continue;
    }
    auto json = Json::parse(entry->value);
    auto record = json.ok() ? decodeBundleRecord(*json) : Result<BundleRecord>(fail(json.error()));
    if (!record.ok() || !record->last_good || record->last_good->variants_object.empty()) {
      continue;  // unreadable (logged by the commit path) or not rendered per cluster
    }
    bool changed = false;
    if (auto status = rerenderBundle(record->workspace, record->bundle, changed); !status.ok()) {
      metrics_.rerender("retry");
      log::warn("cannot re-render a bundle for changed clusters yet",
                {{"workspace", record->workspace}, {"bundle", record->bundle}, {"error", status.error().describe()}});
      if (!first_failure) {
        first_failure = status.error();
      }
      continue;
    }
    republished += changed ? 1 : 0;
  }
  if (first_failure) {
    return fail(*first_failure);
  }
  if (republished > 0) {
    log::info("re-rendered per-cluster bundles after a cluster change",
              {{"workspace", std::string(workspace)}, {"bundles", static_cast<int64_t>(republished)}});
  }
  return {};
}

Status CommitHandler::rerenderBundle(std::string_view workspace, std::string_view bundle, bool& changed) {
  changed = false;
  auto peek = bus_.bundles->get(events::bundleKey(workspace, bundle));
  if (!peek.ok()) {
    return peek.error().kind == ErrorKind::kNotFound ? Status{} : Status(fail(peek.error()));
  }
  auto peek_json = Json::parse(peek->value);
  auto peeked = peek_json.ok() ? decodeBundleRecord(*peek_json) : Result<BundleRecord>(fail(peek_json.error()));
  if (!peeked.ok()) {
    return {};
  }
  auto lock = gitrepoLock(peeked->workspace, peeked->gitrepo);
  std::lock_guard guard(*lock);
  // Read again under the lock: a commit may have rendered the bundle meanwhile.
  auto entry = bus_.bundles->get(events::bundleKey(workspace, bundle));
  if (!entry.ok()) {
    return entry.error().kind == ErrorKind::kNotFound ? Status{} : Status(fail(entry.error()));
  }
  auto json = Json::parse(entry->value);
  auto record = json.ok() ? decodeBundleRecord(*json) : Result<BundleRecord>(fail(json.error()));
  // A record whose latest render failed is re-rendered too: the change may be what fixes it (a label a template
  // needs); the same error again publishes nothing.
  if (!record.ok() || !record->last_good || record->last_good->variants_object.empty()) {
    metrics_.rerender("skipped");
    return {};
  }
  if (record->source_object.empty()) {
    metrics_.rerender("skipped");
    log::warn(
        "cannot re-render a per-cluster bundle: its record names no source archive (rendered before this "
        "version); the next commit will",
        {{"workspace", record->workspace}, {"bundle", record->bundle}});
    return {};
  }
  auto gitrepo = loadGitRepo(record->workspace, record->gitrepo);
  if (!gitrepo.ok()) {
    return fail(gitrepo.error());
  }
  if (!gitrepo->has_value()) {
    metrics_.rerender("skipped");
    return {};
  }
  events::CommitEvent commit;
  commit.workspace = record->workspace;
  commit.gitrepo = record->gitrepo;
  commit.commit = record->commit;
  commit.source_object = record->source_object;
  commit.force_sync_generation = record->last_good->force_sync_generation;
  auto archive = loadSource(commit);
  if (!archive.ok()) {
    if (archive.error().kind == ErrorKind::kNotFound || archive.error().kind == ErrorKind::kInvalid) {
      metrics_.rerender("skipped");
      log::warn("cannot re-render a per-cluster bundle: its source archive is gone or unreadable",
                {{"workspace", record->workspace},
                 {"bundle", record->bundle},
                 {"source_object", record->source_object},
                 {"error", archive.error().describe()}});
      return {};
    }
    return fail(archive.error());
  }
  auto checkout = extractCheckout(*archive, options_.work_dir);
  if (!checkout.ok()) {
    return fail(checkout.error());
  }
  const std::string root = checkout->root() + "/src";
  BundleDir dir{.path = record->path};
  for (const char* name : {"fleet.yaml", "fleet.yml"}) {
    const std::string relative = record->path == "." ? std::string(name) : record->path + "/" + name;
    std::error_code ec;
    if (fs::is_regular_file(fs::path(root) / relative, ec)) {
      dir.fleet_yaml = relative;
      break;
    }
  }
  const std::map<std::string, std::string> previous_ids = {{record->path, record->bundle}};
  const std::vector<ClusterFacts> workspace_clusters =
      clusters_ ? clusters_->snapshot(record->workspace) : std::vector<ClusterFacts>{};
  RenderContext context{root, commit, **gitrepo, *renderers_, options_.limits, previous_ids};
  context.clusters = &workspace_clusters;
  context.cache = &variant_cache_;
  auto rendered = renderBundle(context, dir);
  if (!rendered.ok()) {
    return fail(rendered.error());
  }
  metrics_.renderDuration(rendered->renderer, rendered->seconds);
  if (rendered->bundle != record->bundle) {
    metrics_.rerender("skipped");
    return {};
  }
  metrics_.variants(rendered->variant_renders, rendered->variant_cache_hits);
  const bool same_table =
      !rendered->error && !record->error && rendered->event.variants_object == record->last_good->variants_object;
  const bool same_error = rendered->error && record->error && *rendered->error == *record->error;
  if (same_table || same_error) {
    metrics_.rerender("unchanged");
    return {};
  }
  for (const auto& [id, manifest] : rendered->manifests) {
    FLOTILLA_TRY(storeManifest(manifest));
  }
  FLOTILLA_TRY(storeVariants(*rendered));
  FLOTILLA_TRY(commitBundle(*rendered, *record, record->commit_sequence));
  metrics_.rerender(rendered->error ? "error" : "published");
  log::info("bundle re-rendered for changed clusters",
            {{"workspace", record->workspace},
             {"bundle", record->bundle},
             {"commit", record->commit},
             {"variants_object", rendered->event.variants_object},
             {"renders", static_cast<int64_t>(rendered->variant_renders)},
             {"cache_hits", static_cast<int64_t>(rendered->variant_cache_hits)}});
  changed = true;
  return {};
}

}  // namespace flotilla::bundler
