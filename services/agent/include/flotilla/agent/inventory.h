// flotilla/agent/inventory.h
//
// What a bundle applied, kept in the downstream cluster itself (docs/pipeline.md stage 5) so pruning stays exact
// across agent restarts and even a new agent installation: one ConfigMap per bundle,
//   name       flotilla-inv-<first 40 hex of sha256("<workspace>/<bundle>")> (names escaped with escapeToken,
//              which leaves ordinary names unchanged, so "a" + "b/c" and "a/b" + "c" differ)
//   namespace  the agent namespace (flotilla-system by default)
//   labels     flotilla.io/inventory=true (so the agent can list them after a restart)
//   data       inventory.json = {"bundle", "workspace", "deploymentID", "generation", "applied",
//                                "gitrepo", "commitSequence", "labels": {k: v},
//                                "objects": [{"apiVersion", "kind", "namespace", "name"}],
//                                "claims": [{"apiVersion", "kind", "namespace", "name"}],
//                                "adopted": [{...}], "createdNamespaces": ["ns"], "previousManifestID",
//                                "waitUntil"}
// `workspace`, `generation` and `applied` are additions to pipeline.md's {bundle, deploymentID, objects}:
// generation lets the agent drop stale deploy events, and applied says whether every object of deploymentID went
// in (only then is a redelivery of the same deploymentID skipped). `gitrepo`, `commitSequence` and `labels` come
// from the DeployEvent (the newer-commit claim rule, dependsOn selectors); `claims` lists the objects the bundle
// wants that another bundle holds (docs/pipeline.md "Ownership handover"). `adopted` lists the objects of `objects`
// that existed unmanaged and were adopted with takeOwnership (every other object was created by Flotilla or handed
// over from another bundle); `createdNamespaces` the target namespaces the agent created for the bundle (deleted
// with it under deleteNamespace); `previousManifestID` the manifest of the last deployment applied without error
// before this one (what helm.atomic reverts to); `waitUntil` (RFC 3339) the end of a helm.timeoutSeconds health
// wait in progress. Inventories written before any of these fields existed still decode (empty values).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/agent/objects.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/client.h"
#include "flotilla/model/labels.h"

namespace flotilla::agent {

inline constexpr std::string_view kInventoryDataKey = "inventory.json";
inline constexpr std::string_view kInventoryLabel = "flotilla.io/inventory";

struct Inventory {
  std::string workspace;
  std::string bundle;
  std::string deployment_id;    //!< the deployment these objects belong to ("" before the first complete apply)
  int64_t generation = 0;       //!< the DeployEvent generation last handled
  bool applied = false;         //!< every object of deployment_id was applied without error
  std::string gitrepo;          //!< the bundle's GitRepo ("" when unknown)
  int64_t commit_sequence = 0;  //!< the FLOTILLA_COMMITS sequence of its commit (0: unknown)
  model::Labels labels;         //!< the bundle's labels (dependsOn selectors)
  std::vector<ObjectRef> objects;
  std::vector<ObjectRef> claims;                //!< objects it wants that another bundle owns (OwnershipConflict)
  std::vector<ObjectRef> adopted;               //!< objects of `objects` adopted unmanaged with takeOwnership
  std::vector<std::string> created_namespaces;  //!< target namespaces the agent created for the bundle
  std::string previous_manifest_id;             //!< the last good manifest before deployment_id ("" none)
  std::string wait_until;                       //!< RFC 3339 end of a timeoutSeconds health wait ("" none)
  //! What the drift watch needs of the DeployEvent's options (watchOptionsOf; null in inventories of older agents):
  //! after a restart it rebuilds the desired objects from them and the manifest.
  Json options;

  //! Whether `ref` (by ObjectRef::identity) is in objects / claims.
  [[nodiscard]] bool lists(const ObjectRef& ref) const;
  [[nodiscard]] bool claimsObject(const ObjectRef& ref) const;
  //! Removes `ref` from objects; false when it was not listed.
  bool drop(const ObjectRef& ref);

  bool operator==(const Inventory&) const = default;
};

//! "flotilla-inv-<40 hex>" for a bundle.
std::string inventoryName(std::string_view workspace, std::string_view bundle);
//! The inventory.json document.
Json encodeInventory(const Inventory& inventory);
//! Strict inverse of encodeInventory: kInvalid naming the field on a wrong shape.
Result<Inventory> decodeInventory(const Json& value);
//! The ConfigMap that stores `inventory` in namespace `ns`.
Json inventoryConfigMap(const Inventory& inventory, std::string_view ns);
//! Reads the inventory out of a ConfigMap (as returned by the API server).
Result<Inventory> inventoryFromConfigMap(const Json& config_map);

//! Reads and writes inventories in one namespace of the downstream cluster.
class InventoryStore {
 public:
  InventoryStore(kube::KubeClient& client, std::string ns) : client_(client), ns_(std::move(ns)) {}

  //! The bundle's inventory; nullopt when it has none. A ConfigMap that does not decode is kInvalid.
  Result<std::optional<Inventory>> load(std::string_view workspace, std::string_view bundle);
  //! Creates or replaces the inventory (server-side apply), creating the namespace first when it is missing.
  Status save(const Inventory& inventory);
  //! Deletes the inventory (done when it does not exist).
  Status remove(std::string_view workspace, std::string_view bundle);
  //! Every inventory in the namespace (ones that do not decode are logged and skipped).
  Result<std::vector<Inventory>> list();

  [[nodiscard]] const std::string& ns() const { return ns_; }
  [[nodiscard]] kube::KubeClient& client() const { return client_; }

 private:
  Status ensureNamespace();

  kube::KubeClient& client_;
  std::string ns_;
};

}  // namespace flotilla::agent
