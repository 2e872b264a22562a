// Releasing the objects a bundle no longer wants, and the reaper of held ones (docs/pipeline.md "Ownership
// handover", Release). For each object a bundle releases (a new deployment without it, a bundle delete):
//   another bundle's annotation, gone, a CRD kept without deleteCRDResources -> prune's rules (left alone)
//   another inventory claims it   -> handed over: dropped from the releaser's inventory, not deleted, wake
//   --release-hold > 0            -> held: listed in flotilla-released (fault point agent.hold.listed), deleted by
//                                    the reaper after the hold unless a bundle claims it first
//   --release-hold 0              -> deleted at once (prune)
// keepResources (delete only) never gets here: the objects are orphaned.
#include <algorithm>
#include <set>

#include "flotilla/agent/deploy_handler.h"
#include "flotilla/core/fault.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"

namespace flotilla::agent {
namespace {

void countRelease(Metrics& metrics, std::string_view result, size_t n = 1) {
  metrics.counter("objects_pruned_total", "Objects handled by prune, by result", {{"result", std::string(result)}})
      .Increment(static_cast<double>(n));
}

}  // namespace

Result<ReleaseResult> DeployHandler::release(const std::string& owner, const std::vector<ObjectRef>& refs,
                                             bool delete_crds, const std::function<void()>& progress,
                                             kube::KubeClient* client) {
  ReleaseResult result;
  if (refs.empty()) {
    return result;
  }
  // Each object's fate is decided and carried out under its stripe: a concurrent claim of it by another bundle
  // either happened before (the annotation names the claimant: left alone) or waits until it is held or deleted.
  auto stripes = object_locks_.lockAll(refs);
  auto claimants = ownership_.claimants(owner);
  FLOTILLA_TRY(claimants);
  std::vector<ObjectRef> held;
  std::vector<ObjectRef> to_prune;  // prune deletes them, or leaves them by its rules
  for (const auto& ref : refs) {
    if (isCrd(ref) && !delete_crds) {
      to_prune.push_back(ref);
      continue;
    }
    auto live = inventories_.client().get(ref.api_version, ref.kind, ref.ns, ref.name);
    if (!live.ok() && live.error().retryable()) {
      return fail(live.error());
    }
    std::string current = live.ok() ? ownerAnnotation(*live) : std::string();
    if (!live.ok() || current != owner) {
      // Gone, unreadable, another bundle's or managed by no bundle: prune reports it and deletes nothing.
      to_prune.push_back(ref);
      continue;
    }
    if (auto claimant = claimants->find(ref.identity()); claimant != claimants->end()) {
      ++result.handed_over;
      countRelease(metrics_, "handed_over");
      log::info("released object left for the bundle that claims it",
                {{"cluster", cluster_}, {"object", ref.describe()}, {"from", owner}, {"to", claimant->second}});
      continue;
    }
    (options_.release_hold.count() > 0 ? held : to_prune).push_back(ref);
  }
  if (!held.empty()) {
    FLOTILLA_TRY(holdObjects(owner, held));
    result.held = held.size();
  }
  if (!to_prune.empty()) {
    auto pruned = applier_.prune(to_prune, owner, delete_crds, progress, client);
    FLOTILLA_TRY(pruned);
    result.deleted = pruned->deleted;
    result.gone = pruned->gone;
    result.kept = pruned->orphaned.size();
    result.remaining = std::move(pruned->remaining);
    result.errors = std::move(pruned->errors);
  }
  return result;
}

Status DeployHandler::holdObjects(const std::string& owner, const std::vector<ObjectRef>& held) {
  std::vector<ReleasedObject> entries;
  entries.reserve(held.size());
  const std::string now = formatRfc3339(clock().now());
  for (const auto& ref : held) {
    entries.push_back(ReleasedObject{.ref = ref, .released_by = owner, .released_at = now});
  }
  FLOTILLA_TRY(released_.add(entries));
  countRelease(metrics_, "held", held.size());
  for (const auto& ref : held) {
    log::info("released object held", {{"cluster", cluster_},
                                       {"object", ref.describe()},
                                       {"released_by", owner},
                                       {"hold_ms", static_cast<int64_t>(options_.release_hold.count())}});
  }
  fault::point("agent.hold.listed");  // the releaser's inventory still lists them: the reaper leaves them alone
  return {};
}

//! One expired entry: deleted only while its annotation names the releaser and no inventory lists it. Under the
//! object's stripe, so a bundle claiming it right now either took it already or finds it gone and creates it.
Result<DeployHandler::Reaped> DeployHandler::reapOne(const ReleasedObject& entry, const std::set<std::string>& listed) {
  const ObjectRef& ref = entry.ref;
  auto stripe = object_locks_.lock(ref);
  kube::KubeClient& client = inventories_.client();
  auto live = client.get(ref.api_version, ref.kind, ref.ns, ref.name);
  if (!live.ok()) {
    if (live.error().retryable()) {
      return fail(live.error());
    }
    return live.error().kind == ErrorKind::kNotFound ? Reaped::kDrop : Reaped::kKeep;
  }
  const std::string owner = ownerAnnotation(*live);
  if (owner != entry.released_by || listed.contains(ref.identity())) {
    log::info("held object was taken by a bundle; not deleting it",
              {{"object", ref.describe()}, {"released_by", entry.released_by}, {"owner", owner}});
    return Reaped::kDrop;
  }
  auto removed = client.remove(ref.api_version, ref.kind, ref.ns, ref.name,
                               kube::DeleteOptions{.propagation = kube::Propagation::kBackground});
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    if (removed.error().retryable()) {
      return fail(removed.error());
    }
    log::warn("cannot delete a released object after its hold",
              {{"object", ref.describe()}, {"error", removed.error().describe()}});
    return Reaped::kKeep;
  }
  metrics_.counter("released_deleted_total", "Held objects deleted after their hold expired").Increment();
  log::info("deleted a released object after its hold",
            {{"object", ref.describe()}, {"released_by", entry.released_by}, {"released_at", entry.released_at}});
  return Reaped::kDeleted;
}

