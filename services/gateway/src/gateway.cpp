// The gateway component (gateway.h): its threads, readiness and counters.
#include "flotilla/gateway/gateway.h"

#include <algorithm>
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

void GatewayMetrics::clusterCr(const std::string& result) {
  metrics_.counter("cluster_crs_total", "Cluster CRs made for registered clusters, by result", {{"result", result}})
      .Increment();
}

void GatewayMetrics::viewSweep(const std::string& result) {
  metrics_
      .counter("view_sweeps_total", "sweeps of the views whose records went while no gateway ran, by result",
               {{"result", result}})
      .Increment();
}

void GatewayMetrics::retriesWaiting(size_t count) {
  metrics_.gauge("write_retries", "failed API server writes waiting for their retry").Set(static_cast<double>(count));
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
  // A hub leaving KV mode keeps what runs: its specs get CRs (adopted) before Kubernetes mode is marked, after
  // which `flotilla apply` into KV is refused and a spec without a CR is removed (spec_mirror.cpp).
  auto mode = specs::hubMode(*core.hub.clusters);
  FLOTILLA_TRY(mode);
  core.adopting = *mode == specs::HubMode::kKv;
  if (core.adopting) {
    log::info("the hub is in KV mode: its specs without a CR will be adopted (a CR made for each)");
  }
  for (const auto& kind : core.kinds) {
    core.threads.emplace_back([&core, &kind] { core.runSpecMirror(kind); });
  }
  // The records each write is made from: GitRepo, Cluster and ClusterGroup statuses, the Cluster CRs of registered
  // clusters, the Bundle and BundleDeployment views.
  struct RecordWatch {
    bus::KeyValue* bucket;
    std::string filter;
    std::function<void(const bus::KvEntry&)> apply;
    bool view_source = false;  //!< a view is made from it: the view sweep waits for its initial values
  };
  const auto cluster_record = [&core](ClusterRecord record) {
    return [&core, record](const bus::KvEntry& e) { core.applyClusterRecord(e, record); };
  };
  bus::KeyValue* status = core.hub.status.get();
  const std::vector<RecordWatch> watches = {
      {status, "gitrepo.>", [&core](const bus::KvEntry& e) { core.applyGitRepoRecord(e, false); }},
      {status, "summary.gitrepo.>", [&core](const bus::KvEntry& e) { core.applyGitRepoRecord(e, true); }},
      {status, "summary.cluster.>", [&core](const bus::KvEntry& e) { core.applyClusterSummary(e); }},
      {status, "summary.bundle.>", [&core](const bus::KvEntry& e) { core.applyBundleSummary(e); }, true},
      {status, "bd.>", [&core](const bus::KvEntry& e) { core.applyDeploymentFact(e, true); }, true},
      {core.hub.deployments.get(), ">", [&core](const bus::KvEntry& e) { core.applyDeploymentFact(e, false); }, true},
      {core.hub.clusters.get(), "cluster.>", cluster_record(ClusterRecord::kRegistration)},
      {core.hub.clusters.get(), "spec.>", cluster_record(ClusterRecord::kDocument)},
      {core.hub.clusters.get(), "group.>", cluster_record(ClusterRecord::kGroup)},
      {core.hub.clusters.get(), "deregistered.>", cluster_record(ClusterRecord::kDeregistration)},
  };
  core.view_watches_pending = static_cast<int>(
      std::count_if(watches.begin(), watches.end(), [](const RecordWatch& w) { return w.view_source; }));
  for (const auto& watch : watches) {
    std::function<void()> initial_done;
    if (watch.view_source) {
      initial_done = [&core] {
        if (--core.view_watches_pending == 0) {
          core.queueWrite(std::string(kViewSweep));
        }
      };
    }
    core.threads.emplace_back(
        [&core, watch, initial_done] { core.runKvWatch(*watch.bucket, watch.filter, watch.apply, initial_done); });
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
