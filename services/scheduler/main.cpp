// flotilla-scheduler: cluster registry, targeting, deploy events and status roll-up (docs/pipeline.md stage 4).
// Wiring only; the behaviour lives in libflotilla_scheduler.
#include "flotilla/service/main.h"

#include <memory>
#include <mutex>
#include <optional>

#include "flotilla/core/log.h"
#include "flotilla/scheduler/enrollment.h"
#include "flotilla/scheduler/flags.h"
#include "flotilla/scheduler/partition_set.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/lease.h"
#include "flotilla/service/store_usage.h"

using namespace flotilla;

namespace {

//! What the readiness check looks at; empty until the scheduler exists.
struct ReadinessSlot {
  std::mutex mutex;
  std::shared_ptr<scheduler::Scheduler> scheduler;
  std::shared_ptr<scheduler::Registrar> registrar;      //!< with --registration-signing-key
  std::shared_ptr<service::Lease> lease;                //!< with --lease-ttl (replicas)
  std::shared_ptr<scheduler::PartitionSet> partitions;  //!< with --partitions above 1
};

//! Ready as the holder (everything started) or, while another replica holds the lease, as a standby that serves
//! manifest requests.
bool slotReady(ReadinessSlot& slot, std::string& why) {
  if (!slot.scheduler) {
    why = "starting: connecting to the hub";
    return false;
  }
  if (slot.partitions) {
    // Serving manifests, and every partition it holds started.
    return slot.scheduler->readyAsStandby(why) && slot.partitions->ready(why) &&
           (!slot.registrar || slot.registrar->ready(why));
  }
  const bool standby = slot.lease && !slot.lease->held();
  const bool scheduler = standby ? slot.scheduler->readyAsStandby(why) : slot.scheduler->ready(why);
  return scheduler && (!slot.registrar || slot.registrar->ready(why));
}

//! How the scheduler stops: the lease's renewals first (with replicas), the registrar, the scheduler (its last
//! publish), then the lease released so that a standby takes over at once.
service::StopService stopping(std::shared_ptr<scheduler::Scheduler> scheduler,
                              std::shared_ptr<scheduler::Registrar> registrar, std::shared_ptr<service::Lease> lease) {
  return [scheduler = std::move(scheduler), registrar = std::move(registrar), lease = std::move(lease)] {
    log::info("shutting down", {});
    if (lease) {
      lease->stop();
    }
    if (registrar) {
      registrar->stop();
    }
    scheduler->stop();
    if (lease) {
      lease->release();
    }
    log::info("scheduler stopped", {});
  };
}

//! One of several replicas (--lease-ttl): serves manifest requests (and registration tokens) at once, and starts
//! the rest (placement, publishing, status roll-up, registrations) when it holds the lease. A replica that loses
//! the lease shuts down, so it comes back as a standby with state read afresh from KV.
service::StopService startReplica(service::Runtime& runtime, const std::shared_ptr<scheduler::Scheduler>& scheduler,
                                  const std::shared_ptr<scheduler::Registrar>& registrar,
                                  const std::shared_ptr<service::Lease>& lease) {
  if (auto serving = scheduler->serveManifests(); !serving.ok()) {
    return service::startupFailed("cannot serve manifests", serving.error());
  }
  if (registrar) {
    if (auto subscribed = registrar->start(); !subscribed.ok()) {
      return service::startupFailed("cannot start the registrar", subscribed.error());
    }
  }
  lease->start(
      [scheduler, &runtime] {
        log::info("scheduler lease held: starting placement and publishing", {});
        if (auto started = scheduler->start(); !started.ok()) {
          log::error("cannot start the scheduler", {{"error", started.error().describe()}});
          runtime.requestShutdown();
        }
      },
      [&runtime] { runtime.requestShutdown(); });
  log::info("scheduler running as a replica: standby until it holds the lease",
            {{"http_port", static_cast<int64_t>(runtime.httpPort())}});
  return stopping(scheduler, registrar, lease);
}

//! One of several replicas splitting the work (--partitions): serves manifest requests (and registration tokens)
//! at once; each partition it holds runs as a Scheduler of its own (partition_set.h).
service::StopService startPartitioned(service::Runtime& runtime, const service::Hub& hub,
                                      const scheduler::SchedulerOptions& options,
                                      const scheduler::ReplicaOptions& replica,
                                      const std::shared_ptr<scheduler::Scheduler>& scheduler,
                                      const std::shared_ptr<scheduler::Registrar>& registrar,
                                      const std::shared_ptr<ReadinessSlot>& slot) {
  if (auto serving = scheduler->serveManifests(); !serving.ok()) {
    return service::startupFailed("cannot serve manifests", serving.error());
  }
  if (registrar) {
    if (auto subscribed = registrar->start(); !subscribed.ok()) {
      return service::startupFailed("cannot start the registrar", subscribed.error());
    }
  }
  Metrics& metrics = runtime.metrics();
  auto factory = [hub, options, &metrics](
                     scheduler::Partition partition,
                     std::function<bool()> may_publish) -> Result<std::shared_ptr<service::Component>> {
    scheduler::SchedulerOptions own = options;
    own.partition = partition;
    own.serve_manifests = false;  // served once per process, above
    own.may_publish = std::move(may_publish);
    auto created = scheduler::Scheduler::create(hub, metrics, own);
    FLOTILLA_TRY(created);
    return std::shared_ptr<service::Component>(std::move(created).value());
  };
  auto partitions = std::make_shared<scheduler::PartitionSet>(
      hub.clusters, metrics,
      scheduler::PartitionSetOptions{.id = replica.id, .ttl = replica.lease_ttl, .partitions = replica.partitions},
      std::move(factory));
  {
    std::lock_guard lock(slot->mutex);
    slot->partitions = partitions;
  }
  partitions->start();
  log::info("scheduler running as a partitioned replica", {{"partitions", static_cast<int64_t>(replica.partitions)},
                                                           {"replica", replica.id},
                                                           {"http_port", static_cast<int64_t>(runtime.httpPort())}});
  return [partitions, scheduler, registrar] {
    log::info("shutting down", {});
    if (registrar) {
      registrar->stop();
    }
    partitions->stop();  // each partition's last publish, then its lease released
    scheduler->stop();
    log::info("scheduler stopped", {});
  };
}

service::StopService startScheduler(const service::Config& config, service::Runtime& runtime) {
  auto options = scheduler::schedulerOptionsFrom(config);
  if (!options.ok()) {
    return service::startupFailed("invalid flags", options.error());
  }
  auto registrar_options = scheduler::registrarOptionsFrom(config);
  if (!registrar_options.ok()) {
    return service::startupFailed("invalid flags", registrar_options.error());
  }
  // Registered before anything else: /readyz must say "not ready" while the hub is being reached (a runtime with
  // no checks reports ready). Shared with the HTTP server, which may still call it while main unwinds.
  auto slot = std::make_shared<ReadinessSlot>();
  auto replica = scheduler::replicaOptionsFrom(config);
  if (!replica.ok()) {
    return service::startupFailed("invalid flags", replica.error());
  }
  runtime.addReadinessCheck("scheduler", [slot](std::string& why) {
    std::lock_guard lock(slot->mutex);
    return slotReady(*slot, why);
  });
  auto hub = service::connectProvisioningHub(config, runtime, "flotilla-scheduler");
  if (!hub) {
    return {};
  }
  service::exportStoreUsage(runtime.metrics(), hub->js);  // store_bytes, store_max_bytes at each scrape
  std::shared_ptr<service::Lease> lease;
  if (replica->lease_ttl.count() > 0 && replica->partitions == 1) {
    lease = std::make_shared<service::Lease>(
        hub->clusters, runtime.metrics(),
        service::LeaseOptions{.key = scheduler::kLeaseKey, .holder = replica->id, .ttl = replica->lease_ttl});
    options->may_publish = [lease] { return lease->held(); };
  }
  auto created = scheduler::Scheduler::create(*hub, runtime.metrics(), *options);
  if (!created.ok()) {
    return service::startupFailed("cannot create the scheduler", created.error());
  }
  std::shared_ptr<scheduler::Scheduler> scheduler = std::move(created).value();
  {
    std::lock_guard lock(slot->mutex);
    slot->scheduler = scheduler;
    slot->lease = lease;
  }
  // The registrar (registration tokens), when configured: known to /readyz (not ready until subscribed) before the
  // scheduler starts, started after it.
  std::shared_ptr<scheduler::Registrar> registrar;
  if (*registrar_options) {
    registrar =
        std::make_shared<scheduler::Registrar>(hub->connection, hub->clusters, runtime.metrics(), **registrar_options);
    std::lock_guard lock(slot->mutex);
    slot->registrar = registrar;
  }
  if (replica->partitions > 1) {
    return startPartitioned(runtime, *hub, *options, *replica, scheduler, registrar, slot);
  }
  if (lease) {
    return startReplica(runtime, scheduler, registrar, lease);
  }
  auto started = scheduler->start();
  if (!started.ok()) {
    return service::startupFailed("cannot start the scheduler", started.error());
  }
  if (registrar) {
    if (auto subscribed = registrar->start(); !subscribed.ok()) {
      scheduler->stop();
      return service::startupFailed("cannot start the registrar", subscribed.error());
    }
  }
  log::info("scheduler running", {{"http_port", static_cast<int64_t>(runtime.httpPort())}});
  return stopping(scheduler, registrar, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = scheduler::schedulerFlags();
  flags.merge(service::storeFlags());
  flags.merge(scheduler::registrarFlags());
  return service::runService("scheduler", flags, argc, argv, startScheduler);
}
