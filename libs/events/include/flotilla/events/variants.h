// flotilla/events/variants.h
//
// BundleVariants: which manifest and options each cluster gets from a bundle rendered per cluster (Fleet's `${ }`
// value templating, AllMatches customizations, charts that read the Kubernetes version). The bundler stores it
// content-addressed in the `manifests` object store (name "variants-<sha256 of the encoded JSON>") and names it in
// BundleEvent.variantsObject; the scheduler reads it there. An object store instead of the event keeps a table of
// thousands of clusters clear of NATS's 1 MiB message limit. docs/pipeline.md "Per-cluster variants".
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::events {

//! One rendered variant of a bundle.
struct Variant {
  std::string manifest_id;                  //!< required: object name in kManifestsBucket
  Json options = Json::object();            //!< the BundleDeploymentOptions for its clusters (values templated)
  std::vector<std::string> customizations;  //!< the targetCustomizations applied, in order

  bool operator==(const Variant&) const = default;
};

//! The per-cluster table of one bundle rendering.
struct BundleVariants {
  static constexpr std::string_view kKind = "BundleVariants";
  std::string workspace;
  std::string bundle;
  std::string commit;
  std::vector<Variant> variants;
  std::map<std::string, int64_t> clusters;  //!< cluster name -> index into `variants`

  bool operator==(const BundleVariants&) const = default;
};

inline constexpr std::string_view kVariantsObjectPrefix = "variants-";

//! {"apiVersion":"bundler.flotilla.io/v1","kind":"BundleVariants","workspace","bundle","commit",
//!  "variants":[{"manifestID","options","customizations"}],"clusters":{"<cluster>": <index>}}
Json encode(const BundleVariants& value);
//! Strict: unknown fields, wrong types, a missing manifestID and indexes out of range are kInvalid.
Result<BundleVariants> decodeBundleVariants(const Json& json);
//! "variants-" + sha256 hex of `encoded` (the canonical JSON text).
std::string variantsObjectName(std::string_view encoded);

}  // namespace flotilla::events
