#include "flotilla/agent/objects.h"

#include <algorithm>
#include <array>

namespace flotilla::agent {
namespace {

// Helm's install order (pkg/releaseutil/kind_sorter.go lists the same kinds): what others depend on first.
constexpr std::array<std::string_view, 36> kInstallOrder = {
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "PriorityClass",
    "RuntimeClass",
    "Lease",
    "EndpointSlice",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
};

}  // namespace

std::string ownerAnnotation(const Json& live) {
  const Json* owner = live.at({"metadata", "annotations", kBundleAnnotation});
  return owner != nullptr && owner->isString() ? owner->asString() : std::string();
}

std::string ObjectRef::describe() const {
  return ns.empty() ? kind + "/" + name : kind + "/" + ns + "/" + name;
}

std::string ObjectRef::group() const {
  auto slash = api_version.find('/');
  return slash == std::string::npos ? std::string() : api_version.substr(0, slash);
}

std::string ObjectRef::identity() const {
  return group() + "|" + kind + "|" + ns + "|" + name;
}

Result<ObjectRef> objectRefOf(const Json& object) {
  if (!object.isObject()) {
    return fail(ErrorKind::kInvalid, "not a JSON object");
  }
  ObjectRef ref;
  const Json* api_version = object.find("apiVersion");
  const Json* kind = object.find("kind");
  const Json* name = object.at({"metadata", "name"});
  if (api_version == nullptr || !api_version->isString() || api_version->asString().empty()) {
    return fail(ErrorKind::kInvalid, "apiVersion: expected a non-empty string");
  }
  if (kind == nullptr || !kind->isString() || kind->asString().empty()) {
    return fail(ErrorKind::kInvalid, "kind: expected a non-empty string");
  }
  if (name == nullptr || !name->isString() || name->asString().empty()) {
    return fail(ErrorKind::kInvalid, "metadata.name: expected a non-empty string");
  }
  ref.api_version = api_version->asString();
  ref.kind = kind->asString();
  ref.name = name->asString();
  const Json* ns = object.at({"metadata", "namespace"});
  if (ns != nullptr && ns->isString()) {
    ref.ns = ns->asString();
  }
  return ref;
}

Result<std::vector<Json>> parseManifest(std::string_view data) {
  auto parsed = Json::parse(data);
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, "manifest is not JSON: " + parsed.error().message);
  }
  if (!parsed->isArray()) {
    return fail(ErrorKind::kInvalid, "manifest: expected a JSON array of objects");
  }
  return std::move(parsed->asArray());
}

bool isCrd(const ObjectRef& ref) {
  return ref.kind == "CustomResourceDefinition" && ref.group() == "apiextensions.k8s.io";
}

bool isNamespace(const ObjectRef& ref) {
  return ref.kind == "Namespace" && ref.api_version == "v1";
}

bool isDefinitionKind(const ObjectRef& ref) {
  return isCrd(ref) || isNamespace(ref);
}

Stage stageOf(const ObjectRef& ref, bool namespaced) {
  if (isDefinitionKind(ref)) {
    return Stage::kDefinitions;
  }
  return namespaced ? Stage::kNamespaced : Stage::kClusterScoped;
}

int kindPriority(std::string_view kind) {
  auto it = std::find(kInstallOrder.begin(), kInstallOrder.end(), kind);
  return static_cast<int>(it - kInstallOrder.begin());  // unknown kinds: kInstallOrder.size(), i.e. last
}

void sortForApply(std::vector<PlannedObject>& objects) {
  std::stable_sort(objects.begin(), objects.end(), [](const PlannedObject& a, const PlannedObject& b) {
    if (a.stage != b.stage) {
      return a.stage < b.stage;
    }
    int pa = kindPriority(a.ref.kind);
    int pb = kindPriority(b.ref.kind);
    if (pa != pb) {
      return pa < pb;
    }
    return a.index < b.index;
  });
}

void sortForPrune(std::vector<ObjectRef>& refs) {
  // Scope is not known for refs of kinds the cluster may no longer serve; a namespace on the ref is enough.
  auto stage = [](const ObjectRef& ref) { return stageOf(ref, !ref.ns.empty()); };
  std::stable_sort(refs.begin(), refs.end(), [&](const ObjectRef& a, const ObjectRef& b) {
    if (stage(a) != stage(b)) {
      return stage(a) > stage(b);
    }
    int pa = kindPriority(a.kind);
    int pb = kindPriority(b.kind);
    if (pa != pb) {
      return pa > pb;
    }
    return a < b;
  });
}

std::string effectiveNamespace(const Json& object, const NamespacePolicy& policy) {
  if (!policy.target_namespace.empty()) {
    return policy.target_namespace;
  }
  const Json* ns = object.at({"metadata", "namespace"});
  if (ns != nullptr && ns->isString() && !ns->asString().empty()) {
    return ns->asString();
  }
  return policy.default_namespace.empty() ? std::string("default") : policy.default_namespace;
}

Json placeObject(Json object, bool namespaced, const NamespacePolicy& policy, std::string_view owner) {
  Json& metadata = object["metadata"];
  if (namespaced) {
    metadata["namespace"] = effectiveNamespace(object, policy);
  } else {
    metadata.erase("namespace");
  }
  metadata["annotations"][kBundleAnnotation] = std::string(owner);
  return object;
}

}  // namespace flotilla::agent
