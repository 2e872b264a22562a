#include "flotilla/service/main.h"

#include <cstdio>

#include "flotilla/core/log.h"

namespace flotilla::service {

StopService startupFailed(std::string_view what, const Error& error) {
  log::error(what, {{"error", error.describe()}});
  return {};
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
