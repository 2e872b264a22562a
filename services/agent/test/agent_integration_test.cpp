// Integration tests of the agent against a real nats-server -js and a real kube-apiserver (tests/harness), with
// the fixture of agent_fixture.h (the test plays the scheduler).
#include "agent_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

// Start-up: the agent registers (labels, Kubernetes version, agent version), binds agent-<cluster> filtered on
// its deploy subject, and sends heartbeats inside its status subject space.
TEST_F(AgentTest, RegistersBindsConsumerAndSendsHeartbeats) {
  startRegisteredAgent();
  {
    std::lock_guard lock(mutex_);
    ASSERT_FALSE(requests_.empty());
    EXPECT_EQ(requests_[0].workspace, "fleet-default");
    EXPECT_EQ(requests_[0].labels.at("env"), "cluster1");
    // The test tools are built without version stamping ("v0.0.0-master+..."): only the shape is checked.
    EXPECT_TRUE(startsWith(requests_[0].kubernetes_version, "v")) << requests_[0].kubernetes_version;
    EXPECT_EQ(requests_[0].agent_version, kAgentVersion);
  }
  EXPECT_EQ(agent_->clusterId(), cluster_name_);
  auto consumer = js_->consumerInfo(service::kDeployStream, consumerName(cluster_name_));
  ASSERT_TRUE(consumer.ok()) << consumer.error().describe();
  EXPECT_TRUE(eventually([&] { return status_.heartbeats() >= 2; }, seconds(10)));
  EXPECT_EQ(status_.heartbeatSubjects(), std::set<std::string>{heartbeatSubjectFor(cluster_name_)});
  // Counted once the publish is acknowledged, which can come after the subscriber above saw the message.
  EXPECT_TRUE(eventually([&] { return metric("heartbeats_total") >= 2; }, seconds(10)));
}

// No scheduler yet: registration is retried with backoff (logged and counted) until one answers.
TEST_F(AgentTest, RegistrationRetriesUntilTheSchedulerAnswers) {
  startAgent(nullptr, /*wait_ready=*/false);
  ASSERT_TRUE(eventually([&] { return metric("register_retries_total") >= 2; }, seconds(30)));
  std::string why;
  EXPECT_FALSE(agent_->ready(why));
  EXPECT_EQ(why, "not registered with the hub yet");
  startResponder();
  EXPECT_TRUE(eventually([&] { return agent_->ready(why); }, seconds(30))) << why;
}

// The hub creates the deploy durable, not the agent: accepted but without a durable, the agent waits (logged and
// counted), creates nothing, and binds once the durable exists.
TEST_F(AgentTest, WaitsForTheHubToCreateItsDurable) {
  create_durable_ = false;
  startResponder();
  startAgent(nullptr, /*wait_ready=*/false);
  ASSERT_TRUE(eventually(
      [&] {
        return metric("consumer_setup_retries_total", {{"reason", "absent"}}) >= 2;
      },
      seconds(30)));
  std::string why;
  EXPECT_FALSE(agent_->ready(why));
  EXPECT_EQ(why, "deploy consumer not bound");
  EXPECT_FALSE(js_->consumerInfo(service::kDeployStream, consumerName(cluster_name_)).ok())
      << "the agent created its own durable";
  ensureAgentDurable();
  EXPECT_TRUE(eventually([&] { return agent_->ready(why); }, seconds(30))) << why;
}

// A rejected registration is retried too.
TEST_F(AgentTest, RejectedRegistrationIsRetried) {
  startResponder(/*accept=*/false);
  startAgent(nullptr, /*wait_ready=*/false);
  ASSERT_TRUE(eventually([&] { return metric("register_retries_total") >= 2; }, seconds(30)));
  EXPECT_FALSE(agent_->registered());
}

// A bundle of a Namespace and ConfigMaps: objects exist (namespaced per defaultNamespace), the inventory is in
// the agent namespace, and the status is Ready with the deploymentID and the Msg-Id of docs/pipeline.md.
TEST_F(AgentTest, AppliesBundleWritesInventoryAndReportsReady) {
  startRegisteredAgent();
  std::string ns = unique("app");
  std::string bundle = unique("bundle");
  std::string id =
      putManifest({namespaceObject(ns), configMap("settings", "", {{"a", "1"}}), configMap("other", ns, {{"b", "2"}})});
  auto event = deploy(bundle, id, Json::obj({{"defaultNamespace", ns}}));
  auto status = status_.waitForState(bundle, "Ready");
  ASSERT_TRUE(status) << "no Ready status";
  EXPECT_EQ(status->deployment_id, event.deployment_id);
  EXPECT_EQ(status->generation, event.generation);
  EXPECT_EQ(status->workspace, workspace_);
  EXPECT_EQ(status->agent_version, kAgentVersion);
  auto settings = get("v1", "ConfigMap", ns, "settings");
  ASSERT_TRUE(settings.ok()) << settings.error().describe();
  EXPECT_EQ(settings->at({"data", "a"})->asString(), "1");
  EXPECT_EQ(settings->at({"metadata", "annotations", kBundleAnnotation})->asString(), workspace_ + "/" + bundle);
  EXPECT_TRUE(exists("v1", "Namespace", "", ns));
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->deployment_id, event.deployment_id);
  EXPECT_TRUE(inv->applied);
  EXPECT_EQ(inv->objects.size(), 3u);
  ASSERT_FALSE(status_.msgIds().empty());
  EXPECT_TRUE(startsWith(status_.msgIds().back(),
                         "status/" + cluster_name_ + "/" + bundle + "/" + event.deployment_id + "/Ready/"))
      << status_.msgIds().back();
  EXPECT_EQ(metric("objects_applied_total", {{"result", "ok"}}), 3);
  EXPECT_EQ(metric("deploys_total", {{"outcome", "applied"}}), 1);
  EXPECT_EQ(metric("settled_total", {{"consumer", "deploy"}, {"action", "ack"}}), 1);
  // The deploy's time -> this first report (docs/pipeline.md "Stage latency").
  EXPECT_EQ(metric("stage_latency_seconds", {{"stage", "deploy_to_applied"}}), 1);
}

