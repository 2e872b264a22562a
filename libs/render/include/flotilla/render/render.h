// flotilla/render/render.h
//
// Rendering turns a bundle directory into Kubernetes objects. The handler does not know how: it asks a
// RendererSet for the renderer that fits the bundle (Fleet's rule: a Chart.yaml or helm.chart means Helm, a
// kustomization.yaml or kustomize.dir means kustomize, anything else is raw YAML) and calls render() with the
// options of the customization it is rendering. Adding Helm or kustomize is adding a Renderer; the handler and
// the manifest format stay as they are.
//
// Every renderer sees only the extracted checkout: paths a user names (valuesFiles, kustomize.dir, overlays)
// go through source::resolveInside, single files are capped at RenderLimits::max_file_bytes and the whole
// output at max_output_bytes, and YAML is parsed with core's bounded parser (aliases cannot explode).
//
// Failures: a problem in the user's files is kInvalid with Error::where = "file:line" (line omitted when unknown)
// and a message that names the file; anything else (I/O on the work dir, a renderer binary that is missing or
// timed out) keeps its own kind so the handler can retry instead of blaming the commit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/model/options.h"

namespace flotilla::render {

//! Size bounds for one render.
struct RenderLimits {
  uint64_t max_file_bytes = 16ull << 20;     //!< any single input file
  uint64_t max_output_bytes = 256ull << 20;  //!< the rendered objects together (canonical JSON)
  std::chrono::milliseconds timeout{60000};  //!< external renderers (helm, kustomize)
};

//! How Helm may authenticate to chart repositories, from the GitRepo (helmSecretName, helmRepoURLRegex,
//! insecureSkipTLSVerify, insecureAllowHTTP, and its namespace: the workspace whose secrets it may name). The
//! renderer reads the secret itself, from <credentials dir>/<workspace>/.
struct HelmRepoAccess {
  std::string secret_name;     //!< "" = no credentials
  std::string repo_url_regex;  //!< the secret is used only for repository URLs matching it ("" = all)
  bool insecure_skip_tls_verify = false;
  std::string workspace;    //!< the GitRepo's namespace
  bool allow_http = false;  //!< credentials may go to plain http:// repositories (spec.insecureAllowHTTP)
};

//! What a render learnt besides the objects (a remote chart's resolved version), filled when requested.
struct RenderNotes {
  std::string chart;          //!< the remote chart: "<repo> <name>", its URL, or its oci:// reference
  std::string chart_version;  //!< the version helm.version resolved to
  std::string chart_digest;   //!< sha256 of the chart archive
  std::string chart_source;   //!< "cache" (the chart cache had it) or "pulled" (downloaded by this render)
};

//! What to render.
struct RenderRequest {
  std::string root;         //!< absolute path of the extracted checkout
  std::string bundle_path;  //!< the bundle directory relative to root ("." for the root)
  std::string bundle_id;    //!< the default Helm release name
  //! The options of the customization being rendered (fleet.yaml's defaults merged with a target's overrides).
  model::BundleDeploymentOptions options;
  RenderLimits limits;
  HelmRepoAccess helm_access;    //!< credentials for remote charts and chart dependencies
  RenderNotes* notes = nullptr;  //!< when set, receives what the render learnt (chart version)
  //! The target cluster's Kubernetes version ("v1.30.2") and extra API versions for `helm template --kube-version`
  //! / `--api-versions`; empty = helm's defaults (a render not for one cluster). Set by per-cluster rendering.
  std::string kube_version;
  std::vector<std::string> api_versions;
};

//! One rendered object and where it came from (for error messages and duplicate reports).
struct RenderedObject {
  Json object;
  std::string file;  //!< relative to the checkout root
  int line = 0;      //!< where its document starts; 0 when unknown

  //! "file:line" (or just the file).
  [[nodiscard]] std::string origin() const;
};

//! A way to turn a bundle directory into objects.
class Renderer {
 public:
  virtual ~Renderer() = default;
  //! "raw", "helm", "kustomize" (a metrics label).
  [[nodiscard]] virtual std::string_view name() const = 0;
  //! The objects of the bundle, in no particular order (canonicalisation sorts them).
  [[nodiscard]] virtual Result<std::vector<RenderedObject>> render(const RenderRequest& request) const = 0;
  //! The executables it runs (none for raw YAML): another binary may render the same files differently, so the
  //! bundler's render cache keys on them.
  [[nodiscard]] virtual std::vector<std::string> executables() const { return {}; }
  //! What a render of `request` fetches from outside the checkout, resolved to what identifies its content (the
  //! bundler's render cache keys on it): "" when it fetches nothing; an error when it cannot be resolved (the render
  //! then runs and reports it, or the bundle is rendered on every commit).
  [[nodiscard]] virtual Result<std::string> resolveRemoteInputs(const RenderRequest& /*request*/) const {
    return std::string();
  }
};

//! Raw YAML/JSON: every manifest file of the bundle (see discovery.h), every document a Kubernetes object.
//! `kind: List` documents are expanded into their items. yaml.overlays are applied first (Fleet's rules:
//! overlays/<name>/<path> replaces <path>; overlays/<name>/<x>_patch.<ext> patches <x>.<ext> with a JSON merge
//! patch, or with an RFC 6902 JSON patch when the patch is a list).
class RawRenderer : public Renderer {
 public:
  [[nodiscard]] std::string_view name() const override { return "raw"; }
  [[nodiscard]] Result<std::vector<RenderedObject>> render(const RenderRequest& request) const override;
};

//! Checks that a document is a Kubernetes object: a map with non-empty string apiVersion, kind and metadata.name
//! (metadata.namespace, when present, a string). kInvalid with a message naming what is missing.
Status validateObject(const Json& document);

//! Parses one manifest file's text (multi-document YAML or JSON) into objects: empty documents are skipped,
//! `List` kinds expanded, every object validated. Errors are kInvalid with where = "file:line".
Result<std::vector<RenderedObject>> parseManifestText(std::string_view text, const std::string& file,
                                                      uint64_t max_bytes);

//! The renderers a bundler has, and the rule that picks one for a bundle.
class RendererSet {
 public:
  //! Raw only; helm and kustomize are added with setHelm/setKustomize when their binaries are configured.
  RendererSet();
  void setHelm(std::shared_ptr<const Renderer> helm) { helm_ = std::move(helm); }
  void setKustomize(std::shared_ptr<const Renderer> kustomize) { kustomize_ = std::move(kustomize); }

  //! The renderer for the bundle at `bundle_path` with `options` (Fleet's DetermineStyle): Helm when
  //! <helm.chart or ".">/Chart.yaml exists in the bundle, or helm.repo / a chart URL names a remote chart; else
  //! kustomize when <kustomize.dir or ".">/kustomization.yaml exists; else raw. kInvalid naming the style when
  //! that renderer is not available, or when helm.chart names a local chart that is not there.
  [[nodiscard]] Result<const Renderer*> choose(const std::string& root, std::string_view bundle_path,
                                               const model::BundleDeploymentOptions& options) const;
  //! Every executable of its renderers (Renderer::executables), in a fixed order.
  [[nodiscard]] std::vector<std::string> executables() const;

 private:
  std::shared_ptr<const Renderer> raw_;
  std::shared_ptr<const Renderer> helm_;
  std::shared_ptr<const Renderer> kustomize_;
};

//! Splits Error::where "file:line" into its parts (line 0 when absent or not a number).
std::pair<std::string, int64_t> splitWhere(std::string_view where);

}  // namespace flotilla::render
