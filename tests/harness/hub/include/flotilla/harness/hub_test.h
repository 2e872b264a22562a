// tests/harness/hub/include/flotilla/harness/hub_test.h
//
// Test-side helpers over LocalHub, for the service and CLI integration tests: a gtest fixture base that starts and
// stops the hub, a scratch directory, an agent's registration request, and a reader of typed payloads from a pull
// consumer. Header-only: the tests that include it link gtest.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/bus/jetstream.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/local_hub.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/hub.h"

namespace flotilla::harness {

//! A fixture with a started hub in nats_ and hub_. Call the helpers inside ASSERT_NO_FATAL_FAILURE so that a
//! failed start ends SetUp.
class HubTest : public ::testing::Test {
 protected:
  void startHub(const std::string& client) {
    auto local = LocalHub::start(client);
    ASSERT_TRUE(local.ok()) << local.error().describe();
    nats_ = std::move(local->nats);
    hub_ = std::move(local->hub);
  }

  //! Disconnects, then stops the server.
  void stopHub() {
    hub_ = service::Hub{};
    nats_.reset();
  }

  //! Provisions the hub again with the object store `store` capped at `bytes` (what --store-limits=<store>=<bytes>
  //! does).
  void capStore(const std::string& store, int64_t bytes) {
    service::StoreLimits limits = service::StoreLimits::fromBudget(service::kDefaultStoreBudget);
    limits.max_bytes[store] = bytes;
    auto hub = service::connectHub(bus::ConnectOptions{.servers = {nats_->url()}, .name = "capped"},
                                   service::HubAccess::kProvision, nullptr, std::chrono::seconds(10), limits);
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    hub_ = std::move(hub).value();
  }

  //! Creates the durable `config` describes on `stream` and binds `consumer` to it, as a service process does (a
  //! test then takes messages through it and "dies" holding them).
  void bindDurable(std::string_view stream, const bus::ConsumerConfig& config, bus::PullConsumer& consumer) {
    auto created = hub_.js->ensureConsumer(stream, config);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    auto bound = hub_.js->bindPull(stream, config.durable);
    ASSERT_TRUE(bound.ok()) << bound.error().describe();
    consumer = std::move(bound).value();
  }

  //! A fresh temporary directory named after `prefix`, stored in `dir`.
  static void makeScratchDir(const std::string& prefix, std::string& dir) {
    auto made = makeTempDir(prefix);
    ASSERT_TRUE(made.ok());
    dir = *made;
  }

  std::unique_ptr<NatsServer> nats_;
  service::Hub hub_;
};

//! True only when `read` (a KV get, an object's info, ...) failed with kNotFound. Any other failure is not "gone":
//! it fails the test with the error, naming `what`, and returns false, so an absence check never passes on a
//! broken connection or a denied read.
template <typename T>
bool notFound(const Result<T>& read, const std::string& what) {
  if (read.ok()) {
    return false;
  }
  if (read.error().kind == ErrorKind::kNotFound) {
    return true;
  }
  ADD_FAILURE() << "reading " << what << ": " << read.error().describe();
  return false;
}

//! Sends the registration an agent of `cluster` would send to the scheduler (with `api_versions`, sorted, as its
//! discovery found them); the reply message.
inline Result<bus::Message> requestRegistration(const service::Hub& hub, const std::string& cluster,
                                                const std::string& workspace, events::StringMap labels,
                                                std::vector<std::string> api_versions = {}) {
  events::RegisterRequest request{.id = events::newEventId(),
                                  .time = log::nowRfc3339(),
                                  .cluster = cluster,
                                  .workspace = workspace,
                                  .labels = std::move(labels),
                                  .kubernetes_version = "v1.31.2",
                                  .agent_version = "0.1.0",
                                  .api_versions = std::move(api_versions)};
  // On the cluster's own subject, as an agent registers (its credentials allow only that one).
  return hub.connection->request(std::string(events::kRegisterSubject) + "." + events::escapeToken(cluster),
                                 events::encode(request).dump(), std::chrono::seconds(5));
}

//! An agent's durable, agent-<cluster> on flotilla.deploy.<cluster>, as the scheduler creates it at registration
//! (created here too when the test registers nothing), bound.
inline bus::PullConsumer agentDurable(const service::Hub& hub, const std::string& cluster) {
  bus::ConsumerConfig config = service::agentDeployConsumer(cluster);
  EXPECT_TRUE(hub.js->ensureConsumer(service::kDeployStream, config).ok());
  auto bound = hub.js->bindPull(service::kDeployStream, config.durable);
  EXPECT_TRUE(bound.ok());
  return std::move(bound).value();
}

//! Takes the next message `times` times without settling it, as a service that crashes on it would; the stream
//! sequence of the last delivery in `sequence`. Call inside ASSERT_NO_FATAL_FAILURE.
inline void deliverUnsettled(bus::PullConsumer& consumer, int times, uint64_t& sequence) {
  for (int crash = 1; crash <= times; ++crash) {
    auto batch = consumer.fetch(1, std::chrono::seconds(10));
    ASSERT_TRUE(batch.ok());
    ASSERT_EQ(batch->size(), 1u) << "delivery " << crash;
    sequence = (*batch)[0].metadata()->stream_sequence;
  }
}

//! How fetchPayloads reads: until `count` payloads were kept or `timeout` passed, each fetch waiting `wait` for
//! `batch` messages (0: as many as are still missing).
struct FetchPlan {
  size_t count = 1;
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds wait{200};
  int batch = 0;
};

//! Fetches and acks messages, parses each as a `Payload` and passes it with its message to `check` (the test's
//! expectations); keeps the parsed payloads for which `check` returns true.
template <typename Payload, typename Check>
std::vector<Payload> fetchPayloads(bus::PullConsumer& consumer, const FetchPlan& plan, Check&& check) {
  std::vector<Payload> out;
  const auto deadline = std::chrono::steady_clock::now() + plan.timeout;
  while (out.size() < plan.count && std::chrono::steady_clock::now() < deadline) {
    const int want = plan.batch > 0 ? plan.batch : static_cast<int>(plan.count - out.size());
    auto batch = consumer.fetch(want, plan.wait);
    if (!batch.ok()) {
      continue;
    }
    for (auto& message : *batch) {
      auto payload = events::parsePayload<Payload>(message.data());
      if (check(message, payload) && payload.ok()) {
        out.push_back(std::move(payload).value());
      }
      (void)message.ackSync();
    }
  }
  return out;
}

}  // namespace flotilla::harness
