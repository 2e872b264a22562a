// tests/harness/kube/src/node_services.h
//
// The Service network of a harness node (KubeClusterOptions::with_service_network): kube-proxy in iptables mode,
// so ClusterIPs (the `kubernetes` Service included) reach their endpoints, and CoreDNS with its kubernetes plugin
// on the node's bridge address, so pods resolve <service>.<namespace>.svc.cluster.local. Both are real binaries
// built by scripts/setup; CoreDNS runs as a host process rather than a pod (it needs no image then, and it is up
// before the first pod). README.md says why each setting is there.
#pragma once

#include <memory>
#include <string>

#include "flotilla/core/result.h"

namespace flotilla::harness {

struct NodeServicesConfig {
  std::string node_name;
  std::string dir;               //!< <cluster dir>/node/services
  std::string admin_kubeconfig;  //!< kube-proxy and CoreDNS read the API with it
  std::string bridge;            //!< created here, before the first pod, so CoreDNS can bind its address
  std::string subnet;            //!< the node's pod CIDR (kube-proxy's clusterCIDR)
  std::string gateway;           //!< the bridge's address: the DNS server pods are given, and the host as pods see it
};

class NodeServices {
 public:
  //! Takes the machine-wide kube-proxy lock (two kube-proxies would each rewrite the other's chains; a second
  //! cluster with services waits for the first to stop), makes the bridge, starts CoreDNS and kube-proxy and
  //! waits until CoreDNS answers.
  static Result<std::unique_ptr<NodeServices>> start(const NodeServicesConfig& config);
  //! Waits until kube-proxy is healthy, which it is only once its Node exists: call after the kubelet registered.
  Status waitProxyReady();
  NodeServices(const NodeServices&) = delete;
  NodeServices& operator=(const NodeServices&) = delete;
  ~NodeServices();

  //! kOk while CoreDNS and kube-proxy run.
  Status healthy();
  //! Stops both, removes kube-proxy's iptables chains (`kube-proxy --cleanup`) and releases the lock. Idempotent.
  void stop();
  [[nodiscard]] std::string logTail(size_t lines) const;

  struct State;

 private:
  explicit NodeServices(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace flotilla::harness
