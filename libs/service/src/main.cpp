#include "flotilla/service/main.h"

#include <cstdio>

#include "flotilla/core/log.h"

namespace flotilla::service {

StopService startupFailed(std::string_view what, const Error& error) {
  log::error(what, {{"error", error.describe()}});
  return {};
}

std::optional<Hub> connectProvisioningHub(const Config& config, Runtime& runtime, const std::string& client_name) {
  auto limits = storeLimitsFrom(config);
  if (!limits.ok()) {
    startupFailed("invalid flags", limits.error());
    return std::nullopt;
  }
  auto hub = connectHub(connectOptionsFrom(config, client_name), HubAccess::kProvision, &runtime.metrics(),
                        std::chrono::minutes(5), *limits);
  if (!hub.ok()) {
    startupFailed("cannot connect to the hub", hub.error());
    return std::nullopt;
  }
  return std::move(hub).value();
}

int runService(const std::string& name, std::map<std::string, std::string> flags, int argc, char** argv,
               const StartService& start) {
  const std::string program = "flotilla-" + name;
  auto config = Config::parse(argc, argv, std::move(flags));
  if (!config.ok()) {
    std::fprintf(stderr, "%s: %s (see --help)\n", program.c_str(), config.error().describe().c_str());
    return 1;
  }
  if (config->helpRequested()) {
    std::printf("%s", config->usage(program).c_str());
    return 0;
  }
  auto runtime = Runtime::start(name, *config);
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), runtime.error().describe().c_str());
    return 1;
  }
  // Declared after the runtime, so the service goes before the HTTP server that may still call its checks.
  StopService stop = start(*config, **runtime);
  if (!stop) {
    return 1;
  }
  (*runtime)->waitForShutdown();
  stop();
  return 0;
}

}  // namespace flotilla::service
