// tests/e2e/e2e_util.h
//
// Reading the pipeline's state the way a read-only user or automation does: from the hub's KV records
// (docs/pipeline.md) and from the clusters' API servers.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "hub_fixture.h"

namespace flotilla::e2e {

//! How long a step of the pipeline may take on a loaded 2-core machine before a test gives up on it.
inline constexpr auto kLands = std::chrono::seconds(90);

//! The names of every cluster of `hub`, in order.
inline std::vector<std::string> clusterNames(const Hub& hub) {
  std::vector<std::string> names;
  for (size_t c = 0; c < hub.clusterCount(); ++c) {
    names.push_back(hub.clusterName(c));
  }
  return names;
}

inline std::string gitRepoYaml(const std::string& name, const std::string& url, const std::vector<std::string>& paths,
                               const std::string& targets_yaml = "  targets:\n  - clusterSelector: {}\n",
                               const std::string& interval = "1s") {
  std::string yaml = "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: " + name +
                     "\n  namespace: fleet-default\nspec:\n  repo: " + url +
                     "\n  branch: main\n  pollingInterval: " + interval + "\n  paths:\n";
  for (const auto& path : paths) {
    yaml += "  - " + path + "\n";
  }
  return yaml + targets_yaml;
}

//! Every record of `bucket` whose key starts with `prefix` (Hub::records). A failed read is never "no records": it
//! is read again for up to 10 s, and a failure that lasts fails the test, so a check that records are gone cannot
//! pass on a broken connection.
inline std::vector<Json> recordsOf(Hub& hub, const std::string& bucket, const std::string& prefix) {
  Result<std::vector<Json>> read = hub.records(bucket, prefix);
  if (!read.ok()) {
    Hub::waitFor(
        [&] {
          read = hub.records(bucket, prefix);
          return read.ok();
        },
        std::chrono::seconds(10));
  }
  if (!read.ok()) {
    ADD_FAILURE() << "reading KV " << bucket << " (keys " << prefix << "*): " << read.error().describe();
    return {};
  }
  return std::move(read).value();
}

//! The deployment a cluster should run for a bundle (scheduler's record) and what its agent last reported.
struct BundleOnCluster {
  std::string bundle;
  std::string commit;
  std::string wanted_deployment;
  std::string reported_deployment;
  std::string state;
  std::string message;
  Json resources;
};

inline std::vector<BundleOnCluster> bundlesOn(Hub& hub, const std::string& cluster, const std::string& gitrepo) {
  std::vector<BundleOnCluster> out;
  auto statuses = recordsOf(hub, "status", "bd.");
  for (const auto& record : recordsOf(hub, "deployments", "")) {
    if (record.getString("cluster") != cluster || record.getString("gitrepo") != gitrepo) {
      continue;
    }
    BundleOnCluster item{.bundle = record.getString("bundle"),
                         .commit = record.getString("commit"),
                         .wanted_deployment = record.getString("deploymentID")};
    for (const auto& status : statuses) {
      if (status.getString("cluster") == cluster && status.getString("bundle") == item.bundle) {
        item.reported_deployment = status.getString("deploymentID");
        item.state = status.getString("state");
        item.message = status.getString("message");
        if (const Json* resources = status.find("resources")) {
          item.resources = *resources;
        }
      }
    }
    out.push_back(std::move(item));
  }
  return out;
}

//! True when `bundle` on `cluster` reports `state` for the deployment the scheduler wants at `commit`
//! (empty commit: any).
inline bool bundleState(Hub& hub, const std::string& cluster, const std::string& gitrepo, const std::string& bundle,
                        const std::string& state, const std::string& commit = "") {
  for (const auto& item : bundlesOn(hub, cluster, gitrepo)) {
    if (item.bundle == bundle && item.state == state && item.reported_deployment == item.wanted_deployment &&
        (commit.empty() || item.commit == commit)) {
      return true;
    }
  }
  return false;
}

//! True when every bundle of `gitrepo` is Ready at `commit` on each of `clusters` (and each has at least one, or
//! exactly `bundles` when given: a bundle the bundler has not published yet is not on the list at all, so a test
//! that counts events per bundle must say how many it waits for).
inline bool readyEverywhere(Hub& hub, const std::string& gitrepo, const std::string& commit,
                            const std::vector<std::string>& clusters, size_t bundles = 0) {
  for (const auto& cluster : clusters) {
    auto items = bundlesOn(hub, cluster, gitrepo);
    if (items.empty() || (bundles != 0 && items.size() != bundles)) {
      return false;
    }
    for (const auto& item : items) {
      if (item.commit != commit || item.state != "Ready" || item.reported_deployment != item.wanted_deployment) {
        return false;
      }
    }
  }
  return true;
}

inline std::string configMapValue(Hub& hub, size_t cluster, const std::string& ns, const std::string& name,
                                  const std::string& key) {
  auto object = hub.kube(cluster).get("v1", "ConfigMap", ns, name);
  if (!object.ok()) {
    return {};
  }
  const Json* value = object->at({"data", key});
  return value != nullptr && value->isString() ? value->asString() : std::string();
}

inline bool configMapExists(Hub& hub, size_t cluster, const std::string& ns, const std::string& name) {
  return hub.kube(cluster).get("v1", "ConfigMap", ns, name).ok();
}

//! True only when the API server answers NotFound: an unreachable server or any other error is not "gone".
inline bool configMapGone(Hub& hub, size_t cluster, const std::string& ns, const std::string& name) {
  auto object = hub.kube(cluster).get("v1", "ConfigMap", ns, name);
  return !object.ok() && object.error().kind == ErrorKind::kNotFound;
}

inline std::string configMap(const std::string& name, const std::string& value) {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  value: \"" + value + "\"\n";
}

inline std::string namespaceYaml(const std::string& name) {
  return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n";
}

//! Repository `name` with one bundle app/ (namespace ns-<name>, ConfigMap c with value v1) and its GitRepo applied
//! to the hub: the first commit. Later commits change app/cm.yaml.
//! How many times agent `i` logged "bundle applied" for `commit` (an agent applies each commit of a bundle once,
//! unless a deploy reaches it twice).
inline size_t appliesOf(Hub& hub, size_t i, const std::string& commit) {
  auto text = readFile(hub.dir() + "/agent-" + std::to_string(i) + ".log");
  if (!text.ok()) {
    return 0;
  }
  size_t count = 0;
  for (const auto& line : split(*text, '\n')) {
    if (line.find("bundle applied") != std::string::npos && line.find(commit) != std::string::npos) {
      ++count;
    }
  }
  return count;
}

//! Agent `i`'s log lines that name `commit`, and the scheduler's: what a failed applies check prints.
inline std::string linesNaming(Hub& hub, size_t i, const std::string& commit) {
  std::string out;
  for (const std::string& log : {"agent-" + std::to_string(i) + ".log", std::string("scheduler.log")}) {
    auto text = readFile(hub.dir() + "/" + log);
    if (!text.ok()) {
      continue;
    }
    for (const auto& line : split(*text, '\n')) {
      if (line.find(commit) != std::string::npos) {
        out += log + ": " + line + "\n";
      }
    }
  }
  return out;
}

inline Result<std::string> applyConfigMapRepo(Hub& hub, const std::string& name) {
  auto repo = hub.git().createRepo(name);
  FLOTILLA_TRY(repo);
  const std::string ns = "ns-" + name;
  auto first = hub.git().commitFiles(name, "main",
                                     {{"app/fleet.yaml", "defaultNamespace: " + ns + "\n"},
                                      {"app/ns.yaml", namespaceYaml(ns)},
                                      {"app/cm.yaml", configMap("c", "v1")}},
                                     "first");
  FLOTILLA_TRY(first);
  FLOTILLA_TRY(hub.apply(gitRepoYaml(name, repo->http, {"app"})));
  return first;
}

}  // namespace flotilla::e2e
