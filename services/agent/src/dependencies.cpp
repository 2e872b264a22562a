// dependsOn, evaluated by the agent for bundles of the same workspace on this cluster (docs/pipeline.md
// "dependsOn"): `name` names one bundle; `selector` matches every other bundle whose labels (from its DeployEvent,
// kept in its inventory) match, and matching none is not met. Each must be in one of `acceptedStates` (default
// Ready). Not met: WaitApplied (reason DependenciesNotReady) reported once per deployment, and the deploy is
// parked until a wake (a bundle of the cluster applied, deleted, released something or changed state). A cycle
// among the parked bundles: ErrApplied (reason DependencyCycle) for each bundle of it, still parked, until a new
// deploy breaks it.
#include <algorithm>
#include <set>

#include "flotilla/agent/deploy_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/model/codec.h"

namespace flotilla::agent {
namespace {

//! "bundle infra is NotReady (accepted: Ready)".
std::string describeUnmet(const std::string& bundle, const std::string& state,
                          const std::vector<std::string>& accepted) {
  std::string list;
  for (const auto& a : accepted) {
    list += (list.empty() ? "" : ", ") + a;
  }
  return "bundle " + bundle + " is " + state + " (accepted: " + list + ")";
}

//! The entries of the event's dependsOn; kInvalid for a malformed one or one with neither name nor selector.
Result<std::vector<model::BundleRef>> decodeDependsOn(const events::DeployEvent& event) {
  std::vector<model::BundleRef> refs;
  if (!event.depends_on.isArray()) {
    return refs;
  }
  const auto& entries = event.depends_on.asArray();
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string path = "dependsOn[" + std::to_string(i) + "]";
    auto ref = model::decodeBundleRef(entries[i], path);
    FLOTILLA_TRY(ref);
    if (ref->name.empty() && !ref->selector) {
      return fail(ErrorKind::kInvalid, path + ": needs a name or a selector");
    }
    refs.push_back(std::move(ref).value());
  }
  return refs;
}

std::vector<std::string> acceptedStates(const model::BundleRef& ref) {
  return ref.accepted_states.empty() ? std::vector<std::string>{"Ready"} : ref.accepted_states;
}

bool accepts(const std::vector<std::string>& accepted, const std::optional<model::BundleState>& state) {
  return state && std::find(accepted.begin(), accepted.end(), std::string(model::stateName(*state))) != accepted.end();
}

std::string stateText(const std::optional<model::BundleState>& state) {
  return state ? std::string(model::stateName(*state)) : std::string("not deployed");
}

//! "dependsOn cycle: ws/a → ws/b → ws/a", starting at cycle[start].
std::string cycleMessage(const std::vector<std::string>& cycle, size_t start) {
  const size_t n = cycle.size() - 1;  // the last element repeats the first
  std::string text = "dependsOn cycle: ";
  for (size_t i = 0; i <= n; ++i) {
    text += (i == 0 ? "" : " → ") + cycle[(start + i) % n];
  }
  return text;
}

}  // namespace

Outcome DeployHandler::applyWhenDependenciesMet(const events::DeployEvent& event,
                                                const model::BundleDeploymentOptions& options,
                                                const std::optional<Inventory>& inventory, const Delivery& delivery) {
  auto refs = decodeDependsOn(event);
  if (!refs.ok()) {
    return rejectWithReport(event, delivery, kReasonInvalidOptions, refs.error().describe(), "invalid");
  }
  auto unmet = unmetDependencies(event, *refs);
  if (!unmet.ok()) {
    return transientFailure(event, delivery, "dependencies", unmet.error());
  }
  if (!unmet->empty()) {
    return waitForDependencies(event, *refs, *unmet);
  }
  return handleApply(event, options, inventory, delivery);
}

Result<std::optional<model::BundleState>> DeployHandler::inventoryState(const Inventory& inventory) {
  if (inventory.deployment_id.empty()) {
    return std::optional<model::BundleState>();
  }
  if (!inventory.applied) {
    return std::optional<model::BundleState>(model::BundleState::kErrApplied);
  }
  auto health = applier_.checkHealth(inventory.objects);
  FLOTILLA_TRY(health);
  return std::optional<model::BundleState>(summarize(*health).state);
}