// The same deploymentID again: nothing is applied (resourceVersions unchanged), the status is re-reported.
TEST_F(AgentTest, SameDeploymentIdIsNotReappliedButReReported) {
  startRegisteredAgent();
  std::string ns = unique("app");
  std::string bundle = unique("bundle");
  std::string id = putManifest({configMap("a", "", {{"k", "v"}}), configMap("b", "", {{"k", "v"}})});
  Json options = Json::obj({{"defaultNamespace", ns}});
  auto first = deploy(bundle, id, options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  std::string rv_a = get("v1", "ConfigMap", ns, "a")->at({"metadata", "resourceVersion"})->asString();
  std::string rv_b = get("v1", "ConfigMap", ns, "b")->at({"metadata", "resourceVersion"})->asString();
  double applied_before = metric("objects_applied_total", {{"result", "ok"}});

  events::DeployEvent again = first;
  again.generation = ++generations_[bundle];  // the scheduler re-sends the same deployment (e.g. a redeploy)
  again.id = events::deployMsgId(cluster_name_, bundle, again.deployment_id, again.generation);
  publish(again);
  auto status = status_.waitForState(bundle, "Ready");
  ASSERT_TRUE(status) << "status was not re-reported";
  EXPECT_EQ(status->deployment_id, first.deployment_id);
  EXPECT_EQ(get("v1", "ConfigMap", ns, "a")->at({"metadata", "resourceVersion"})->asString(), rv_a);
  EXPECT_EQ(get("v1", "ConfigMap", ns, "b")->at({"metadata", "resourceVersion"})->asString(), rv_b);
  EXPECT_EQ(metric("objects_applied_total", {{"result", "ok"}}), applied_before);
  // Counted when the consumer settles the message, just after the handler published the report.
  EXPECT_TRUE(eventually([&] { return metric("deploys_total", {{"outcome", "skipped"}}) == 1; }, seconds(10)));
}

// A new manifest where one ConfigMap changed and one was removed: the change is applied, the removed one pruned.
TEST_F(AgentTest, NewManifestUpdatesAndPrunes) {
  startRegisteredAgent();
  std::string ns = unique("app");
  std::string bundle = unique("bundle");
  Json options = Json::obj({{"defaultNamespace", ns}});
  deploy(bundle,
         putManifest({configMap("keep", "", {{"k", "1"}}), configMap("change", "", {{"k", "1"}}),
                      configMap("drop", "", {{"k", "1"}})}),
         options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  ASSERT_TRUE(exists("v1", "ConfigMap", ns, "drop"));
  std::string rv_keep = get("v1", "ConfigMap", ns, "keep")->at({"metadata", "resourceVersion"})->asString();

  auto second = deploy(
      bundle, putManifest({configMap("keep", "", {{"k", "1"}}), configMap("change", "", {{"k", "2"}})}), options);
  auto status =
      status_.waitFor(bundle, [&](const events::StatusEvent& s) { return s.deployment_id == second.deployment_id; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "Ready") << status->message;
  EXPECT_EQ(get("v1", "ConfigMap", ns, "change")->at({"data", "k"})->asString(), "2");
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "drop"));
  EXPECT_EQ(get("v1", "ConfigMap", ns, "keep")->at({"metadata", "resourceVersion"})->asString(), rv_keep);
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->objects.size(), 2u);
  EXPECT_EQ(inv->deployment_id, second.deployment_id);
  EXPECT_EQ(metric("objects_pruned_total", {{"result", "deleted"}}), 1);
}

// A CRD and a custom resource of it in one bundle: stage 1 applies the CRD and waits until it is Established,
// so the custom resource (stage 3) is accepted in the same deploy.
TEST_F(AgentTest, CrdAndCustomResourceInOneBundle) {
  startRegisteredAgent();
  std::string ns = unique("crd");
  std::string group = randomHex(4) + ".example.com";
  std::string bundle = unique("bundle");
  Json widgets = crd(group, "widgets", "Widget");
  widgets["spec"]["scope"] = "Namespaced";
  Json widget = Json::obj({{"apiVersion", group + "/v1"},
                           {"kind", "Widget"},
                           {"metadata", Json::obj({{"name", "w1"}})},
                           {"spec", Json::obj({{"size", 3}})}});
  // The manifest lists the custom resource first: the agent's staging, not the manifest order, must win.
  deploy(bundle, putManifest({widget, widgets, namespaceObject(ns)}), Json::obj({{"defaultNamespace", ns}}));
  auto status = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "Ready") << status->message;
  auto live = get(group + "/v1", "Widget", ns, "w1");
  ASSERT_TRUE(live.ok()) << live.error().describe();
  EXPECT_EQ(live->at({"spec", "size"})->asInt(), 3);
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->objects.size(), 3u);

  // Deleting the bundle removes the custom resource and the namespace but keeps the CRD (deleteCRDResources off).
  deploy(bundle, "", Json::object(), true);
  auto deleted = status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.reason == "Deleted"; });
  ASSERT_TRUE(deleted);
  EXPECT_TRUE(goneOrDeleting(group + "/v1", "Widget", ns, "w1"));
  EXPECT_TRUE(exists("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group));
  (void)kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group);
}

