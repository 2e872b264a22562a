#include "flotilla/render/render.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <sys/stat.h>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/render/discovery.h"
#include "flotilla/render/patch.h"
#include "flotilla/source/archive.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace {

std::string at(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

Failure invalidAt(const std::string& file, int line, const std::string& what) {
  return fail(ErrorKind::kInvalid, at(file, line) + ": " + what, at(file, line));
}

bool isRegular(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(fs::status(path, ec));
}

//! Reads a file of the checkout named by a relative path, refusing links out of it and files over the limit.
Result<std::string> readCheckoutFile(const std::string& root, const std::string& relative, uint64_t max_bytes) {
  auto resolved = source::resolveInside(root, relative);
  if (!resolved.ok()) {
    return invalidAt(relative, 0, "resolves outside the repository checkout");
  }
  struct stat info {};
  if (::stat(resolved->c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return invalidAt(relative, 0, "not a regular file");
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return invalidAt(relative, 0,
                     "file is " + std::to_string(info.st_size) + " bytes, more than the limit of " +
                         std::to_string(max_bytes) + " bytes");
  }
  auto text = readFile(*resolved);
  if (!text.ok()) {
    return fail(ErrorKind::kInternal, "cannot read " + relative + ": " + text.error().message, "readFile");
  }
  return std::move(text).value();
}

//! The files under overlays/<name>/ of a bundle, relative to that overlay directory.
Result<std::vector<std::string>> overlayFiles(const std::string& root, const std::string& overlay_dir) {
  std::vector<std::string> files;
  std::vector<std::string> stack = {""};
  while (!stack.empty()) {
    std::string sub = stack.back();
    stack.pop_back();
    std::error_code ec;
    const std::string abs = root + "/" + joinRelative(overlay_dir, sub.empty() ? "." : sub);
    for (fs::directory_iterator it(abs, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.front() == '.') {
        continue;
      }
      const std::string relative = sub.empty() ? name : joinRelative(sub, name);
      auto status = it->symlink_status(ec);
      if (fs::is_directory(status)) {
        stack.push_back(relative);
      } else if (fs::is_regular_file(status) || fs::is_symlink(status)) {
        files.push_back(relative);
      }
    }
    if (ec) {
      return fail(ErrorKind::kInternal, "cannot list " + abs + ": " + ec.message(), "directory_iterator");
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

//! "dir/x_patch.yaml" -> "dir/x.yaml" (Fleet's isPatchFile), or "" when the name is not a patch.
std::string patchTarget(const std::string& relative) {
  auto slash = relative.rfind('/');
  std::string dir = slash == std::string::npos ? "" : relative.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? relative : relative.substr(slash + 1);
  auto marker = base.find("_patch.");
  if (marker == std::string::npos) {
    return {};
  }
  return dir + base.substr(0, marker) + "." + base.substr(marker + 7);
}

//! Applies yaml.overlays to the bundle's files (keys relative to the checkout root) the way Fleet's agent does.
Status applyOverlays(const RenderRequest& request, std::map<std::string, std::string>& contents) {
  for (const auto& overlay : request.options.yaml->overlays) {
    if (!source::isSafeRelativePath(overlay) || overlay.find('/') != std::string::npos) {
      return fail(ErrorKind::kInvalid, "yaml.overlays: \"" + overlay + "\" is not an overlay name",
                  joinRelative(request.bundle_path, "fleet.yaml"));
    }
    const std::string overlay_dir = joinRelative(request.bundle_path, "overlays/" + overlay);
    auto resolved = source::resolveInside(request.root, overlay_dir);
    std::error_code ec;
    if (!resolved.ok() || !fs::is_directory(fs::status(*resolved, ec))) {
      return invalidAt(overlay_dir, 0, "overlay \"" + overlay + "\" (yaml.overlays) is not a directory of the bundle");
    }
    auto files = overlayFiles(request.root, overlay_dir);
    if (!files.ok()) {
      return fail(files.error());
    }
    for (const auto& file : *files) {
      const std::string source_path = joinRelative(overlay_dir, file);
      auto text = readCheckoutFile(request.root, source_path, request.limits.max_file_bytes);
      if (!text.ok()) {
        return fail(text.error());
      }
      const std::string target = patchTarget(file);
      if (target.empty()) {
        contents[joinRelative(request.bundle_path, file)] = std::move(text).value();
        continue;
      }
      const std::string target_path = joinRelative(request.bundle_path, target);
      auto base = contents.find(target_path);
      if (base == contents.end()) {
        return invalidAt(source_path, 0, "cannot find the file to patch, " + target_path);
      }
      auto patch = parseYaml(*text, source_path, YamlLimits{.max_input_bytes = request.limits.max_file_bytes});
      if (!patch.ok()) {
        return fail(patch.error());
      }
      auto original =
          parseYaml(base->second, target_path, YamlLimits{.max_input_bytes = request.limits.max_file_bytes});
      if (!original.ok()) {
        return fail(original.error());
      }
      Json patched = std::move(original).value();
      if (auto status = applyOverlayPatch(patched, *patch); !status.ok()) {
        return invalidAt(source_path, 0, "cannot patch " + target_path + ": " + status.error().message);
      }
      base->second = patched.dump();
    }
  }
  return {};
}

}  // namespace

std::string RenderedObject::origin() const {
  return at(file, line);
}

std::pair<std::string, int64_t> splitWhere(std::string_view where) {
  auto colon = where.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == where.size()) {
    return {std::string(where), 0};
  }
  std::string_view digits = where.substr(colon + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9) {
    return {std::string(where), 0};
  }
  return {std::string(where.substr(0, colon)), std::stoll(std::string(digits))};
}

Status validateObject(const Json& document) {
  if (!document.isObject()) {
    return fail(
        ErrorKind::kInvalid,
        "expected a Kubernetes object (a map with apiVersion, kind and metadata.name), got " + jsonTypeName(document));
  }
  for (const char* field : {"apiVersion", "kind"}) {
    const Json* value = document.find(field);
    if (value == nullptr || value->isNull()) {
      return fail(ErrorKind::kInvalid, std::string("not a Kubernetes object: ") + field + " is missing");
    }
    if (!value->isString() || value->asString().empty()) {
      return fail(ErrorKind::kInvalid, std::string("not a Kubernetes object: ") + field +
                                           " must be a non-empty string, got " + jsonTypeName(*value));
    }
  }
  const Json* metadata = document.find("metadata");
  if (metadata == nullptr || !metadata->isObject()) {
    return fail(ErrorKind::kInvalid, "not a Kubernetes object: metadata.name is missing");
  }
  const Json* name = metadata->find("name");
  if (name == nullptr || !name->isString() || name->asString().empty()) {
    return fail(ErrorKind::kInvalid, "not a Kubernetes object: metadata.name is missing");
  }
  if (const Json* ns = metadata->find("namespace"); ns != nullptr && !ns->isNull() && !ns->isString()) {
    return fail(ErrorKind::kInvalid, "metadata.namespace must be a string, got " + jsonTypeName(*ns));
  }
  return {};
}

Result<std::vector<RenderedObject>> parseManifestText(std::string_view text, const std::string& file,
                                                      uint64_t max_bytes) {
  auto documents = parseYamlDocuments(text, file, YamlLimits{.max_input_bytes = max_bytes});
  if (!documents.ok()) {
    const auto [where_file, line] = splitWhere(documents.error().where);
    return invalidAt(file, static_cast<int>(line), documents.error().message);
  }
  std::vector<RenderedObject> objects;
  for (auto& document : *documents) {
    if (document.value.isNull()) {
      continue;
    }
    const std::string* kind = nullptr;
    if (const Json* k = document.value.find("kind"); k != nullptr && k->isString()) {
      kind = &k->asString();
    }
    const Json* items = document.value.find("items");
    if (kind != nullptr && endsWith(*kind, "List") && items != nullptr && items->isArray()) {
      // kubectl's List (and typed lists such as ConfigMapList): apply the items.
      for (size_t i = 0; i < items->asArray().size(); ++i) {
        const Json& item = items->asArray()[i];
        if (auto status = validateObject(item); !status.ok()) {
          return invalidAt(file, document.line, "items[" + std::to_string(i) + "]: " + status.error().message);
        }
        objects.push_back(RenderedObject{item, file, document.line});
      }
      continue;
    }
    if (auto status = validateObject(document.value); !status.ok()) {
      return invalidAt(file, document.line, status.error().message);
    }
    objects.push_back(RenderedObject{std::move(document.value), file, document.line});
  }
  return objects;
}

Result<std::vector<RenderedObject>> RawRenderer::render(const RenderRequest& request) const {
  FileSelection selection;
  if (request.options.helm) {
    selection.extra_excludes = request.options.helm->values_files;
  }
  auto files = collectManifestFiles(request.root, request.bundle_path, selection);
  if (!files.ok()) {
    return fail(files.error());
  }
  std::map<std::string, std::string> contents;
  uint64_t total = 0;
  for (const auto& file : *files) {
    auto text = readCheckoutFile(request.root, file, request.limits.max_file_bytes);
    if (!text.ok()) {
      return fail(text.error());
    }
    total += text->size();
    if (total > request.limits.max_output_bytes) {
      return invalidAt(
          request.bundle_path, 0,
          "the bundle's manifests exceed the limit of " + std::to_string(request.limits.max_output_bytes) + " bytes");
    }
    contents.emplace(file, std::move(text).value());
  }
  if (request.options.yaml && !request.options.yaml->overlays.empty()) {
    FLOTILLA_TRY(applyOverlays(request, contents));
  }
  std::vector<RenderedObject> objects;
  for (const auto& [file, text] : contents) {
    auto name = fs::path(file).filename().string();
    if (!(endsWith(name, ".yaml") || endsWith(name, ".yml") || endsWith(name, ".json"))) {
      continue;  // an overlay may add other files; only manifests count
    }
    auto parsed = parseManifestText(text, file, request.limits.max_file_bytes);
    if (!parsed.ok()) {
      return fail(parsed.error());
    }
    for (auto& object : *parsed) {
      objects.push_back(std::move(object));
    }
  }
  return objects;
}

RendererSet::RendererSet() : raw_(std::make_shared<RawRenderer>()) {}

std::vector<std::string> RendererSet::executables() const {
  std::vector<std::string> out;
  for (const auto& renderer : {raw_, helm_, kustomize_}) {
    if (renderer) {
      auto own = renderer->executables();
      out.insert(out.end(), own.begin(), own.end());
    }
  }
  return out;
}

Result<const Renderer*> RendererSet::choose(const std::string& root, std::string_view bundle_path,
                                            const model::BundleDeploymentOptions& options) const {
  const std::string bundle(bundle_path.empty() ? "." : bundle_path);
  const std::string fleet_yaml = joinRelative(bundle, "fleet.yaml");
  bool helm = false;
  if (options.helm) {
    const auto& chart = options.helm->chart;
    const bool remote =
        !options.helm->repo.empty() || chart.find("://") != std::string::npos || startsWith(chart, "oci:");
    if (remote) {
      helm = true;
    } else if (!chart.empty()) {
      auto resolved = source::resolveInside(root, joinRelative(bundle, chart) + "/Chart.yaml");
      if (!resolved.ok() || !isRegular(*resolved)) {
        return fail(ErrorKind::kInvalid, "helm.chart: no chart at \"" + chart + "\" in the bundle", fleet_yaml);
      }
      helm = true;
    }
  }
  if (!helm) {
    auto resolved = source::resolveInside(root, joinRelative(bundle, "Chart.yaml"));
    helm = resolved.ok() && isRegular(*resolved);
  }
  if (helm) {
    if (!helm_) {
      return fail(ErrorKind::kInvalid, "Helm charts are not supported by this bundler (no helm binary configured)",
                  fleet_yaml);
    }
    return helm_.get();
  }
  const std::string kustomize_dir = options.kustomize && !options.kustomize->dir.empty() ? options.kustomize->dir : ".";
  auto kustomization =
      source::resolveInside(root, joinRelative(joinRelative(bundle, kustomize_dir), "kustomization.yaml"));
  if (kustomization.ok() && isRegular(*kustomization)) {
    if (!kustomize_) {
      return fail(ErrorKind::kInvalid,
                  "kustomize bundles are not supported by this bundler (no kustomize binary configured)", fleet_yaml);
    }
    return kustomize_.get();
  }
  if (options.kustomize && !options.kustomize->dir.empty()) {
    return fail(ErrorKind::kInvalid,
                "kustomize.dir: no kustomization.yaml in \"" + options.kustomize->dir + "\" of the bundle", fleet_yaml);
  }
  return raw_.get();
}

}  // namespace flotilla::render
