// tests/harness/kube/src/kube_node.h
//
// One real node for a harness cluster (KubeClusterOptions::with_node): containerd (own root, state and socket in
// the cluster's temp dir, native snapshotter, runc), the CNI bridge + host-local + loopback plugins on a pod CIDR of
// its own, a locally built pause image as the sandbox image, kube-scheduler and one kubelet. README.md says what runs
// and why each setting is there.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "flotilla/core/result.h"

namespace flotilla::harness {

//! A node's bridge, its /24 pod CIDR and the bridge's (the host's) address on it.
struct NodeNetwork {
  std::string bridge;
  std::string subnet;
  std::string gateway;
};

//! A bridge name and a pod CIDR no other node of this machine's harness clusters uses at the same time: derived
//! from the process id and a per-process counter (10.128.0.0/10 holds 16384 of them).
NodeNetwork pickNodeNetwork();

struct KubeNodeConfig {
  std::string cluster_name;
  std::string cluster_dir;       //!< the node lives in <cluster_dir>/node
  std::string server;            //!< https://127.0.0.1:<port>
  std::string admin_kubeconfig;  //!< kube-scheduler and the harness's own kubectl calls
  std::string ca_cert_file;
  std::string ca_key_file;  //!< signs the kubelet's client certificate (system:node:<name>, O=system:nodes)
  std::chrono::seconds ready_timeout{180};
  NodeNetwork network;  //!< from pickNodeNetwork(), chosen by the cluster (its API server may advertise the gateway)
  //! Also kube-proxy and CoreDNS (node_services.h): ClusterIPs and cluster DNS work in pods.
  bool with_service_network = false;
};

class KubeNode {
 public:
  //! Starts containerd, imports the pause and test app images, starts kubelet and kube-scheduler, and waits until
  //! the Node is Ready. Must be called from the thread that owns the cluster (PR_SET_PDEATHSIG).
  static Result<std::unique_ptr<KubeNode>> start(const KubeNodeConfig& config);
  KubeNode(const KubeNode&) = delete;
  KubeNode& operator=(const KubeNode&) = delete;
  ~KubeNode();

  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] double startSeconds() const;
  //! `docker save`s a local Docker image and imports it into the node's containerd.
  Status importDockerImage(const std::string& image);
  //! kOk while containerd, kubelet and kube-scheduler run.
  Status healthy();
  //! Deletes the pods (kubelet tears their sandboxes and networks down), stops kubelet, kube-scheduler and
  //! containerd, then removes what may be left: shims, mounts under the node dir, the bridge, kubelet's cgroups.
  //! Idempotent.
  void stop();
  [[nodiscard]] std::string logTail(size_t lines) const;

  struct State;

 private:
  explicit KubeNode(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

//! The images every node has: the sandbox (pause) image and the test app (testapp.c: HTTP 200 on 8080;
//! `--unready` answers 503; `--exit N` exits).
inline constexpr const char* kPauseImage = "flotilla.local/pause:1";
inline constexpr const char* kTestAppImage = "flotilla.local/testapp:1";

}  // namespace flotilla::harness
