// flotilla/scheduler/records.h
//
// What the scheduler keeps in memory about bundles, clusters and groups, read from the records of the KV contract
// (libs/events records.h: DeploymentRecord, BdStatus, BundleRecord; the cluster and group records are libs/model's
// Cluster and ClusterGroup). The records themselves and their codecs live in libs/events, so the bundler and the
// CLI read them without this library.
#pragma once

#include <optional>
#include <string>

#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"
#include "flotilla/model/resources.h"
#include "flotilla/scheduler/targeting.h"

namespace flotilla::scheduler {

using events::BdStatus;
using events::DeploymentRecord;

//! Targeting's view of a cluster record.
ClusterInfo clusterInfoOf(const model::Cluster& cluster);

//! What the scheduler knows about a bundle, from a BundleEvent or the bundler's BundleRecord.
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

//! The scheduler's view of the bundler's BundleRecord: lastGood gives the targeting, error the current render
//! error. kInvalid when lastGood's targeting is invalid.
Result<BundleInfo> bundleFromRecord(const events::BundleRecord& record);
//! The state a BundleEvent leaves (error events keep `previous` targeting).
Result<BundleInfo> bundleFromEvent(const events::BundleEvent& event, const BundleInfo* previous);

}  // namespace flotilla::scheduler
