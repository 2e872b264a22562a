#include "flotilla/harness/nats_cluster.h"

#include <thread>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/local_port.h"

namespace flotilla::harness {

namespace {

constexpr int kStartAttempts = 3;

std::string nodeConfig(const NatsClusterOptions& options, size_t index, const std::vector<int>& route_ports) {
  std::string routes;
  for (size_t j = 0; j < route_ports.size(); ++j) {
    if (j != index) {
      routes += "    nats-route://127.0.0.1:" + std::to_string(route_ports[j]) + "\n";
    }
  }
  return "server_name: n" + std::to_string(index + 1) +
         "\n"
         "cluster {\n"
         "  name: flotilla\n"
         "  listen: 127.0.0.1:" +
         std::to_string(route_ports[index]) +
         "\n"
         "  routes: [\n" +
         routes +
         "  ]\n"
         "}\n" +
         options.extra_config;
}

}  // namespace

Result<std::unique_ptr<NatsCluster>> NatsCluster::start(NatsClusterOptions options) {
  Error last_error = makeError(ErrorKind::kInternal, "not started");
  // Route ports are chosen before any node starts (each config lists the others): retry the whole cluster when one
  // was taken meanwhile.
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    std::vector<int> route_ports;
    for (int i = 0; i < options.nodes; ++i) {
      auto port = freeTcpPort();
      if (!port.ok()) {
        return fail(port.error());
      }
      route_ports.push_back(*port);
    }
    std::unique_ptr<NatsCluster> cluster(new NatsCluster());
    Status started;
    for (size_t i = 0; i < route_ports.size() && started.ok(); ++i) {
      auto node = NatsServer::start({.config = nodeConfig(options, i, route_ports), .scheme = options.scheme});
      if (node.ok()) {
        cluster->nodes_.push_back(std::move(node).value());
      } else {
        started = fail(node.error());
      }
    }
    if (started.ok()) {
      started = cluster->waitCurrent(options.start_timeout);
    }
    if (started.ok()) {
      return cluster;
    }
    last_error = started.error();
    log::warn("nats cluster did not start, retrying on new ports",
              {{"attempt", attempt + 1}, {"error", last_error.describe()}});
  }
  return fail(last_error);
}

std::vector<std::string> NatsCluster::urlList() const {
  std::vector<std::string> out;
  for (const auto& node : nodes_) {
    out.push_back(node->url());
  }
  return out;
}

std::string NatsCluster::urls() const {
  return join(urlList(), ",");
}

bool NatsCluster::jetStreamCurrent() {
  for (const auto& node : nodes_) {
    if (node->running() && !node->jetStreamHealthy()) {
      return false;
    }
  }
  return true;
}

Status NatsCluster::waitCurrent(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (jetStreamCurrent()) {
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string tails;
  for (const auto& node : nodes_) {
    tails += "\n--- " + node->url() + "\n" + node->logTail(10);
  }
  return fail(
      ErrorKind::kTransient,
      "the JetStream cluster has no current meta leader after " + std::to_string(timeout.count()) + " ms" + tails,
      "NatsCluster");
}

}  // namespace flotilla::harness
