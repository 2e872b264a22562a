// tests/e2e/hub_fixture.h
//
// The whole system on one machine for end-to-end tests and the local demo: a real nats-server -js, a real git
// server, N real kube-apiservers, and the four services (poller, bundler, scheduler, one agent per cluster) as
// separate processes, each with its log file. Tests drive it like a user would: commit to git, run the
// `flotilla` CLI, read Kubernetes objects from the clusters, and kill -9 / restart services.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/core/json.h"
#include "flotilla/core/process.h"
#include "flotilla/core/result.h"
#include "flotilla/harness/git_server.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/nats_cluster.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/kube/client.h"

namespace flotilla::e2e {

//! Extra command-line flags and environment variables of a service (appended to / added over the fixture's own),
//! e.g. an agent's `--release-hold 3s` or FLOTILLA_FAULT_POINTS for a crash test.
struct ServiceSettings {
  std::vector<std::string> flags;
  std::map<std::string, std::string> env;
};

struct HubOptions {
  size_t clusters = 2;
  std::vector<std::map<std::string, std::string>> cluster_labels;  //!< per cluster; default env=cluster<i>
  bool share_clusters = true;  //!< reuse the process-wide clusters (namespaces differ per test)
  std::string log_level = "info";
  //! The bundler's --helm-binary; empty = the pinned helm in the tools dir. Tests put a wrapper here to stop the
  //! bundler inside a render (a fault-injection point that needs no test code in the service).
  std::string helm_binary;
  //! Per service: "poller", "bundler", "scheduler", "agent" (every agent) or "agent-<i>" (one agent, after the
  //! "agent" entry). Hub::configure changes them for the next start.
  std::map<std::string, ServiceSettings> services;  //! The hub's NATS identities (docs/pipeline.md "Identities and
                                                    //! permissions"): `flotilla auth init --tls` into
  //! <dir>/auth (identity::initAuthDir), nats-server in operator mode with TLS from its config, and every service
  //! and agent with its own .creds and the CA (an agent's cluster then comes from its credentials: no
  //! --cluster-name). The CLI and the fixture's reader use the admin identity.
  bool secure = false;
  //! Secure hubs only: the last `enrolled_agents` agents get no issued credentials but a registration token
  //! (docs/pipeline.md "Registration tokens"): they enroll with the scheduler's registrar (which a secure hub always
  //! runs) and keep what it gives them in <dir>/agent-<i>-store.creds.
  size_t enrolled_agents = 0;
  //! Secure hubs only: mutual TLS (`auth init --mutual-tls`): nats-server refuses a client without a certificate
  //! from the hub's CA, and every service, agent (enrolled ones too), the CLI and the fixture's reader present
  //! their own (tls/<identity>.pem, issued like `flotilla auth issue --client-cert`).
  bool mutual_tls = false;
  //! 3 (or 5): the hub on a JetStream cluster of that many nats-servers (harness::NatsCluster); every service,
  //! agent and client gets all their URLs, and the hub services --store-replicas <n>. With `secure`, every node
  //! has the same operator, accounts and TLS certificate, and its own account resolver directory.
  size_t nats_nodes = 1;
};

//! Paths of the built binaries (set by CMake).
struct Binaries {
  std::string poller, bundler, scheduler, agent, cli, gateway;
  static Binaries fromBuild();
};

class Hub {
 public:
  static Result<std::unique_ptr<Hub>> start(HubOptions options = {});
  ~Hub();

  //! The single nats-server (nats_nodes = 1), or the cluster's first node.
  harness::NatsServer& nats() { return nats_cluster_ ? nats_cluster_->node(0) : *nats_; }
  //! The JetStream cluster (nats_nodes > 1; null otherwise).
  harness::NatsCluster* natsCluster() { return nats_cluster_.get(); }
  //! What --nats-url gets: the server's URL, or every node's, comma-separated.
  [[nodiscard]] std::string natsUrl() const { return nats_cluster_ ? nats_cluster_->urls() : nats_->url(); }
  harness::GitServer& git() { return *git_; }
  [[nodiscard]] size_t clusterCount() const { return clusters_.size(); }
  harness::KubeCluster& cluster(size_t i) { return *clusters_.at(i); }
  [[nodiscard]] std::string clusterName(size_t i) const { return cluster_names_.at(i); }
  kube::KubeClient& kube(size_t i) { return *kube_clients_.at(i); }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  //! The auth directory of a secure hub ("" otherwise): creds/<identity>.creds, tls/ca.pem.
  [[nodiscard]] const std::string& authDir() const { return auth_dir_; }
  //! The NATS flags of a client with `identity`'s credentials ("admin", "readonly", "scheduler",
  //! "agent-<cluster>"): --nats-creds and --nats-ca on a secure hub (and --nats-cert/--nats-key with mutual TLS),
  //! nothing otherwise (--nats-url not included).
  [[nodiscard]] std::vector<std::string> natsFlags(const std::string& identity) const;

