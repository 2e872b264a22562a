// flotilla-gateway: the hub's Kubernetes front door (Kubernetes mode). Wiring only; see README.md.
#include "flotilla/service/main.h"

#include <memory>

#include "flotilla/core/log.h"
#include "flotilla/gateway/gateway.h"
#include "flotilla/kube/client.h"
#include "flotilla/kube/kubeconfig.h"
#include "flotilla/service/hub.h"

namespace {

using namespace flotilla;

std::map<std::string, std::string> gatewayFlags() {
  return {
      {"kubeconfig", "kubeconfig of the hub cluster (default: in a pod its service account, else $KUBECONFIG)"},
      {"kube-context", "context of --kubeconfig (default: its current context)"},
      {"status-rate", "writes per second to the API server (statuses, views, Cluster CRs), all together (default 20)"},
      {"status-burst", "status writes that may go at once after a quiet spell (default 20)"},
  };
}

Result<double> positiveNumber(const service::Config& config, const std::string& flag, double fallback) {
  const std::string text = config.get(flag);
  if (text.empty()) {
    return fallback;
  }
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || !(value > 0)) {
    return fail(ErrorKind::kInvalid, "--" + flag + " must be a positive number, got \"" + text + "\"");
  }
  return value;
}

Result<gateway::GatewayOptions> optionsFrom(const service::Config& config) {
  gateway::GatewayOptions options;
  auto rate = positiveNumber(config, "status-rate", options.status_rate);
  FLOTILLA_TRY(rate);
  auto burst = positiveNumber(config, "status-burst", options.status_burst);
  FLOTILLA_TRY(burst);
  if (*burst < 1) {
    return fail(ErrorKind::kInvalid, "--status-burst must be at least 1");
  }
  options.status_rate = *rate;
  options.status_burst = *burst;
  return options;
}

service::StopService startGateway(const service::Config& config, service::Runtime& runtime) {
  using service::startupFailed;
  auto options = optionsFrom(config);
  if (!options.ok()) {
    return startupFailed("invalid flags", options.error());
  }
  const std::string path = config.get("kubeconfig");
  auto kubeconfig =
      path.empty() ? kube::Kubeconfig::loadDefault() : kube::Kubeconfig::load(path, config.get("kube-context"));
  if (!kubeconfig.ok()) {
    return startupFailed("cannot load the kubeconfig", kubeconfig.error());
  }
  auto kube_client = kube::KubeClient::create(*kubeconfig, kube::KubeClientOptions{.metrics = &runtime.metrics()});
  if (!kube_client.ok()) {
    return startupFailed("cannot create the Kubernetes client", kube_client.error());
  }
  auto hub = service::connectProvisioningHub(config, runtime, "gateway");
  if (!hub) {
    return {};
  }
  auto created = gateway::Gateway::create(*options, *hub, std::move(kube_client).value(), runtime.metrics());
  if (!created.ok()) {
    return startupFailed("cannot create the gateway", created.error());
  }
  std::shared_ptr<gateway::Gateway> gateway = std::move(created).value();
  runtime.addReadinessCheck("gateway", gateway);
  if (auto started = gateway->start(); !started.ok()) {
    return startupFailed("cannot start the gateway", started.error());
  }
  return [gateway] {
    log::info("shutting down");
    gateway->stop();
  };
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = gatewayFlags();
  flags.merge(service::storeFlags());
  return service::runService("gateway", flags, argc, argv, startGateway);
}
