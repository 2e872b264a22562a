// What the handover and parallel-bundles tests share on top of agent_fixture.h: a DeployHandler of their own (as a
// freshly started agent has), and a fixture whose bundles are ConfigMaps in one test namespace.
#pragma once

#include <atomic>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent_fixture.h"
#include "flotilla/agent/released.h"

namespace flotilla::agent::testing {

//! A DeployHandler of its own, as a freshly started agent has: nothing in memory, everything read from the cluster.
//! `wakes` counts the handler's wake calls.
struct HandlerRig {
  HandlerRig(const std::shared_ptr<kube::KubeClient>& kube, const std::shared_ptr<bus::JetStream>& js,
             const std::string& cluster, const std::string& agent_namespace, DeployHandlerOptions options)
      : applier(*kube, ApplierOptions{}, metrics, [] { return false; }),
        inventories(*kube, agent_namespace),
        manifests(js->connection(), cluster, metrics),
        publisher(js, cluster, metrics) {
    options.wake = [this] { ++wakes; };
    handler = std::make_unique<DeployHandler>(cluster, applier, inventories, manifests, publisher, metrics, options);
  }
  Outcome handle(const events::DeployEvent& event) { return handler->handleEvent(event, Delivery{}); }

  //! Handles `events` on one thread each, all started together; the outcomes in the same order.
  std::vector<Outcome> race(const std::vector<events::DeployEvent>& events) {
    std::vector<Outcome> outcomes(events.size());
    std::latch start(static_cast<std::ptrdiff_t>(events.size()));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < events.size(); ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        outcomes[i] = handler->handleEvent(events[i], Delivery{});
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    return outcomes;
  }

  Metrics metrics{"agent"};
  Applier applier;
  InventoryStore inventories;
  ManifestSource manifests;
  StatusPublisher publisher;
  std::unique_ptr<DeployHandler> handler;
  std::atomic<int> wakes = 0;
};

//! Bundles of ConfigMaps in one namespace of their own (`ns_`, the bundles' defaultNamespace in `options_`).
class ConfigMapBundlesTest : public AgentTest {
 protected:
  //! `prefix` starts the test namespace's name.
  explicit ConfigMapBundlesTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    AgentTest::SetUp();
    ns_ = unique(prefix_);
    options_ = Json::obj({{"defaultNamespace", ns_}});
  }

  static Json cm(const std::string& name, const std::string& value = "v") {
    return configMap(name, "", {{"k", value}});
  }
  std::unique_ptr<HandlerRig> rig(DeployHandlerOptions options = {.release_hold = std::chrono::milliseconds(0)}) {
    return std::make_unique<HandlerRig>(kube_, js_, cluster_name_, agent_namespace_, std::move(options));
  }
  //! The objects on the agent's hold list.
  std::vector<ReleasedObject> held() {
    Metrics metrics("agent");
    auto loaded = ReleasedStore(*kube_, agent_namespace_, metrics).load();
    EXPECT_TRUE(loaded.ok()) << loaded.error().describe();
    return loaded.ok() ? *loaded : std::vector<ReleasedObject>();
  }
  //! The bundle a ConfigMap's annotation names ("" when it has none).
  std::string owner(const std::string& name) { return ownerOfLive("v1", "ConfigMap", ns_, name); }
  std::string bundleOwner(const std::string& bundle) { return workspace_ + "/" + bundle; }

  std::string prefix_;
  std::string ns_;
  Json options_;
};

}  // namespace flotilla::agent::testing
