// flotilla-bundler: renders commits into bundles. Wiring only; the behaviour lives in libflotilla_bundler.
#include <cstdio>

#include "flotilla/bundler/bundler.h"
#include "flotilla/bundler/flags.h"
#include "flotilla/core/log.h"
#include "flotilla/render/render.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/runtime.h"

using namespace flotilla;

namespace {

int startupFailure(std::string_view what, const Error& error) {
  log::error(what, {{"error", error.describe()}});
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto config = service::Config::parse(argc, argv, bundler::bundlerFlags());
  if (!config.ok()) {
    std::fprintf(stderr, "flotilla-bundler: %s (see --help)\n", config.error().describe().c_str());
    return 1;
  }
  if (config->helpRequested()) {
    std::printf("%s", config->usage("flotilla-bundler").c_str());
    return 0;
  }
  auto runtime = service::Runtime::start("bundler", *config);
  if (!runtime.ok()) {
    std::fprintf(stderr, "flotilla-bundler: %s\n", runtime.error().describe().c_str());
    return 1;
  }
  auto options = bundler::bundlerOptionsFrom(*config);
  if (!options.ok()) {
    return startupFailure("invalid flags", options.error());
  }
  auto renderers = render::makeRenderers(bundler::rendererBinariesFrom(*config));
  auto hub = service::connectHub(service::connectOptionsFrom(*config, "flotilla-bundler"),
                                 service::HubAccess::kProvision, &(*runtime)->metrics());
  if (!hub.ok()) {
    return startupFailure("cannot connect to the hub", hub.error());
  }
  bundler::HandlerBus bus{hub->js,      hub->sources, hub->manifests, hub->gitrepos,
                          hub->bundles, hub->status,  hub->clusters};
  auto service = std::make_shared<bundler::Bundler>(bus, renderers, (*runtime)->metrics(), *options);
  (*runtime)->addReadinessCheck("bundler", [service](std::string& why) { return service->ready(why); });
  if (auto started = service->start(); !started.ok()) {
    return startupFailure("cannot start consuming commits", started.error());
  }
  log::info("bundler started", {{"work_dir", options->handler.work_dir},
                                {"workers", static_cast<int64_t>(options->workers)},
                                {"http_port", static_cast<int64_t>((*runtime)->httpPort())}});
  (*runtime)->waitForShutdown();
  log::info("shutting down");
  service->stop();
  return 0;
}
