// flotilla/service/main.h
//
// The main() every Flotilla service shares: parse the flags (printing --help), start the Runtime, let the service
// wire its implementations and handlers, wait for SIGTERM/SIGINT, then stop the service.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/result.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/runtime.h"

namespace flotilla::service {

//! Stops a started service; runService calls it once the shutdown signal arrived.
using StopService = std::function<void()>;

//! Builds and starts the service. Returns how to stop it, or an empty StopService after startupFailed().
using StartService = std::function<StopService(const Config& config, Runtime& runtime)>;

//! Logs why the service could not start and returns the empty StopService that tells runService so.
StopService startupFailed(std::string_view what, const Error& error);

//! The hub of a service that provisions it (poller, bundler, scheduler): connected as `client_name` with the
//! --nats-* flags (retried for up to 5 minutes), the stores capped by the --store-* flags. nullopt once
//! startupFailed() said why (invalid flags, or no hub): the start function then returns the empty StopService.
std::optional<Hub> connectProvisioningHub(const Config& config, Runtime& runtime, const std::string& client_name);

//! The whole main() of service `name` (program flotilla-<name>) with its own `flags`: returns the exit code.
int runService(const std::string& name, std::map<std::string, std::string> flags, int argc, char** argv,
               const StartService& start);

}  // namespace flotilla::service
