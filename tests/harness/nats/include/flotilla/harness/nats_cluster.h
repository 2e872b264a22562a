// flotilla/harness/nats_cluster.h
//
// A real 3-node (or n-node) JetStream cluster of the pinned nats-server for integration tests: each node a
// NatsServer (free client, monitor and route ports, its own store dir) with a server_name and routes to every other
// node. start() returns once every node reports JetStream current (a meta leader is elected), so streams and
// buckets with replicas can be created at once. Killing a node (kill9) and restarting it keep its store, as for one
// server.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/harness/nats_server.h"

namespace flotilla::harness {

struct NatsClusterOptions {
  int nodes = 3;
  //! Added to every node's config (e.g. authorization blocks); "$DIR" is each node's temp dir.
  std::string extra_config;
  //! The nodes' URL scheme: "tls" when extra_config requires TLS of clients (routes stay plain on loopback).
  std::string scheme = "nats";
  std::chrono::milliseconds start_timeout = std::chrono::seconds(60);
};

class NatsCluster {
 public:
  static Result<std::unique_ptr<NatsCluster>> start(NatsClusterOptions options = {});

  [[nodiscard]] size_t size() const { return nodes_.size(); }
  [[nodiscard]] NatsServer& node(size_t i) { return *nodes_.at(i); }
  //! Every node's client URL, comma-separated: what a client lists to fail over between them.
  [[nodiscard]] std::string urls() const;
  [[nodiscard]] std::vector<std::string> urlList() const;
  //! Every running node reports JetStream current (GET /healthz on its monitor port answers 200).
  [[nodiscard]] bool jetStreamCurrent();
  //! Waits for jetStreamCurrent().
  Status waitCurrent(std::chrono::milliseconds timeout);

 private:
  NatsCluster() = default;
  std::vector<std::unique_ptr<NatsServer>> nodes_;
};

}  // namespace flotilla::harness
