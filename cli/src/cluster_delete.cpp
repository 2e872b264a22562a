// `flotilla delete cluster <name> [--keep-resources]`: deregisters a cluster. The CLI writes the tombstone
// clusters/deregistered.<name> (created only when absent) and then removes the admin's document clusters/spec.<name>
// (specs::deregisterCluster);
// the scheduler does the rest (docs/pipeline.md "Deletes that cascade"): while the cluster's agent is connected it
// is sent a delete for each deployment and the cluster's records go as its reports arrive, otherwise they go at
// once; a registration under that name is refused until a Cluster document for it is applied again. The tombstone
// is written first so that the document's labels never drop away from a cluster that is still being targeted.
#include <optional>
#include <ostream>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/cli/views.h"
#include "flotilla/core/log.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/specs/store.h"

namespace flotilla::cli {

namespace {

//! What the hub holds for a cluster name.
struct ClusterKeys {
  bool registered = false;  //!< clusters/cluster.<name>
  bool documented = false;  //!< clusters/spec.<name>
  std::optional<events::ClusterDeregistration> tombstone;
};

Result<ClusterKeys> readClusterKeys(bus::KeyValue& kv, const std::string& name) {
  ClusterKeys out;
  auto registered = kv.find(events::clusterKey(name));
  FLOTILLA_TRY(registered);
  out.registered = registered->has_value();
  auto documented = kv.find(events::clusterSpecKey(name));
  FLOTILLA_TRY(documented);
  out.documented = documented->has_value();
  auto tombstone = kv.find(events::clusterDeregisteredKey(name));
  FLOTILLA_TRY(tombstone);
  if (*tombstone) {
    auto record = events::parseRecord<events::ClusterDeregistration>((*tombstone)->value);
    out.tombstone = record.ok() ? *record : events::ClusterDeregistration{.cluster = name};
  }
  return out;
}

}  // namespace

int runDeleteCluster(Invocation& invocation, const Streams& io) {
  if (!invocation.global.workspace.empty()) {
    return usageError(io.err, "-n does not apply to clusters (a cluster's name is unique on the hub)", "delete");
  }
  const std::string& name = invocation.name;
  auto hub = openHub(invocation.global.connect, {std::string(events::kClustersBucket)});
  if (!hub.ok()) {
    return failWith(io.err, hub.error().describe());
  }
  auto& kv = hub->bucket(events::kClustersBucket);
  if (auto mode = specs::requireKvMode(kv, "delete"); !mode.ok()) {
    return failWith(io.err, mode.error().message);
  }
  auto keys = readClusterKeys(kv, name);
  if (!keys.ok()) {
    return failWith(io.err, "cannot read the hub: " + keys.error().describe());
  }
  if (!keys->tombstone && !keys->registered && !keys->documented) {
    return failWith(io.err, "Cluster \"" + name + "\" not found");
  }
  if (keys->tombstone && !keys->documented) {
    return failWith(io.err, "cluster \"" + name + "\" is already deregistered (at " + keys->tombstone->time +
                                "); apply a Cluster document for it to let it register again");
  }
  // The same deregistration the gateway makes of a deleted Cluster CR: the tombstone (unless one exists, so a
  // delete that stopped half-way is finished by running it again), then the document.
  if (auto deregistered = specs::deregisterCluster(kv, name, invocation.keep_resources); !deregistered.ok()) {
    return failWith(io.err, "cannot deregister " + name + ": " + deregistered.error().describe() +
                                " (run the command again to finish)");
  }
  io.out << qualifiedKind(Kind::kCluster) << "/" << name << " deleted (deregistered; the hub removes its records"
         << (invocation.keep_resources ? " and leaves its deployed objects in place"
                                       : " and, while its agent is connected, the objects it deployed")
         << ")\n";
  return kExitOk;
}

}  // namespace flotilla::cli
