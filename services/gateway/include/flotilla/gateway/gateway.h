// flotilla/gateway/gateway.h
//
// The hub's Kubernetes front door (Kubernetes mode; docs/pipeline.md "Gateway"): watches the fleet.cattle.io
// GitRepo, ClusterGroup and Cluster CRs on the hub cluster and mirrors their specs into KV (libs/specs), so the CRs
// are the one source of truth; writes each GitRepo's status back into its status subresource in Fleet's shape, at a
// bounded rate. The rest of the pipeline is unchanged: it sees the same KV records `flotilla apply` writes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/client.h"
#include "flotilla/service/component.h"
#include "flotilla/service/hub.h"

namespace flotilla::gateway {

struct GatewayOptions {
  //! Status writes to the API server per second, all objects together (--status-rate), and how many may go at
  //! once after a quiet spell (--status-burst). Changes to one object while it waits are coalesced into one write.
  double status_rate = 20;
  double status_burst = 20;
  //! First and longest wait before listing a kind again after the API server or KV failed.
  std::chrono::milliseconds retry_base{500};
  std::chrono::milliseconds retry_max{30000};
  //! How long one watch call waits for an event before checking for shutdown.
  std::chrono::milliseconds poll_interval{500};
};

class Gateway final : public service::Component {
 public:
  //! Builds the gateway; contacts nothing until start().
  static Result<std::unique_ptr<Gateway>> create(GatewayOptions options, service::Hub hub,
                                                 std::unique_ptr<kube::KubeClient> kube, Metrics& metrics);
  ~Gateway() override;

  //! Starts one mirror thread per kind, the KV status watches and the status writer.
  Status start() override;
  void stop() override;
  //! Ready once every kind has been listed and mirrored once.
  bool ready(std::string& why) const override;

  struct Core;

 private:
  explicit Gateway(std::unique_ptr<Core> core);
  std::unique_ptr<Core> core_;
};

}  // namespace flotilla::gateway
