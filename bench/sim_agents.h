// Simulated agents for the scale benchmark (bench/fleet_scale.cpp): each one a real NATS client with its own
// identity (agent-<cluster> credentials issued from the hub's auth directory, TLS), which does on the bus what
// flotilla-agent does and nothing on a Kubernetes API server:
//
//   register   RegisterRequest on flotilla.register.<cluster> (request/reply), as the agent does at start
//   pull       JetStream pull requests on its durable agent-<cluster> (the one the scheduler created when it
//              registered), each waiting `pull_expires` like the agent's fetch timeout (30 s), sent again when the
//              server answers 408 (expired) or the batch is used up
//   deploy     for each DeployEvent: the manifest asked of the hub on flotilla.manifest.<cluster> (every chunk), then
//              a StatusEvent Ready for its deploymentID on flotilla.status.<cluster>.<bundle> (with the agent's
//              Nats-Msg-Id), then the ack
//   heartbeat  a Heartbeat on flotilla.status.<cluster>. every `heartbeat_interval`, spread over the interval
//
// One connection per simulated agent; their sockets are read and written on `event_loops` epoll threads
// (bus::EventLoop) and callbacks run on libnats' shared delivery thread (global message delivery), so 10,000 agents
// need no thread each (with libnats' own threads: two each, 20,000 threads contending on libnats' locks). A request
// (the registration, a pull, a manifest) is published with a reply subject under the agent's own inbox
// (_INBOX.agent-<cluster>.…, the only subjects its identity may subscribe to) and answered on one subscription; only
// the registration is waited for.
// Differences from the real agent, stated in bench/README.md: status is published without waiting for the stream's
// ack, and a delete is acked without reporting.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/event_loop.h"
#include "flotilla/core/result.h"

namespace flotilla::bench {

struct SimulatedAgentsOptions {
  std::vector<std::string> servers;           //!< the hub's NATS URLs
  std::string auth_dir;                       //!< `flotilla auth init` directory: agent credentials are issued from it
  std::string ca_file;                        //!< the server's CA (TLS)
  std::string work_dir;                       //!< where the agents' .creds files are written
  std::map<std::string, std::string> labels;  //!< every agent's cluster labels
  std::chrono::milliseconds pull_expires{30000};  //!< the agent's fetch timeout (AgentOptions::fetch_timeout)
  int pull_batch = 4;                             //!< messages per pull (the agent: its free slots)
  std::chrono::milliseconds heartbeat_interval{30000};
  int connect_threads = 8;  //!< connections and registrations made in parallel at start
  //! Epoll threads that read and write every agent's socket (bus::EventLoop); 0 = libnats' own reader and flusher
  //! threads per connection (two threads per agent: 20,000 at 10,000 agents).
  int event_loops = 1;
  //! Each connection's own PING to the server (bus::ConnectOptions::ping_interval; the agent's is 30 s). libnats keeps
  //! every connection's ping timer in one sorted list walked on each reset: at 10,000 connections that walk was 42 % of
  //! the load generator's CPU (session 17's profile), a cost of 10,000 connections in one process, not of an agent.
  std::chrono::milliseconds ping_interval{30000};
};

//! What the agents did, summed over all of them.
struct SimulatedCounts {
  uint64_t deploys = 0;            //!< DeployEvents received (redeliveries included)
  uint64_t redeliveries = 0;       //!< of those, deliveries of a stream message delivered before (ack wait, nak)
  uint64_t republished = 0;        //!< first deliveries of a deploymentID this cluster got from another stream message
  uint64_t applies = 0;            //!< deployments "applied": manifest read in full and Ready reported
  uint64_t duplicate_applies = 0;  //!< applies of a deploymentID this cluster had applied already
  uint64_t manifest_requests = 0;
  uint64_t manifest_refusals = 0;  //!< answers with Flotilla-Error (the deploy is then nak'ed, like the agent)
  uint64_t pulls = 0;              //!< pull requests sent
  uint64_t pull_timeouts = 0;      //!< pulls that expired empty (status 408)
  uint64_t pull_other_status = 0;  //!< any other status answer (404, 409, 503, ...): the pull is sent again later
  uint64_t heartbeats = 0;
  uint64_t publish_failures = 0;
};

class SimulatedAgents {
 public:
  //! Issues every cluster's credentials, connects and registers them all (in parallel), then starts pulling.
  //! Fails when any agent cannot connect or is refused.
  static Result<std::unique_ptr<SimulatedAgents>> start(const std::vector<std::string>& clusters,
                                                        SimulatedAgentsOptions options);
  ~SimulatedAgents();
  SimulatedAgents(const SimulatedAgents&) = delete;
  SimulatedAgents& operator=(const SimulatedAgents&) = delete;

  [[nodiscard]] SimulatedCounts counts() const;
  [[nodiscard]] size_t size() const { return agents_.size(); }

  struct Agent;
  struct Counters;

 private:
  explicit SimulatedAgents(SimulatedAgentsOptions options);
  Status connectAll(const std::vector<std::string>& clusters);
  Status issueCredentials(Agent& agent);
  Status connectOne(Agent& agent);
  void tickLoop();

  SimulatedAgentsOptions options_;
  std::unique_ptr<Counters> counters_;
  std::vector<std::shared_ptr<bus::EventLoop>> loops_;
  std::mutex agents_mutex_;  //!< agents_ is filled before the ticker walks it
  std::vector<std::unique_ptr<Agent>> agents_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> next_loop_{0};  //!< connections spread over loops_ in turn
  std::thread ticker_;
};

}  // namespace flotilla::bench
