// Shared by the external renderers (helm_renderer.cpp, helm_sources.cpp, kustomize_renderer.cpp): running a pinned
// tool offline or for a fetch step, scratch directories, and the checks that keep a tool inside the checkout.
// Internal to libs/render.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <stdlib.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/render/discovery.h"
#include "flotilla/render/external_renderers.h"

namespace flotilla::render::detail {

//! A scratch directory next to the checkout (inside the commit's work directory), removed on destruction.
class Scratch {
 public:
  static Result<Scratch> create(const std::string& root, std::string_view prefix) {
    std::string pattern = std::filesystem::path(root).parent_path().string() + "/" + std::string(prefix) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return fail(ErrorKind::kInternal, "cannot create a scratch directory next to " + root, "mkdtemp");
    }
    return Scratch(pattern);
  }
  Scratch(Scratch&& other) noexcept : dir_(std::exchange(other.dir_, {})) {}
  Scratch& operator=(Scratch&&) = delete;
  Scratch(const Scratch&) = delete;
  ~Scratch() {
    if (!dir_.empty()) {
      removeAll(dir_);
    }
  }
  [[nodiscard]] const std::string& dir() const { return dir_; }

 private:
  explicit Scratch(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

//! The environment of a fetch step: its own HOME, caches and Helm repository config, the network allowed.
std::map<std::string, std::string> networkEnv(const std::string& scratch);
//! The environment of a renderer: as a fetch step's, and no way out to the network.
std::map<std::string, std::string> sandboxEnv(const std::string& scratch);
//! The end of a tool's output, for error messages.
std::string lastLines(std::string_view text, size_t max_chars = 2000);
//! `text` with every "<root>/" removed: tools name absolute paths, errors show them relative to the checkout.
std::string withoutRoot(std::string text, const std::string& root);
//! `text` with `secret` replaced by [REDACTED].
std::string scrub(std::string text, const std::string& secret);

enum class Network { kOffline, kAllowed };

//! Runs `binary args...` in `scratch` with the render limits; only a tool that cannot run is an error here.
Result<CommandResult> run(const std::string& binary, std::vector<std::string> args, const std::string& scratch,
                          const RenderLimits& limits, const std::string& what, Network network = Network::kOffline,
                          std::string input = {});

bool isDirectory(const std::string& path);

//! Symlinks under `relative` (a directory of the checkout) that resolve outside it: refused before a tool that
//! follows links (helm, kustomize) reads the directory.
Status checkLinksInside(const std::string& root, const std::string& relative);

//! Every kustomization reachable from `dir` stays inside the checkout (kustomize_renderer.cpp).
Status checkKustomizationInside(const std::string& root, const std::string& dir, std::set<std::string>& visited);

//! Fleet's Helm post-render: helm's output becomes a resource of the bundle's kustomization (kustomize_renderer.cpp).
Result<std::vector<RenderedObject>> postRender(const std::string& kustomize_binary, const RenderRequest& request,
                                               const std::string& kustomize_dir, const std::string& helm_output,
                                               const std::string& scratch);

//! A chart ready for `helm template`: an archive or a directory, and how to name its files in errors.
struct PreparedChart {
  std::string path;   //!< absolute
  std::string label;  //!< what "# Source: <chart>/..." maps to (a checkout directory or "<name>-<version>")
};

// Chart sources (helm_sources.cpp).

//! helm.repo + helm.chart (+ helm.version): the repository's index resolves the version, the cache is looked up
//! by (repo, chart, version, digest), and only a miss downloads the archive.
Result<PreparedChart> fetchRepoChart(const std::string& binary, const HelmRendererOptions& options,
                                     const RenderRequest& request, const std::string& scratch,
                                     const std::string& fleet_yaml, RenderNotes& notes);
//! helm.chart as a chart archive URL or an oci:// reference: pulled on every render, then described offline.
Result<PreparedChart> fetchChartReference(const std::string& binary, const HelmRendererOptions& options,
                                          const RenderRequest& request, const std::string& scratch,
                                          const std::string& fleet_yaml, RenderNotes& notes);
//! A local chart whose Chart.yaml declares dependencies missing from charts/: a copy gets `helm dependency build`.
Result<PreparedChart> buildDependencies(const std::string& binary, const HelmRendererOptions& options,
                                        const RenderRequest& request, const std::string& scratch,
                                        const std::string& chart_dir, const std::string& chart_path);

// What the chart sources fetch, resolved for the render cache (HelmRenderer::resolveRemoteInputs); each result is a
// length-prefixed list of fields. kPermanent when something cannot be resolved without rendering.

//! helm.repo + helm.chart: (repository, chart, version, index digest); the index is fetched, the chart is not.
Result<std::string> resolveRepoChartIdentity(const std::string& binary, const HelmRendererOptions& options,
                                             const RenderRequest& request, const std::string& scratch,
                                             const std::string& fleet_yaml);
//! A chart URL / oci:// reference: (reference, helm.version, sha256 of the archive); the archive is pulled.
Result<std::string> resolveChartReferenceIdentity(const std::string& binary, const HelmRendererOptions& options,
                                                  const RenderRequest& request, const std::string& scratch,
                                                  const std::string& fleet_yaml);
//! A local chart's dependencies that buildDependencies would fetch: (repository, name, version, index digest) each;
//! "" when charts/ has them all or dependency updates are disabled.
Result<std::string> resolveDependencyIdentity(const std::string& binary, const HelmRendererOptions& options,
                                              const RenderRequest& request, const std::string& scratch,
                                              const std::string& chart_dir, const std::string& chart_path);

}  // namespace flotilla::render::detail