// Invalid objects (data: 5; a Deployment without selector) make ErrApplied naming each object with the API
// server's message; the bundle's other objects still apply, and another bundle is not blocked.
TEST_F(AgentTest, InvalidObjectsReportErrAppliedWhileOthersApply) {
  startRegisteredAgent();
  std::string ns = unique("bad");
  std::string bundle = unique("bundle");
  Json bad_data = configMap("bad-data", "", {});
  bad_data["data"] = 5;
  Json bad_deployment = Json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"no-selector"},
    "spec":{"replicas":1,"template":{"metadata":{"labels":{"app":"x"}},
      "spec":{"containers":[{"name":"c","image":"nginx"}]}}}})")
                            .value();
  deploy(bundle, putManifest({configMap("good", "", {{"k", "v"}}), bad_data, bad_deployment}),
         Json::obj({{"defaultNamespace", ns}}));
  auto status = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "ErrApplied");
  EXPECT_EQ(status->reason, "ApplyFailed");
  EXPECT_NE(status->message.find("ConfigMap/" + ns + "/bad-data: "), std::string::npos) << status->message;
  EXPECT_NE(status->message.find("Deployment/" + ns + "/no-selector: "), std::string::npos) << status->message;
  EXPECT_NE(status->message.find("selector"), std::string::npos) << status->message;
  std::set<std::string> failed;
  for (const auto& r : status->resources) {
    if (r.state == "ErrApplied") {
      failed.insert(r.name);
      EXPECT_FALSE(r.message.empty());
    }
  }
  EXPECT_EQ(failed, (std::set<std::string>{"bad-data", "no-selector"}));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "good"));
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_FALSE(inv->applied);
  EXPECT_EQ(metric("objects_applied_total", {{"result", "failed"}}), 2);

  std::string other = unique("bundle");
  deploy(other, putManifest({configMap("fine", "", {{"k", "v"}})}), Json::obj({{"defaultNamespace", ns}}));
  EXPECT_TRUE(status_.waitForState(other, "Ready"));

  // Fix forward: the next manifest of the failed bundle applies (the failed deploy did not block it).
  auto fixed =
      deploy(bundle, putManifest({configMap("good", "", {{"k", "v2"}})}), Json::obj({{"defaultNamespace", ns}}));
  auto ready = status_.waitForState(bundle, "Ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->deployment_id, fixed.deployment_id);
}

// A manifest that is not a JSON array, and one that is missing: ErrApplied with a reason, message terminated.
TEST_F(AgentTest, InvalidOrMissingManifestIsReportedAndTerminated) {
  startRegisteredAgent();
  std::string bundle = unique("bundle");
  deploy(bundle, putManifestBytes(R"({"not":"an array"})"), Json::object());
  auto invalid = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(invalid);
  EXPECT_EQ(invalid->state, "ErrApplied");
  EXPECT_EQ(invalid->reason, "InvalidManifest");

  deploy(bundle, std::string(64, 'a'), Json::object());
  auto missing = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->reason, "ManifestNotFound");

  deploy(bundle, putManifest({}), Json::obj({{"helm", "not a map"}}));
  auto bad_options = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(bad_options);
  EXPECT_EQ(bad_options->reason, "InvalidOptions");
  EXPECT_TRUE(eventually(
      [&] {
        return metric("settled_total", {{"consumer", "deploy"}, {"action", "term"}}) == 3;
      },
      seconds(5)));
}

// Delete: everything the inventory owns is pruned and the inventory is gone; with keepResources the objects
// stay (orphaned) and only the inventory goes.
TEST_F(AgentTest, DeletePrunesOrOrphans) {
  startRegisteredAgent();
  std::string ns = unique("del");
  std::string pruned = unique("bundle");
  std::string kept = unique("bundle");
  deploy(pruned, putManifest({namespaceObject(ns), configMap("a", "", {{"k", "v"}}), configMap("b", "", {})}),
         Json::obj({{"defaultNamespace", ns}}));
  deploy(kept, putManifest({configMap("c", "", {{"k", "v"}})}), Json::obj({{"defaultNamespace", ns}}));
  ASSERT_TRUE(status_.waitForState(pruned, "Ready"));
  ASSERT_TRUE(status_.waitForState(kept, "Ready"));

  deploy(kept, "", Json::obj({{"keepResources", true}}), true);
  auto orphaned = status_.waitFor(kept, [](const events::StatusEvent& s) { return s.reason == "Orphaned"; });
  ASSERT_TRUE(orphaned);
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "c"));
  EXPECT_FALSE(inventory(kept));

  deploy(pruned, "", Json::object(), true);
  auto deleted = status_.waitFor(pruned, [](const events::StatusEvent& s) { return s.reason == "Deleted"; });
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->state, "Ready");
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "a"));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "b"));
  EXPECT_TRUE(goneOrDeleting("v1", "Namespace", "", ns));
  EXPECT_FALSE(inventory(pruned));
  EXPECT_EQ(metric("deploys_total", {{"outcome", "deleted"}}), 1);
  EXPECT_EQ(metric("deploys_total", {{"outcome", "orphaned"}}), 1);
}

