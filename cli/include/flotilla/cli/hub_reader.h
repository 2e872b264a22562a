// flotilla/cli/hub_reader.h
//
// The CLI's access to the hub: a NATS connection that opens the existing KV buckets and never creates anything
// (a missing bucket means the hub is not initialised: no Flotilla service has run against this NATS yet), and a
// snapshot of every record the read commands show. Each record is decoded with its strict codec (libs/events
// records.h, libs/model for the Fleet resources); one that does not decode is skipped with a warning, so one bad
// record does not hide the rest.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/records.h"
#include "flotilla/model/resources.h"

namespace flotilla::cli {

//! How to reach NATS (the CLI's global flags): the credentials and TLS files go to the connection as they are. An
//! empty inbox_prefix is the one of the credentials' role (_INBOX.readonly for readonly), else _INBOX.
struct ConnectSettings : bus::ConnectOptions {
  std::string url = "nats://127.0.0.1:4222";  //!< comma-separated for a cluster (the servers)
  std::chrono::milliseconds timeout{5000};    //!< to connect, and of each JetStream call
};

//! An open connection with the buckets a command asked for. It closes the connection before its watchers go: a
//! watcher destroyed on an open connection deletes its consumer and waits for the answer, which the readonly role
//! (it may not delete consumers) never gets, a whole timeout per watcher.
struct HubConnection {
  std::shared_ptr<bus::Connection> connection;
  std::shared_ptr<bus::JetStream> js;
  std::map<std::string, std::shared_ptr<bus::KeyValue>, std::less<>> buckets;
  //! Watchers whose reading is done (loadSnapshot's), kept until the connection is closed.
  std::vector<bus::KvWatcher> finished_watchers;

  HubConnection() = default;
  HubConnection(HubConnection&&) = default;
  HubConnection& operator=(HubConnection&&) = default;
  HubConnection(const HubConnection&) = delete;
  HubConnection& operator=(const HubConnection&) = delete;
  ~HubConnection();

  //! The bucket (it was opened by openHub).
  [[nodiscard]] bus::KeyValue& bucket(std::string_view name) const;
};

//! Connects and opens `buckets` without creating them. A missing bucket is kNotFound with a message saying the hub
//! is not initialised; an unreachable server is kTransient naming the URL.
Result<HubConnection> openHub(const ConnectSettings& settings, const std::vector<std::string>& buckets);

//! Every record the read commands need, as stored. Maps are keyed by the record's KV key.
struct Snapshot {
  std::vector<model::GitRepo> gitrepos;
  std::vector<model::Cluster> clusters;  //!< registrations (clusters/cluster.*), as the agents reported them
  std::map<std::string, model::Cluster> cluster_specs;  //!< cluster -> the admin's document (clusters/spec.*)
  std::map<std::string, events::ClusterDeregistration> deregistrations;  //!< cluster -> tombstone
  std::vector<model::ClusterGroup> groups;
  std::map<std::string, std::string> heartbeats;                    //!< cluster -> time, from clusters/heartbeat.*
  std::map<std::string, events::BundleRecord> bundles;              //!< bundles bucket
  std::vector<events::DeploymentRecord> deployments;                //!< deployments bucket
  std::map<std::string, events::BdStatus> bd_statuses;              //!< by deployments key (cluster.ws.bundle)
  std::map<std::string, events::PollStatus> poll_statuses;          //!< status: gitrepo.<ws>.<gitrepo>
  std::map<std::string, events::RenderStatus> render_statuses;      //!< status: bundle-render.<ws>.<bundle>
  std::map<std::string, events::BundleSummary> bundle_summaries;    //!< status: summary.bundle.<ws>.<bundle>
  std::map<std::string, events::GitRepoSummary> gitrepo_summaries;  //!< status: summary.gitrepo.<ws>.<gitrepo>
  std::map<std::string, events::ClusterSummary> cluster_summaries;  //!< status: summary.cluster.<cluster>
  std::vector<std::string> warnings;                                //!< records that could not be read
};

//! Reads the gitrepos, clusters, bundles, deployments and status buckets (its watchers stay with `hub` until it is
//! destroyed: a command that reads again and again reads each time on a connection of its own).
Result<Snapshot> loadSnapshot(HubConnection& hub);

}  // namespace flotilla::cli
