// tests/harness/hub/include/flotilla/harness/local_hub.h
//
// The in-process hub that service integration tests run against: a real nats-server -js (tests/harness/nats)
// and a hub connection that provisioned the streams, KV buckets and object stores (libs/service), as a service
// does when it starts. One place for the set-up every service test repeated.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "flotilla/core/result.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/harness/poll.h"
#include "flotilla/service/hub.h"

namespace flotilla::harness {

struct LocalHub {
  std::unique_ptr<NatsServer> nats;  //!< can be restarted or killed by the test
  service::Hub hub;                  //!< connected and provisioned

  //! Starts the server and provisions the hub; `client` names the NATS connection in the server's logs.
  static Result<LocalHub> start(const std::string& client);
};

}  // namespace flotilla::harness
