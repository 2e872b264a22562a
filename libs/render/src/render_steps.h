// Steps of renderBundle shared by its two render paths (render_bundle.cpp, variant_render.cpp); internal to
// libs/render.
#pragma once

#include <string>

#include "flotilla/render/render_bundle.h"

namespace flotilla::render::detail {

//! One render of the bundle with `options`, canonicalised; `cluster` (optional) gives helm its Kubernetes
//! version and API versions, `notes` (optional) receives a remote chart's version and digest.
Result<CanonicalManifest> renderOnce(const RenderContext& context, const BundleDir& dir, const std::string& bundle_id,
                                     const model::BundleDeploymentOptions& options, std::string& renderer_name,
                                     RenderNotes* notes = nullptr, const ClusterFacts* cluster = nullptr);

//! Whether the bundle must be rendered per cluster (see variants.h).
bool needsVariants(const RenderContext& context, const BundleDir& dir, const model::FleetYaml& fleet_yaml,
                   const model::BundleDeploymentOptions& defaults);

//! Renders the bundle for every cluster of the workspace (variants.h): place, pre-process the values, render once
//! per distinct input, and build the BundleVariants table. Fills out.event (manifestID stays "", customizations
//! carry their options only), out.manifests, out.variants and out.placements.
Status renderVariants(const RenderContext& context, const BundleDir& dir, const model::FleetYaml& fleet_yaml,
                      RenderedBundle& out);

}  // namespace flotilla::render::detail
