// flotilla/render/render_bundle.h
//
// Rendering one bundle directory of a checkout, as the bundler does for every bundle of a commit and `flotilla
// render` does for one cluster:
//   1. fleet.yaml     read (size-limited, inside the checkout) and decoded strictly; a broken one keeps the bundle's
//                     recorded identity (RenderContext::previous_ids) so a typo does not delete the bundle
//   2. identity       the bundle ID (Fleet's naming)
//   3. render         per cluster (variants.h) when the output depends on the cluster; otherwise the default render
//                     and one render per distinct customization (renderKey)
//   4. event          the rest of the BundleEvent: options, targets, dependsOn, rollout, paused, labels
// Bad user input is reported in RenderedBundle::error, never as a failure.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/variants.h"
#include "flotilla/model/resources.h"
#include "flotilla/model/targeting.h"
#include "flotilla/render/discovery.h"
#include "flotilla/render/manifest.h"
#include "flotilla/render/render.h"
#include "flotilla/render/variants.h"

namespace flotilla::render {

//! An extracted source archive; the directory is removed when this is destroyed.
class Checkout {
 public:
  Checkout() = default;
  explicit Checkout(std::string root) : root_(std::move(root)) {}
  Checkout(Checkout&& other) noexcept : root_(std::exchange(other.root_, {})) {}
  Checkout& operator=(Checkout&& other) noexcept;
  Checkout(const Checkout&) = delete;
  Checkout& operator=(const Checkout&) = delete;
  ~Checkout();

  [[nodiscard]] const std::string& root() const { return root_; }

 private:
  std::string root_;
};

//! The result of rendering one bundle directory.
struct RenderedBundle {
  std::string bundle;  //!< the bundle ID
  std::string path;    //!< the directory ("." for the root)
  std::string renderer;
  //! Set when the bundle's files are bad (fleet.yaml, YAML, not an object, size limits...). `event` then carries
  //! only the identity fields.
  std::optional<events::RenderError> error;
  events::BundleEvent event;                           //!< complete except id and time
  std::map<std::string, CanonicalManifest> manifests;  //!< by manifestID: the default and each distinct customization
  RenderNotes notes;  //!< of the default render: a remote chart's resolved version and digest
  double seconds = 0;
  //! Per-cluster rendering (variants.h): the table (event.variantsObject names it; `variants_text` is what to store
  //! under that name) and every cluster's targeting decision.
  std::optional<events::BundleVariants> variants;
  std::string variants_text;
  std::map<std::string, BundlePlacement> placements;
  std::string source_object;  //!< the commit's source archive (kept in the record for re-renders)
  //! (cache key, manifestID) of the variants rendered here, for VariantCache once their manifests are stored.
  std::vector<std::pair<std::string, std::string>> cache_entries;
  size_t variant_renders = 0;     //!< renderer runs for variants (cache misses)
  size_t variant_cache_hits = 0;  //!< variants whose manifest came from the cache
  //! The bundler's render cache (services/bundler render_key.h): the key its BundleRecord keeps ("" = not
  //! cacheable), and whether this result was taken from that record instead of being rendered (`manifests` is
  //! then empty: the manifests it names are stored already).
  std::string render_key;
  bool from_cache = false;
};

//! Everything renderBundle needs besides the directory.
struct RenderContext {
  const std::string& root;
  const events::CommitEvent& commit;
  const model::GitRepo& gitrepo;
  const RendererSet& renderers;
  const RenderLimits& limits;
  //! Bundle IDs recorded for this GitRepo, by path: keeps a bundle's identity when its fleet.yaml (and with it a
  //! `name:` override) cannot be read, so a typo does not delete the deployed bundle.
  const std::map<std::string, std::string>& previous_ids;
  //! Per-cluster variants (variants.h): the clusters of the commit's workspace (nullptr = none known), a cache of
  //! earlier variant renders (optional), and `force_variants` to render every bundle per cluster (renderForCluster).
  const std::vector<ClusterFacts>* clusters = nullptr;
  VariantCache* cache = nullptr;
  bool force_variants = false;
};

//! Renders one bundle directory. Bad user input is not a failure: it comes back as RenderedBundle::error. Only
//! failures that are not the commit's fault (file system, renderer binaries) are returned as errors.
Result<RenderedBundle> renderBundle(const RenderContext& context, const BundleDir& dir);

//! What renderBundle(context, dir) would fetch from outside the checkout (remote charts, chart dependencies from
//! repositories), resolved for the bundler's render cache: the renderers' resolveRemoteInputs for the default
//! options and each distinct customization's, concatenated ("" when nothing is fetched). An error when the bundle
//! cannot be resolved so: its fleet.yaml does not decode, it is rendered per cluster, or a renderer cannot resolve
//! what it fetches (its message says why; the render reports any user error itself).
Result<std::string> resolveRemoteInputs(const RenderContext& context, const BundleDir& dir);

//! A RenderError from a kInvalid Error (where = "file:line"); `fallback_file` when the error names no file.
events::RenderError renderErrorOf(const Error& error, std::string_view fallback_file);

}  // namespace flotilla::render
