// flotilla-agent: one per downstream cluster. Wiring only; the behaviour lives in libflotilla_agent.
#include "flotilla/service/main.h"

#include <memory>
#include <utility>

#include <malloc.h>

#include "flotilla/agent/agent.h"
#include "flotilla/agent/enrollment.h"
#include "flotilla/agent/flags.h"
#include "flotilla/core/json.h"
#include "flotilla/core/log.h"
#include "flotilla/kube/client.h"
#include "flotilla/kube/kubeconfig.h"
#include "flotilla/service/hub.h"

using namespace flotilla;

namespace {

Result<kube::Kubeconfig> loadKubeconfig(const service::Config& config) {
  std::string path = config.get("kubeconfig");
  if (path.empty()) {
    return kube::Kubeconfig::loadDefault();
  }
  return kube::Kubeconfig::load(path, config.get("kube-context"));
}

//! Connects to the hub (retried while it is not reachable). The agent opens no bucket: its deploys come through its
//! durable, its manifests by request from the hub (manifest_source.h); its credentials allow nothing else.
Result<std::shared_ptr<bus::JetStream>> connectToHub(const service::Config& config, const agent::AgentOptions& options,
                                                     service::Runtime& runtime,
                                                     const agent::CredentialsKeeper* keeper) {
  auto connect_options = service::connectOptionsFrom(config, "flotilla-agent-" + options.cluster_name);
  connect_options.inbox_prefix = options.inbox_prefix;  // the agent credentials' own prefix (flags.cpp)
  if (keeper != nullptr) {
    connect_options.creds_file = keeper->credsFile();  // read again at each reconnect: renewals take effect
  }
  auto hub = service::connectHub(connect_options, service::HubAccess::kAgent, &runtime.metrics());
  FLOTILLA_TRY(hub);
  return hub->js;
}

service::StopService startAgent(const service::Config& config, service::Runtime& runtime) {
  auto options = agent::agentOptionsFrom(config);
  if (!options.ok()) {
    return service::startupFailed("invalid flags", options.error());
  }
  auto kubeconfig = loadKubeconfig(config);
  if (!kubeconfig.ok()) {
    return service::startupFailed("cannot load the kubeconfig", kubeconfig.error());
  }
  auto kube_client = kube::KubeClient::create(*kubeconfig, kube::KubeClientOptions{.metrics = &runtime.metrics()});
  if (!kube_client.ok()) {
    return service::startupFailed("cannot create the Kubernetes client", kube_client.error());
  }
  // With a registration token: the agent's own credentials first (stored, or asked for), renewed in the background.
  auto enrollment = agent::enrollmentOptionsFrom(config);
  if (!enrollment.ok()) {
    return service::startupFailed("invalid flags", enrollment.error());
  }
  std::shared_ptr<kube::KubeClient> kube(std::move(kube_client).value());
  std::shared_ptr<agent::CredentialsKeeper> keeper;
  if (*enrollment) {
    (*enrollment)->kube = kube;  // --creds-secret keeps the credentials in the cluster too
    keeper = std::make_shared<agent::CredentialsKeeper>(**enrollment, runtime.metrics());
    if (auto obtained = keeper->obtain(); !obtained.ok()) {
      return service::startupFailed("no agent credentials", obtained.error());
    }
    options->inbox_prefix = keeper->inboxPrefix();
    keeper->start();
  }
  auto hub = connectToHub(config, *options, runtime, keeper.get());
  if (!hub.ok()) {
    return service::startupFailed("cannot connect to the hub", hub.error());
  }
  auto created = agent::Agent::create(*options, *hub, kube, runtime.metrics());
  if (!created.ok()) {
    return service::startupFailed("cannot create the agent", created.error());
  }
  std::shared_ptr<agent::Agent> agent = std::move(created).value();
  runtime.addReadinessCheck("agent", agent);
  log::info("agent starting", {{"cluster", options->cluster_name},
                               {"kube_server", kubeconfig->server},
                               {"agent_namespace", options->agent_namespace}});
  if (auto started = agent->start(); !started.ok()) {
    if (keeper) {
      keeper->stop();
    }
    return service::startupFailed("cannot start the agent", started.error());
  }
  return [agent, keeper, cluster = options->cluster_name] {
    log::info("shutting down", {{"cluster", cluster}});
    agent->stop();
    if (keeper) {
      keeper->stop();
    }
    log::info("agent stopped", {{"cluster", cluster}});
  };
}

}  // namespace

int main(int argc, char** argv) {
  // glibc gives threads that allocate at once their own arenas (up to 8 per core), and memory freed in one arena is
  // not reused by the others. The workers, NATS and HTTP threads mostly wait on the network, so two arenas cost no
  // speed and keep the resident size a little lower (bench_agent: about 0.3 MiB after the updates settled).
  mallopt(M_ARENA_MAX, 2);  // NOLINT(concurrency-mt-unsafe): called before any thread exists
  // glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), after which the large transient
  // buffers of an apply burst (list answers, response bodies) come from the arenas and fragment them. A fixed
  // threshold keeps every block of 128 KiB and more in its own mapping, returned to the OS when freed.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // NOLINT(concurrency-mt-unsafe): idem
  // About 20 of the agent's threads parse JSON now and then (workers, watches, NATS handlers); a parser kept per
  // thread stays at ~14 bytes per byte of the largest answer that thread saw (~0.5 MiB in all, bench_agent). A
  // parser per document costs an allocation of the same size, freed right after.
  Json::setThreadParserLimit(0);
  auto flags = agent::agentFlags();
  flags.merge(agent::enrollmentFlags());
  return service::runService("agent", flags, argc, argv, startAgent);
}
