#include <functional>

#include "flotilla/core/log.h"
#include "flotilla/render/external_renderers.h"

namespace flotilla::render {

std::shared_ptr<const RendererSet> makeRenderers(const RendererBinaries& binaries) {
  auto set = std::make_shared<RendererSet>();
  const std::string kustomize_path = binaries.kustomize.empty() ? std::string() : findExecutable(binaries.kustomize);
  struct Tool {
    const std::string& requested;
    const char* what;
    std::function<void(const std::string&)> install;
  };
  for (const Tool& tool : {Tool{binaries.helm, "helm",
                                [&](const std::string& path) {
                                  set->setHelm(std::make_shared<HelmRenderer>(
                                      path, HelmRendererOptions{.kustomize_binary = kustomize_path,
                                                                .chart_cache_dir = binaries.chart_cache_dir,
                                                                .credentials_dir = binaries.credentials_dir}));
                                }},
                           Tool{binaries.kustomize, "kustomize", [&](const std::string& path) {
                                  set->setKustomize(std::make_shared<KustomizeRenderer>(path));
                                }}}) {
    if (tool.requested.empty()) {
      log::info("renderer disabled", {{"renderer", tool.what}});
      continue;
    }
    std::string path = findExecutable(tool.requested);
    if (path.empty()) {
      log::warn("renderer binary not found; its bundles will get an error event",
                {{"renderer", tool.what}, {"binary", tool.requested}});
      continue;
    }
    log::info("renderer enabled", {{"renderer", tool.what}, {"binary", path}});
    tool.install(path);
  }
  return set;
}

}  // namespace flotilla::render