Result<std::optional<model::BundleState>> DeployHandler::bundleState(std::string_view workspace,
                                                                     std::string_view bundle) {
  auto inventory = inventories_.load(workspace, bundle);
  if (!inventory.ok()) {
    if (inventory.error().retryable()) {
      return fail(inventory.error());
    }
    return std::optional<model::BundleState>(model::BundleState::kErrApplied);  // unreadable: not acceptable
  }
  if (!*inventory) {
    return std::optional<model::BundleState>();
  }
  return inventoryState(**inventory);
}

Status DeployHandler::unmetBySelector(const events::DeployEvent& event, const model::BundleRef& ref,
                                      const std::vector<std::string>& accepted,
                                      std::optional<std::vector<Inventory>>& listed, std::vector<std::string>& unmet) {
  if (!listed) {
    auto inventories = inventories_.list();
    FLOTILLA_TRY(inventories);
    listed = std::move(inventories).value();
  }
  size_t matched = 0;
  for (const auto& inventory : *listed) {
    if (inventory.workspace != event.workspace || inventory.bundle == event.bundle ||
        !ref.selector->matches(inventory.labels)) {
      continue;
    }
    ++matched;
    auto state = inventoryState(inventory);
    FLOTILLA_TRY(state);
    if (!accepts(accepted, *state)) {
      unmet.push_back(describeUnmet(inventory.bundle, stateText(*state), accepted));
    }
  }
  if (matched == 0) {
    unmet.push_back("no bundle matches selector " + model::formatSelector(*ref.selector) + " on this cluster");
  }
  return {};
}

Result<std::vector<std::string>> DeployHandler::unmetDependencies(const events::DeployEvent& event,
                                                                  const std::vector<model::BundleRef>& refs) {
  std::vector<std::string> unmet;
  std::optional<std::vector<Inventory>> listed;  // the inventories, read once for every selector
  for (const auto& ref : refs) {
    auto accepted = acceptedStates(ref);
    if (!ref.name.empty()) {
      auto state = bundleState(event.workspace, ref.name);
      FLOTILLA_TRY(state);
      if (!accepts(accepted, *state)) {
        unmet.push_back(describeUnmet(ref.name, stateText(*state), accepted));
      }
    }
    if (ref.selector) {
      FLOTILLA_TRY(unmetBySelector(event, ref, accepted, listed, unmet));
    }
  }
  return unmet;
}

Outcome DeployHandler::waitForDependencies(const events::DeployEvent& event, const std::vector<model::BundleRef>& refs,
                                           const std::vector<std::string>& unmet) {
  const std::string owner = ownerOf(event.workspace, event.bundle);
  std::vector<std::string> cycle;
  std::vector<WaitingBundle> members;  // copied: reported without state_mutex_
  {
    std::lock_guard state(state_mutex_);
    waiting_[owner] = WaitingBundle{.workspace = event.workspace,
                                    .bundle = event.bundle,
                                    .deployment_id = event.deployment_id,
                                    .generation = event.generation,
                                    .depends_on = refs,
                                    .labels = event.labels};
    cycle = findCycle(owner);
    for (size_t i = 0; i + 1 < cycle.size(); ++i) {
      members.push_back(waiting_.at(cycle[i]));
    }
  }
  metrics_.counter("dependency_waits_total", "Deploys parked because dependsOn is not satisfied").Increment();
  if (!cycle.empty()) {
    reportCycle(cycle, members);
    return Outcome::wait(options_.park_fallback, "cycle");
  }
  std::string message = "waiting for dependencies: ";
  for (size_t i = 0; i < unmet.size(); ++i) {
    message += (i == 0 ? "" : "; ") + unmet[i];
  }
  log::info("deploy waits for its dependencies",
            {{"cluster", cluster_}, {"bundle", event.bundle}, {"commit", event.commit}, {"waiting_for", message}});
  BundleReport waiting = bundleFailure(model::BundleState::kWaitApplied, kReasonDependencies, message);
  // Reported once per deployment, not on every wake.
  if (!alreadyReported(owner, event.deployment_id, waiting, /*compare_message=*/false)) {
    if (auto published = report(event, waiting, event.deployment_id, {}); !published.ok()) {
      // The next wake (or the fallback) reports it again; the deploy still waits.
      log::warn("cannot report WaitApplied", {{"bundle", event.bundle}, {"error", published.error().describe()}});
    }
  }
  return Outcome::wait(options_.park_fallback, "waiting");
}

