#include "flotilla/agent/ownership.h"

#include "flotilla/core/fault.h"
#include "flotilla/core/log.h"

namespace flotilla::agent {

std::optional<std::pair<std::string, std::string>> splitOwner(std::string_view owner) {
  auto slash = owner.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == owner.size()) {
    return std::nullopt;
  }
  return std::pair{std::string(owner.substr(0, slash)), std::string(owner.substr(slash + 1))};
}

Result<std::optional<Inventory>> Ownership::inventoryOf(std::string_view owner) {
  auto parts = splitOwner(owner);
  if (!parts) {
    return std::optional<Inventory>();  // not a bundle this agent could have applied: no inventory
  }
  return inventories_.load(parts->first, parts->second);
}

Result<std::optional<std::string>> Ownership::decide(const Claimant& claimant, const ObjectRef& ref,
                                                     std::string_view owner) {
  auto inventory = inventoryOf(owner);
  if (!inventory.ok() && inventory.error().retryable()) {
    return fail(inventory.error());
  }
  // An unreadable inventory proves nothing: the object is not treated as stale.
  const bool readable = inventory.ok();
  const bool listed = !readable || (*inventory && (*inventory)->lists(ref));
  auto held = released_.find(ref, owner);
  FLOTILLA_TRY(held);
  if (!listed) {
    return std::optional<std::string>(std::string(held->has_value() ? kRuleReleased : kRuleStale));
  }
  if (held->has_value()) {
    return std::optional<std::string>(std::string(kRuleReleased));
  }
  if (readable && *inventory) {
    const Inventory& current = **inventory;
    if (current.workspace == claimant.workspace && !current.gitrepo.empty() && current.gitrepo == claimant.gitrepo &&
        claimant.commit_sequence > current.commit_sequence) {
      return std::optional<std::string>(std::string(kRuleNewerCommit));
    }
  }
  if (auto parts = splitOwner(owner);
      parts && parts->first == claimant.workspace && claimant.retiring.contains(parts->second)) {
    return std::optional<std::string>(std::string(kRuleRetiring));
  }
  if (claimant.force) {
    return std::optional<std::string>(std::string(kRuleForced));
  }
  return std::optional<std::string>();
}

Status Ownership::completeHandover(const Claimant& claimant, const ObjectRef& ref, std::string_view previous_owner,
                                   std::string_view rule) {
  fault::point("agent.claim.applied");
  auto inventory = inventoryOf(previous_owner);
  if (!inventory.ok() && inventory.error().retryable()) {
    return fail(inventory.error());
  }
  if (inventory.ok() && *inventory && (*inventory)->drop(ref)) {
    FLOTILLA_TRY(inventories_.save(**inventory));
    fault::point("agent.claim.dropped");  // the previous owner's inventory dropped it; the hold entry not yet
  }
  FLOTILLA_TRY(released_.remove(ref));
  metrics_
      .counter("handovers_total", "Objects handed over from one bundle to another, by claim rule",
               {{"rule", std::string(rule)}})
      .Increment();
  log::info("object handed over", {{"object", ref.describe()},
                                   {"from", std::string(previous_owner)},
                                   {"to", claimant.owner()},
                                   {"rule", std::string(rule)}});
  return {};
}

Result<std::map<std::string, std::string>> Ownership::claimants(std::string_view except) {
  auto inventories = inventories_.list();
  FLOTILLA_TRY(inventories);
  std::map<std::string, std::string> out;
  for (const auto& inventory : *inventories) {
    std::string owner = inventory.workspace + "/" + inventory.bundle;
    if (owner == except) {
      continue;
    }
    for (const auto& ref : inventory.claims) {
      out.emplace(ref.identity(), owner);
    }
  }
  return out;
}

}  // namespace flotilla::agent