// A new agent instance (restart) reads the inventory from the cluster: prune stays exact, and the bundles it
// finds are re-reported by the first resync.
TEST_F(AgentTest, RestartedAgentPrunesFromClusterInventory) {
  startRegisteredAgent();
  std::string ns = unique("restart");
  std::string bundle = unique("bundle");
  Json options = Json::obj({{"defaultNamespace", ns}});
  deploy(bundle, putManifest({configMap("a", "", {}), configMap("b", "", {}), configMap("c", "", {})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  // An object of the same names outside the bundle must survive the prune.
  ASSERT_TRUE(
      kube_->apply(configMap("b", "default", {{"not", "ours"}}), kube::ApplyOptions{.field_manager = "test"}).ok());
  stopAgent();

  // A new instance with a new Kubernetes client: nothing in memory.
  startAgent(nullptr, /*wait_ready=*/true);
  auto reseeded = status_.waitForState(bundle, "Ready", seconds(20));
  EXPECT_TRUE(reseeded) << "the restarted agent did not re-report the bundle it found";
  auto next = deploy(bundle, putManifest({configMap("a", "", {})}), options);
  auto status =
      status_.waitFor(bundle, [&](const events::StatusEvent& s) { return s.deployment_id == next.deployment_id; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "Ready") << status->message;
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "a"));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "b"));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "c"));
  EXPECT_TRUE(exists("v1", "ConfigMap", "default", "b"));
  (void)kube_->remove("v1", "ConfigMap", "default", "b");
}

// A field owned by another field manager: ErrApplied naming that manager; with takeOwnership the agent applies
// with force and says so.
TEST_F(AgentTest, ConflictNamesManagerAndTakeOwnershipForces) {
  startRegisteredAgent();
  std::string ns = unique("own");
  std::string bundle = unique("bundle");
  ASSERT_TRUE(kube_->apply(namespaceObject(ns), kube::ApplyOptions{.field_manager = "test"}).ok());
  ASSERT_TRUE(
      kube_->apply(configMap("shared", ns, {{"k", "theirs"}}), kube::ApplyOptions{.field_manager = "other-tool"}).ok());
  std::string id = putManifest({configMap("shared", "", {{"k", "ours"}})});
  deploy(bundle, id, Json::obj({{"defaultNamespace", ns}}));
  auto conflict = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(conflict);
  EXPECT_EQ(conflict->state, "ErrApplied");
  EXPECT_NE(conflict->message.find("other-tool"), std::string::npos) << conflict->message;
  EXPECT_EQ(get("v1", "ConfigMap", ns, "shared")->at({"data", "k"})->asString(), "theirs");

  deploy(bundle, id, Json::obj({{"defaultNamespace", ns}, {"helm", Json::obj({{"takeOwnership", true}})}}));
  auto forced = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(forced);
  EXPECT_EQ(forced->state, "Ready") << forced->message;
  EXPECT_NE(forced->message.find("force"), std::string::npos) << forced->message;
  EXPECT_EQ(get("v1", "ConfigMap", ns, "shared")->at({"data", "k"})->asString(), "ours");
}

// An object another bundle owns is not silently taken over, and prune never deletes another bundle's object.
TEST_F(AgentTest, ObjectOfAnotherBundleIsAReportedConflict) {
  startRegisteredAgent();
  std::string ns = unique("two");
  std::string first = unique("bundle");
  std::string second = unique("bundle");
  Json options = Json::obj({{"defaultNamespace", ns}});
  deploy(first, putManifest({configMap("same", "", {{"k", "first"}})}), options);
  ASSERT_TRUE(status_.waitForState(first, "Ready"));
  deploy(second, putManifest({configMap("same", "", {{"k", "second"}}), configMap("own", "", {})}), options);
  auto status = status_.waitFor(second, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "ErrApplied");
  EXPECT_NE(status->message.find("owned by bundle " + workspace_ + "/" + first), std::string::npos) << status->message;
  EXPECT_EQ(get("v1", "ConfigMap", ns, "same")->at({"data", "k"})->asString(), "first");
  // The second bundle never owned it, so deleting the second bundle leaves it alone.
  deploy(second, "", Json::object(), true);
  ASSERT_TRUE(status_.waitFor(second, [](const events::StatusEvent& s) { return s.reason == "Deleted"; }));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "same"));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "own"));
}

