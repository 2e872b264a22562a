#include "flotilla/agent/applier.h"

#include <algorithm>
#include <thread>

#include "flotilla/agent/health.h"
#include "flotilla/core/log.h"

namespace flotilla::agent {
namespace {

bool transient(const Error& error) {
  return error.kind == ErrorKind::kTransient || error.kind == ErrorKind::kWait;
}

// A manifest element that is not a usable object still gets a name in the report.
ObjectRef lenientRef(const Json& object, size_t index) {
  ObjectRef ref;
  if (object.isObject()) {
    ref.api_version = object.getString("apiVersion");
    ref.kind = object.getString("kind");
    const Json* name = object.at({"metadata", "name"});
    const Json* ns = object.at({"metadata", "namespace"});
    ref.name = name != nullptr && name->isString() ? name->asString() : std::string();
    ref.ns = ns != nullptr && ns->isString() ? ns->asString() : std::string();
  }
  if (ref.kind.empty()) {
    ref.kind = "Object";
  }
  if (ref.name.empty()) {
    ref.name = "manifest[" + std::to_string(index) + "]";
  }
  return ref;
}

std::vector<ObjectRef> refsOf(const std::vector<PlannedObject>& planned) {
  std::vector<ObjectRef> refs;
  refs.reserve(planned.size());
  for (const auto& object : planned) {
    refs.push_back(object.ref);
  }
  return refs;
}

}  // namespace

Applier::Applier(kube::KubeClient& client, ApplierOptions options, Metrics& metrics, std::function<bool()> stopping)
    : client_(client), options_(std::move(options)), metrics_(metrics), stopping_(std::move(stopping)) {}

Result<std::optional<std::string>> Applier::checkOwner(const PlannedObject& planned, const ApplyRequest& request,
                                                       std::string& previous_owner, ObjectOutcome& outcome) {
  // Every object the watch cache cannot vouch for is read first, also those the inventory lists: a crash may have
  // left an object in a bundle's inventory that another bundle owns (docs/pipeline.md "Order of writes and
  // crashes").
  auto live = clientFor(request).get(planned.ref.api_version, planned.ref.kind, planned.ref.ns, planned.ref.name);
  if (!live.ok()) {
    if (transient(live.error())) {
      return fail(live.error());
    }
    return std::optional<std::string>(std::string());  // absent (or unreadable): the apply reports it
  }
  previous_owner = ownerAnnotation(*live);
  if (previous_owner.empty()) {
    return checkUnmanaged(planned, request, *live, outcome);
  }
  if (previous_owner == request.owner) {
    return std::optional<std::string>(std::string());
  }
  std::optional<std::string> rule;
  if (request.decide_claim) {
    auto decided = request.decide_claim(planned.ref, previous_owner);
    FLOTILLA_TRY(decided);
    rule = std::move(decided).value();
  } else if (request.force) {
    rule = "forced";
  }
  if (!rule) {
    outcome.apply_failed = true;
    outcome.conflict = true;
    outcome.error = conflictMessage(planned.ref, previous_owner, request.owner);
    countApplied("foreign");
  }
  return rule;
}

namespace {

//! The field managers of a live object (metadata.managedFields[].manager), each once.
std::vector<std::string> fieldManagers(const Json& live) {
  std::vector<std::string> managers;
  const Json* fields = live.at({"metadata", "managedFields"});
  if (fields == nullptr || !fields->isArray()) {
    return managers;
  }
  for (const auto& entry : fields->asArray()) {
    std::string manager = entry.isObject() ? entry.getString("manager") : std::string();
    if (!manager.empty() && std::find(managers.begin(), managers.end(), manager) == managers.end()) {
      managers.push_back(manager);
    }
  }
  return managers;
}

}  // namespace

std::optional<std::string> Applier::checkUnmanaged(const PlannedObject& planned, const ApplyRequest& request,
                                                   const Json& live, ObjectOutcome& outcome) {
  if (isNamespace(planned.ref) && request.owned_namespaces.contains(planned.ref.name)) {
    return std::string();  // created by the agent for this bundle earlier (namespaces carry no annotation)
  }
  // A target namespace the agent created for another bundle, or for this one by an apply that crashed before its
  // inventory was written, carries kCreatedForAnnotation (older agents left only their field manager, and only
  // when they set labels or annotations on it).
  const auto managers = fieldManagers(live);
  if (isNamespace(planned.ref) && (live.at({"metadata", "annotations", kCreatedForAnnotation}) != nullptr ||
                                   std::find(managers.begin(), managers.end(), kFieldManager) != managers.end())) {
    return std::string();
  }
  auto count = [&](std::string_view result) {
    metrics_
        .counter("unmanaged_objects_total", "Existing objects no bundle manages, by decision",
                 {{"result", std::string(result)}})
        .Increment();
  };
  if (request.force) {
    count("adopted");
    outcome.adopted_unmanaged = true;
    log::info("adopting an object no bundle manages (takeOwnership)",
              {{"object", planned.ref.describe()}, {"owner", request.owner}});
    return std::string();
  }
  count("refused");
  outcome.apply_failed = true;
  outcome.unmanaged = true;
  outcome.error = unmanagedMessage(planned.ref, managers);
  log::warn("refusing to adopt an object no bundle manages",
            {{"object", planned.ref.describe()}, {"owner", request.owner}, {"error", outcome.error}});
  return std::nullopt;
}

Result<std::optional<Json>> Applier::applyOwned(const PlannedObject& planned, const ApplyRequest& request) {
  const uint64_t version = options_.owned_version ? options_.owned_version(planned.ref, request.owner) : 0;
  if (version == 0) {
    return std::optional<Json>();
  }
  // The watch saw this bundle's annotation on the object at `version` and nothing newer: the read would say the
  // same. The precondition makes the API server check that claim at the write, so a handover, a hand edit or a
  // delete the watch has not delivered yet fails the apply instead of being overwritten.
  Json object = planned.object;
  object["metadata"]["resourceVersion"] = std::to_string(version);
  auto applied = clientFor(request).apply(
      object, kube::ApplyOptions{.field_manager = std::string(kFieldManager), .force = request.force});
  auto count = [&](std::string_view result) {
    metrics_
        .counter("owner_reads_skipped_total",
                 "Applies of objects the watch cache knew as the bundle's own, without a read first, by result",
                 {{"result", std::string(result)}})
        .Increment();
  };
  if (applied.ok()) {
    count("applied");
    return std::optional<Json>(std::move(applied).value());
  }
  if (transient(applied.error())) {
    return fail(applied.error());
  }
  count("read");
  log::info("the object changed since the watch saw it (or the apply was refused); reading it first",
            {{"object", planned.ref.describe()}, {"owner", request.owner}, {"error", applied.error().describe()}});
  return std::optional<Json>();
}

void Applier::finishApplied(const PlannedObject& planned, const ApplyRequest& request, const Json& applied,
                            ObjectOutcome& outcome) {
  Health health = evaluateHealth(applied);
  outcome.ready = health.ready;
  outcome.message = health.message;
  countApplied("ok");
  request.applied_object(planned.ref, planned.object, applied);
}

Result<ObjectOutcome> Applier::applyOne(const PlannedObject& planned, const ApplyRequest& request, bool& adopted,
                                        bool& foreign) {
  ObjectOutcome outcome{.ref = planned.ref};
  auto held = request.lock_object ? request.lock_object(planned.ref) : std::unique_lock<std::mutex>();
  auto owned = applyOwned(planned, request);
  FLOTILLA_TRY(owned);
  if (owned->has_value()) {
    adopted = false;
    foreign = false;
    finishApplied(planned, request, **owned, outcome);
    return outcome;
  }
  std::string previous_owner;
  auto rule = checkOwner(planned, request, previous_owner, outcome);
  FLOTILLA_TRY(rule);
  foreign = !rule->has_value();
  adopted = !foreign && !(*rule)->empty();
  if (foreign) {
    return outcome;
  }
  kube::ApplyOptions apply_options{.field_manager = std::string(kFieldManager), .force = request.force};
  auto applied = clientFor(request).apply(planned.object, apply_options);
  if (!applied.ok() && !previous_owner.empty()) {
    // The object exists and is this bundle's (or a claim rule gave it to it): a refused immutable field replaces it.
    applied = replaceIfImmutable(planned, request, applied.error(), outcome);
  }
  if (!applied.ok()) {
    if (transient(applied.error())) {
      return fail(applied.error());
    }
    adopted = false;
    outcome.apply_failed = true;
    outcome.error = applied.error().message;
    countApplied("failed");
    log::warn("object rejected",
              {{"object", planned.ref.describe()}, {"owner", request.owner}, {"error", applied.error().describe()}});
    return outcome;
  }
  finishApplied(planned, request, *applied, outcome);
  if (adopted) {
    metrics_.counter("objects_adopted_total", "Objects taken over from another bundle (a claim rule)").Increment();
    FLOTILLA_TRY(request.claimed(planned.ref, previous_owner, **rule));
  }
  return outcome;
}

Status Applier::waitForCrds(std::vector<std::pair<size_t, std::string>>& crds, std::vector<ObjectOutcome>& outcomes) {
  auto deadline = std::chrono::steady_clock::now() + options_.crd_timeout;
  for (const auto& [index, api_version] : crds) {
    ObjectOutcome& outcome = outcomes[index];
    while (true) {
      auto live = client_.get(api_version, outcome.ref.kind, "", outcome.ref.name);
      if (live.ok()) {
        Health health = evaluateHealth(*live);
        outcome.ready = health.ready;
        outcome.message = health.message;
        if (health.ready) {
          break;
        }
      } else if (transient(live.error())) {
        return fail(live.error());
      } else {
        outcome.ready = false;
        outcome.message = live.error().message;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        metrics_.counter("crd_wait_timeouts_total", "CRDs not Established within --crd-timeout").Increment();
        log::warn("CRD not established in time; its custom resources will fail",
                  {{"crd", outcome.ref.name}, {"timeout_ms", static_cast<int64_t>(options_.crd_timeout.count())}});
        outcome.message =
            "not established after " + std::to_string(options_.crd_timeout.count()) + " ms: " + outcome.message;
        break;
      }
      if (stopping_()) {
        return fail(ErrorKind::kTransient, "stopping while waiting for CRD " + outcome.ref.name);
      }
      std::this_thread::sleep_for(options_.crd_poll);
    }
  }
  return {};
}

Status Applier::ensureNamespaces(const std::set<std::string>& namespaces, const ApplyRequest& request,
                                 std::vector<std::string>& created) {
  kube::KubeClient& client = clientFor(request);
  for (const auto& ns : namespaces) {
    auto live = client.get("v1", "Namespace", "", ns);
    if (live.ok()) {
      continue;
    }
    if (transient(live.error())) {
      return fail(live.error());
    }
    if (live.error().kind != ErrorKind::kNotFound) {
      continue;  // e.g. forbidden: the objects' own apply will report it
    }
    // Fleet creates a bundle's target namespace when it is missing; it is not part of the bundle's inventory.
    Json object = Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", ns}})}});
    object["metadata"]["annotations"][std::string(kCreatedForAnnotation)] = request.owner;
    for (const auto& [key, value] : request.namespace_labels) {
      object["metadata"]["labels"][key] = value;
    }
    for (const auto& [key, value] : request.namespace_annotations) {
      object["metadata"]["annotations"][key] = value;
    }
    // A create, not a server-side apply: a bundle that lists this Namespace may apply it between the get and here,
    // and an apply with the agent's field manager would strip that bundle's fields (its owner annotation) again.
    auto applied = client.requestJson("POST", "/api/v1/namespaces?fieldManager=" + std::string(kFieldManager),
                                      object.dump(), "application/json");
    if (!applied.ok()) {
      if (transient(applied.error())) {
        return fail(applied.error());
      }
      if (applied.error().kind == ErrorKind::kConflict) {
        continue;  // AlreadyExists: created in the meantime by someone else, so not by us
      }
      log::warn("could not create a namespace for the bundle",
                {{"namespace", ns}, {"owner", request.owner}, {"error", applied.error().describe()}});
      continue;
    }
    created.push_back(ns);
    metrics_.counter("namespaces_created_total", "Target namespaces created for bundles").Increment();
    log::info("created the bundle's namespace", {{"namespace", ns}, {"owner", request.owner}});
  }
  return {};
}

//! One staged apply on its way through the stages of Applier::apply.
struct Applier::StagedApply {
  const ApplyRequest& request;
  const std::function<void()>& progress;
  ApplyResult result;
  std::vector<PlannedObject> definitions;  //!< stage 1: CRDs and Namespaces
  std::vector<PlannedObject> rest;         //!< stages 2 and 3, placed once discovery knows the new CRDs
  std::vector<PlannedObject> placed;       //!< `rest` with their scope and namespace (placeRest)
  //! Objects never sent: of a kind the cluster does not serve, or outside --namespaces.
  std::vector<ObjectOutcome> unmapped;
  bool rest_placed = false;
  std::set<std::string> bundle_namespaces;  //!< Namespaces the bundle itself applies
};

Result<ApplyResult> Applier::apply(const ApplyRequest& request, const std::function<void()>& progress) {
  StagedApply staged{.request = request, .progress = progress};
  planObjects(staged);
  if (std::none_of(staged.definitions.begin(), staged.definitions.end(),
                   [](const PlannedObject& planned) { return isCrd(planned.ref); })) {
    // No kind of the bundle can appear during stage 1, so the objects of stages 2 and 3 are placed now and the
    // intent of every stage is recorded in one inventory write instead of one per stage.
    FLOTILLA_TRY(placeRest(staged));
    std::vector<ObjectRef> intent = refsOf(staged.definitions);
    for (const auto& planned : staged.placed) {
      intent.push_back(planned.ref);
    }
    FLOTILLA_TRY(request.record_intent(intent));
  }
  FLOTILLA_TRY(applyDefinitions(staged));
  if (!staged.rest_placed) {
    FLOTILLA_TRY(placeRest(staged));
  }
  FLOTILLA_TRY(applyPlaced(staged));
  return std::move(staged.result);
}

void Applier::planObjects(StagedApply& staged) {
  const ApplyRequest& request = staged.request;
  for (size_t i = 0; i < request.manifest.size(); ++i) {
    const Json& object = request.manifest[i];
    auto ref = objectRefOf(object);
    if (!ref.ok()) {
      staged.result.outcomes.push_back(
          ObjectOutcome{.ref = lenientRef(object, i), .apply_failed = true, .error = ref.error().message});
      continue;
    }
    PlannedObject planned{.object = object, .ref = *ref, .stage = Stage::kNamespaced, .index = i};
    if (isDefinitionKind(planned.ref)) {
      planned.stage = Stage::kDefinitions;
      planned.object = placeObject(std::move(planned.object), false, request.namespaces, request.owner);
      planned.ref.ns.clear();
      if (auto refused = refuseOutside(options_.scope, planned.ref, request.owner, metrics_)) {
        staged.unmapped.push_back(std::move(refused).value());  // never created, so not part of the inventory
        continue;
      }
      staged.definitions.push_back(std::move(planned));
    } else {
      staged.rest.push_back(std::move(planned));
    }
  }
}

Status Applier::applyPlanned(StagedApply& staged, const PlannedObject& planned) {
  bool adopted = false;
  bool foreign = false;
  auto outcome = applyOne(planned, staged.request, adopted, foreign);
  FLOTILLA_TRY(outcome);
  ApplyResult& result = staged.result;
  if (foreign) {  // an object we may not touch stays out of our inventory: a claim, or an unmanaged object
    (outcome->unmanaged ? result.unmanaged : result.claims).push_back(planned.ref);
  } else {
    result.objects.push_back(planned.ref);
  }
  if (outcome->adopted_unmanaged && !outcome->apply_failed) {
    result.adopted_unmanaged.push_back(planned.ref);
  }
  (outcome->apply_failed ? result.failed : result.applied) += 1;
  result.adopted += adopted ? 1 : 0;
  result.outcomes.push_back(std::move(outcome).value());
  staged.progress();
  return {};
}

//! Stage 1: CRDs and Namespaces, then wait until the CRDs are served.
Status Applier::applyDefinitions(StagedApply& staged) {
  sortForApply(staged.definitions);
  FLOTILLA_TRY(staged.request.record_intent(refsOf(staged.definitions)));
  std::vector<std::pair<size_t, std::string>> crds;
  for (const auto& planned : staged.definitions) {
    FLOTILLA_TRY(applyPlanned(staged, planned));
    if (isNamespace(planned.ref)) {
      staged.bundle_namespaces.insert(planned.ref.name);
    }
    if (isCrd(planned.ref) && !staged.result.outcomes.back().apply_failed) {
      crds.emplace_back(staged.result.outcomes.size() - 1, planned.ref.api_version);
    }
  }
  return waitForCrds(crds, staged.result.outcomes);
}

//! Stages 2 and 3 (placed by placeRest: the scope of each kind comes from discovery, which knows the new CRDs).
Status Applier::placeRest(StagedApply& staged) {
  staged.rest_placed = true;
  for (auto& planned : staged.rest) {
    auto mapping = clientFor(staged.request).mapping(planned.ref.api_version, planned.ref.kind);
    if (!mapping.ok()) {
      if (transient(mapping.error())) {
        return fail(mapping.error());
      }
      // Never created, so not part of the inventory.
      staged.unmapped.push_back(
          ObjectOutcome{.ref = planned.ref, .apply_failed = true, .error = mapping.error().message});
      continue;
    }
    planned.object =
        placeObject(std::move(planned.object), mapping->namespaced, staged.request.namespaces, staged.request.owner);
    planned.ref.ns = mapping->namespaced ? planned.object.at({"metadata", "namespace"})->asString() : std::string();
    planned.stage = stageOf(planned.ref, mapping->namespaced);
    if (auto refused = refuseOutside(options_.scope, planned.ref, staged.request.owner, metrics_)) {
      staged.unmapped.push_back(std::move(refused).value());
      continue;
    }
    staged.placed.push_back(std::move(planned));
  }
  staged.rest.clear();
  sortForApply(staged.placed);
  return {};
}

Status Applier::applyPlaced(StagedApply& staged) {
  for (auto& outcome : staged.unmapped) {
    staged.result.outcomes.push_back(std::move(outcome));
    staged.result.failed += 1;
    countApplied("failed");
  }
  std::set<std::string> needed_namespaces;
  for (const auto& planned : staged.placed) {
    if (!planned.ref.ns.empty() && !staged.bundle_namespaces.contains(planned.ref.ns)) {
      needed_namespaces.insert(planned.ref.ns);
    }
  }
  FLOTILLA_TRY(staged.request.record_intent(refsOf(staged.placed)));  // writes only what stage 1 did not record
  if (!options_.scope.restricted()) {  // with --namespaces the listed namespaces exist; none is created
    FLOTILLA_TRY(ensureNamespaces(needed_namespaces, staged.request, staged.result.created_namespaces));
  }
  for (const auto& planned : staged.placed) {
    FLOTILLA_TRY(applyPlanned(staged, planned));
  }
  return {};
}

void Applier::countApplied(std::string_view result) {
  metrics_.counter("objects_applied_total", "Objects applied, by result", {{"result", std::string(result)}})
      .Increment();
}

Result<std::vector<ObjectOutcome>> Applier::checkHealth(const std::vector<ObjectRef>& refs, kube::KubeClient* client) {
  kube::KubeClient& reader = client != nullptr ? *client : client_;
  std::vector<ObjectOutcome> outcomes;
  outcomes.reserve(refs.size());
  for (const auto& ref : refs) {
    ObjectOutcome outcome{.ref = ref};
    auto live = reader.get(ref.api_version, ref.kind, ref.ns, ref.name);
    if (live.ok()) {
      Health health = evaluateHealth(*live);
      outcome.ready = health.ready;
      outcome.message = health.message;
    } else if (transient(live.error())) {
      return fail(live.error());
    } else {
      outcome.message = live.error().kind == ErrorKind::kNotFound ? std::string("not found") : live.error().message;
    }
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

Result<PruneResult> Applier::prune(std::vector<ObjectRef> refs, std::string_view owner, bool delete_crds,
                                   const std::function<void()>& progress, kube::KubeClient* client) {
  kube::KubeClient& writer = client != nullptr ? *client : client_;
  PruneResult result;
  sortForPrune(refs);
  auto count = [&](std::string_view what) {
    metrics_.counter("objects_pruned_total", "Objects handled by prune, by result", {{"result", std::string(what)}})
        .Increment();
  };
  auto keep = [&](const ObjectRef& ref, const Error& error) {  // could not delete it: it stays in the inventory
    result.remaining.push_back(ref);
    result.errors.push_back(ref.describe() + ": " + error.message);
    count("failed");
  };
  for (const auto& ref : refs) {
    if (isCrd(ref) && !delete_crds) {
      log::info("keeping a CRD that left the bundle (deleteCRDResources is off)",
                {{"object", ref.describe()}, {"owner", std::string(owner)}});
      result.orphaned.push_back(ref);
      count("orphaned");
      continue;
    }
    auto live = writer.get(ref.api_version, ref.kind, ref.ns, ref.name);
    if (!live.ok()) {
      if (transient(live.error())) {
        return fail(live.error());
      }
      if (live.error().kind == ErrorKind::kNotFound) {  // the object, or its kind, is gone
        result.gone += 1;
        count("gone");
        continue;
      }
      keep(ref, live.error());
      continue;
    }
    std::string current_owner = ownerAnnotation(*live);
    if (current_owner != owner) {
      // Another bundle adopted it, or it carries no owner annotation: Flotilla neither created nor adopted it (an
      // unmanaged object the bundle was refused, or one whose annotation someone removed). Never deleted.
      log::info(current_owner.empty() ? "not pruning an object no bundle manages"
                                      : "not pruning an object another bundle has adopted",
                {{"object", ref.describe()}, {"owner", std::string(owner)}, {"adopted_by", current_owner}});
      result.orphaned.push_back(ref);
      count("orphaned");
      continue;
    }
    auto removed = writer.remove(ref.api_version, ref.kind, ref.ns, ref.name,
                                 kube::DeleteOptions{.propagation = kube::Propagation::kBackground});
    if (!removed.ok()) {
      if (transient(removed.error())) {
        return fail(removed.error());
      }
      if (removed.error().kind == ErrorKind::kNotFound) {
        result.gone += 1;
        count("gone");
        continue;
      }
      keep(ref, removed.error());
      log::warn("prune failed", {{"object", ref.describe()}, {"error", removed.error().describe()}});
      continue;
    }
    result.deleted += 1;
    count("deleted");
    log::info("pruned", {{"object", ref.describe()}, {"owner", std::string(owner)}});
    progress();
  }
  return result;
}

Result<std::vector<std::string>> Applier::deleteNamespaces(const std::vector<std::string>& names,
                                                           kube::KubeClient* client) {
  kube::KubeClient& writer = client != nullptr ? *client : client_;
  std::vector<std::string> errors;
  for (const auto& name : names) {
    auto removed = writer.remove("v1", "Namespace", "", name);
    if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
      if (transient(removed.error())) {
        return fail(removed.error());
      }
      metrics_
          .counter("namespaces_deleted_total", "Namespaces deleted with their bundle (deleteNamespace), by result",
                   {{"result", "failed"}})
          .Increment();
      log::warn("cannot delete the bundle's namespace", {{"namespace", name}, {"error", removed.error().describe()}});
      errors.push_back("namespace " + name + ": " + removed.error().message);
      continue;
    }
    metrics_
        .counter("namespaces_deleted_total", "Namespaces deleted with their bundle (deleteNamespace), by result",
                 {{"result", "deleted"}})
        .Increment();
    log::info("deleted the bundle's namespace (deleteNamespace)", {{"namespace", name}});
  }
  return errors;
}

}  // namespace flotilla::agent
