// flotilla/render/external_renderers.h
//
// Renderers that run a pinned binary: `helm template` for Helm bundles and `kustomize build` for kustomize
// bundles. Rendering always runs offline: a time limit (RenderLimits::timeout), an output cap
// (RenderLimits::max_output_bytes), a private HOME/cache, and HTTP(S) proxies pointed at a closed port, so a
// render can only read the checkout (and charts fetched before it). Output goes through the same parsing and
// object checks as raw YAML.
//
// Helm (Fleet's helm options):
//  - chart source, fetched in a separate step that may use the network (same time limit; archives capped at
//    RenderLimits::max_file_bytes): a local chart <bundle>/<helm.chart or ".">; helm.repo + helm.chart (+
//    helm.version, a semver constraint resolved against the repository's index.yaml); a chart archive URL
//    (helm.chart: https://.../x.tgz); or oci://. Repository charts are cached by (repo, chart, resolved version,
//    digest) in HelmRendererOptions::chart_cache_dir. A local chart whose Chart.yaml dependencies are missing from
//    charts/ gets `helm dependency build` on a copy (unless helm.disableDependencyUpdate).
//  - credentials: the GitRepo's helmSecretName (for repository URLs matching helmRepoURLRegex) read from the
//    credentials dir (Secret-shaped, keys username, password, cacerts — the poller's format);
//    insecureSkipTLSVerify from the GitRepo.
//  - release name = helm.releaseName or the bundle ID; namespace = the `namespace` option, else
//    `defaultNamespace`, else "default"; values = helm.values, then each helm.valuesFiles entry (relative to the
//    bundle, resolved inside the checkout; later ones win, as in Fleet); CRDs included, chart tests skipped.
//  - post-rendering (Fleet's): when <bundle>/<kustomize.dir or ".">/kustomization.yaml exists, helm's output is
//    written next to it as fleet-manifests.yaml, prepended to its `resources`, and the result of `kustomize
//    build` is the bundle's objects.
//  - templates that render nothing are skipped; the "# Source:" comments map each object back to its template
//    file for error messages. valuesFrom is read downstream in Fleet (passed on as an option), ${ } templating
//    happens per cluster.
//
// kustomize: `kustomize build <bundle>/<kustomize.dir or ".">` with the default load restrictor (files must stay
// inside the kustomization root). Objects are attributed to the kustomization.yaml.
//
// Symlinks in a chart or kustomization directory that leave the checkout are refused before the tool runs.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "flotilla/model/resources.h"
#include "flotilla/render/render.h"

namespace flotilla::render {

struct HelmRendererOptions {
  std::string kustomize_binary;  //!< post-renders charts of bundles with a kustomization.yaml ("" = no post-render)
  std::string chart_cache_dir;   //!< where pulled repository charts are kept ("" = pull on every render)
  std::string credentials_dir;   //!< Secret-shaped helm credentials by name ("" = none available)
};

class HelmRenderer : public Renderer {
 public:
  //! `binary`: path of the helm executable.
  explicit HelmRenderer(std::string binary, HelmRendererOptions options = {})
      : binary_(std::move(binary)), options_(std::move(options)) {}
  [[nodiscard]] std::string_view name() const override { return "helm"; }
  [[nodiscard]] Result<std::vector<RenderedObject>> render(const RenderRequest& request) const override;
  //! helm, and kustomize when it post-renders.
  [[nodiscard]] std::vector<std::string> executables() const override;
  //! The chart it would fetch, resolved: helm.repo charts to (repository, chart, version, index digest) with no
  //! download; chart URLs and oci:// references to (reference, version, sha256 of the pulled archive); a local
  //! chart's dependencies from http(s) repositories that charts/ lacks to (repository, name, version, index digest).
  [[nodiscard]] Result<std::string> resolveRemoteInputs(const RenderRequest& request) const override;

 private:
  std::string binary_;
  HelmRendererOptions options_;
};

//! True when the Helm options name a chart that must be fetched: helm.repo, a URL or oci://.
bool isRemoteChart(const model::HelmOptions& helm);

//! The chart repository access a GitRepo grants (helmSecretName, helmRepoURLRegex, insecureSkipTLSVerify).
HelmRepoAccess helmRepoAccessOf(const model::GitRepo& gitrepo);

class KustomizeRenderer : public Renderer {
 public:
  explicit KustomizeRenderer(std::string binary) : binary_(std::move(binary)) {}
  [[nodiscard]] std::string_view name() const override { return "kustomize"; }
  [[nodiscard]] Result<std::vector<RenderedObject>> render(const RenderRequest& request) const override;
  [[nodiscard]] std::vector<std::string> executables() const override { return {binary_}; }

 private:
  std::string binary_;
};

//! The full path of `name` (as is when it contains a '/'), searched in $PATH; "" when not found or not executable.
std::string findExecutable(std::string_view name);

//! Splits `helm template` output into objects, attributing each to its "# Source:" template: a source
//! "<chart>/templates/x.yaml" becomes "<chart_dir>/templates/x.yaml". Errors name that file and the line within
//! the rendered template.
Result<std::vector<RenderedObject>> parseHelmOutput(std::string_view output, const std::string& chart_dir,
                                                    uint64_t max_bytes);

//! Where the external renderers are (the bundler's flags, `flotilla render`'s tool lookup).
struct RendererBinaries {
  std::string helm;             //!< "" = Helm bundles are reported as unsupported
  std::string kustomize;        //!< "" = kustomize bundles are reported as unsupported
  std::string chart_cache_dir;  //!< --chart-cache-dir (default <work-dir>/chart-cache)
  std::string credentials_dir;  //!< --credentials-dir: helmSecretName secrets
};

//! The renderers for these binaries: raw always, Helm and kustomize when their binary is set and found (a missing
//! binary is logged; its bundles then get error events rather than being retried forever).
std::shared_ptr<const RendererSet> makeRenderers(const RendererBinaries& binaries);

}  // namespace flotilla::render