// A Deployment stays NotReady without controllers; when its status says it is available the resync reports
// Ready without a new deploy event.
TEST_F(AgentTest, ResyncReportsNotReadyToReady) {
  startRegisteredAgent();
  std::string ns = unique("rs");
  std::string bundle = unique("bundle");
  deploy(bundle, putManifest({webDeployment(), configMap("cfg", "", {})}), Json::obj({{"defaultNamespace", ns}}));
  auto not_ready = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->state, "NotReady");
  EXPECT_EQ(not_ready->reason, "ResourcesNotReady");
  ASSERT_EQ(not_ready->resources.size(), 1u);
  EXPECT_EQ(not_ready->resources[0].kind, "Deployment");
  EXPECT_NE(not_ready->message.find("Deployment/" + ns + "/web"), std::string::npos);

  // Play the deployment controller: report the rollout as complete.
  auto live = get("apps/v1", "Deployment", ns, "web");
  ASSERT_TRUE(live.ok());
  int64_t generation = live->at({"metadata", "generation"})->asInt();
  Json patch = Json::obj({{"status", Json::obj({{"observedGeneration", generation},
                                                {"replicas", 1},
                                                {"updatedReplicas", 1},
                                                {"readyReplicas", 1},
                                                {"availableReplicas", 1}})}});
  auto patched = kube_->request("PATCH", "/apis/apps/v1/namespaces/" + ns + "/deployments/web/status", patch.dump(),
                                "application/merge-patch+json");
  ASSERT_TRUE(patched.ok()) << patched.error().describe();
  auto ready = status_.waitForState(bundle, "Ready", seconds(20));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->deployment_id, not_ready->deployment_id);
  // Counted right after the publish returns, which may be a moment after the reader saw the event; the watch
  // usually sees the change before the resync does.
  EXPECT_TRUE(eventually(
      [&] {
        return metric("resync_state_changes_total") + metric("watch_state_changes_total", {{"state", "Ready"}}) >= 1;
      },
      seconds(5)));
}

// dependsOn: a bundle whose dependency is not deployed yet reports WaitApplied (once) and applies nothing; it is
// parked, runs again on each wake (another bundle applied) without reporting again, and applies once the
// dependency is Ready.
TEST_F(AgentTest, DependsOnWaitsForTheDependency) {
  startRegisteredAgent();
  std::string ns = unique("dep");
  std::string infra = unique("infra");
  std::string app = unique("app");
  Json options = Json::obj({{"defaultNamespace", ns}});
  auto event = deploy(app, putManifest({configMap("app", "", {})}), options, /*remove=*/false,
                      {.depends_on = Json(Json::Array{Json::obj({{"name", infra}})})});
  auto waiting = status_.waitFor(app, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "WaitApplied");
  EXPECT_EQ(waiting->reason, "DependenciesNotReady");
  EXPECT_NE(waiting->message.find("bundle " + infra + " is not deployed"), std::string::npos) << waiting->message;
  std::string other = unique("other");
  deploy(other, putManifest({configMap("other", "", {})}), options);  // its Ready report wakes the parked deploy
  ASSERT_TRUE(status_.waitForState(other, "Ready"));
  ASSERT_TRUE(eventually([&] { return metric("dependency_waits_total") >= 2; }, seconds(10)));
  EXPECT_GE(metric("wakes_total", {{"consumer", "deploy"}}), 1);
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "app"));
  EXPECT_EQ(status_.all(app).size(), 1u) << "WaitApplied must be reported once, not per redelivery";

  deploy(infra, putManifest({configMap("infra", "", {})}), options);
  ASSERT_TRUE(status_.waitForState(infra, "Ready"));
  auto ready = status_.waitForState(app, "Ready", seconds(30));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->deployment_id, event.deployment_id);
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "app"));
}

