// flotilla-scheduler: cluster registry, targeting, deploy events and status roll-up (docs/pipeline.md stage 4).
// Wiring only; the behaviour lives in libflotilla_scheduler.
#include <cstdio>
#include <memory>
#include <mutex>

#include "flotilla/core/log.h"
#include "flotilla/scheduler/flags.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/runtime.h"

using namespace flotilla;

namespace {

//! What the readiness check looks at; empty until the scheduler exists.
struct ReadinessSlot {
  std::mutex mutex;
  std::shared_ptr<scheduler::Scheduler> scheduler;
};

int startupFailure(std::string_view what, const Error& error) {
  log::error(what, {{"error", error.describe()}});
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto config = service::Config::parse(argc, argv, scheduler::schedulerFlags());
  if (!config.ok()) {
    std::fprintf(stderr, "flotilla-scheduler: %s (see --help)\n", config.error().describe().c_str());
    return 1;
  }
  if (config->helpRequested()) {
    std::printf("%s", config->usage("flotilla-scheduler").c_str());
    return 0;
  }
  auto runtime = service::Runtime::start("scheduler", *config);
  if (!runtime.ok()) {
    std::fprintf(stderr, "flotilla-scheduler: %s\n", runtime.error().describe().c_str());
    return 1;
  }
  auto options = scheduler::schedulerOptionsFrom(*config);
  if (!options.ok()) {
    return startupFailure("invalid flags", options.error());
  }
  // Registered before anything else: /readyz must say "not ready" while the hub is being reached (a runtime with
  // no checks reports ready). Shared with the HTTP server, which may still call it while main unwinds.
  auto slot = std::make_shared<ReadinessSlot>();
  (*runtime)->addReadinessCheck("scheduler", [slot](std::string& why) {
    std::lock_guard lock(slot->mutex);
    if (!slot->scheduler) {
      why = "starting: connecting to the hub";
      return false;
    }
    return slot->scheduler->ready(why);
  });
  auto hub = service::connectHub(service::connectOptionsFrom(*config, "flotilla-scheduler"),
                                 service::HubAccess::kProvision, &(*runtime)->metrics());
  if (!hub.ok()) {
    return startupFailure("cannot connect to the hub", hub.error());
  }
  auto created = scheduler::Scheduler::create(*hub, (*runtime)->metrics(), *options);
  if (!created.ok()) {
    return startupFailure("cannot create the scheduler", created.error());
  }
  std::shared_ptr<scheduler::Scheduler> scheduler = std::move(created).value();
  {
    std::lock_guard lock(slot->mutex);
    slot->scheduler = scheduler;
  }
  auto started = scheduler->start();
  if (!started.ok()) {
    return startupFailure("cannot start the scheduler", started.error());
  }
  log::info("scheduler running", {{"http_port", static_cast<int64_t>((*runtime)->httpPort())}});
  (*runtime)->waitForShutdown();
  log::info("shutting down", {});
  scheduler->stop();
  log::info("scheduler stopped", {});
  return 0;
}
