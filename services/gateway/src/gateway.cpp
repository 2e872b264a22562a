// The gateway component (gateway.h): its threads, readiness and counters.
#include "flotilla/gateway/gateway.h"

#include <functional>
#include <vector>

#include "flotilla/core/log.h"
#include "flotilla/specs/store.h"
#include "gateway_core.h"

namespace flotilla::gateway {

void GatewayMetrics::spec(const std::string& kind, const std::string& result) {
  metrics_.counter("specs_total", "CR specs handled, by kind and result", {{"kind", kind}, {"result", result}})
      .Increment();
}

void GatewayMetrics::statusWrite(const std::string& result) {
  metrics_.counter("status_writes_total", "GitRepo status writes to the API server, by result", {{"result", result}})
      .Increment();
}

void GatewayMetrics::coalesced() {
  metrics_.counter("status_coalesced_total", "status changes merged into a write already waiting").Increment();
}

void GatewayMetrics::queueDepth(size_t depth) {
  metrics_.gauge("status_queue_depth", "GitRepos waiting for a status write").Set(static_cast<double>(depth));
}

void GatewayMetrics::view(const std::string& kind, const std::string& result) {
  metrics_
      .counter("view_writes_total", "Bundle and BundleDeployment views, by kind and result",
               {{"kind", kind}, {"result", result}})
      .Increment();
}

void GatewayMetrics::mirrorRestart(const std::string& kind, const std::string& reason) {
  metrics_
      .counter("mirror_restarts_total", "list/watch rounds started again, by kind and reason",
               {{"kind", kind}, {"reason", reason}})
      .Increment();
}

Gateway::Core::Core(GatewayOptions gateway_options, service::Hub hub_handles,
                    std::unique_ptr<kube::KubeClient> kube_client, Metrics& service_metrics)
    : options(gateway_options),
      hub(std::move(hub_handles)),
      kube(std::move(kube_client)),
      metrics(service_metrics),
      kinds(mirroredKinds(hub)) {}

void Gateway::Core::sleepFor(std::chrono::milliseconds duration) {
  std::unique_lock lock(mutex);
  wake.wait_for(lock, duration, [&] { return stopping.load(); });
}

void Gateway::Core::updateFacts(const std::string& key, const std::function<void(GitRepoFacts&)>& change) {
  {
    std::lock_guard lock(mutex);
    change(gitrepos[key]);
  }
  queueWrite(writeKey(kGitRepoWrite, key));
}

Result<std::unique_ptr<Gateway>> Gateway::create(GatewayOptions options, service::Hub hub,
                                                 std::unique_ptr<kube::KubeClient> kube, Metrics& metrics) {
  if (!(options.status_rate > 0) || !(options.status_burst >= 1)) {
    return fail(ErrorKind::kInvalid, "the status write rate must be > 0 and the burst >= 1");
  }
  if (!hub.gitrepos || !hub.clusters || !hub.status || !hub.deployments || !kube) {
    return fail(ErrorKind::kInvalid,
                "the gateway needs the gitrepos, clusters, deployments and status buckets and a kube client");
  }
  return std::unique_ptr<Gateway>(
      new Gateway(std::make_unique<Core>(options, std::move(hub), std::move(kube), metrics)));
}

Gateway::Gateway(std::unique_ptr<Core> core) : core_(std::move(core)) {}

Gateway::~Gateway() {
  stop();
}

Status Gateway::start() {
  Core& core = *core_;
  // From now on `flotilla apply` into KV is refused: it would be undone at the next relist.
  FLOTILLA_TRY(specs::markKubernetesMode(*core.hub.clusters));
  for (const auto& kind : core.kinds) {
    core.threads.emplace_back([&core, &kind] { core.runSpecMirror(kind); });
  }
  // The records each write is made from: GitRepo and Cluster statuses, the Bundle and BundleDeployment views.
  struct RecordWatch {
    bus::KeyValue* bucket;
    std::string filter;
    std::function<void(const bus::KvEntry&)> apply;
  };
  const std::vector<RecordWatch> watches = {
      {core.hub.status.get(), "gitrepo.>", [&core](const bus::KvEntry& e) { core.applyGitRepoRecord(e, false); }},
      {core.hub.status.get(), "summary.gitrepo.>",
       [&core](const bus::KvEntry& e) { core.applyGitRepoRecord(e, true); }},
      {core.hub.status.get(), "summary.cluster.>", [&core](const bus::KvEntry& e) { core.applyClusterSummary(e); }},
      {core.hub.status.get(), "summary.bundle.>", [&core](const bus::KvEntry& e) { core.applyBundleSummary(e); }},
      {core.hub.status.get(), "bd.>", [&core](const bus::KvEntry& e) { core.applyDeploymentFact(e, true); }},
      {core.hub.deployments.get(), ">", [&core](const bus::KvEntry& e) { core.applyDeploymentFact(e, false); }},
  };
  for (const auto& watch : watches) {
    core.threads.emplace_back([&core, watch] { core.runKvWatch(*watch.bucket, watch.filter, watch.apply); });
  }
  core.threads.emplace_back([&core] { core.runStatusWriter(); });
  log::info("gateway started", {{"status_rate", std::to_string(core.options.status_rate)}});
  return {};
}

void Gateway::stop() {
  Core& core = *core_;
  {
    std::lock_guard lock(core.mutex);
    core.stopping = true;
  }
  core.wake.notify_all();
  core.queue.close();
  for (auto& thread : core.threads) {
    if (thread.joinable()) {
      thread.join();
    }
  }
  core.threads.clear();
}

bool Gateway::ready(std::string& why) const {
  std::lock_guard lock(core_->mutex);
  for (const auto& kind : core_->kinds) {
    if (!core_->listed.count(kind.kind)) {
      why = "has not listed the " + kind.kind + " CRs yet";
      return false;
    }
  }
  return true;
}

}  // namespace flotilla::gateway
