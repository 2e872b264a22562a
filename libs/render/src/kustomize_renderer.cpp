// kustomize: `kustomize build` of a bundle's kustomization, and Fleet's post-render of helm output through it.
#include <array>
#include <filesystem>
#include <functional>
#include <mutex>

#include "flotilla/core/yaml.h"
#include "flotilla/render/discovery.h"
#include "flotilla/source/archive.h"
#include "tool_run.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace detail {

//! kustomize reads bases and components wherever they point (its load restrictor only covers files), so every
//! kustomization reachable from `dir` is checked first: local `resources`, `bases` and `components` must stay
//! inside the checkout (no absolute paths, no climbing out, no symlinks out), recursively. Remote entries (URLs)
//! are left to kustomize, which cannot reach the network.
Status checkKustomizationInside(const std::string& root, const std::string& dir, std::set<std::string>& visited) {
  if (!visited.insert(dir).second || visited.size() > 1000) {
    return {};
  }
  FLOTILLA_TRY(checkLinksInside(root, dir));
  std::string file;
  for (const char* name : {"kustomization.yaml", "kustomization.yml", "Kustomization"}) {
    std::error_code ec;
    if (fs::is_regular_file(root + "/" + joinRelative(dir, name), ec)) {
      file = joinRelative(dir, name);
      break;
    }
  }
  if (file.empty()) {
    return {};
  }
  auto text = readFile(root + "/" + file);
  if (!text.ok()) {
    return {};  // kustomize reports it
  }
  auto parsed = parseYaml(*text, file);
  if (!parsed.ok() || !parsed->isObject()) {
    return {};  // kustomize reports it, with its own message
  }
  for (const char* field : {"resources", "bases", "components"}) {
    const Json* entries = parsed->find(field);
    if (entries == nullptr || !entries->isArray()) {
      continue;
    }
    for (const auto& entry : entries->asArray()) {
      if (!entry.isString() || entry.asString().find("://") != std::string::npos) {
        continue;
      }
      const std::string& named = entry.asString();
      const std::string target = joinRelative(dir, named);
      if (startsWith(named, "/") || target == ".." || startsWith(target, "../") ||
          !source::resolveInside(root, target).ok()) {
        std::string message = file;
        message.append(": ").append(field).append(" entry \"").append(named);
        message += "\" is outside the repository checkout";
        return fail(ErrorKind::kInvalid, std::move(message), file);
      }
      std::error_code ec;
      if (fs::is_directory(std::string(root).append("/").append(target), ec)) {
        FLOTILLA_TRY(checkKustomizationInside(root, target, visited));
      }
    }
  }
  return {};
}

namespace {

//! Serialises post-renders of one kustomization directory (they write into the shared checkout): striped locks
//! by path, so unrelated directories rarely wait and nothing grows with the number of checkouts.
std::mutex& postRenderLock(const std::string& dir) {
  static std::array<std::mutex, 64> locks;
  return locks[std::hash<std::string>{}(dir) % locks.size()];
}

constexpr std::string_view kPostRenderManifests = "fleet-manifests.yaml";

}  // namespace

