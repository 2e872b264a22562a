// services/agent/test/handover_fixture.h
//
// The fixture of the ownership, release and dependsOn integration tests (handover_integration_test.cpp and its
// siblings): DeployEvents with the facts the claim rules read, a DeployHandler of its own (handler_rig.h: a freshly
// started agent), and reads of the cluster by ConfigMap name in the test's namespace.
#pragma once

#include "flotilla/agent/ownership.h"
#include "flotilla/core/time.h"
#include "handler_rig.h"

namespace flotilla::agent::testing {

class HandoverFixture : public ConfigMapBundlesTest {
 protected:
  HandoverFixture() : ConfigMapBundlesTest("ho") {}

  //! The next DeployEvent of `bundle` with `objects`, not published.
  events::DeployEvent event(const std::string& bundle, const std::vector<Json>& objects, const BundleFacts& facts = {},
                            const Json& options = Json()) {
    return makeEvent(bundle, putManifest(objects), options.isNull() ? options_ : options, /*remove=*/false, facts);
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
  std::string uid(const std::string& name) { return uidOf("v1", "ConfigMap", ns_, name); }
  bool lists(const std::string& bundle, const std::string& name) {
    auto inv = inventory(bundle);
    return inv && inv->lists({"v1", "ConfigMap", ns_, name});
  }
  //! Sends `objects` as `bundle` and waits until it is Ready; the UID of ConfigMap "o" then ("" when not Ready).
  std::string readyWithO(const std::string& bundle, const std::vector<Json>& objects, const BundleFacts& facts = {}) {
    sendReady(bundle, objects, facts);
    return HasFatalFailure() ? std::string() : uid("o");
  }
  //! Starts the agent, then readyWithO.
  std::string startOwningO(const std::string& bundle, const std::vector<Json>& objects, const BundleFacts& facts = {}) {
    startRegisteredAgent();
    return readyWithO(bundle, objects, facts);
  }
  void sendReady(const std::string& bundle, const std::vector<Json>& objects, const BundleFacts& facts = {}) {
    send(bundle, objects, facts);
    ASSERT_TRUE(status_.waitForState(bundle, "Ready")) << bundle;
  }
  //! `bundle` deploys ConfigMaps "o" and "keep", then a deployment without "o"; the UID "o" had ("" on a failure).
  std::string releasesO(const std::string& bundle) {
    std::string before = readyWithO(bundle, {cm("o"), cm("keep")});
    sendReady(bundle, {cm("keep")});
    return HasFatalFailure() ? std::string() : before;
  }
  //! `first` handles a deployment of ConfigMaps "o" (k=a) and "keep" as `bundle`; the UID "o" then has.
  std::string appliedWithO(HandlerRig& first, const std::string& bundle) {
    EXPECT_EQ(first.handle(event(bundle, {cm("o", "a"), cm("keep")})).result, "applied");
    return uid("o");
  }
  //! Sends `objects` as `claimant`: its first status is Ready, and ConfigMap "o" is its, with the UID `before`.
  void expectAdopted(const std::string& claimant, const std::vector<Json>& objects, const std::string& before,
                     const BundleFacts& facts = {}, const Json& options = Json()) {
    send(claimant, objects, facts, options);
    auto first = next(claimant);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->state, "Ready") << first->message;
    EXPECT_EQ(uid("o"), before);
    EXPECT_EQ(owner("o"), bundleOwner(claimant));
  }
  //! Applies ConfigMap "o" (data k=`value`) annotated as `bundle`'s, as a claim's apply step does.
  void annotateO(const std::string& bundle, const std::string& value) {
    Json annotated = configMap("o", ns_, {{"k", value}});
    annotated["metadata"]["annotations"][kBundleAnnotation] = bundleOwner(bundle);
    ASSERT_TRUE(kube_->apply(annotated, kube::ApplyOptions{.field_manager = std::string(kFieldManager)}).ok());
  }
  static Json selectorOn(const std::string& key, const std::string& value) {
    return Json(Json::Array{Json::obj({{"selector", Json::obj({{"matchLabels", Json::obj({{key, value}})}})}})});
  }
};

}  // namespace flotilla::agent::testing
