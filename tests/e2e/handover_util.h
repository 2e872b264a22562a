// tests/e2e/handover_util.h
//
// What the ownership-handover, cascade and dependsOn tests read from the clusters and the hub, the way a user
// with kubectl and read access to the hub's KV would: object UIDs and owner annotations, the agents' inventories
// and release-hold list in each cluster, and which hub records still name a bundle; and how they set up the
// repositories and GitRepos they start from.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "flotilla/core/util.h"

namespace flotilla::e2e {

//! The namespace the agents keep their inventories and the release-hold list in (the agent's default).
inline constexpr const char* kAgentNamespace = "flotilla-system";
//! The annotation naming the bundle that owns an object (`<ws>/<bundle>`).
inline constexpr const char* kOwnerAnnotation = "flotilla.io/bundle";
inline constexpr const char* kWorkspace = "fleet-default";

//! Fleet's bundle ID for the simple names these tests use: `<gitrepo>-<path with / as ->`.
inline std::string bundleId(const std::string& gitrepo, const std::string& path) {
  std::string out = gitrepo + "-" + path;
  for (char& c : out) {
    if (c == '/') {
      c = '-';
    }
  }
  return out;
}

//! `<ws>/<bundle>`, as the owner annotation and the agent's messages name a bundle.
inline std::string qualified(const std::string& bundle) {
  return std::string(kWorkspace) + "/" + bundle;
}

struct ObjectRef {
  std::string api_version;
  std::string kind;
  std::string ns;  //!< "" for cluster-scoped kinds
  std::string name;