// Manifests come from the hub (manifest_source.h): without an answering hub a fetch is retried with backoff (logged
// and counted) and ends as a transient failure, so the deploy is retried later; once the hub answers, a manifest of
// several MiB comes in chunks and is checked against its size and digest. A manifest only another cluster is
// deployed is refused (retried, then transient); one a deployment references but the store lacks is kNotFound.
TEST(ManifestSourceTest, RetriesUntilTheHubAnswersAndFetchesALargeManifestInChunks) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto hub = service::connectHub({.servers = {(*server)->url()}, .name = "manifest-source-test"},
                                 service::HubAccess::kProvision, nullptr);
  ASSERT_TRUE(hub.ok()) << hub.error().describe();
  std::string data = "[";
  for (int i = 0; data.size() < (5u << 20); ++i) {
    data += (i > 0 ? "," : "") + configMap("cm-" + std::to_string(i), "", {{"k", std::string(4000, 'x')}}).dump();
  }
  data += "]";
  std::string id = model::manifestID(data);
  ASSERT_TRUE(hub->manifests->put(events::manifestObjectName(id), data).ok());
  auto record = [&](const std::string& cluster, const std::string& bundle, const std::string& manifest) {
    events::DeploymentRecord r{.cluster = cluster, .workspace = "ws", .bundle = bundle, .manifest_id = manifest};
    ASSERT_TRUE(hub->deployments->put(events::deploymentKey(cluster, "ws", bundle), events::encode(r).dump()).ok());
  };
  record("c1", "big", id);
  Metrics metrics("agent");
  ManifestSource source(hub->connection, "c1", metrics,
                        {.request_timeout = milliseconds(300),
                         .attempts = 3,
                         .backoff_min = milliseconds(50),
                         .backoff_max = milliseconds(100)});
  auto early = source.get(id);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().kind, ErrorKind::kTransient) << early.error().describe();
  EXPECT_EQ(metrics.value("manifest_fetch_retries_total"), 2);
  EXPECT_EQ(metrics.value("manifest_fetches_total", {{"result", "failed"}}), 1);

  Metrics hub_metrics("scheduler");
  scheduler::ManifestServer manifests(hub->connection, hub->deployments, hub->status, hub->manifests, hub_metrics);
  ASSERT_TRUE(manifests.start().ok());
  auto loaded = source.get(id);
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  EXPECT_TRUE(*loaded == data);
  const double chunks = hub_metrics.value("manifest_requests_total", {{"result", "ok"}});
  EXPECT_EQ(chunks, static_cast<double>((data.size() + hub->connection->maxPayload() - scheduler::kChunkHeadroom - 1) /
                                        (hub->connection->maxPayload() - scheduler::kChunkHeadroom)));
  EXPECT_GE(chunks, 5);
  EXPECT_EQ(metrics.value("manifest_bytes_received_total"), static_cast<double>(data.size()));

  std::string theirs = model::manifestID("[]");
  ASSERT_TRUE(hub->manifests->put(events::manifestObjectName(theirs), "[]").ok());
  record("c2", "app", theirs);
  auto foreign = source.get(theirs);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.error().kind, ErrorKind::kTransient);
  EXPECT_NE(foreign.error().message.find("NotDeployed"), std::string::npos) << foreign.error().message;
  std::string missing(64, 'b');
  record("c1", "lost", missing);
  Result<std::string> lost = fail(ErrorKind::kInternal, "not asked yet");
  ASSERT_TRUE(eventually(
      [&] {
        lost = source.get(missing);
        return !lost.ok() && lost.error().kind == ErrorKind::kNotFound;
      },
      seconds(10)))
      << lost.error().describe();
  manifests.stop();
}

// An agent applies a manifest larger than one NATS message: it comes from the hub in several chunks.
TEST_F(AgentTest, AppliesAManifestOfSeveralMiBFromTheHub) {
  startRegisteredAgent();
  std::string ns = unique("big");
  std::string bundle = unique("bundle");
  std::vector<Json> objects;
  for (int i = 0; i < 4; ++i) {
    objects.push_back(configMap("big-" + std::to_string(i), "", {{"k", std::string(700 * 1024, 'a' + i)}}));
  }
  auto event = deploy(bundle, putManifest(objects), Json::obj({{"defaultNamespace", ns}}));
  auto status = status_.waitForState(bundle, "Ready");
  ASSERT_TRUE(status) << "no Ready status";
  EXPECT_EQ(status->deployment_id, event.deployment_id);
  EXPECT_EQ(dataOf(ns, "big-3", "k"), std::string(700 * 1024, 'd'));
  EXPECT_GE(hub_metrics_.value("manifest_requests_total", {{"result", "ok"}}), 3);
  EXPECT_EQ(metric("manifest_fetches_total", {{"result", "ok"}}), 1);
}

// An empty manifest never prunes a bundle to nothing: the objects stay, the state says why.
TEST_F(AgentTest, EmptyManifestDoesNotPruneEverything) {
  startRegisteredAgent();
  std::string ns = unique("empty");
  std::string bundle = unique("bundle");
  Json options = Json::obj({{"defaultNamespace", ns}});
  deploy(bundle, putManifest({configMap("a", "", {})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  deploy(bundle, putManifest({}), options);
  auto status = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "OutOfSync");
  EXPECT_EQ(status->reason, "PruneToEmptyRefused");
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "a"));
  EXPECT_EQ(metric("prune_to_empty_refused_total"), 1);
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->objects.size(), 1u);  // still owned, so an explicit delete removes it
  deploy(bundle, "", Json::object(), true);
  ASSERT_TRUE(status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.reason == "Deleted"; }));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "a"));
}

// An inventory that does not decode is replaced (counted and logged); nothing is pruned from it.
TEST_F(AgentTest, UnreadableInventoryIsReplaced) {
  startRegisteredAgent();
  std::string ns = unique("inv");
  std::string bundle = unique("bundle");
  Json broken = inventoryConfigMap(Inventory{.workspace = workspace_, .bundle = bundle}, agent_namespace_);
  broken["data"][kInventoryDataKey] = "{not json";
  ASSERT_TRUE(kube_->apply(namespaceObject(agent_namespace_), kube::ApplyOptions{.field_manager = "test"}).ok());
  ASSERT_TRUE(kube_->apply(broken, kube::ApplyOptions{.field_manager = "test"}).ok());
  deploy(bundle, putManifest({configMap("a", "", {})}), Json::obj({{"defaultNamespace", ns}}));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  EXPECT_EQ(metric("inventory_invalid_total"), 1);
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->objects.size(), 1u);
}

