// `flotilla get`, `describe` and `delete`: read the hub's records into a snapshot and show them, or remove a spec
// (a cluster's deregistration is in cluster_delete.cpp).
#include <ostream>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/cli/views.h"
#include "flotilla/core/yaml.h"
#include "flotilla/events/subjects.h"
#include "flotilla/specs/store.h"

namespace flotilla::cli {

namespace {

std::string notFound(Kind kind, const std::string& name, const std::string& workspace) {
  return std::string(kindName(kind)) + " \"" + name + "\" not found" +
         (workspace.empty() ? "" : " in workspace " + workspace);
}

//! -o json|yaml, as kubectl prints them: one object when one object was asked for by name, else a `kind: List`
//! (apiVersion v1) of every object, even of none or one.
void printStructured(std::vector<Json> views, bool named, const std::string& format, std::ostream& out) {
  Json printed;
  if (named && views.size() == 1) {
    printed = std::move(views.front());
  } else {
    Json items = Json::array();
    for (auto& view : views) {
      items.push(std::move(view));
    }
    printed = Json::obj({{"apiVersion", "v1"},
                         {"kind", "List"},
                         {"items", std::move(items)},
                         {"metadata", Json::obj({{"resourceVersion", ""}})}});
  }
  out << (format == "json" ? printed.pretty() + "\n" : toYaml(printed));
}

void defineKindAndName(CLI::App& command, Invocation& invocation, bool name_required) {
  command.add_option("kind", invocation.kind, "gitrepos, bundles, clusters, clustergroups or bundledeployments (bd)")
      ->required();
  auto* name =
      command.add_option("name", invocation.name, "the object's name (a bundledeployment: <cluster>/<bundle>)");
  if (name_required) {
    name->required();
  }
}

}  // namespace

Result<Snapshot> readHub(const ConnectSettings& connect, std::ostream& err) {
  auto hub = openHub(connect, {std::string(events::kGitReposBucket), std::string(events::kClustersBucket),
                               std::string(events::kBundlesBucket), std::string(events::kDeploymentsBucket),
                               std::string(events::kStatusBucket)});
  if (!hub.ok()) {
    return fail(hub.error());
  }
  auto snapshot = loadSnapshot(*hub);
  if (!snapshot.ok()) {
    return fail(snapshot.error().kind, "cannot read the hub: " + snapshot.error().describe());
  }
  for (const auto& warning : snapshot->warnings) {
    err << "warning: " << warning << "\n";
  }
  return snapshot;
}

void defineGet(CLI::App& command, Invocation& invocation) {
  defineKindAndName(command, invocation, false);
  command.add_flag("-w,--watch", invocation.watch,
                   "after the table, print a row each time one of the objects changes (until interrupted; -o table "
                   "or wide)");
}
void defineDescribe(CLI::App& command, Invocation& invocation) {
  defineKindAndName(command, invocation, true);
}
void defineDelete(CLI::App& command, Invocation& invocation) {
  defineKindAndName(command, invocation, true);
  command.add_flag("--keep-resources", invocation.keep_resources,
                   "clusters only: leave the objects the cluster's bundles deployed in place (orphaned)");
}

int runGet(Invocation& invocation, const Streams& io) {
  auto kind = parseKind(invocation.kind);
  if (!kind.ok()) {
    return usageError(io.err, kind.error().message, "get");
  }
  const GlobalFlags& global = invocation.global;
  if (invocation.watch && global.output != "table" && global.output != "wide") {
    return usageError(io.err, "-w prints table rows: use it with -o table or wide, not -o " + global.output, "get");
  }
  if (invocation.watch) {
    return runGetWatch(invocation, *kind, io);
  }
  auto snapshot = readHub(global.connect, io.err);
  if (!snapshot.ok()) {
    return failWith(io.err, snapshot.error().describe());
  }
  Filter filter{.workspace = global.workspace, .name = invocation.name};
  auto views = listViews(*snapshot, *kind, filter);
  if (!filter.name.empty() && views.empty()) {
    return failWith(io.err, notFound(*kind, filter.name, filter.workspace));
  }
  if (global.output == "json" || global.output == "yaml") {
    // A bare cluster or bundle name lists that cluster's or bundle's deployments: a list, whatever its length.
    const bool one_object =
        !filter.name.empty() && (*kind != Kind::kBundleDeployment || filter.name.find('/') != std::string::npos);
    printStructured(std::move(views), one_object, global.output, io.out);
    return kExitOk;
  }
  if (views.empty()) {
    io.err << "No " << kindName(*kind) << " objects found"
           << (global.workspace.empty() ? "" : " in " + global.workspace) << ".\n";
    return kExitOk;
  }
  io.out << renderTable(*kind, views, global.workspace.empty(), std::chrono::system_clock::now());
  return kExitOk;
}

int runDescribe(Invocation& invocation, const Streams& io) {
  auto kind = parseKind(invocation.kind);
  if (!kind.ok()) {
    return usageError(io.err, kind.error().message, "describe");
  }
  const std::string& workspace = invocation.global.workspace;
  auto snapshot = readHub(invocation.global.connect, io.err);
  if (!snapshot.ok()) {
    return failWith(io.err, snapshot.error().describe());
  }
  const std::string& name = invocation.name;
  std::vector<Json> views = listViews(*snapshot, *kind, {.workspace = workspace, .name = name});
  if (*kind == Kind::kBundleDeployment && name.find('/') == std::string::npos && views.size() != 1) {
    return failWith(io.err, "name a bundle deployment as <cluster>/<bundle>");
  }
  if (views.empty()) {
    return failWith(io.err, notFound(*kind, name, workspace));
  }
  if (views.size() > 1) {
    std::string where;
    for (const auto& view : views) {
      const Json* ns = view.at({"metadata", "namespace"});
      where += (where.empty() ? "" : ", ") + (ns != nullptr && ns->isString() ? ns->asString() : std::string());
    }
    return failWith(io.err, std::string(kindName(*kind)) + " \"" + name + "\" exists in several workspaces (" + where +
                                "); choose one with -n");
  }
  io.out << describeView(*snapshot, *kind, views.front(), std::chrono::system_clock::now());
  return kExitOk;
}

int runDelete(Invocation& invocation, const Streams& io) {
  auto kind = parseKind(invocation.kind);
  if (!kind.ok()) {
    return usageError(io.err, kind.error().message, "delete");
  }
  if (*kind == Kind::kCluster) {
    return runDeleteCluster(invocation, io);
  }
  if (*kind != Kind::kGitRepo && *kind != Kind::kClusterGroup) {
    return usageError(io.err, "only gitrepos, clustergroups and clusters can be deleted", "delete");
  }
  if (invocation.keep_resources) {
    return usageError(io.err,
                      "--keep-resources applies to clusters only (a GitRepo's spec.keepResources decides for its "
                      "bundles)",
                      "delete");
  }
  const std::string& name = invocation.name;
  const std::string& workspace = invocation.global.workspace;
  const bool gitrepo = *kind == Kind::kGitRepo;
  std::string_view bucket = gitrepo ? events::kGitReposBucket : events::kClustersBucket;
  auto hub = openHub(invocation.global.connect, {std::string(bucket), std::string(events::kClustersBucket)});
  if (!hub.ok()) {
    return failWith(io.err, hub.error().describe());
  }
  auto& kv = hub->bucket(bucket);
  if (auto mode = specs::requireKvMode(hub->bucket(events::kClustersBucket), "delete"); !mode.ok()) {
    return failWith(io.err, mode.error().message);
  }
  // Without -n the name must exist in exactly one workspace.
  std::string pattern =
      gitrepo ? std::string("*.") + events::escapeToken(name) : "group.*." + events::escapeToken(name);
  if (!workspace.empty()) {
    pattern = gitrepo ? events::gitRepoKey(workspace, name) : events::clusterGroupKey(workspace, name);
  }
  auto keys = kv.keys(pattern);
  if (!keys.ok()) {
    return failWith(io.err, "cannot read the hub: " + keys.error().describe());
  }
  if (keys->empty()) {
    return failWith(io.err, notFound(*kind, name, workspace));
  }
  if (keys->size() > 1) {
    return failWith(
        io.err, std::string(kindName(*kind)) + " \"" + name + "\" exists in several workspaces; choose one with -n");
  }
  if (auto removed = kv.remove(keys->front()); !removed.ok()) {
    return failWith(io.err, "cannot delete " + name + ": " + removed.error().describe());
  }
  io.out << qualifiedKind(*kind) << "/" << name << " deleted\n";
  return kExitOk;
}

}  // namespace flotilla::cli
