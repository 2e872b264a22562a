#include "flotilla/render/render_bundle.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "flotilla/model/option_support.h"
#include "flotilla/render/bundle_spec.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/source/archive.h"
#include "render_steps.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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

//! A bundle's fleet.yaml (optional): decoded, or why not (with the `name:` read leniently).
struct FleetYamlRead {
  model::FleetYaml fleet_yaml;
  std::optional<Error> error;
};

FleetYamlRead readBundleFleetYaml(const RenderContext& context, const BundleDir& dir) {
  FleetYamlRead out;
  if (dir.fleet_yaml.empty()) {
    return out;
  }
  auto text = readFleetYaml(context.root, dir.fleet_yaml, context.limits.max_file_bytes);
  if (!text.ok()) {
    out.error = text.error();
    return out;
  }
  auto decoded = model::decodeFleetYaml(*text, dir.fleet_yaml);
  if (decoded.ok()) {
    out.fleet_yaml = std::move(decoded).value();
  } else {
    out.error = decoded.error();
    out.fleet_yaml.name = lenientName(*text, dir.fleet_yaml);
  }
  return out;
}

//! The bundle ID (Fleet's naming) and the event's identity fields. A broken fleet.yaml keeps the bundle's recorded
//! identity.
void setIdentity(const RenderContext& context, const BundleDir& dir, FleetYamlRead& read, RenderedBundle& out) {
  const auto& commit = context.commit;
  if (read.error && read.fleet_yaml.name.empty()) {
    if (auto previous = context.previous_ids.find(dir.path); previous != context.previous_ids.end()) {
      read.fleet_yaml.name = previous->second;
    }
  }
  const std::string id_path = dir.path == "." ? std::string() : dir.path;
  out.bundle = model::bundleID(commit.gitrepo, id_path, read.fleet_yaml.name);
  out.event.workspace = commit.workspace;
  out.event.gitrepo = commit.gitrepo;
  out.event.bundle = out.bundle;
  out.event.path = dir.path;
  out.event.commit = commit.commit;
  out.event.force_sync_generation = commit.force_sync_generation;
}

