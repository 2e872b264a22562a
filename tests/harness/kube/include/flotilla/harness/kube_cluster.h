// flotilla/harness/kube_cluster.h
//
// Real Kubernetes API servers for tests. Each KubeCluster is independent: its own temp dir, its own etcd on
// free ports, its own PKI (CA, serving certificate for 127.0.0.1/localhost, admin client certificate in
// system:masters, service-account signing key), a kube-apiserver with RBAC on a free port bound to 127.0.0.1,
// and optionally a kube-controller-manager (garbage collector, namespace controller, ClusterRole aggregation). There
// are no nodes and no scheduler unless `with_node` asks for one: without it pods never run, but every API object can be
// created, watched, applied and deleted.
//
// Tools are found in $FLOTILLA_TOOLS_DIR (default ${FLOTILLA_SOURCE_DIR}/.tools/bin); etcd falls back to PATH.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::harness {

struct KubeClusterOptions {
  std::string name = "kube";                //!< shows up in logs, temp dir and kubeconfig names
  bool with_controller_manager = false;     //!< also run kube-controller-manager (GC, namespaces, RBAC aggregation)
  std::chrono::seconds start_timeout{120};  //!< how long to wait for /readyz
  std::vector<std::string> extra_apiserver_args;  //!< appended to kube-apiserver's flags (feature gates, ...)
  //! Also run one real node: containerd + runc + CNI bridge, kubelet, kube-scheduler, and kube-controller-manager
  //! with all its controllers, so pods run (tests/harness/kube/README.md). Needs root, Docker (to build the local
  //! pause and test app images) and the tools scripts/setup builds.
  bool with_node = false;
  std::chrono::seconds node_timeout{240};  //!< how long to wait for the Node to be Ready
  //! Also a Service network on the node (implies with_node): kube-proxy (iptables mode) and CoreDNS, so pods reach
  //! ClusterIPs, resolve <service>.<namespace>.svc.cluster.local and talk to the API server through the
  //! `kubernetes` Service (kube-apiserver then listens on all addresses and advertises podReachableHost()). One
  //! such cluster per machine at a time: a second one waits for the first to stop (README.md).
  bool with_service_network = false;
};

//! Identity of a token user the cluster accepts (from --token-auth-file); it has no RBAC grants.
struct TokenUser {
  std::string name;
  std::string token;
  std::string group;
};

class KubeCluster {
 public:
  //! Starts one cluster and waits until kube-apiserver's /readyz answers ok. The Error message carries the
  //! etcd and kube-apiserver log tails when a server fails to start.
  static Result<std::unique_ptr<KubeCluster>> start(const KubeClusterOptions& options);
  //! Starts several clusters concurrently (each waits for its own etcd/apiserver in parallel).
  static Result<std::vector<std::unique_ptr<KubeCluster>>> startMany(const std::vector<KubeClusterOptions>& options);
  //! True when kube-controller-manager is available in the tools dir.
  static bool controllerManagerAvailable();

  KubeCluster(const KubeCluster&) = delete;
  KubeCluster& operator=(const KubeCluster&) = delete;
  //! Stops the servers and removes the temp dir (kept when FLOTILLA_KEEP_TEST_DIRS is set).
  ~KubeCluster();

  [[nodiscard]] const std::string& name() const;
  //! "https://127.0.0.1:<port>".
  [[nodiscard]] std::string serverUrl() const;
  [[nodiscard]] int port() const;
  //! Kubeconfig for the admin (client certificate, CN=admin, O=system:masters).
  [[nodiscard]] std::string kubeconfigPath() const;
  //! Kubeconfig for the token user (see tokenUser()), same server and CA.
  [[nodiscard]] std::string tokenKubeconfigPath() const;
  [[nodiscard]] std::string caFile() const;
  [[nodiscard]] std::string adminCertFile() const;
  [[nodiscard]] std::string adminKeyFile() const;
  //! The bearer token of the second identity.
  [[nodiscard]] const std::string& token() const;
  [[nodiscard]] const TokenUser& tokenUser() const;
  [[nodiscard]] const std::string& dir() const;
  //! Seconds from starting etcd to kube-apiserver's /readyz answering ok.
  [[nodiscard]] double startSeconds() const;
  [[nodiscard]] bool hasControllerManager() const;
  //! The node's name ("node-<cluster name>"); empty without with_node.
  [[nodiscard]] std::string nodeName() const;
  //! The host's address as this cluster's pods see it (the node bridge's gateway): a server the test runs on the
  //! host and binds there (or on all addresses) is reachable from pods at it. Empty without a node.
  [[nodiscard]] std::string podReachableHost() const;
  //! Seconds from starting containerd to the Node being Ready (0 without a node).
  [[nodiscard]] double nodeStartSeconds() const;
  //! Imports a local Docker image (`docker save`) into the node's containerd, for pods with imagePullPolicy Never.
  Status importImage(const std::string& docker_image);
  //! A locally built image every node has: a static HTTP server answering 200 "ok" on :8080; with args
  //! `--unready` it answers 503, with `--exit N` it exits with N.
  static const char* testAppImage();

  //! kOk while every server process is still running; otherwise the exit and the log tails.
  Status healthy();
  //! Stops kube-apiserver and starts it again on the same port with the same data, waiting for /readyz: what a
  //! control-plane upgrade looks like to clients (their connections and watches break).
  Status restartApiserver();
  //! Stops kube-controller-manager, kube-apiserver and etcd (in that order). Idempotent.
  void stop();
  //! The last `lines` lines of each server's log, each under a "== <file> ==" heading.
  [[nodiscard]] std::string logTail(size_t lines = 30) const;

 private:
  struct State;
  explicit KubeCluster(std::unique_ptr<State> state);
  static Status bringUp(const std::vector<State*>& clusters);
  std::unique_ptr<State> state_;
};

//! The first `n` of a set of clusters shared by every test in this process ("kube-0", "kube-1", ...): started
//! once, lazily and concurrently, stopped when the process exits. A failed start is remembered, so later
//! tests fail fast with the same error instead of waiting again. Call from the test's main thread.
Result<std::vector<KubeCluster*>> sharedKubeClusters(size_t n);

}  // namespace flotilla::harness
