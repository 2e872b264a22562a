#include "force_sync.h"

#include <ostream>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/cli/views.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/specs/store.h"

namespace flotilla::cli {

Result<int64_t> bumpForceSyncGeneration(bus::KeyValue& gitrepos, const std::string& key) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto entry = gitrepos.get(key);
    if (!entry.ok()) {
      return fail(entry.error());
    }
    auto json = Json::parse(entry->value);
    if (!json.ok()) {
      return fail(ErrorKind::kInvalid, "gitrepos/" + key + ": the stored record is not JSON", "force-sync");
    }
    auto gitrepo = model::decodeGitRepo(*json, "gitrepos/" + key);
    if (!gitrepo.ok()) {
      return fail(gitrepo.error());
    }
    gitrepo->spec.force_sync_generation += 1;
    gitrepo->metadata.generation += 1;
    auto written = gitrepos.update(key, model::encode(*gitrepo).dump(), entry->revision);
    if (written.ok()) {
      return gitrepo->spec.force_sync_generation;
    }
    if (written.error().kind != ErrorKind::kConflict) {
      return fail(written.error());
    }
    // Another writer (apply, another force-sync) changed the record after we read it: read it again.
  }
  return fail(ErrorKind::kConflict, "gitrepos/" + key + " kept changing while force-sync updated it; try again",
              "force-sync");
}

int forceSync(const std::string& qualified_name, const std::string& workspace, const ConnectSettings& connect,
              std::ostream& out, std::ostream& err) {
  if (qualified_name.empty()) {
    return usageError(err, "force-sync needs a GitRepo name", "force-sync");
  }
  std::string ws = workspace;
  std::string name = qualified_name;
  if (auto slash = name.find('/'); slash != std::string::npos) {
    if (!ws.empty() && ws != name.substr(0, slash)) {
      return usageError(err, name + " names workspace " + name.substr(0, slash) + " but -n says " + ws, "force-sync");
    }
    ws = name.substr(0, slash);
    name = name.substr(slash + 1);
  }
  auto hub = openHub(connect, {std::string(events::kGitReposBucket), std::string(events::kClustersBucket)});
  if (!hub.ok()) {
    err << "error: " << hub.error().describe() << "\n";
    return kExitError;
  }
  // In Kubernetes mode spec.forceSyncGeneration is the CR's: `kubectl patch gitrepo` it instead.
  if (auto mode = specs::requireKvMode(hub->bucket(events::kClustersBucket), "change"); !mode.ok()) {
    err << "error: " << mode.error().message << "\n";
    return kExitError;
  }
  auto& kv = hub->bucket(events::kGitReposBucket);
  const std::string pattern = ws.empty() ? std::string("*.") + events::escapeToken(name) : events::gitRepoKey(ws, name);
  auto keys = kv.keys(pattern);
  if (!keys.ok()) {
    err << "error: cannot read the hub: " << keys.error().describe() << "\n";
    return kExitError;
  }
  if (keys->empty()) {
    err << "error: gitrepo \"" << name << "\" not found" << (ws.empty() ? "" : " in workspace " + ws) << "\n";
    return kExitError;
  }
  if (keys->size() > 1) {
    err << "error: gitrepo \"" << name << "\" exists in several workspaces; choose one with -n\n";
    return kExitError;
  }
  auto generation = bumpForceSyncGeneration(kv, keys->front());
  if (!generation.ok()) {
    err << "error: cannot force-sync " << name << ": " << generation.error().describe() << "\n";
    return kExitError;
  }
  out << qualifiedKind(Kind::kGitRepo) << "/" << name << " force-sync requested (forceSyncGeneration " << *generation
      << ")\n";
  return kExitOk;
}

void defineForceSync(CLI::App& command, Invocation& invocation) {
  command.add_option("gitrepo", invocation.name, "the GitRepo: <name>, or <workspace>/<name>")->required();
}

int runForceSync(Invocation& invocation, const Streams& io) {
  return forceSync(invocation.name, invocation.global.workspace, invocation.global.connect, io.out, io.err);
}

}  // namespace flotilla::cli
