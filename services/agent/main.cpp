// flotilla-agent: one per downstream cluster. Wiring only; the behaviour lives in libflotilla_agent.
#include <cstdio>

#include "flotilla/agent/agent.h"
#include "flotilla/agent/flags.h"
#include "flotilla/core/log.h"
#include "flotilla/kube/client.h"
#include "flotilla/kube/kubeconfig.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/runtime.h"

using namespace flotilla;

namespace {

Result<kube::Kubeconfig> loadKubeconfig(const service::Config& config) {
  std::string path = config.get("kubeconfig");
  if (path.empty()) {
    return kube::Kubeconfig::loadDefault();
  }
  return kube::Kubeconfig::load(path, config.get("kube-context"));
}

int startupFailure(std::string_view what, const Error& error) {
  log::error(what, {{"error", error.describe()}});
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto config = service::Config::parse(argc, argv, agent::agentFlags());
  if (!config.ok()) {
    std::fprintf(stderr, "flotilla-agent: %s (see --help)\n", config.error().describe().c_str());
    return 1;
  }
  if (config->helpRequested()) {
    std::printf("%s", config->usage("flotilla-agent").c_str());
    return 0;
  }
  auto runtime = service::Runtime::start("agent", *config);
  if (!runtime.ok()) {
    std::fprintf(stderr, "flotilla-agent: %s\n", runtime.error().describe().c_str());
    return 1;
  }
  auto options = agent::agentOptionsFrom(*config);
  if (!options.ok()) {
    return startupFailure("invalid flags", options.error());
  }
  auto kubeconfig = loadKubeconfig(*config);
  if (!kubeconfig.ok()) {
    return startupFailure("cannot load the kubeconfig", kubeconfig.error());
  }
  auto kube_client = kube::KubeClient::create(*kubeconfig, kube::KubeClientOptions{.metrics = &(*runtime)->metrics()});
  if (!kube_client.ok()) {
    return startupFailure("cannot create the Kubernetes client", kube_client.error());
  }
  auto connect_options = service::connectOptionsFrom(*config, "flotilla-agent-" + options->cluster_name);
  auto hub = service::connectHub(connect_options, service::HubAccess::kAgent, &(*runtime)->metrics());
  std::shared_ptr<bus::JetStream> js;
  std::shared_ptr<bus::ObjectStore> manifests;
  if (hub.ok()) {
    js = hub->js;
    manifests = hub->manifests;
  } else if (hub.error().kind == ErrorKind::kNotFound) {
    // The hub services create the manifests bucket; an agent started first opens it on its first deploy.
    log::warn("the manifests bucket does not exist yet; opening it on first use", {{"error", hub.error().describe()}});
    auto connection = bus::Connection::connect(connect_options);
    if (!connection.ok()) {
      return startupFailure("cannot connect to the hub", connection.error());
    }
    auto created_js = bus::JetStream::create(std::move(connection).value());
    if (!created_js.ok()) {
      return startupFailure("cannot connect to the hub", created_js.error());
    }
    js = std::move(created_js).value();
  } else {
    return startupFailure("cannot connect to the hub", hub.error());
  }
  auto created =
      agent::Agent::create(*options, js, manifests, std::shared_ptr<kube::KubeClient>(std::move(kube_client).value()),
                           (*runtime)->metrics());
  if (!created.ok()) {
    return startupFailure("cannot create the agent", created.error());
  }
  // Shared with the readiness check, which the HTTP server may still call while main unwinds.
  std::shared_ptr<agent::Agent> agent = std::move(created).value();
  (*runtime)->addReadinessCheck("agent", [agent](std::string& why) { return agent->ready(why); });
  log::info("agent starting", {{"cluster", options->cluster_name},
                               {"kube_server", kubeconfig->server},
                               {"agent_namespace", options->agent_namespace}});
  agent->start();
  (*runtime)->waitForShutdown();
  log::info("shutting down", {{"cluster", options->cluster_name}});
  agent->stop();
  log::info("agent stopped", {{"cluster", options->cluster_name}});
  return 0;
}