Result<std::vector<RenderedObject>> postRender(const std::string& kustomize_binary, const RenderRequest& request,
                                               const std::string& kustomize_dir, const std::string& helm_output,
                                               const std::string& scratch) {
  const std::string kustomization = joinRelative(kustomize_dir, "kustomization.yaml");
  auto path = source::resolveInside(request.root, kustomize_dir);
  if (!path.ok()) {
    return fail(ErrorKind::kInvalid, kustomization + ": resolves outside the repository checkout", kustomization);
  }
  std::set<std::string> visited;
  FLOTILLA_TRY(checkKustomizationInside(request.root, kustomize_dir, visited));
  std::lock_guard lock(postRenderLock(*path));
  const std::string file = *path + "/kustomization.yaml";
  auto original = readFile(file);
  if (!original.ok()) {
    return fail(ErrorKind::kInternal, "cannot read " + kustomization + ": " + original.error().message, "readFile");
  }
  const std::string manifests = *path + "/" + std::string(kPostRenderManifests);
  std::error_code ec;
  const bool had_manifests = fs::exists(manifests, ec);
  struct Restore {
    std::string file, text, manifests;
    bool had_manifests;
    ~Restore() {
      (void)writeFile(file, text);
      if (!had_manifests) {
        removeAll(manifests);
      }
    }
  } restore{file, *original, manifests, had_manifests};
  if (!trim(helm_output).empty()) {
    auto parsed = parseYaml(*original, kustomization, YamlLimits{.max_input_bytes = request.limits.max_file_bytes});
    if (!parsed.ok()) {
      return fail(ErrorKind::kInvalid, parsed.error().message, kustomization);
    }
    Json document = parsed->isObject() ? *parsed : Json::object();
    Json resources = Json::array();
    resources.push(std::string(kPostRenderManifests));
    if (const Json* listed = document.find("resources"); listed != nullptr && listed->isArray()) {
      for (const auto& resource : listed->asArray()) {
        if (!(resource == Json(std::string(kPostRenderManifests)))) {
          resources.push(resource);
        }
      }
    }
    document["resources"] = std::move(resources);
    FLOTILLA_TRY(writeFile(manifests, helm_output));
    FLOTILLA_TRY(writeFile(file, toYaml(document)));
  }
  auto result = run(kustomize_binary, {"build", *path}, scratch, request.limits, "kustomize build");
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->timed_out || result->exit_code != 0) {
    const std::string text =
        result->timed_out ? std::string("did not finish in time")
                          : withoutRoot(lastLines(result->err.empty() ? result->out : result->err), request.root);
    return fail(ErrorKind::kInvalid, kustomization + ": kustomize build (post-rendering the chart) failed: " + text,
                kustomization);
  }
  return parseManifestText(result->out, kustomization, request.limits.max_output_bytes);
}

}  // namespace detail

using detail::checkKustomizationInside;
using detail::isDirectory;
using detail::lastLines;
using detail::run;
using detail::Scratch;
using detail::withoutRoot;

Result<std::vector<RenderedObject>> KustomizeRenderer::render(const RenderRequest& request) const {
  const auto& kustomize = request.options.kustomize;
  const std::string dir =
      joinRelative(request.bundle_path, kustomize && !kustomize->dir.empty() ? kustomize->dir : ".");
  const std::string kustomization = joinRelative(dir, "kustomization.yaml");
  auto path = source::resolveInside(request.root, dir);
  if (!path.ok() || !isDirectory(*path)) {
    const std::string fleet_yaml = joinRelative(request.bundle_path, "fleet.yaml");
    return fail(ErrorKind::kInvalid, fleet_yaml + ": kustomize.dir: no directory \"" + dir + "\"", fleet_yaml);
  }
  std::set<std::string> visited;
  FLOTILLA_TRY(checkKustomizationInside(request.root, dir, visited));
  auto scratch = Scratch::create(request.root, "kustomize");
  if (!scratch.ok()) {
    return fail(scratch.error());
  }
  auto result = run(binary_, {"build", *path}, scratch->dir(), request.limits, "kustomize build");
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->timed_out) {
    return fail(ErrorKind::kInvalid,
                kustomization + ": kustomize build did not finish within " +
                    std::to_string(request.limits.timeout.count() / 1000) + "s",
                kustomization);
  }
  if (result->exit_code != 0) {
    // kustomize names absolute paths; show them relative to the checkout.
    const std::string text = withoutRoot(lastLines(result->err.empty() ? result->out : result->err), request.root);
    return fail(ErrorKind::kInvalid, kustomization + ": kustomize build failed: " + text, kustomization);
  }
  if (result->out.size() > request.limits.max_output_bytes) {
    return fail(ErrorKind::kInvalid,
                kustomization + ": the kustomization renders more than " +
                    std::to_string(request.limits.max_output_bytes) + " bytes",
                kustomization);
  }
  return parseManifestText(result->out, kustomization, request.limits.max_output_bytes);
}

}  // namespace flotilla::render
