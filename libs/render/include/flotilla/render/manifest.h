// flotilla/render/manifest.h
//
// The canonical rendered manifest (docs/manifests.md): a JSON array of the bundle's Kubernetes objects, sorted by
// (apiVersion, kind, metadata.namespace, metadata.name), each object with its keys sorted, serialised compactly
// by flotilla::Json::dump(). The same objects in any order or format (YAML or JSON, any indentation, key order,
// document order, file layout) give the same bytes, hence the same manifestID (model::manifestID = sha256 hex
// of those bytes). Objects are kept as written: namespaces are not filled in or forced here (defaultNamespace and
// namespace travel as options for the agent, as in Fleet, where the agent's Helm post-render applies them).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/render/render.h"

namespace flotilla::render {

//! A canonical manifest and its identity.
struct CanonicalManifest {
  std::string text;         //!< the bytes stored in the `manifests` object store
  std::string manifest_id;  //!< model::manifestID(text)
  size_t objects = 0;
};

//! The identity of an object in a manifest: apiVersion, kind, namespace ("" when not set), name.
struct ObjectKey {
  std::string api_version;
  std::string kind;
  std::string ns;
  std::string name;

  bool operator==(const ObjectKey&) const = default;
  //! Manifest order: apiVersion, kind, namespace, name.
  bool operator<(const ObjectKey& other) const {
    return std::tie(api_version, kind, ns, name) < std::tie(other.api_version, other.kind, other.ns, other.name);
  }
  //! "apiVersion/kind namespace/name" (or "apiVersion/kind name" without a namespace).
  [[nodiscard]] std::string describe() const;
};

//! The key of a validated object (see validateObject).
ObjectKey keyOf(const Json& object);

//! Sorts, checks and serialises rendered objects. Two objects with the same key are kInvalid naming both origins
//! (where = the second one); a result larger than `max_bytes` is kInvalid.
Result<CanonicalManifest> canonicalize(std::vector<RenderedObject> objects, uint64_t max_bytes);

}  // namespace flotilla::render