std::vector<std::string> DeployHandler::waitingDependencies(const WaitingBundle& waiting) const {
  std::vector<std::string> out;
  for (const auto& ref : waiting.depends_on) {
    if (!ref.name.empty()) {
      std::string target = ownerOf(waiting.workspace, ref.name);
      if (waiting_.contains(target)) {
        out.push_back(target);
      }
    }
    if (!ref.selector) {
      continue;
    }
    for (const auto& [key, other] : waiting_) {
      if (other.workspace == waiting.workspace && other.bundle != waiting.bundle &&
          ref.selector->matches(other.labels)) {
        out.push_back(key);
      }
    }
  }
  return out;
}

std::vector<std::string> DeployHandler::findCycle(const std::string& owner) const {
  // Depth-first over the waiting bundles; `path` is the chain from `owner` to the bundle being expanded.
  std::vector<std::string> path{owner};
  std::vector<std::vector<std::string>> pending{waitingDependencies(waiting_.at(owner))};
  std::set<std::string> visited{owner};
  while (!pending.empty()) {
    if (pending.back().empty()) {
      pending.pop_back();
      path.pop_back();
      continue;
    }
    std::string next = pending.back().back();
    pending.back().pop_back();
    if (next == owner) {
      path.push_back(owner);
      return path;
    }
    if (!visited.insert(next).second) {
      continue;
    }
    path.push_back(next);
    pending.push_back(waitingDependencies(waiting_.at(next)));
  }
  return {};
}

bool DeployHandler::stillWaiting(const WaitingBundle& member) const {
  std::lock_guard state(state_mutex_);
  auto it = waiting_.find(ownerOf(member.workspace, member.bundle));
  return it != waiting_.end() && it->second.deployment_id == member.deployment_id &&
         it->second.generation == member.generation;
}

void DeployHandler::reportCycle(const std::vector<std::string>& cycle, const std::vector<WaitingBundle>& members) {
  bool reported = false;
  for (size_t i = 0; i < members.size(); ++i) {
    const WaitingBundle& member = members[i];
    // cycle[0] is the bundle being handled (its lock is held); another member is reported only while no deploy of
    // it runs and it still waits with the same deployment, so a newer state it reports itself is never overwritten.
    std::unique_lock<std::mutex> other;
    if (i > 0) {
      other = bundle_locks_.tryLock(cycle[i]);
      if (!other.owns_lock() || !stillWaiting(member)) {
        continue;
      }
    }
    BundleReport failed =
        bundleFailure(model::BundleState::kErrApplied, kReasonDependencyCycle, cycleMessage(cycle, i));
    if (alreadyReported(cycle[i], member.deployment_id, failed, /*compare_message=*/true)) {
      continue;
    }
    events::DeployEvent origin{.cluster = cluster_,
                               .workspace = member.workspace,
                               .bundle = member.bundle,
                               .deployment_id = member.deployment_id,
                               .generation = member.generation};
    if (auto published = report(origin, failed, member.deployment_id, {}); !published.ok()) {
      log::warn("cannot report a dependsOn cycle",
                {{"bundle", member.bundle}, {"error", published.error().describe()}});
      continue;
    }
    reported = true;
  }
  if (reported) {
    metrics_.counter("dependency_cycles_total", "dependsOn cycles found among the waiting bundles").Increment();
    log::warn("dependsOn cycle", {{"cluster", cluster_}, {"cycle", cycleMessage(cycle, 0)}});
  }
}

}  // namespace flotilla::agent
