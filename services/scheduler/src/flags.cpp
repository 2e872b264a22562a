#include "flotilla/scheduler/flags.h"

#include <array>
#include <charconv>
#include <chrono>

#include <unistd.h>

namespace flotilla::scheduler {

std::map<std::string, std::string> schedulerFlags() {
  return {
      {"ack-wait",
       "seconds before JetStream redelivers a message the scheduler did not acknowledge (default " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(SchedulerOptions{}.ack_wait).count()) +
           "; in-progress acks cover longer handling)"},
      {"agent-ack-wait",
       "seconds before JetStream redelivers a deploy an agent did not acknowledge, i.e. after it died holding it "
       "(default 30; the agents' durables, which the scheduler creates, carry it)"},
      {"agent-max-deliveries",
       "deliveries of a failing deploy before the agent terminates and reports it (default 10)"},
      {"agent-labels",
       "label keys an agent's own registration may set for targeting: comma-separated keys, `prefix*` for every key "
       "with that prefix, `*` for every key (default none: clusters are targeted by the labels of their Cluster "
       "documents, `flotilla apply`); a reported label left out is kept in status.agent.labels"},
      {"agent-heartbeat-interval",
       "seconds between the agents' heartbeats (their --heartbeat-interval, default 30); an agent silent for three "
       "of them counts as disconnected"},
      {"cluster-offline-after",
       "seconds without a heartbeat or registration after which a cluster is Offline (its summary, get clusters, "
       "the clusters_offline gauge); default three --agent-heartbeat-interval"},
      {"fetch-batch", "messages fetched per pull from each durable consumer (default 16)"},
      {"lease-ttl",
       "seconds; run several replicas: they share a lease (KV clusters/lease.scheduler), the holder places and "
       "publishes, the others serve manifest requests and take over when the holder has not renewed for this long "
       "(default: no lease; run one replica)"},
      {"replica-id",
       "this replica's id in the lease, unique among the replicas (default the host name, a pod's name); a replica "
       "restarted under the same id takes its lease back at once"},
      {"partitions",
       "split the work among the replicas without a leader (needs --lease-ttl; every replica must be given the same "
       "number): a GitRepo's bundles belong to one of this many partitions, each with its own lease "
       "(lease.scheduler.p<i>) and durables, and each live replica holds its share (default 1: the lease holder "
       "does everything)"},
      {"max-deliveries", "deliveries of a failing message before it is terminated and reported (default 10)"},
      {"public-events", "publish CloudEvents on flotilla.events.> (true|false, default true)"},
      {"per-cluster-metrics",
       "export cluster_ready{cluster} and cluster_offline{cluster}, two series per cluster (true|false, default "
       "false: at 10,000 clusters that is 20,000 series; clusters_by_state counts them either way)"},
  };
}

namespace {

std::string hostName() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) {
    return "scheduler";
  }
  return name.data();
}

Result<int64_t> positive(const service::Config& config, const std::string& name, int64_t fallback) {
  std::string text = config.get(name);
  if (text.empty()) {
    return fallback;
  }
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    return fail(ErrorKind::kInvalid, "--" + name + ": expected a positive integer, got \"" + text + "\"");
  }
  return value;
}

}  // namespace

Result<SchedulerOptions> schedulerOptionsFrom(const service::Config& config) {
  SchedulerOptions options;
  auto ack_wait = positive(config, "ack-wait", options.ack_wait.count() / 1000);
  FLOTILLA_TRY(ack_wait);
  options.ack_wait = std::chrono::seconds(*ack_wait);
  auto heartbeat = positive(config, "agent-heartbeat-interval", options.heartbeat_interval.count() / 1000);
  FLOTILLA_TRY(heartbeat);
  options.heartbeat_interval = std::chrono::seconds(*heartbeat);
  auto offline_after = positive(config, "cluster-offline-after", 3 * *heartbeat);
  FLOTILLA_TRY(offline_after);
  options.offline_after = std::chrono::seconds(*offline_after);
  auto agent_ack_wait = positive(config, "agent-ack-wait", options.agent_ack_wait.count() / 1000);
  FLOTILLA_TRY(agent_ack_wait);
  options.agent_ack_wait = std::chrono::seconds(*agent_ack_wait);
  auto agent_max_deliveries = positive(config, "agent-max-deliveries", options.agent_max_deliveries);
  FLOTILLA_TRY(agent_max_deliveries);
  options.agent_max_deliveries = *agent_max_deliveries;
  auto batch = positive(config, "fetch-batch", options.fetch_batch);
  FLOTILLA_TRY(batch);
  options.fetch_batch = static_cast<int>(*batch);
  auto max_deliveries = positive(config, "max-deliveries", options.max_deliveries);
  FLOTILLA_TRY(max_deliveries);
  options.max_deliveries = *max_deliveries;
  auto agent_labels = AgentLabelPolicy::parse(config.get("agent-labels"));
  FLOTILLA_TRY(agent_labels);
  options.agent_labels = std::move(agent_labels).value();
  std::string events = config.get("public-events", "true");
  if (events != "true" && events != "false") {
    return fail(ErrorKind::kInvalid, "--public-events: expected true or false, got \"" + events + "\"");
  }
  options.public_events = events == "true";
  std::string per_cluster = config.get("per-cluster-metrics", "false");
  if (per_cluster != "true" && per_cluster != "false") {
    return fail(ErrorKind::kInvalid, "--per-cluster-metrics: expected true or false, got \"" + per_cluster + "\"");
  }
  options.per_cluster_metrics = per_cluster == "true";
  return options;
}

Result<ReplicaOptions> replicaOptionsFrom(const service::Config& config) {
  ReplicaOptions replica;
  if (!config.get("lease-ttl").empty()) {
    auto ttl = positive(config, "lease-ttl", 0);
    FLOTILLA_TRY(ttl);
    replica.lease_ttl = std::chrono::seconds(*ttl);
  }
  replica.id = config.get("replica-id");
  if (replica.id.empty()) {
    replica.id = hostName();
  } else if (replica.lease_ttl.count() == 0) {
    return fail(ErrorKind::kInvalid, "--replica-id: names this replica in the lease, and needs --lease-ttl");
  }
  if (!config.get("partitions").empty()) {
    auto partitions = positive(config, "partitions", 1);
    FLOTILLA_TRY(partitions);
    if (*partitions > kMaxPartitions) {
      return fail(ErrorKind::kInvalid, "--partitions: at most " + std::to_string(kMaxPartitions));
    }
    if (*partitions > 1 && replica.lease_ttl.count() == 0) {
      return fail(ErrorKind::kInvalid, "--partitions: partitions are held through leases, and need --lease-ttl");
    }
    replica.partitions = static_cast<uint32_t>(*partitions);
  }
  return replica;
}

}  // namespace flotilla::scheduler
