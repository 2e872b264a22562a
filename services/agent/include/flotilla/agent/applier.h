// flotilla/agent/applier.h
//
// The part of the agent that changes the downstream cluster: staged server-side apply of a bundle's objects,
// health checks of live objects, and prune. Each object is applied on its own: one that fails (rejected by the
// API server, owned by another bundle, of a kind the cluster does not serve) becomes a failed outcome and the
// others still go in. Before applying, each object is read (unless the watch cache vouches for it as the request's
// own: ApplierOptions::owned_version): one whose owner annotation names another bundle is
// taken over only when the request's decide_claim allows it (the claim rules of docs/pipeline.md "Ownership
// handover", in the DeployHandler), else it is an ownership conflict. Only failures that say nothing about the bundle
// itself (API server unreachable, 5xx, throttling: ErrorKind::kTransient) abort the call, so the caller can retry the
// whole deploy later; every step is idempotent, so a retry converges.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flotilla/agent/objects.h"
#include "flotilla/agent/report.h"
#include "flotilla/agent/scope.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/client.h"
#include "flotilla/model/labels.h"

namespace flotilla::agent {

//! The fields a 422 refusal of the API server names as immutable ("spec.selector" from "... is invalid:
//! spec.selector: Invalid value: ...: field is immutable"), each once; empty when it is not such a refusal.
std::vector<std::string> immutableFields(const Error& error);
//! "Deployment app/web was deleted and re-created (new UID) because field spec.selector is immutable".
std::string replacedMessage(const ObjectRef& ref, const std::vector<std::string>& fields);

//! The field manager of every bundle object the agent applies (DESIGN.md "Apply semantics").
inline constexpr std::string_view kFieldManager = "flotilla";

struct ApplierOptions {
  //! How long to wait for the CRDs of a bundle to become Established before applying their custom resources.
  std::chrono::milliseconds crd_timeout{60000};
  std::chrono::milliseconds crd_poll{200};
  //! How long a replacement (replace.cpp: delete and re-create of an object whose change touches an immutable
  //! field) waits for the old object to be gone; after it the deploy fails as transient and is retried.
  std::chrono::milliseconds replace_timeout{30000};
  //! The watch cache's word on an object (DriftWatcher::ownedVersion): the resourceVersion at which the live object
  //! carried `owner`'s annotation and was the newest state the watch had seen, 0 when it cannot say. With one, the
  //! read before the apply is skipped and the apply carries that resourceVersion as a precondition, so the API
  //! server refuses it (409) when anything changed since; the object is then read and decided as any other.
  std::function<uint64_t(const ObjectRef&, const std::string& owner)> owned_version;
  //! --namespaces (scope.h): objects it refuses fail before any request (never in the inventory), and no target
  //! namespace is created. Empty: unrestricted.
  NamespaceScope scope;
};

//! What to apply.
struct ApplyRequest {
  std::string owner;  //!< "<workspace>/<bundle>", written to kBundleAnnotation
  std::vector<Json> manifest;
  NamespacePolicy namespaces;
  //! Apply with force=true: take over fields other field managers own (takeOwnership).
  bool force = false;
  //! Whether an object whose owner annotation names another bundle (`owner`) may be taken over: the claim rule's
  //! name, or nullopt for a conflict (the object is left alone and reported). Default: only with force ("forced").
  std::function<Result<std::optional<std::string>>(const ObjectRef&, const std::string& owner)> decide_claim;
  //! Called after such an object was applied with this bundle's annotation, with its previous owner and the rule:
  //! the rest of the handover. A failure aborts the apply (retried; every step is idempotent).
  std::function<Status(const ObjectRef&, const std::string& owner, const std::string& rule)> claimed =
      [](const ObjectRef&, const std::string&, const std::string&) { return Status(); };
  //! Held while one object's owner is read, decided and the object applied (and the handover completed), so no
  //! other bundle's claim or release, and not the reaper, acts on the object in between (the handler's
  //! ObjectLocks stripe). Empty: no lock.
  std::function<std::unique_lock<std::mutex>(const ObjectRef&)> lock_object;
  //! Called after each object was applied, with the object as sent and as the API server answered (the drift
  //! watch takes the field set server-side apply gave manager flotilla from it).
  std::function<void(const ObjectRef&, const Json& sent, const Json& live)> applied_object =
      [](const ObjectRef&, const Json&, const Json&) {};
  model::Labels namespace_labels;       //!< for namespaces the agent creates for the bundle
  model::Labels namespace_annotations;  //!< idem
  //! Namespaces the agent created for this bundle earlier (its inventory's createdNamespaces): without the owner
  //! annotation, yet the bundle's own, so a Namespace object for one of them is not "unmanaged".
  std::set<std::string> owned_namespaces;
  //! The client to apply (and read) the bundle's objects with: an impersonating one for serviceAccount;
  //! nullptr = the agent's own.
  kube::KubeClient* client = nullptr;
  //! Called before each stage with the refs of the objects about to be applied (the caller widens its inventory
  //! with them, so a crash mid-apply leaves nothing unaccounted for). A failure aborts the apply.
  std::function<Status(const std::vector<ObjectRef>&)> record_intent = [](const std::vector<ObjectRef>&) {
    return Status();
  };
};

struct ApplyResult {
  std::vector<ObjectOutcome> outcomes;  //!< one per manifest element, in apply order
  std::vector<ObjectRef> objects;       //!< what the bundle may now have in the cluster (the new inventory)
  size_t applied = 0;
  size_t failed = 0;
  size_t adopted = 0;             //!< objects taken over from another bundle (a claim rule allowed it)
  std::vector<ObjectRef> claims;  //!< objects another bundle owns that no claim rule let this one take
  //! Objects that exist without an owner annotation (managed by no bundle) and were refused: no takeOwnership.
  std::vector<ObjectRef> unmanaged;
  std::vector<ObjectRef> adopted_unmanaged;     //!< such objects adopted because the request has force
  std::vector<std::string> created_namespaces;  //!< target namespaces created for the bundle by this apply
};

struct PruneResult {
  size_t deleted = 0;
  size_t gone = 0;                   //!< already absent
  std::vector<ObjectRef> orphaned;   //!< deliberately left in place (CRDs, objects another bundle adopted)
  std::vector<ObjectRef> remaining;  //!< could not be deleted (listed in errors)
  std::vector<std::string> errors;
};

class Applier {
 public:
  //! `stopping` is polled during long waits (CRDs) so shutdown is not delayed by them.
  Applier(kube::KubeClient& client, ApplierOptions options, Metrics& metrics, std::function<bool()> stopping);

