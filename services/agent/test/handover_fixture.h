// services/agent/test/handover_fixture.h
//
// The fixture of the ownership, release and dependsOn integration tests (handover_integration_test.cpp and its
// siblings): DeployEvents with the facts the claim rules read, a DeployHandler of its own (a freshly started
// agent), and reads of the cluster by ConfigMap name in the test's namespace.
#pragma once

#include "agent_fixture.h"
#include "flotilla/agent/ownership.h"
#include "flotilla/agent/released.h"
#include "flotilla/core/time.h"

namespace flotilla::agent::testing {

//! What a DeployEvent says about its bundle besides the manifest.
struct BundleFacts {
  std::string gitrepo;
  int64_t commit_sequence = 0;
  events::StringMap labels;
  Json depends_on = Json::array();
  std::vector<std::string> retiring;  //!< DeployEvent::retiring: bundles being deleted
};

//! A DeployHandler of its own, as a freshly started agent has: nothing in memory, everything read from the cluster.
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

  Metrics metrics{"agent"};
  Applier applier;
  InventoryStore inventories;
  ManifestSource manifests;
  StatusPublisher publisher;
  std::unique_ptr<DeployHandler> handler;
  int wakes = 0;
};

class HandoverFixture : public AgentTest {
 protected:
  void SetUp() override {
    AgentTest::SetUp();
    ns_ = unique("ho");
    options_ = Json::obj({{"defaultNamespace", ns_}});
  }

  //! The next DeployEvent of `bundle` with `objects`, not published.
  events::DeployEvent event(const std::string& bundle, const std::vector<Json>& objects, const BundleFacts& facts = {},
                            const Json& options = Json()) {
    auto made = makeEvent(bundle, putManifest(objects), options.isNull() ? options_ : options);
    made.gitrepo = facts.gitrepo;
    made.commit_sequence = facts.commit_sequence;
    made.labels = facts.labels;
    made.depends_on = facts.depends_on;
    made.retiring = facts.retiring;
    return made;
  }
  events::DeployEvent send(const std::string& bundle, const std::vector<Json>& objects, const BundleFacts& facts = {},
                           const Json& options = Json()) {
    auto made = event(bundle, objects, facts, options);
    publish(made);
    return made;
  }
  events::DeployEvent sendDelete(const std::string& bundle, const Json& options = Json::object()) {
    return deploy(bundle, "", options, /*remove=*/true);
  }
  //! The next status of `bundle`, whatever it is.
  std::optional<events::StatusEvent> next(const std::string& bundle, milliseconds timeout = seconds(60)) {
    return status_.waitFor(
        bundle, [](const events::StatusEvent&) { return true; }, timeout);
  }
  void startWithHold(milliseconds hold) {
    startResponder();
    AgentOptions options = agentOptions();
    options.retry.release_hold = hold;
    startAgent(nullptr, true, options);
  }
  std::unique_ptr<HandlerRig> rig(DeployHandlerOptions options = {.release_hold = milliseconds(0)}) {
    return std::make_unique<HandlerRig>(kube_, js_, cluster_name_, agent_namespace_, options);
  }
  std::vector<ReleasedObject> held() {
    Metrics metrics("agent");
    auto loaded = ReleasedStore(*kube_, agent_namespace_, metrics).load();
    EXPECT_TRUE(loaded.ok()) << loaded.error().describe();
    return loaded.ok() ? *loaded : std::vector<ReleasedObject>();
  }
  std::string uid(const std::string& name) { return uidOf("v1", "ConfigMap", ns_, name); }
  std::string owner(const std::string& name) { return ownerOfLive("v1", "ConfigMap", ns_, name); }
  std::string bundleOwner(const std::string& bundle) { return workspace_ + "/" + bundle; }
  bool lists(const std::string& bundle, const std::string& name) {
    auto inv = inventory(bundle);
    return inv && inv->lists({"v1", "ConfigMap", ns_, name});
  }
  static Json cm(const std::string& name, const std::string& value = "v") {
    return configMap(name, "", {{"k", value}});
  }
  static Json selectorOn(const std::string& key, const std::string& value) {
    return Json(Json::Array{Json::obj({{"selector", Json::obj({{"matchLabels", Json::obj({{key, value}})}})}})});
  }

  std::string ns_;
  Json options_;
};

}  // namespace flotilla::agent::testing
