// Releasing the objects a bundle no longer wants, and the reaper of held ones (docs/pipeline.md "Ownership
// handover", Release). For each object a bundle releases (a new deployment without it, a bundle delete):
//   another bundle's annotation, gone, a CRD kept without deleteCRDResources -> prune's rules (left alone)
//   another inventory claims it   -> handed over: dropped from the releaser's inventory, not deleted, wake
//   --release-hold > 0            -> held: listed in flotilla-released (fault point agent.hold.listed), deleted by
//                                    the reaper after the hold unless a bundle claims it first
//   --release-hold 0              -> deleted at once (prune)
// keepResources (delete only) never gets here: the objects are orphaned.
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

//! What the reaper does with one expired entry.
enum class Reaped { kKeep, kDrop, kDeleted };

}  // namespace

Result<ReleaseResult> DeployHandler::release(const std::string& owner, const std::vector<ObjectRef>& refs,
                                             bool delete_crds, const std::function<void()>& progress,
                                             kube::KubeClient* client) {
  ReleaseResult result;
  if (refs.empty()) {
    return result;
  }
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

namespace {

//! One expired entry: deleted only while its annotation names the releaser and no inventory lists it.
Result<Reaped> reapOne(kube::KubeClient& client, Metrics& metrics, const ReleasedObject& entry,
                       const std::set<std::string>& listed) {
  const ObjectRef& ref = entry.ref;
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
  metrics.counter("released_deleted_total", "Held objects deleted after their hold expired").Increment();
  log::info("deleted a released object after its hold",
            {{"object", ref.describe()}, {"released_by", entry.released_by}, {"released_at", entry.released_at}});
  return Reaped::kDeleted;
}

}  // namespace

Result<size_t> DeployHandler::reapReleased() {
  std::lock_guard work(work_mutex_);
  auto entries = released_.load();
  FLOTILLA_TRY(entries);
  const auto now = clock().now();
  std::vector<ReleasedObject> keep;
  std::vector<ReleasedObject> expired;
  for (auto& entry : *entries) {
    auto at = parseRfc3339(entry.released_at);  // checked when decoded
    (at && *at + options_.release_hold > now ? keep : expired).push_back(std::move(entry));
  }
  released_.setGauge(keep.size() + expired.size());
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
  for (auto& entry : expired) {
    auto reaped = failed.ok() ? reapOne(inventories_.client(), metrics_, entry, listed) : Result<Reaped>(Reaped::kKeep);
    if (!reaped.ok()) {
      failed = fail(reaped.error());  // keep this entry and the rest for the next round
    }
    if (!reaped.ok() || *reaped == Reaped::kKeep) {
      keep.push_back(std::move(entry));
    }
    deleted += reaped.ok() && *reaped == Reaped::kDeleted ? 1 : 0;
  }
  FLOTILLA_TRY(released_.save(keep));
  FLOTILLA_TRY(failed);
  return deleted;
}

}  // namespace flotilla::agent