// A CRD that never becomes Established (its names clash with another CRD) is waited for only --crd-timeout;
// its custom resources then fail and the bundle is ErrApplied, without blocking the agent.
TEST_F(AgentTest, CrdNotEstablishedInTimeFailsItsResources) {
  startResponder();
  AgentOptions options = agentOptions();
  options.crd_timeout = milliseconds(1500);
  startAgent(nullptr, true, options);
  std::string group = randomHex(4) + ".example.com";
  ASSERT_NO_FATAL_FAILURE(applyEstablishedCrd(group, "widgets", "Widget"));
  // Same kind under another plural: the API server never accepts its names.
  std::string bundle = unique("bundle");
  Json clash = crd(group, "gizmos", "Widget");
  Json resource =
      Json::obj({{"apiVersion", group + "/v1"}, {"kind", "Gizmo"}, {"metadata", Json::obj({{"name", "g"}})}});
  deploy(bundle, putManifest({clash, resource}), Json::object());
  auto status = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "ErrApplied");
  EXPECT_NE(status->message.find("Gizmo/g"), std::string::npos) << status->message;
  EXPECT_EQ(metric("crd_wait_timeouts_total"), 1);
  for (const char* plural : {"widgets", "gizmos"}) {
    (void)kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", std::string(plural) + "." + group);
  }
}

// A status that cannot be stored (no stream) is retried a few times, counted, and reported as transient.
TEST(StatusPublisherTest, FailedPublishIsCountedAndTransient) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto conn = bus::Connection::connect({.servers = {(*server)->url()}, .name = "status-publisher-test"});
  ASSERT_TRUE(conn.ok());
  auto js = bus::JetStream::create(*conn, bus::JetStreamOptions{.api_timeout = milliseconds(300)});
  ASSERT_TRUE(js.ok());
  Metrics metrics("agent");
  StatusPublisher publisher(*js, "c1", metrics);
  auto published = publisher.publish(events::StatusEvent{.bundle = "b", .state = "Ready"});
  ASSERT_FALSE(published.ok());
  EXPECT_EQ(published.error().kind, ErrorKind::kTransient);
  EXPECT_EQ(metrics.value("status_publish_failures_total"), 3);
  // Report counters grow and never repeat.
  int64_t first = publisher.nextSequence("b");
  EXPECT_GT(publisher.nextSequence("b"), first);
}

// An older generation than the last one handled is acked without touching anything.
TEST_F(AgentTest, StaleGenerationIsIgnored) {
  startRegisteredAgent();
  std::string ns = unique("stale");
  std::string bundle = unique("bundle");
  Json options = Json::obj({{"defaultNamespace", ns}});
  auto old_event = deploy(bundle, putManifest({configMap("old", "", {})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  auto new_event = deploy(bundle, putManifest({configMap("new", "", {})}), options);
  ASSERT_TRUE(status_.waitFor(
      bundle, [&](const events::StatusEvent& s) { return s.deployment_id == new_event.deployment_id; }));
  events::DeployEvent replay = old_event;
  replay.id = "replay-" + old_event.id;  // the old event again, past the duplicate filter
  publish(replay);
  ASSERT_TRUE(eventually([&] { return metric("deploys_total", {{"outcome", "stale"}}) == 1; }, seconds(10)));
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "old"));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "new"));
}

// A deploy whose bundle record already holds a newer generation and no longer references its manifest (quick
// commits: the newer DeployEvents are published before the record moves on) is skipped at once on the hub's
// Superseded answer, not retried until it runs out.
TEST_F(AgentTest, SupersededDeployIsSkippedAtOnce) {
  startRegisteredAgent();
  std::string ns = unique("superseded");
  std::string bundle = unique("bundle");
  Json options = Json::obj({{"defaultNamespace", ns}});
  auto older = makeEvent(bundle, putManifest({configMap("older", "", {})}), options);
  // The record moves on twice: the hub still serves the manifest just before the latest (a rollout), not older ones.
  makeEvent(bundle, putManifest({configMap("middle", "", {})}), options);
  auto newer = makeEvent(bundle, putManifest({configMap("newer", "", {})}), options);
  publish(older);
  ASSERT_TRUE(eventually([&] { return metric("deploys_total", {{"outcome", "stale"}}) == 1; }, seconds(10)));
  EXPECT_EQ(metric("manifest_fetches_total", {{"result", "superseded"}}), 1);
  EXPECT_EQ(metric("manifest_fetch_retries_total"), 0);
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "older"));
  publish(newer);
  ASSERT_TRUE(
      status_.waitFor(bundle, [&](const events::StatusEvent& s) { return s.deployment_id == newer.deployment_id; }));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "newer"));
}

// An API server that cannot be reached is waited out: the message is parked and re-run with backoff, kept alive
// with in-progress acks, so it uses no delivery (it is never terminated for it), and no status is invented.
TEST_F(AgentTest, UnreachableApiServerWaitsWithoutUsingDeliveries) {
  startResponder();
  std::shared_ptr<kube::KubeClient> unreachable;
  ASSERT_NO_FATAL_FAILURE(makeUnreachableKubeClient(unreachable));
  startAgent(unreachable);
  std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("a", "default", {})}), Json::object());
  ASSERT_TRUE(eventually(
      [&] {
        return metric("settled_total", {{"consumer", "deploy"}, {"action", "wait"}}) >= 2;
      },
      seconds(30)));
  EXPECT_GE(metric("deploy_retries_total", {{"step", "inventory"}}), 2);
  EXPECT_EQ(metric("settled_total", {{"consumer", "deploy"}, {"action", "nak"}}), 0);
  auto info = js_->consumerInfo(service::kDeployStream, consumerName(cluster_name_));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->num_redelivered, 0);
  EXPECT_TRUE(status_.all(bundle).empty());
}