  //! Service control. `name` is "poller", "bundler", "scheduler", "agent-<i>" or "gateway" (never started by
  //! start(): its hub cluster is cluster 0, which must serve the chart's CRDs first); "poller-<x>", "bundler-<x>" and
  //! "scheduler-<x>" are more replicas of that service (its identity and settings, their own data dir and log, the
  //! settings of their own name added last).
  Status startService(const std::string& name);
  void kill9(const std::string& name);
  Status stopService(const std::string& name);
  //! SIGTERM (the service must exit with 0) unless it is not running, then start with the current settings.
  Status restartService(const std::string& name);
  //! Replaces the flags and environment `name` ("agent" = every agent) gets from its next start on.
  void configure(const std::string& name, ServiceSettings settings);
  //! Waits until the service's process has exited (e.g. killed by a fault point); its exit code (128+signal when
  //! killed), or nullopt when it still runs after `timeout` or was never started.
  std::optional<int> waitExit(const std::string& name, std::chrono::milliseconds timeout);
  [[nodiscard]] bool running(const std::string& name);
  //! The process id of a running service (0 when it is not running).
  [[nodiscard]] int pid(const std::string& name);
  [[nodiscard]] std::string logTail(const std::string& name, size_t lines = 40) const;
  //! Every service's log tail, for failure messages.
  [[nodiscard]] std::string allLogs(size_t lines = 25) const;

  //! Runs the CLI against this hub: flotilla --nats-url <url> args...
  Result<CommandResult> cli(const std::vector<std::string>& args, const std::string& input = "");
  //! Writes `yaml` to a temp file and runs `flotilla apply -f` on it.
  Status apply(const std::string& yaml);

  //! A hub KV bucket / JetStream handle (connects on first use), for reading records the way a read-only
  //! automation would.
  Result<std::shared_ptr<bus::KeyValue>> kv(const std::string& bucket);
  Result<std::shared_ptr<bus::JetStream>> js();
  //! Every record of a bucket whose key starts with `prefix`, decoded as JSON; any failed read (the bucket, the
  //! key list, a value that is not JSON) is an error, never an empty list. Tests read through e2e::recordsOf.
  Result<std::vector<Json>> records(const std::string& bucket, const std::string& prefix);

  //! Polls `check` every 200 ms until it returns true or the timeout passes.
  static bool waitFor(const std::function<bool()>& check, std::chrono::milliseconds timeout);

 private:
  Hub() = default;
  std::vector<std::string> serviceArgs(const std::string& name) const;
  //! "poller" for "poller" and "poller-<x>" (likewise bundler and scheduler); any other name is its own kind.
  static std::string serviceKind(const std::string& name);
  //! The "agent" entry and then the "agent-<i>" entry for agents; the service's own entry otherwise.
  ServiceSettings settingsOf(const std::string& name) const;

  //! Secure mode: the auth directory, the started server, and agents' credentials are issued in startNats.
  Status startNats();
  [[nodiscard]] bool enrolled(size_t agent) const;
  //! Mutual TLS: --nats-cert/--nats-key of `identity`'s client certificate (nothing otherwise).
  [[nodiscard]] std::vector<std::string> clientCertFlags(const std::string& identity) const;

  HubOptions options_;
  Binaries binaries_;
  std::string dir_;
  std::string auth_dir_;
  std::string registration_creds_;  //!< the token's .creds file, once issued
  std::unique_ptr<harness::NatsServer> nats_;
  std::unique_ptr<harness::NatsCluster> nats_cluster_;
  std::unique_ptr<harness::GitServer> git_;
  std::vector<std::unique_ptr<harness::KubeCluster>> owned_clusters_;
  std::vector<harness::KubeCluster*> clusters_;
  std::vector<std::string> cluster_names_;
  std::vector<std::unique_ptr<kube::KubeClient>> kube_clients_;
  std::map<std::string, Process> services_;
  std::shared_ptr<bus::JetStream> js_;
  std::map<std::string, std::shared_ptr<bus::KeyValue>> buckets_;
};

}  // namespace flotilla::e2e