  //! Staged apply (objects.h): stage 1, wait for CRDs, then stages 2 and 3. Per-object failures are outcomes;
  //! a kTransient failure aborts with that error. `progress` is called between objects (keeps the message alive).
  Result<ApplyResult> apply(const ApplyRequest& request, const std::function<void()>& progress);
  //! The health of each object, read live (an object that does not exist is not Ready: "not found").
  //! kTransient when the API server cannot be asked.
  Result<std::vector<ObjectOutcome>> checkHealth(const std::vector<ObjectRef>& refs,
                                                 kube::KubeClient* client = nullptr);
  //! Deletes `refs` (Background propagation), namespaced objects first. Skips objects whose kBundleAnnotation
  //! names another owner, and CRDs unless `delete_crds` (deleting a CRD deletes every custom resource of it in
  //! the cluster: Fleet's deleteCRDResources). kTransient aborts; other failures are listed in the result.
  //! An object without any owner annotation was not created by Flotilla nor adopted (it is left in place).
  //! `client`: the bundle's (impersonating) client, nullptr = the agent's own.
  Result<PruneResult> prune(std::vector<ObjectRef> refs, std::string_view owner, bool delete_crds,
                            const std::function<void()>& progress, kube::KubeClient* client = nullptr);
  //! Deletes the namespaces in `names` (deleteNamespace); kTransient aborts, other failures are returned as
  //! "namespace x: <message>". A namespace already gone counts as deleted.
  Result<std::vector<std::string>> deleteNamespaces(const std::vector<std::string>& names, kube::KubeClient* client);
  //! The agent's own client.
  [[nodiscard]] kube::KubeClient& client() const { return client_; }

 private:
  //! One object: ownership check, then server-side apply and health. `adopted`: it was another bundle's and a
  //! claim rule took it; `foreign`: it is another bundle's and was left alone (a conflict).
  Result<ObjectOutcome> applyOne(const PlannedObject& planned, const ApplyRequest& request, bool& adopted,
                                 bool& foreign);
  //! The apply of an object the watch cache knows as the request's own (options_.owned_version), without reading
  //! it first: the answer, or nullopt when the cache cannot say or the precondition failed (read it then).
  Result<std::optional<Json>> applyOwned(const PlannedObject& planned, const ApplyRequest& request);
  //! After the API server refused an apply of an object this request may write (`refused`): when the refusal names
  //! immutable fields (immutableFields), the object is deleted and re-created (replace.cpp) and outcome.replaced
  //! says so; otherwise, or when the replacement fails, the error.
  Result<Json> replaceIfImmutable(const PlannedObject& planned, const ApplyRequest& request, Error refused,
                                  ObjectOutcome& outcome);
  //! Health and the callbacks of an object the API server accepted.
  void finishApplied(const PlannedObject& planned, const ApplyRequest& request, const Json& applied,
                     ObjectOutcome& outcome);
  //! The owner annotation check of applyOne: the rule that lets the request take the object ("" when it is not
  //! another bundle's), or nullopt for a conflict (outcome filled in).
  Result<std::optional<std::string>> checkOwner(const PlannedObject& planned, const ApplyRequest& request,
                                                std::string& previous_owner, ObjectOutcome& outcome);
  //! An object that exists without an owner annotation: adopted with force ("" and outcome.adopted_unmanaged),
  //! the bundle's own namespace (""), else refused (nullopt, outcome.unmanaged, Helm's wording).
  std::optional<std::string> checkUnmanaged(const PlannedObject& planned, const ApplyRequest& request, const Json& live,
                                            ObjectOutcome& outcome);
  [[nodiscard]] kube::KubeClient& clientFor(const ApplyRequest& request) const {
    return request.client != nullptr ? *request.client : client_;
  }
  //! The stages of apply(), over the objects of one request.
  struct StagedApply;
  void planObjects(StagedApply& staged);
  Status applyDefinitions(StagedApply& staged);
  //! The scope of each stage 2/3 object from discovery, and its namespace.
  Status placeRest(StagedApply& staged);
  Status applyPlaced(StagedApply& staged);
  Status applyPlanned(StagedApply& staged, const PlannedObject& planned);
  void countApplied(std::string_view result);
  Status waitForCrds(std::vector<std::pair<size_t, std::string>>& crds, std::vector<ObjectOutcome>& outcomes);
  Status ensureNamespaces(const std::set<std::string>& namespaces, const ApplyRequest& request,
                          std::vector<std::string>& created);

  kube::KubeClient& client_;
  ApplierOptions options_;
  Metrics& metrics_;
  std::function<bool()> stopping_;
};

}  // namespace flotilla::agent