  [[nodiscard]] std::string describe() const { return kind + "/" + (ns.empty() ? "" : ns + "/") + name; }
};

inline ObjectRef configMapRef(const std::string& ns, const std::string& name) {
  return {.api_version = "v1", .kind = "ConfigMap", .ns = ns, .name = name};
}
inline ObjectRef namespaceRef(const std::string& name) {
  return {.api_version = "v1", .kind = "Namespace", .ns = "", .name = name};
}

//! The live object, or nullopt when the API server answers NotFound; any other failed read also fails the test, so
//! "no object" (no UID, no owner, not terminating) is never read from an error.
inline std::optional<Json> liveObject(Hub& hub, size_t cluster, const ObjectRef& ref) {
  auto object = hub.kube(cluster).get(ref.api_version, ref.kind, ref.ns, ref.name);
  if (!object.ok()) {
    EXPECT_EQ(object.error().kind, ErrorKind::kNotFound)
        << ref.describe() << " on cluster " << cluster << ": " << object.error().describe();
    return std::nullopt;
  }
  return std::move(object).value();
}

//! metadata.uid ("" when the object does not exist).
inline std::string uidOf(Hub& hub, size_t cluster, const ObjectRef& ref) {
  auto object = liveObject(hub, cluster, ref);
  const Json* uid = object ? object->at({"metadata", "uid"}) : nullptr;
  return uid != nullptr && uid->isString() ? uid->asString() : std::string();
}

//! The owner annotation ("" when the object or the annotation is missing).
inline std::string ownerOf(Hub& hub, size_t cluster, const ObjectRef& ref) {
  auto object = liveObject(hub, cluster, ref);
  const Json* owner = object ? object->at({"metadata", "annotations", kOwnerAnnotation}) : nullptr;
  return owner != nullptr && owner->isString() ? owner->asString() : std::string();
}

//! True while the object is being deleted (a Namespace without the namespace controller stays Terminating).
inline bool terminating(Hub& hub, size_t cluster, const ObjectRef& ref) {
  auto object = liveObject(hub, cluster, ref);
  return object && object->at({"metadata", "deletionTimestamp"}) != nullptr;
}

//! True only when the API server answers NotFound.
inline bool objectGone(Hub& hub, size_t cluster, const ObjectRef& ref) {
  auto object = hub.kube(cluster).get(ref.api_version, ref.kind, ref.ns, ref.name);
  return !object.ok() && object.error().kind == ErrorKind::kNotFound;
}

//! UIDs of `refs` on one cluster, keyed by ObjectRef::describe() ("" for a missing object).
inline std::map<std::string, std::string> uidsOf(Hub& hub, size_t cluster, const std::vector<ObjectRef>& refs) {
  std::map<std::string, std::string> out;
  for (const auto& ref : refs) {
    out[ref.describe()] = uidOf(hub, cluster, ref);
  }
  return out;
}

//! The agent's inventory of `bundle` on a cluster (the parsed `inventory.json`), nullopt when there is none.
//! Found by its label and content rather than by its name, so the test does not depend on the name's hash.
inline std::optional<Json> inventoryOf(Hub& hub, size_t cluster, const std::string& bundle) {
  auto list =
      hub.kube(cluster).list("v1", "ConfigMap", kAgentNamespace, {.label_selector = "flotilla.io/inventory=true"});
  if (!list.ok()) {
    return std::nullopt;
  }
  for (const auto& item : list->items) {
    const Json* text = item.at({"data", "inventory.json"});
    if (text == nullptr || !text->isString()) {
      continue;
    }
    auto inventory = Json::parse(text->asString());
    if (inventory.ok() && inventory->getString("bundle") == bundle &&
        inventory->getString("workspace", kWorkspace) == kWorkspace) {
      return std::move(inventory).value();
    }
  }
  return std::nullopt;
}

//! True when the cluster answers and has no inventory for `bundle`.
inline bool inventoryGone(Hub& hub, size_t cluster, const std::string& bundle) {
  auto list =
      hub.kube(cluster).list("v1", "ConfigMap", kAgentNamespace, {.label_selector = "flotilla.io/inventory=true"});
  return list.ok() && !inventoryOf(hub, cluster, bundle).has_value();
}

//! The release-hold list of a cluster (ConfigMap `flotilla-released`), its data as text ("" when it is not found;
//! any other failed read also fails the test): tests only look for an object's name in it, so they do not depend on
//! the list's layout.
inline std::string releaseHoldText(Hub& hub, size_t cluster) {
  auto object = hub.kube(cluster).get("v1", "ConfigMap", kAgentNamespace, "flotilla-released");
  if (!object.ok()) {
    EXPECT_EQ(object.error().kind, ErrorKind::kNotFound)
        << "release-hold list on cluster " << cluster << ": " << object.error().describe();
    return {};
  }
  const Json* data = object->find("data");
  return data != nullptr ? data->dump() : std::string();
}

//! Hub records that still name `bundle`: deployments, the agent reports (bd.*), the bundle's summary, the
//! bundler's record and render status. "" when there are none; otherwise one line per record, for messages.
inline std::string bundleRecordsLeft(Hub& hub, const std::string& bundle) {
  std::string left;
  for (const auto& record : recordsOf(hub, "deployments", "")) {
    if (record.getString("bundle") == bundle) {
      left += "deployments: " + record.getString("cluster") + "/" + bundle + "\n";
    }
  }
  for (const char* prefix : {"bd.", "summary.bundle.", "bundle-render."}) {
    for (const auto& record : recordsOf(hub, "status", prefix)) {
      if (record.getString("bundle") == bundle) {
        left += std::string("status: ") + prefix + record.getString("cluster") + " " + bundle + "\n";
      }
    }
  }
  for (const auto& record : recordsOf(hub, "bundles", "")) {
    if (record.getString("bundle") == bundle) {
      left += "bundles: " + bundle + "\n";
    }
  }
  return left;
}

//! The GitRepo summary the scheduler keeps (what `flotilla get gitrepos` shows), nullopt when there is none.
inline std::optional<Json> gitRepoSummary(Hub& hub, const std::string& gitrepo) {
  for (auto& record : recordsOf(hub, "status", "summary.gitrepo.")) {
    if (record.getString("gitrepo") == gitrepo) {
      return std::move(record);
    }
  }
  return std::nullopt;
}

//! The files of a raw-YAML bundle in directory `dir`: fleet.yaml (defaultNamespace `ns` plus `fleet_extra`
//! lines) and one file per object (`<name>.yaml`).
inline std::map<std::string, std::string> bundleFiles(const std::string& dir, const std::string& ns,
                                                      const std::map<std::string, std::string>& objects,
                                                      const std::string& fleet_extra = "") {
  std::map<std::string, std::string> files = {{dir + "/fleet.yaml", "defaultNamespace: " + ns + "\n" + fleet_extra}};
  for (const auto& [name, yaml] : objects) {
    files[dir + "/" + name + ".yaml"] = yaml;
  }
  return files;
}

//! `a` with `b`'s entries added.
inline std::map<std::string, std::string> merged(std::map<std::string, std::string> a,
                                                 const std::map<std::string, std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

//! A GitRepo document with extra spec lines (e.g. "  keepResources: true\n").
inline std::string gitRepoWith(const std::string& name, const std::string& url, const std::vector<std::string>& paths,
                               const std::string& extra_spec = "") {
  return gitRepoYaml(name, url, paths) + extra_spec;
}

//! A test's own repository with its first commit.
struct PushedRepo {
  std::string url;     //!< its HTTP URL ("" when it could not be created)
  std::string commit;  //!< the first commit ("" when it failed)
};

//! Creates repository `name` and commits `files` on main. A step that fails fails the test: callers check
//! HasFailure().
inline PushedRepo pushRepo(Hub& hub, const std::string& name, const std::map<std::string, std::string>& files,
                           const std::string& message = "first") {
  PushedRepo pushed;
  auto repo = hub.git().createRepo(name);
  EXPECT_TRUE(repo.ok()) << (repo.ok() ? "" : repo.error().describe());
  if (!repo.ok()) {
    return pushed;
  }
  pushed.url = repo->http;
  auto commit = hub.git().commitFiles(name, "main", files, message);
  EXPECT_TRUE(commit.ok()) << (commit.ok() ? "" : commit.error().describe());
  if (commit.ok()) {
    pushed.commit = *commit;
  }
  return pushed;
}

//! Applies GitRepo `name` on `url` over `paths` (plus `extra_spec` lines) and waits until its bundles are Ready at
//! `commit` on every cluster; failures are test failures.
inline void applyAndWait(Hub& hub, const std::string& name, const std::string& url,
                         const std::vector<std::string>& paths, const std::string& commit,
                         const std::string& extra_spec = "") {
  EXPECT_TRUE(hub.apply(gitRepoWith(name, url, paths, extra_spec)).ok());
  EXPECT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, commit, clusterNames(hub)); }, kLands))
      << name << " not Ready at " << commit;
}

//! pushRepo, then applyAndWait: GitRepo `name` Ready everywhere at its first commit. Callers check HasFailure().
inline PushedRepo deployGitRepo(Hub& hub, const std::string& name, const std::map<std::string, std::string>& files,
                                const std::vector<std::string>& paths, const std::string& extra_spec = "") {
  PushedRepo pushed = pushRepo(hub, name, files);
  if (!pushed.commit.empty()) {
    applyAndWait(hub, name, pushed.url, paths, pushed.commit, extra_spec);
  }
  return pushed;
}

}  // namespace flotilla::e2e
