// flotilla/agent/ownership.h
//
// Who owns an object on this cluster (docs/pipeline.md "Ownership handover"), decided from state kept in the
// cluster: the owner annotation on the object (kBundleAnnotation), each bundle's inventory and the hold list
// (released.h). When bundle B's deployment contains object O whose annotation names bundle A, B takes O when one
// of these holds, checked in this order:
//   stale         A has no inventory, or A's inventory does not list O (reported as `released` when O is held
//                 after A released it: a release drops O from A's inventory, so a held object is also unlisted)
//   released      O is held after A released it (A's inventory still lists it only after a crash mid-release)
//   newer-commit  A and B belong to the same GitRepo (and workspace) and B's commitSequence is greater than A's
//   retiring      A is being deleted (B's DeployEvent lists A under `retiring`: A's GitRepo spec is gone or A's
//                 deployment on this cluster is `deleting`), e.g. a GitRepo renamed by creating the new, deleting the
//                 old
//   forced        B's options ask for it (helm.takeOwnership, helm.force, correctDrift.force)
// Otherwise it is a conflict: O stays A's and B records it under `claims` in its inventory.
// After B applied O with its own annotation, completeHandover() finishes the claim: O leaves A's inventory and the
// hold list (a crash in between is harmless: A's next deployment or delete sees O annotated B and drops it
// without a prune).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "flotilla/agent/inventory.h"
#include "flotilla/agent/objects.h"
#include "flotilla/agent/released.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::agent {

//! The bundle that wants an object, from its DeployEvent and options.
struct Claimant {
  std::string workspace;
  std::string bundle;
  std::string gitrepo;
  int64_t commit_sequence = 0;
  std::set<std::string> retiring;  //!< bundles of the workspace being deleted (DeployEvent::retiring)
  bool force = false;

  [[nodiscard]] std::string owner() const { return workspace + "/" + bundle; }
};

//! The claim rules' names (the `rule` label of handovers_total).
inline constexpr std::string_view kRuleStale = "stale";
inline constexpr std::string_view kRuleReleased = "released";
inline constexpr std::string_view kRuleNewerCommit = "newer-commit";
inline constexpr std::string_view kRuleRetiring = "retiring";
inline constexpr std::string_view kRuleForced = "forced";

//! "<workspace>/<bundle>" split at the first '/'; nullopt when there is none.
std::optional<std::pair<std::string, std::string>> splitOwner(std::string_view owner);

class Ownership {
 public:
  Ownership(InventoryStore& inventories, ReleasedStore& released, Metrics& metrics)
      : inventories_(inventories), released_(released), metrics_(metrics) {}

  //! The rule that lets `claimant` take `ref` from `owner` (the bundle its annotation names), or nullopt for a
  //! conflict. kTransient when the cluster cannot be read.
  Result<std::optional<std::string>> decide(const Claimant& claimant, const ObjectRef& ref, std::string_view owner);
  //! After `ref` was applied with the claimant's annotation: fault point agent.claim.applied, then `ref` leaves
  //! the previous owner's inventory and the hold list; counted (handovers_total{rule}) and logged.
  Status completeHandover(const Claimant& claimant, const ObjectRef& ref, std::string_view previous_owner,
                          std::string_view rule);
  //! Object identity -> the bundle ("<workspace>/<bundle>") whose inventory claims it, over every inventory
  //! except `except`'s.
  Result<std::map<std::string, std::string>> claimants(std::string_view except);

 private:
  //! The inventory of `owner`; nullopt when it has none. Unreadable: kInvalid.
  Result<std::optional<Inventory>> inventoryOf(std::string_view owner);

  InventoryStore& inventories_;
  ReleasedStore& released_;
  Metrics& metrics_;
};

}  // namespace flotilla::agent
