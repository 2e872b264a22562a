#include "flotilla/harness/local_hub.h"

#include <thread>

namespace flotilla::harness {

Result<LocalHub> LocalHub::start(const std::string& client) {
  LocalHub local;
  auto server = NatsServer::start();
  if (!server.ok()) {
    return fail(server.error());
  }
  local.nats = std::move(server).value();
  auto hub = service::connectHub(bus::ConnectOptions{.servers = {local.nats->url()}, .name = client},
                                 service::HubAccess::kProvision, nullptr, std::chrono::seconds(20));
  if (!hub.ok()) {
    return fail(hub.error());
  }
  local.hub = std::move(hub).value();
  return local;
}

bool waitUntil(const std::function<bool()>& check, std::chrono::milliseconds timeout, std::chrono::milliseconds every) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) {
      return true;
    }
    std::this_thread::sleep_for(every);
  }
  return check();
}

}  // namespace flotilla::harness
