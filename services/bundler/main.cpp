// flotilla-bundler: renders commits into bundles. Wiring only; the behaviour lives in libflotilla_bundler.
#include "flotilla/service/main.h"

#include <memory>

#include "flotilla/bundler/bundler.h"
#include "flotilla/bundler/flags.h"
#include "flotilla/core/log.h"
#include "flotilla/render/render.h"
#include "flotilla/secrets/secret_store.h"
#include "flotilla/service/hub.h"

using namespace flotilla;

namespace {

service::StopService startBundler(const service::Config& config, service::Runtime& runtime) {
  auto options = bundler::bundlerOptionsFrom(config);
  if (!options.ok()) {
    return service::startupFailed("invalid flags", options.error());
  }
  // helmSecretName secrets are per workspace; the flat layout of earlier versions would make them all "not found".
  if (auto layout = secrets::checkLayout(config.get("credentials-dir")); !layout.ok()) {
    return service::startupFailed("invalid --credentials-dir", layout.error());
  }
  auto renderers = render::makeRenderers(bundler::rendererBinariesFrom(config));
  auto hub = service::connectProvisioningHub(config, runtime, "flotilla-bundler");
  if (!hub) {
    return {};
  }
  auto service = std::make_shared<bundler::Bundler>(*hub, renderers, runtime.metrics(), *options);
  runtime.addReadinessCheck("bundler", service);
  if (auto started = service->start(); !started.ok()) {
    return service::startupFailed("cannot start consuming commits", started.error());
  }
  log::info("bundler started", {{"work_dir", options->handler.work_dir},
                                {"workers", static_cast<int64_t>(options->workers)},
                                {"http_port", static_cast<int64_t>(runtime.httpPort())}});
  return [service] {
    log::info("shutting down");
    service->stop();
  };
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = bundler::bundlerFlags();
  flags.merge(service::storeFlags());
  return service::runService("bundler", flags, argc, argv, startBundler);
}
