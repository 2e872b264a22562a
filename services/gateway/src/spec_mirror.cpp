// CRs -> KV: one thread per kind lists the CRs, stores every spec (libs/specs), removes the specs whose CR is gone,
// then watches from the list's resourceVersion. A spec the strict decoder refuses is not stored (the last good one
// keeps running) and the CR's status says why, naming the field.
#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/kube/errors.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"
#include "flotilla/specs/store.h"
#include "gateway_core.h"

namespace flotilla::gateway {
namespace {

using Names = std::set<std::pair<std::string, std::string>>;

std::string nameOf(const Json& object, const std::string& field) {
  const Json* value = object.at({"metadata", field});
  return value != nullptr && value->isString() ? value->asString() : "";
}

//! Where a CR's errors point: "gitrepo fleet-default/web".
std::string sourceOf(const std::string& kind, const Json& object) {
  std::string lower = kind;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower + " " + nameOf(object, "namespace") + "/" + nameOf(object, "name");
}

//! The (workspace, name) of each KV key matching `filter` with `count` name tokens after `prefix` (one: a cluster
//! name, its workspace "").
Result<Names> storedNames(bus::KeyValue& kv, const std::string& filter, const std::string& prefix, size_t count) {
  auto keys = kv.keys(filter);
  FLOTILLA_TRY(keys);
  Names out;
  for (const auto& key : *keys) {
    auto names = events::keyNames(key, prefix, count);
    if (names.ok()) {
      out.emplace(count == 2 ? names->at(0) : "", names->back());
    }
  }
  return out;
}

//! The CR of the spec stored at `key` (a hub leaving KV mode adopts it): the stored metadata's name, namespace,
//! labels and annotations, and its spec.
Result<Json> crOf(bus::KeyValue& kv, const std::string& key, const std::string& kind) {
  auto entry = kv.get(key);
  FLOTILLA_TRY(entry);
  auto stored = Json::parse(entry->value);
  FLOTILLA_TRY(stored);
  Json metadata = Json::object();
  for (const char* field : {"name", "namespace", "labels", "annotations"}) {
    if (const Json* value = stored->at({"metadata", field}); value != nullptr) {
      metadata[field] = *value;
    }
  }
  if (!metadata.contains("namespace")) {
    metadata["namespace"] = Json(std::string(model::kDefaultNamespace));
  }
  const Json* spec = stored->find("spec");
  return Json::obj({{"apiVersion", Json(std::string(kFleetApiVersion))},
                    {"kind", Json(kind)},
                    {"metadata", std::move(metadata)},
                    {"spec", spec != nullptr ? *spec : Json::object()}});
}

}  // namespace

std::vector<MirroredKind> mirroredKinds(const service::Hub& hub) {
  auto gitrepos = hub.gitrepos;
  auto clusters = hub.clusters;
  std::vector<MirroredKind> kinds;
  kinds.push_back(MirroredKind{
      .kind = "GitRepo",
      .store = [gitrepos](const Json& object) -> Result<std::string> {
        auto decoded = model::decodeGitRepo(object, sourceOf("GitRepo", object));
        FLOTILLA_TRY(decoded);
        return specs::storeGitRepo(*gitrepos, std::move(decoded).value());
      },
      .remove = [gitrepos](const std::string& ns,
                           const std::string& name) { return specs::removeGitRepo(*gitrepos, ns, name); },
      .stored = [gitrepos] { return storedNames(*gitrepos, ">", "", 2); },
      .storedCr = [gitrepos](
                      const std::string& ns,
                      const std::string& name) { return crOf(*gitrepos, events::gitRepoKey(ns, name), "GitRepo"); },
  });
  kinds.push_back(MirroredKind{
      .kind = "ClusterGroup",
      .store = [clusters](const Json& object) -> Result<std::string> {
        auto decoded = model::decodeClusterGroup(object, sourceOf("ClusterGroup", object));
        FLOTILLA_TRY(decoded);
        return specs::storeClusterGroup(*clusters, std::move(decoded).value());
      },
      .remove = [clusters](const std::string& ns,
                           const std::string& name) { return specs::removeClusterGroup(*clusters, ns, name); },
      .stored = [clusters] { return storedNames(*clusters, "group.>", "group", 2); },
      .storedCr =
          [clusters](const std::string& ns, const std::string& name) {
            return crOf(*clusters, events::clusterGroupKey(ns, name), "ClusterGroup");
          },
  });
  kinds.push_back(MirroredKind{
      .kind = "Cluster",
      .store = [clusters](const Json& object) -> Result<std::string> {
        auto decoded = model::decodeClusterDocument(object, sourceOf("Cluster", object));
        FLOTILLA_TRY(decoded);
        return specs::storeClusterDocument(*clusters, *decoded);
      },
      // A cluster's name is unique on the hub: its CR's namespace is its workspace, not part of its key.
      .remove = [clusters](const std::string&,
                           const std::string& name) { return specs::deregisterCluster(*clusters, name, false); },
      .stored = [clusters] { return storedNames(*clusters, "spec.>", "spec", 1); },
      .storedCr = [clusters](
                      const std::string&,
                      const std::string& name) { return crOf(*clusters, events::clusterSpecKey(name), "Cluster"); },
  });
  return kinds;
}

namespace {

//! What a spec write depends on besides the spec: a change of status leaves it as it is.
Json mirroredMeta(const Json& object) {
  Json out = Json::object();
  for (const char* field : {"generation", "labels", "annotations"}) {
    if (const Json* value = object.at({"metadata", field}); value != nullptr) {
      out[field] = *value;
    }
  }
  return out;
}

}  // namespace

Status Gateway::Core::mirrorObject(const MirroredKind& kind, const Json& object, std::map<std::string, Json>& seen) {
  const std::string ns = nameOf(object, "namespace");
  const std::string name = nameOf(object, "name");
  const std::string key = ns + "/" + name;
  Json meta = mirroredMeta(object);
  if (auto last = seen.find(key); last != seen.end() && last->second == meta) {
    noteObject(kind.kind, ns, name, object.find("status"), std::nullopt);
    return {};
  }
  Acceptance acceptance{.generation = meta.getInt("generation"), .accepted = false, .message = {}};
  auto stored = kind.store(object);
  if (stored.ok()) {
    acceptance.accepted = true;
    metrics.spec(kind.kind, stored->substr(0, stored->find(' ')));
    if (*stored != "unchanged") {
      log::info("spec mirrored into KV", {{"kind", kind.kind}, {"namespace", ns}, {"name", name}, {"result", *stored}});
    }
  } else if (stored.error().kind == ErrorKind::kInvalid) {
    acceptance.message = stored.error().describe();
    metrics.spec(kind.kind, "rejected");
    log::warn("spec refused; the last accepted one stays",
              {{"kind", kind.kind}, {"namespace", ns}, {"name", name}, {"error", acceptance.message}});
  } else {
    metrics.spec(kind.kind, "failed");
    return fail(stored.error().kind, kind.kind + " " + key + ": cannot store the spec: " + stored.error().describe());
  }
  seen[key] = std::move(meta);
  noteObject(kind.kind, ns, name, object.find("status"), acceptance);
  return {};
}

void Gateway::Core::noteObject(const std::string& kind, const std::string& ns, const std::string& name,
                               const Json* current, const std::optional<Acceptance>& acceptance, bool gone) {
  const Json status = current != nullptr ? *current : Json();
  std::string write;
  {
    std::lock_guard lock(mutex);
    if (kind == "GitRepo") {
      write = writeKey(kGitRepoWrite, ns + "/" + name);
      if (gone) {
        gitrepos.erase(ns + "/" + name);
      } else {
        GitRepoFacts& facts = gitrepos[ns + "/" + name];
        facts.current = status;
        facts.acceptance = acceptance ? acceptance : facts.acceptance;
      }
    } else if (kind == "Cluster") {
      write = writeKey(kClusterWrite, name);
      ClusterFacts& facts = clusters[name];
      if (gone) {
        deleted_cluster_crs.insert(name);  // its delete deregisters the cluster: no CR is made for it again
      } else {
        deleted_cluster_crs.erase(name);
      }
      // The roll-up stays (it is the scheduler's): only the CR's part goes.
      facts.ns = gone ? "" : ns;
      facts.current = status;
      facts.acceptance = gone ? std::nullopt : acceptance ? acceptance : facts.acceptance;
    } else {
      write = writeKey(kClusterGroupWrite, ns + "/" + name);
      if (gone) {
        groups.erase(ns + "/" + name);
      } else {
        ClusterGroupFacts& facts = groups[ns + "/" + name];
        facts.current = status;
        facts.acceptance = acceptance ? acceptance : facts.acceptance;
      }
    }
  }
  if (!gone) {
    queueWrite(write);
  }
}

Status Gateway::Core::mirrorDelete(const MirroredKind& kind, const Json& object, std::map<std::string, Json>& seen) {
  const std::string ns = nameOf(object, "namespace");
  const std::string name = nameOf(object, "name");
  if (auto removed = kind.remove(ns, name); !removed.ok()) {
    metrics.spec(kind.kind, "failed");
    return fail(removed.error().kind, kind.kind + " " + ns + "/" + name +
                                          ": cannot remove the spec of the deleted CR: " + removed.error().describe());
  }
  metrics.spec(kind.kind, "removed");
  log::info("CR deleted: its spec is removed from KV", {{"kind", kind.kind}, {"namespace", ns}, {"name", name}});
  seen.erase(ns + "/" + name);
  noteObject(kind.kind, ns, name, nullptr, std::nullopt, /*gone=*/true);
  return {};
}

Status Gateway::Core::adopt(const MirroredKind& kind, const std::string& ns, const std::string& name) {
  auto cr = kind.storedCr(ns, name);
  if (!cr.ok() && cr.error().kind == ErrorKind::kNotFound) {
    return {};  // removed since it was listed
  }
  FLOTILLA_TRY(cr);
  const std::string cr_ns = cr->at({"metadata", "namespace"})->asString();
  std::string plural = kind.kind + "s";
  std::transform(plural.begin(), plural.end(), plural.begin(), [](unsigned char c) { return std::tolower(c); });
  auto created = kube->request("POST", fleetPath(cr_ns, plural), cr->dump(), "application/json");
  if (!created.ok() && kube::httpStatusOf(created.error()) != 409) {
    metrics.spec(kind.kind, "failed");
    // Nothing is removed while a spec cannot be adopted: the round starts over after a backoff.
    return fail(
        created.error().kind,
        kind.kind + " " + cr_ns + "/" + name +
            ": cannot adopt the spec stored in KV (create its CR): " + created.error().describe() +
            (created.error().kind == ErrorKind::kNotFound ? "; create namespace " + cr_ns + " on the hub cluster"
                                                          : ""));
  }
  metrics.spec(kind.kind, "adopted");
  log::info("spec from KV mode adopted: its CR was created",
            {{"kind", kind.kind}, {"namespace", cr_ns}, {"name", name}});
  return {};
}

Status Gateway::Core::afterListed(const MirroredKind& kind) {
  bool every_kind = false;
  std::vector<std::string> registered;
  {
    std::lock_guard lock(mutex);
    listed.insert(kind.kind);
    every_kind = listed.size() == kinds.size();
    if (kind.kind == "Cluster") {
      registered = registry.registered();
    }
  }
  if (every_kind && adopting) {
    FLOTILLA_TRY(specs::markKubernetesMode(*hub.clusters));
    adopting = false;
    log::info("every spec has its CR: the hub is in Kubernetes mode (flotilla apply into KV is refused)");
  }
  // The Cluster CRs are known now: the registered clusters without one get theirs.
  for (const auto& name : registered) {
    queueWrite(writeKey(kClusterWrite, name));
  }
  return {};
}

Status Gateway::Core::mirrorRound(const MirroredKind& kind, std::map<std::string, Json>& seen) {
  auto listed_objects = kube->list(kFleetApiVersion, kind.kind, "");
  FLOTILLA_TRY(listed_objects);
  Names present;
  for (const auto& object : listed_objects->items) {
    present.emplace(kind.kind == "Cluster" ? "" : nameOf(object, "namespace"), nameOf(object, "name"));
    FLOTILLA_TRY(mirrorObject(kind, object, seen));
  }
  // Specs with no CR: written in KV mode (adopted), or their CR was deleted while no gateway watched (removed: the
  // CRs are the one source of truth).
  auto stored = kind.stored();
  FLOTILLA_TRY(stored);
  Status adoption;  // the first spec that could not be adopted: the others are adopted all the same
  for (const auto& [ns, name] : *stored) {
    if (present.count({ns, name})) {
      continue;
    }
    if (!adopting) {
      FLOTILLA_TRY(mirrorDelete(
          kind, Json::obj({{"metadata", Json::obj({{"namespace", Json(ns)}, {"name", Json(name)}})}}), seen));
    } else if (auto adopted = adopt(kind, ns, name); !adopted.ok() && adoption.ok()) {
      adoption = adopted;
    }
  }
  FLOTILLA_TRY(adoption);
  FLOTILLA_TRY(afterListed(kind));
  auto watch = kube->watch(kFleetApiVersion, kind.kind, "", {.resource_version = listed_objects->resource_version});
  FLOTILLA_TRY(watch);
  while (!stopping) {
    auto event = (*watch)->next(options.poll_interval);
    FLOTILLA_TRY(event);
    if (!event->has_value() || (*event)->type == kube::WatchEventType::kBookmark) {
      continue;
    }
    FLOTILLA_TRY((*event)->type == kube::WatchEventType::kDeleted ? mirrorDelete(kind, (*event)->object, seen)
                                                                  : mirrorObject(kind, (*event)->object, seen));
  }
  return {};
}

void Gateway::Core::runSpecMirror(const MirroredKind& kind) {
  auto backoff = options.retry_base;
  std::map<std::string, Json> seen;
  while (!stopping) {
    // A relist stores every CR again (a spec may have changed in KV meanwhile); unchanged ones cost a KV read.
    seen.clear();
    auto round = mirrorRound(kind, seen);
    if (stopping) {
      return;
    }
    const bool gone = !round.ok() && kube::isGone(round.error());
    metrics.mirrorRestart(kind.kind, gone ? "gone" : "error");
    log::warn(gone ? "watch too old (410): listing again" : "cannot list or watch; listing again after a backoff",
              {{"kind", kind.kind},
               {"error", round.ok() ? std::string("watch ended") : round.error().describe()},
               {"backoff_ms", std::to_string(gone ? 0 : backoff.count())}});
    if (!gone) {
      sleepFor(backoff);
      backoff = std::min(options.retry_max, backoff * 2);
    } else {
      backoff = options.retry_base;
    }
  }
}

}  // namespace flotilla::gateway
