// flotilla-scheduler: cluster registry, targeting, deploy events and status roll-up (docs/pipeline.md stage 4).
// Wiring only; the behaviour lives in libflotilla_scheduler.
#include "flotilla/service/main.h"

#include <memory>
#include <mutex>
#include <optional>

#include "flotilla/core/log.h"
#include "flotilla/scheduler/enrollment.h"
#include "flotilla/scheduler/flags.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/hub.h"

using namespace flotilla;

namespace {

//! What the readiness check looks at; empty until the scheduler exists.
struct ReadinessSlot {
  std::mutex mutex;
  std::shared_ptr<scheduler::Scheduler> scheduler;
  std::shared_ptr<scheduler::Registrar> registrar;  //!< with --registration-signing-key
};

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
  runtime.addReadinessCheck("scheduler", [slot](std::string& why) {
    std::lock_guard lock(slot->mutex);
    if (!slot->scheduler) {
      why = "starting: connecting to the hub";
      return false;
    }
    return slot->scheduler->ready(why) && (!slot->registrar || slot->registrar->ready(why));
  });
  auto hub = service::connectProvisioningHub(config, runtime, "flotilla-scheduler");
  if (!hub) {
    return {};
  }
  auto created = scheduler::Scheduler::create(*hub, runtime.metrics(), *options);
  if (!created.ok()) {
    return service::startupFailed("cannot create the scheduler", created.error());
  }
  std::shared_ptr<scheduler::Scheduler> scheduler = std::move(created).value();
  {
    std::lock_guard lock(slot->mutex);
    slot->scheduler = scheduler;
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
  return [scheduler, registrar] {
    log::info("shutting down", {});
    if (registrar) {
      registrar->stop();
    }
    scheduler->stop();
    log::info("scheduler stopped", {});
  };
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = scheduler::schedulerFlags();
  flags.merge(service::storeFlags());
  flags.merge(scheduler::registrarFlags());
  return service::runService("scheduler", flags, argc, argv, startScheduler);
}
