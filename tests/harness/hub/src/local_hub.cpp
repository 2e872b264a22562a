#include "flotilla/harness/local_hub.h"

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

}  // namespace flotilla::harness
