// flotilla/agent/objects.h
//
// The pure part of applying a bundle: reading the rendered manifest (a JSON array of Kubernetes objects, as
// the bundler stores it in the `manifests` object store), naming objects, placing them in namespaces per the
// bundle's options, and ordering them into the stages DESIGN.md "Apply semantics" asks for:
//   stage 1  CustomResourceDefinitions and Namespaces (the agent then waits for each CRD to be Established),
//   stage 2  every other cluster-scoped kind,
//   stage 3  namespaced objects.
// Inside a stage, kinds follow a fixed install order (the one Helm uses: ServiceAccounts and ConfigMaps before
// the Deployments that mount them), then the manifest's own order. Nothing here talks to a cluster.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::agent {

//! The annotation the agent puts on every object it applies: "<workspace>/<bundle>" of the owning bundle. It
//! makes a second bundle applying the same object a reported conflict instead of a silent takeover, and keeps
//! prune from deleting an object another bundle has since adopted.
inline constexpr std::string_view kBundleAnnotation = "flotilla.io/bundle";

//! The annotation on a target namespace the agent created because a bundle's objects needed it (Fleet creates a
//! missing defaultNamespace/namespace): "<workspace>/<bundle>" of that bundle. Such a namespace is not part of the
//! bundle's objects and carries no kBundleAnnotation, yet it is the agent's own, not an unmanaged object: another
//! bundle that lists the Namespace explicitly takes it over without takeOwnership. (A field-manager entry cannot
//! tell: the API server keeps none for an apply that sets nothing but the name.)
inline constexpr std::string_view kCreatedForAnnotation = "flotilla.io/created-for";

//! The kBundleAnnotation of a live object ("" when it has none).
std::string ownerAnnotation(const Json& live);

//! Identifies one object in a cluster.
struct ObjectRef {
  std::string api_version;
  std::string kind;
  std::string ns;  //!< "" for cluster-scoped objects
  std::string name;

  //! "kind/namespace/name", or "kind/name" for cluster-scoped objects (how status messages name objects).
  [[nodiscard]] std::string describe() const;
  //! The API group ("" for the core group, "apps", "apiextensions.k8s.io").
  [[nodiscard]] std::string group() const;
  //! What makes two refs the same object: group, kind, namespace, name. The version is left out, so a manifest
  //! moving a Deployment from apps/v1beta2 to apps/v1 does not prune the object it still wants.
  [[nodiscard]] std::string identity() const;

  auto operator<=>(const ObjectRef&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy misreads it
};

//! The ref of a manifest object: apiVersion, kind and metadata.name must be non-empty strings (kInvalid naming
//! the missing field otherwise); metadata.namespace is taken as written.
Result<ObjectRef> objectRefOf(const Json& object);

//! Parses manifest bytes: a JSON array (kInvalid when the bytes are not JSON or not an array). Elements are
//! returned as they are; an element that is not a usable object is reported per object at apply time, so one
//! bad object does not stop the others.
Result<std::vector<Json>> parseManifest(std::string_view data);

enum class Stage {
  kDefinitions = 1,    //!< CRDs and Namespaces
  kClusterScoped = 2,  //!< other cluster-scoped kinds
  kNamespaced = 3,
};

//! True for the kinds of stage 1 (apiextensions.k8s.io CustomResourceDefinition, core Namespace).
bool isDefinitionKind(const ObjectRef& ref);
bool isCrd(const ObjectRef& ref);
bool isNamespace(const ObjectRef& ref);
//! The stage of an object once its scope is known (definitions regardless of scope).
Stage stageOf(const ObjectRef& ref, bool namespaced);
//! Install order of a kind inside its stage: lower first; unknown kinds (custom resources) come last.
int kindPriority(std::string_view kind);

//! One object ready to apply: the object as it will be sent, its ref and stage, and its index in the manifest.
struct PlannedObject {
  Json object;
  ObjectRef ref;
  Stage stage = Stage::kNamespaced;
  size_t index = 0;
};

//! Orders objects by stage, then kind priority, then manifest index (stable and deterministic).
void sortForApply(std::vector<PlannedObject>& objects);
//! Deletion order for prune: the reverse of the apply order (namespaced objects first, definitions last).
void sortForPrune(std::vector<ObjectRef>& refs);

//! Where namespaced objects go (BundleDeploymentOptions.defaultNamespace / namespace).
struct NamespacePolicy {
  std::string default_namespace;  //!< used when the object names none ("default" when empty)
  std::string target_namespace;   //!< when set, every namespaced object goes here whatever it says
};

//! Places `object` per the policy: a namespaced object gets target_namespace, else its own, else the default;
//! a cluster-scoped object loses a metadata.namespace (meaningless there). Also sets kBundleAnnotation to
//! `owner`. Every other field of the manifest stays as written.
Json placeObject(Json object, bool namespaced, const NamespacePolicy& policy, std::string_view owner);

//! The namespace a namespaced object will land in under `policy` (for objects not yet placed).
std::string effectiveNamespace(const Json& object, const NamespacePolicy& policy);

}  // namespace flotilla::agent
