// flotilla/bundler/external_renderers.h
//
// Renderers that run a pinned binary on the extracted checkout: `helm template` for bundles with a local chart and
// `kustomize build` for kustomize bundles. Both run with a time limit (RenderLimits::timeout), an output cap
// (RenderLimits::max_output_bytes), a private HOME/cache, and HTTP(S) proxies pointed at a closed port, so a
// render can only read the checkout: remote charts, chart repositories and remote kustomize bases are reported as
// errors instead of being fetched. Their output goes through the same parsing and object checks as raw YAML.
//
// Helm (Fleet's helm options): chart = <bundle>/<helm.chart or ".">; release name = helm.releaseName or the bundle
// ID; namespace = the `namespace` option, else `defaultNamespace`, else "default"; values = helm.values, then each
// helm.valuesFiles entry (relative to the bundle, resolved inside the checkout; later ones win, as in Fleet);
// CRDs included, chart tests skipped. Templates that render nothing are skipped; the "# Source:" comments map each
// object back to its template file for error messages. Not supported (reported as errors): remote charts
// (helm.repo, URLs, oci://), chart dependencies missing from charts/, valuesFrom (read downstream in Fleet — passed
// on as an option instead), Fleet's ${ } templating of values.
//
// kustomize: `kustomize build <bundle>/<kustomize.dir or ".">` with the default load restrictor (files must stay
// inside the kustomization root). Objects are attributed to the kustomization.yaml.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/bundler/render.h"

namespace flotilla::bundler {

class HelmRenderer : public Renderer {
 public:
  //! `binary`: path of the helm executable.
  explicit HelmRenderer(std::string binary) : binary_(std::move(binary)) {}
  [[nodiscard]] std::string_view name() const override { return "helm"; }
  [[nodiscard]] Result<std::vector<RenderedObject>> render(const RenderRequest& request) const override;

 private:
  std::string binary_;
};

class KustomizeRenderer : public Renderer {
 public:
  explicit KustomizeRenderer(std::string binary) : binary_(std::move(binary)) {}
  [[nodiscard]] std::string_view name() const override { return "kustomize"; }
  [[nodiscard]] Result<std::vector<RenderedObject>> render(const RenderRequest& request) const override;

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

}  // namespace flotilla::bundler
