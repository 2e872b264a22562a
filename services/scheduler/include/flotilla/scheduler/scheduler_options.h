// flotilla/scheduler/scheduler_options.h
//
// The scheduler's settings (flags.h fills them from the command line; tests set them directly), apart from the
// Scheduler class (scheduler.h) so the partitions' wiring (partition_set.h, main.cpp) reads them on their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "flotilla/scheduler/agent_labels.h"
#include "flotilla/scheduler/manifest_server.h"
#include "flotilla/scheduler/partition.h"
#include "flotilla/service/consumer.h"

namespace flotilla::scheduler {

//! Status messages handled at once (different deployments; scheduler.cpp setUpConsumers).
inline constexpr int kStatusWorkers = 4;

struct SchedulerOptions {
  int fetch_batch = 16;
  std::chrono::milliseconds fetch_timeout{1000};  //!< one fetch's wait; bounds shutdown latency
  std::chrono::milliseconds ack_wait{30000};      //!< redelivery after a crash; in-progress acks cover the rest
  std::chrono::milliseconds retry_base{500};      //!< first nak delay; doubles per delivery
  std::chrono::milliseconds retry_max{30000};     //!< cap of the nak delay
  std::chrono::milliseconds load_timeout{30000};  //!< reading the KV state at start
  //! How many deliveries a status report that is ahead of its deployment record (newer generation, other
  //! deploymentID: the record write is in flight or was lost in a crash) waits before it is stored as stale.
  uint64_t ahead_retries = 5;
  bool public_events = true;  //!< publish CloudEvents on flotilla.events.>
  //! --per-cluster-metrics: cluster_ready{cluster} and cluster_offline{cluster}, one series each per cluster
  //! (off by default: at 10,000 clusters they are 20,000 series; state_gauges.h).
  bool per_cluster_metrics = false;
  int64_t max_deliveries = service::kDefaultMaxDeliveries;    //!< per message, then terminated and reported
  std::chrono::milliseconds budget{std::chrono::minutes(5)};  //!< per message (consumer runtime)
  //! The agents' heartbeat interval: an agent whose last sign of life is older than three of these counts as
  //! disconnected (a deregistered cluster's records are then removed at once, without deletes sent to it).
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(30)};
  //! No sign of life (heartbeat or registration) for this long makes a cluster Offline (offline.cpp); 0 = three
  //! heartbeat intervals.
  std::chrono::milliseconds offline_after{0};
  //! The agents' deploy durables, which the scheduler creates (service::agentDeployConsumer): their ack wait
  //! (redelivery after an agent died holding a deploy) and deliveries of a failing deploy.
  std::chrono::milliseconds agent_ack_wait = service::kDefaultAgentAckWait;
  int64_t agent_max_deliveries = service::kDefaultMaxDeliveries;
  //! Manifest delivery to the agents (manifest_server.h), started and stopped with the scheduler.
  ManifestServerOptions manifests;
  //! How long summaries may wait for the end of a burst of status messages (handleStatus).
  std::chrono::milliseconds summary_delay{250};
  //! Summaries that would visit more deployment records than this are written at most once per summary_delay
  //! (writeSummaries), with the rollout passes the reports asked for: a bundle or GitRepo on 10,000 clusters is
  //! summarized a few times a second while reports stream in, not once per report (10,000 x 10,000 record visits).
  //! Smaller ones are written at once.
  size_t summary_visits_at_once = 2000;
  //! Which of an agent's reported labels count for targeting (--agent-labels; default none: only the labels of
  //! Cluster documents target).
  AgentLabelPolicy agent_labels;
  //! With replicas (--lease-ttl): true while this replica holds the scheduler lease (service::Lease::held). Checked
  //! before every DeployEvent is published, so a replica that lost the lease in the middle of a handler publishes
  //! nothing more (the message is handed back and the new holder handles it). Empty: always allowed.
  std::function<bool()> may_publish;
  //! The share of the work this scheduler does (partition.h, --partitions): its GitRepos' bundles and its clusters'
  //! summaries; the whole by default. Its durables are named with the partition's suffix ("scheduler-p0").
  Partition partition;
  //! start() serves flotilla.manifest.* too; false when the process serves them once for all of its partitions.
  bool serve_manifests = true;
  //! Tests: runs after a status report's bd.* record is written, while mutex_ is released (storeReport), with the
  //! report's cluster and bundle: a test changes the deployment there to drive the overtaken path.
  std::function<void(const std::string& cluster, const std::string& bundle)> after_status_write;
};

//! The KV key (bucket `clusters`) of the lease the scheduler's replicas share (--lease-ttl).
inline constexpr const char* kLeaseKey = "lease.scheduler";

}  // namespace flotilla::scheduler