// The real binary: flags, /readyz once registered, a deploy end to end, clean exit on SIGTERM.
TEST_F(AgentTest, BinaryServesReadyzAppliesAndExitsCleanly) {
  startResponder();
  auto dir = makeTempDir("agent-bin");
  ASSERT_TRUE(dir.ok());
  std::string log_file = *dir + "/agent.log";
  auto process = Process::start(
      {.argv = {FLOTILLA_AGENT_BINARY, "--cluster-name", cluster_name_, "--kubeconfig", cluster_->kubeconfigPath(),
                "--labels", "env=cluster1", "--nats-url", server_->url(), "--http-addr", "127.0.0.1:0", "--log-level",
                "info", "--agent-namespace", agent_namespace_, "--resync-interval", "1s"},
       .output_file = log_file});
  ASSERT_TRUE(process.ok()) << process.error().describe();
  int http_port = 0;
  ASSERT_TRUE(eventually(
      [&] {
        auto text = readFile(log_file);
        if (!text.ok()) {
          return false;
        }
        for (const auto& line : split(*text, '\n')) {
          auto json = Json::parse(line);
          if (json.ok() && json->getString("msg") == "service started") {
            http_port = static_cast<int>(json->getInt("http_port"));
            return true;
          }
        }
        return false;
      },
      seconds(20)));
  auto readyz = [&] {
    auto result = runCommand({.argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                       "http://127.0.0.1:" + std::to_string(http_port) + "/readyz"},
                              .timeout = seconds(5)});
    return result.ok() ? result->out : std::string();
  };
  EXPECT_TRUE(eventually([&] { return readyz() == "200"; }, seconds(30))) << readFile(log_file).valueOr("");
  std::string ns = unique("bin");
  std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("a", "", {{"k", "v"}})}), Json::obj({{"defaultNamespace", ns}}));
  EXPECT_TRUE(status_.waitForState(bundle, "Ready")) << readFile(log_file).valueOr("");
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "a"));
  int exit_code = process->stop(seconds(10));
  EXPECT_EQ(exit_code, 0) << readFile(log_file).valueOr("");
  removeAll(*dir);
}

// A deploy that kills the agent every time it is handled (each "process" takes it and dies without settling it)
// is terminated on the delivery after the maximum, reported to the hub on the cluster's status subject (the
// scheduler stores it), and the agent keeps applying other deploys.
TEST_F(AgentTest, APoisonDeployIsTerminatedAndReportedWhileOthersApply) {
  startResponder();
  // The hub's durable with an ack wait of 1s and 2 deliveries (max_deliver 3: the runtime's extra one); the agent
  // takes both from it.
  bus::ConsumerConfig config = service::agentDeployConsumer(cluster_name_, seconds(1), 2);
  ASSERT_TRUE(js_->ensureConsumer(service::kDeployStream, config).ok());
  auto crashing = js_->bindPull(service::kDeployStream, config.durable);
  ASSERT_TRUE(crashing.ok());
  std::string ns = unique("app");
  std::string poison = unique("poison");
  auto poison_event =
      deploy(poison, putManifest({configMap("p", "", {{"k", "v"}})}), Json::obj({{"defaultNamespace", ns}}));
  for (int crash = 1; crash <= 2; ++crash) {
    auto batch = crashing->fetch(1, seconds(10));
    ASSERT_TRUE(batch.ok());
    ASSERT_EQ(batch->size(), 1u) << "delivery " << crash;
  }
  crashing = bus::PullConsumer();
  startAgent();
  // The report, on flotilla.status.<cluster>.= (where the agent may publish).
  std::optional<events::MessageTerminated> report;
  ASSERT_TRUE(eventually(
      [&] {
        auto info = js_->streamInfo(service::kStatusStream);
        for (uint64_t seq = 1; info.ok() && seq <= info->last_sequence && !report; ++seq) {
          auto message = js_->getMessage(service::kStatusStream, seq);
          auto json = message.ok() ? Json::parse(message->data()) : Result<Json>(fail(ErrorKind::kNotFound, ""));
          if (json.ok() && json->getString("kind") == events::MessageTerminated::kKind) {
            report = events::decodeMessageTerminated(*json).value();
            EXPECT_EQ(message->subject(), events::statusSubject(cluster_name_, ""));
          }
        }
        return report.has_value();
      },
      seconds(20)));
  EXPECT_EQ(report->reason, events::kTerminatedExhausted);
  EXPECT_EQ(report->consumer, consumerName(cluster_name_));
  EXPECT_EQ(report->msg_id, poison_event.id);
  EXPECT_EQ(metric("messages_terminated_total",
                   {{"consumer", "deploy"}, {"reason", std::string(events::kTerminatedExhausted)}}),
            1);
  EXPECT_FALSE(inventory(poison));
  // Still serving.
  std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("ok", "", {{"k", "v"}})}), Json::obj({{"defaultNamespace", ns}}));
  EXPECT_TRUE(status_.waitForState(bundle, "Ready"));
}

}  // namespace
}  // namespace flotilla::agent
