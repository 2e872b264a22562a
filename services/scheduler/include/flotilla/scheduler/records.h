// flotilla/scheduler/records.h
//
// The JSON records the scheduler keeps in KV (docs/pipeline.md key table) and their codecs, shared with the CLI:
//
//   deployments/<cluster>.<ws>.<bundle>   DeploymentRecord  what was sent to the cluster (the BundleDeployment)
//   status/bd.<cluster>.<ws>.<bundle>     BdStatus          what the agent last reported about it
//   clusters/cluster.<cluster>            model::Cluster    registration (labels, versions, first/last seen)
//   clusters/group.<ws>.<group>           model::ClusterGroup (written by `flotilla apply`)
//
// Records are written with every field (lowerCamelCase) and read leniently (a missing field keeps its default),
// so a newer writer does not break an older reader. The bundles bucket is the bundler's; bundleFromRecord()
// reads it in the shapes the scheduler can use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/model/resources.h"
#include "flotilla/scheduler/targeting.h"

namespace flotilla::scheduler {

//! A BundleDeployment: what the scheduler released to (or staged for) one cluster.
struct DeploymentRecord {
  std::string cluster;
  std::string workspace;
  std::string bundle;
  std::string gitrepo;
  std::string commit;
  std::string deployment_id;  //!< released: the last DeployEvent sent ("" while held, e.g. bundle paused)
  std::string manifest_id;
  Json options = Json::object();
  Json depends_on = Json::array();
  std::string target;                //!< the allow-list target that admitted the cluster
  std::string customization;         //!< the targetCustomization that chose manifest/options ("" = default)
  std::string staged_deployment_id;  //!< wanted but not released (paused); "" when nothing is held
  int64_t generation = 0;            //!< of the last DeployEvent sent
  std::string updated;               //!< RFC 3339

  bool operator==(const DeploymentRecord&) const = default;
};

Json encode(const DeploymentRecord& record);
Result<DeploymentRecord> decodeDeploymentRecord(std::string_view json);

//! The applied state of a BundleDeployment: the agent's last StatusEvent about it.
struct BdStatus {
  std::string cluster;
  std::string workspace;
  std::string bundle;
  std::string deployment_id;  //!< the deployment the agent reports on (its applied one)
  int64_t generation = 0;
  std::string state;  //!< one of the seven bundle state names
  std::string reason;
  std::string message;
  Json resources = Json::array();  //!< [{apiVersion, kind, namespace, name, state, message}]
  bool stale = false;              //!< deployment_id differed from the record's when stored (see README "stale status")
  std::string agent_version;
  std::string reported;  //!< the StatusEvent's time
  std::string event_id;
  std::string updated;  //!< when the scheduler stored it

  bool operator==(const BdStatus&) const = default;
};

Json encode(const BdStatus& status);
Result<BdStatus> decodeBdStatus(std::string_view json);
//! The record for a StatusEvent (`stale` and `updated` set by the caller).
BdStatus bdStatusFrom(const events::StatusEvent& event);

//! A registered cluster as the KV record holds it: model::Cluster with metadata.namespace = workspace,
//! metadata.creationTimestamp = first registration, status.agent = versions and last registration, and a
//! "Registered" condition whose lastUpdateTime is the last registration.
Result<model::Cluster> decodeClusterRecord(std::string_view json);
//! Targeting's view of a cluster record.
ClusterInfo clusterInfoOf(const model::Cluster& cluster);

//! What the scheduler knows about a bundle, from a BundleEvent or the bundles KV record.
struct BundleInfo {
  std::string workspace;
  std::string gitrepo;
  std::string bundle;
  std::string time;  //!< of the event it came from ("" unknown); newer events supersede older ones
  std::optional<BundleTargeting> targeting;  //!< the last good rendering (nullopt: never rendered)
  std::optional<events::RenderError> error;  //!< the last event was a render failure
  std::string error_commit;
  std::string error_time;
};

//! A BundleEvent as read from the bus, plus the `deleted` flag of docs/pipeline.md ("a bundle that is gone
//! from the commit gets a bundle event with deleted: true"). A deleted event needs only workspace and bundle.
struct BundleMessage {
  events::BundleEvent event;
  bool deleted = false;
};

//! Decodes a BundleEvent payload, accepting a top-level "deleted" field whether or not libs/events knows it.
Result<BundleMessage> decodeBundleMessage(const Json& json);

//! Reads a bundles KV record. Accepted shapes: the bundler's BundleRecord ({kind: "BundleRecord", workspace,
//! gitrepo, bundle, commit, lastGood: BundleEvent, error: {file, line, message}}), the BundleEvent itself, or an
//! object holding it under "event" / "lastEvent" / "bundleEvent" / "lastGood". kInvalid for anything else (the
//! caller logs and skips it).
Result<BundleInfo> bundleFromRecord(std::string_view json);
//! The state a BundleEvent leaves (error events keep `previous` targeting).
Result<BundleInfo> bundleFromEvent(const events::BundleEvent& event, const BundleInfo* previous);

}  // namespace flotilla::scheduler