Result<size_t> DeployHandler::reapReleased() {
  // Decided on a snapshot of the list, object by object under each one's stripe; only the entries it settled are
  // then dropped from the current list (bundles may hold and claim objects meanwhile).
  auto entries = released_.load();
  FLOTILLA_TRY(entries);
  const auto now = clock().now();
  std::vector<ReleasedObject> expired;
  for (auto& entry : *entries) {
    auto at = parseRfc3339(entry.released_at);  // checked when decoded
    if (!at || *at + options_.release_hold <= now) {
      expired.push_back(std::move(entry));
    }
  }
  released_.setGauge(entries->size());
  if (expired.empty()) {
    return size_t{0};
  }
  auto inventories = inventories_.list();
  FLOTILLA_TRY(inventories);
  std::set<std::string> listed;
  for (const auto& inventory : *inventories) {
    for (const auto& ref : inventory.objects) {
      listed.insert(ref.identity());
    }
  }
  size_t deleted = 0;
  Status failed;
  std::vector<ReleasedObject> settled;  // dropped from the list: deleted, gone, or taken by a bundle
  for (const auto& entry : expired) {
    auto reaped = reapOne(entry, listed);
    if (!reaped.ok()) {
      failed = fail(reaped.error());  // keep this entry and the rest for the next round
      break;
    }
    if (*reaped != Reaped::kKeep) {
      settled.push_back(entry);
    }
    deleted += *reaped == Reaped::kDeleted ? 1 : 0;
  }
  FLOTILLA_TRY(released_.update([&](std::vector<ReleasedObject>& current) {
    std::erase_if(current, [&](const ReleasedObject& entry) {
      return std::find(settled.begin(), settled.end(), entry) != settled.end();
    });
  }));
  FLOTILLA_TRY(failed);
  return deleted;
}

}  // namespace flotilla::agent