//! Options Flotilla does not implement (model::unsupportedOptionFields) are refused here, naming the field, so the
//! user sees it at render time and the last good deployment stays.
Status checkSupported(const model::FleetYaml& fleet_yaml, const model::BundleDeploymentOptions& defaults) {
  FLOTILLA_TRY(model::checkSupportedOptions(defaults, ""));
  for (size_t i = 0; i < fleet_yaml.spec.targets.size(); ++i) {
    FLOTILLA_TRY(
        model::checkSupportedOptions(fleet_yaml.spec.targets[i].options, "targets[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < fleet_yaml.target_customizations.size(); ++i) {
    FLOTILLA_TRY(model::checkSupportedOptions(fleet_yaml.target_customizations[i].options,
                                              "targetCustomizations[" + std::to_string(i) + "]"));
  }
  return {};
}

//! The default render and one render per distinct customization (renderKey); no per-cluster work.
Status renderOncePerCustomization(const RenderContext& context, const BundleDir& dir,
                                  const model::FleetYaml& fleet_yaml, const model::BundleDeploymentOptions& defaults,
                                  RenderedBundle& out) {
  auto manifest = detail::renderOnce(context, dir, out.bundle, defaults, out.renderer, &out.notes);
  FLOTILLA_TRY(manifest);
  std::map<std::string, std::string> by_key = {{renderKey(defaults), manifest->manifest_id}};
  out.event.manifest_id = manifest->manifest_id;
  out.manifests.emplace(out.event.manifest_id, std::move(manifest).value());
  for (const auto& customization : customizations(fleet_yaml, defaults, context.gitrepo)) {
    events::TargetManifest target{.name = customization.name,
                                  .target = targetMatcher(customization.target),
                                  .options = model::encodeOptions(customization.options)};
    if (!customization.target.do_not_deploy) {
      const std::string key = renderKey(customization.options);
      auto known = by_key.find(key);
      if (known == by_key.end()) {
        std::string renderer_name;
        auto rendered = detail::renderOnce(context, dir, out.bundle, customization.options, renderer_name);
        FLOTILLA_TRY(rendered);
        const std::string id = rendered->manifest_id;
        known = by_key.emplace(key, id).first;
        out.manifests.emplace(id, std::move(rendered).value());
      }
      target.manifest_id = known->second;
    }
    out.event.customizations.push_back(std::move(target));
  }
  return {};
}

//! The rest of the event: options, mode, targets, dependsOn, rollout, paused, labels.
void completeEvent(const RenderContext& context, const model::FleetYaml& fleet_yaml,
                   const model::BundleDeploymentOptions& defaults, events::BundleEvent& event) {
  event.options = model::encodeOptions(defaults);
  event.customization_mode = fleet_yaml.spec.target_customization_mode;
  event.targets = bundleTargets(fleet_yaml, context.gitrepo);
  event.depends_on = Json::array();
  for (const auto& ref : fleet_yaml.spec.depends_on) {
    event.depends_on.push(model::encodeBundleRef(ref));
  }
  if (fleet_yaml.spec.rollout_strategy) {
    event.rollout_strategy = model::encodeRolloutStrategy(*fleet_yaml.spec.rollout_strategy);
  }
  event.paused = fleet_yaml.spec.paused || context.gitrepo.spec.paused;
  for (const auto& [k, v] : bundleLabels(fleet_yaml, context.gitrepo)) {
    event.labels[k] = v;
  }
}

}  // namespace

Result<std::string> resolveRemoteInputs(const RenderContext& context, const BundleDir& dir) {
  FleetYamlRead read = readBundleFleetYaml(context, dir);
  if (read.error) {
    return fail(*read.error);
  }
  const auto defaults = defaultOptions(read.fleet_yaml, context.gitrepo, context.commit.force_sync_generation);
  FLOTILLA_TRY(checkSupported(read.fleet_yaml, defaults));
  if (context.force_variants || detail::needsVariants(context, dir, read.fleet_yaml, defaults)) {
    // Rendered per cluster, from cluster facts the key does not cover: never cached, so nothing to resolve.
    return fail(ErrorKind::kPermanent, dir.path + ": rendered per cluster", dir.path);
  }
  // Every render renderOncePerCustomization would make, each distinct set of options once.
  std::vector<const model::BundleDeploymentOptions*> renders = {&defaults};
  const auto all = customizations(read.fleet_yaml, defaults, context.gitrepo);
  std::set<std::string> seen = {renderKey(defaults)};
  for (const auto& customization : all) {
    if (!customization.target.do_not_deploy && seen.insert(renderKey(customization.options)).second) {
      renders.push_back(&customization.options);
    }
  }
  std::string identity;
  for (const auto* options : renders) {
    auto renderer = context.renderers.choose(context.root, dir.path, *options);
    FLOTILLA_TRY(renderer);
    RenderRequest request{context.root, dir.path, std::string(), *options, context.limits};
    request.helm_access = helmRepoAccessOf(context.gitrepo);
    auto resolved = (*renderer)->resolveRemoteInputs(request);
    FLOTILLA_TRY(resolved);
    identity += std::to_string(resolved->size()) + ":" + *resolved;
  }
  return identity;
}

Result<RenderedBundle> renderBundle(const RenderContext& context, const BundleDir& dir) {
  auto start = Clock::now();
  RenderedBundle out;
  out.path = dir.path;
  out.renderer = "raw";
  out.source_object = context.commit.source_object;
  auto failWith = [&](const Error& error, std::string_view fallback_file) -> Result<RenderedBundle> {
    if (!isUserError(error)) {
      return fail(error);
    }
    out.error = renderErrorOf(error, fallback_file);
    out.event.error = out.error;
    out.seconds = secondsSince(start);
    return std::move(out);
  };
  FleetYamlRead read = readBundleFleetYaml(context, dir);
  setIdentity(context, dir, read, out);
  if (read.error) {
    return failWith(*read.error, dir.fleet_yaml);
  }
  // Per-cluster variants when the output depends on the cluster (variants.h); otherwise one render per distinct
  // customization.
  const auto defaults = defaultOptions(read.fleet_yaml, context.gitrepo, context.commit.force_sync_generation);
  if (auto supported = checkSupported(read.fleet_yaml, defaults); !supported.ok()) {
    return failWith(supported.error(), dir.fleet_yaml.empty() ? dir.path : dir.fleet_yaml);
  }
  if (context.force_variants || detail::needsVariants(context, dir, read.fleet_yaml, defaults)) {
    if (auto variants = detail::renderVariants(context, dir, read.fleet_yaml, out); !variants.ok()) {
      return failWith(variants.error(), dir.fleet_yaml.empty() ? dir.path : dir.fleet_yaml);
    }
  } else if (auto rendered = renderOncePerCustomization(context, dir, read.fleet_yaml, defaults, out); !rendered.ok()) {
    return failWith(rendered.error(), dir.path);
  }
  completeEvent(context, read.fleet_yaml, defaults, out.event);
  out.seconds = secondsSince(start);
  return out;
}
}  // namespace flotilla::render
