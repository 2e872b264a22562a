// Integration tests of the agent against a real nats-server -js and a real kube-apiserver (tests/harness).
// The scheduler is played by the test: a NATS responder answers flotilla.register, the test puts manifests in
// the object store and publishes DeployEvents, and reads StatusEvents back from FLOTILLA_STATUS. Tests share
// one kube-apiserver per process; each uses its own cluster name, agent namespace, bundles and namespaces.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/agent/agent.h"
#include "flotilla/agent/health.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/identity.h"
#include "flotilla/service/hub.h"

namespace flotilla::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string unique(const std::string& prefix) {
  return prefix + "-" + randomHex(4);
}

bool eventually(const std::function<bool()>& condition, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return condition();
}

Json configMap(const std::string& name, const std::string& ns, std::map<std::string, Json> data) {
  Json o = Json::obj({{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", Json::obj({{"name", name}})}});
  if (!ns.empty()) {
    o["metadata"]["namespace"] = ns;
  }
  for (auto& [k, v] : data) {
    o["data"][k] = v;
  }
  return o;
}

Json namespaceObject(const std::string& name) {
  return Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", name}})}});
}

//! Reads StatusEvents (and counts heartbeats) of one cluster from FLOTILLA_STATUS.
class StatusReader {
 public:
  Status open(const std::shared_ptr<bus::JetStream>& js, const std::string& cluster) {
    js_ = js;
    durable_ = unique("status-reader");
    auto ensured =
        js->ensureConsumer(service::kStatusStream,
                           bus::ConsumerConfig{.durable = durable_, .filter_subject = events::statusFilter(cluster)});
    FLOTILLA_TRY(ensured);
    auto bound = js->bindPull(service::kStatusStream, durable_);
    FLOTILLA_TRY(bound);
    consumer_ = std::move(bound).value();
    return {};
  }
  ~StatusReader() {
    if (js_) {
      (void)js_->deleteConsumer(service::kStatusStream, durable_);
    }
  }

  void drain(milliseconds wait = milliseconds(100)) {
    auto batch = consumer_.fetch(50, wait);
    if (!batch.ok()) {
      return;
    }
    for (auto& message : *batch) {
      (void)message.ack();
      auto json = Json::parse(message.data());
      if (!json.ok()) {
        continue;
      }
      auto kind = events::payloadKind(*json);
      if (kind.ok() && *kind == "Heartbeat") {
        ++heartbeats_;
        heartbeat_subjects_.insert(std::string(message.subject()));
        continue;
      }
      auto status = events::decodePayload<events::StatusEvent>(*json);
      if (status.ok()) {
        statuses_.push_back(*status);
        msg_ids_.push_back(message.header("Nats-Msg-Id").value_or(""));
      }
    }
  }

  //! Waits for a new StatusEvent of `bundle` (after the ones already consumed by earlier waits) matching `pred`.
  std::optional<events::StatusEvent> waitFor(const std::string& bundle,
                                             const std::function<bool(const events::StatusEvent&)>& pred,
                                             milliseconds timeout = seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (; seen_ < statuses_.size(); ++seen_) {
        if (statuses_[seen_].bundle == bundle && pred(statuses_[seen_])) {
          return statuses_[seen_++];
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return std::nullopt;
      }
      drain(milliseconds(200));
    }
  }
  std::optional<events::StatusEvent> waitForState(const std::string& bundle, const std::string& state,
                                                  milliseconds timeout = seconds(60)) {
    return waitFor(
        bundle, [&](const events::StatusEvent& s) { return s.state == state; }, timeout);
  }
  //! Every status seen so far for `bundle`.
  std::vector<events::StatusEvent> all(const std::string& bundle) {
    drain();
    std::vector<events::StatusEvent> out;
    for (const auto& s : statuses_) {
      if (s.bundle == bundle) {
        out.push_back(s);
      }
    }
    return out;
  }
  int heartbeats() {
    drain();
    return heartbeats_;
  }
  const std::set<std::string>& heartbeatSubjects() const { return heartbeat_subjects_; }
  const std::vector<std::string>& msgIds() const { return msg_ids_; }

 private:
  std::shared_ptr<bus::JetStream> js_;
  std::string durable_;
  bus::PullConsumer consumer_;
  std::vector<events::StatusEvent> statuses_;
  std::vector<std::string> msg_ids_;
  size_t seen_ = 0;
  int heartbeats_ = 0;
  std::set<std::string> heartbeat_subjects_;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto nats = harness::sharedNatsServer();
    ASSERT_TRUE(nats.ok()) << nats.error().describe();
    nats_ = *nats;
    auto clusters = harness::sharedKubeClusters(1);
    ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
    cluster_ = (*clusters)[0];
    auto conn = bus::Connection::connect({.servers = {nats_->url()}, .name = "agent-test"});
    ASSERT_TRUE(conn.ok()) << conn.error().describe();
    conn_ = *conn;
    auto js = bus::JetStream::create(conn_);
    ASSERT_TRUE(js.ok());
    js_ = *js;
    auto topology = service::ensureTopology(*js_);
    ASSERT_TRUE(topology.ok()) << topology.error().describe();
    auto manifests = bus::ObjectStore::open(js_, service::kManifestsObjects, true);
    ASSERT_TRUE(manifests.ok()) << manifests.error().describe();
    manifests_ = *manifests;
    kube_ = newKubeClient();
    ASSERT_NE(kube_, nullptr);

    cluster_name_ = unique("c");
    agent_namespace_ = unique("fa");
    workspace_ = "fleet-default";
    ASSERT_TRUE(status_.open(js_, cluster_name_).ok());
  }

  void TearDown() override {
    stopAgent();
    responder_.unsubscribe();
    if (HasFailure() && cluster_ != nullptr) {
      auto health = cluster_->healthy();
      if (!health.ok()) {
        std::fprintf(stderr, "%s\n", health.error().message.c_str());
      }
    }
  }

  std::shared_ptr<kube::KubeClient> newKubeClient() {
    auto config = kube::Kubeconfig::load(cluster_->kubeconfigPath());
    EXPECT_TRUE(config.ok());
    auto client = kube::KubeClient::create(*config);
    EXPECT_TRUE(client.ok());
    return client.ok() ? std::shared_ptr<kube::KubeClient>(std::move(client).value()) : nullptr;
  }

  //! Answers flotilla.register for this test's cluster (plays the scheduler).
  void startResponder(bool accept = true) {
    auto sub = conn_->subscribe(events::kRegisterSubject, "", [this, accept](bus::Message message) {
      auto request = events::parsePayload<events::RegisterRequest>(message.data());
      if (!request.ok() || request->cluster != cluster_name_) {
        return;
      }
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(*request);
      }
      events::RegisterReply reply{.id = events::newEventId(),
                                  .time = log::nowRfc3339(),
                                  .accepted = accept,
                                  .message = accept ? "" : "not today",
                                  .cluster_id = request->cluster};
      (void)conn_->publish(message.reply(), events::encode(reply).dump());
    });
    ASSERT_TRUE(sub.ok()) << sub.error().describe();
    responder_ = std::move(sub).value();
    ASSERT_TRUE(conn_->flush().ok());
  }

  AgentOptions agentOptions() {
    AgentOptions options;
    options.cluster_name = cluster_name_;
    options.workspace = workspace_;
    options.labels = {{"env", "cluster1"}};
    options.agent_namespace = agent_namespace_;
    options.heartbeat_interval = milliseconds(500);
    options.resync_interval = milliseconds(500);
    options.crd_timeout = seconds(30);
    options.register_backoff_min = milliseconds(100);
    options.register_backoff_max = milliseconds(500);
    options.fetch_timeout = milliseconds(200);
    options.retry = DeployHandlerOptions{.retry_base = milliseconds(200), .retry_max = milliseconds(2000)};
    return options;
  }

  void startAgent(std::shared_ptr<kube::KubeClient> kube = nullptr, bool wait_ready = true, bool lazy_manifests = false,
                  std::optional<AgentOptions> custom = std::nullopt) {
    metrics_ = std::make_unique<Metrics>("agent");
    auto agent = Agent::create(custom ? *custom : agentOptions(), js_, lazy_manifests ? nullptr : manifests_,
                               kube ? kube : newKubeClient(), *metrics_);
    ASSERT_TRUE(agent.ok()) << agent.error().describe();
    agent_ = std::move(agent).value();
    agent_->start();
    if (wait_ready) {
      std::string why;
      ASSERT_TRUE(eventually([&] { return agent_->ready(why); }, seconds(30))) << why;
    }
  }

  //! The usual start: registration answered, agent ready.
  void startRegisteredAgent() {
    startResponder();
    startAgent();
  }

  void stopAgent() {
    if (agent_) {
      agent_->stop();
      agent_.reset();
    }
  }

  //! Stores `objects` as a manifest; returns its manifestID.
  std::string putManifest(const std::vector<Json>& objects) {
    Json array = Json::array();
    for (const auto& o : objects) {
      array.push(o);
    }
    return putManifestBytes(array.dump());
  }
  std::string putManifestBytes(const std::string& data) {
    std::string id = model::manifestID(data);
    auto put = manifests_->put(events::manifestObjectName(id), data);
    EXPECT_TRUE(put.ok()) << put.error().describe();
    return id;
  }

  //! Publishes an apply (or delete) DeployEvent; returns it.
  events::DeployEvent deploy(const std::string& bundle, const std::string& manifest_id, Json options,
                             bool remove = false) {
    events::DeployEvent event{.time = log::nowRfc3339(),
                              .cluster = cluster_name_,
                              .workspace = workspace_,
                              .bundle = bundle,
                              .remove = remove,
                              .deployment_id = manifest_id.empty() ? "" : model::deploymentID(manifest_id, options),
                              .manifest_id = manifest_id,
                              .options = options,
                              .generation = ++generations_[bundle]};
    event.id = events::deployMsgId(cluster_name_, bundle, remove ? "deleted" : event.deployment_id, event.generation);
    publish(event);
    return event;
  }
  void publish(const events::DeployEvent& event) {
    auto ack = js_->publish(events::deploySubject(cluster_name_), events::encode(event).dump(), event.id);
    ASSERT_TRUE(ack.ok()) << ack.error().describe();
  }

  Result<Json> get(const std::string& api_version, const std::string& kind, const std::string& ns,
                   const std::string& name) {
    return kube_->get(api_version, kind, ns, name);
  }
  bool exists(const std::string& api_version, const std::string& kind, const std::string& ns, const std::string& name) {
    return get(api_version, kind, ns, name).ok();
  }
  //! Gone, or being deleted (a Namespace stays Terminating without the namespace controller).
  bool goneOrDeleting(const std::string& api_version, const std::string& kind, const std::string& ns,
                      const std::string& name) {
    auto live = get(api_version, kind, ns, name);
    if (!live.ok()) {
      return live.error().kind == ErrorKind::kNotFound;
    }
    return live->at({"metadata", "deletionTimestamp"}) != nullptr;
  }
  std::optional<Inventory> inventory(const std::string& bundle) {
    InventoryStore store(*kube_, agent_namespace_);
    auto loaded = store.load(workspace_, bundle);
    EXPECT_TRUE(loaded.ok()) << loaded.error().describe();
    return loaded.ok() ? *loaded : std::nullopt;
  }
  double metric(const std::string& name, const prometheus::Labels& labels = {}) {
    return metrics_->value(name, labels);
  }

  harness::NatsServer* nats_ = nullptr;
  harness::KubeCluster* cluster_ = nullptr;
  std::shared_ptr<bus::Connection> conn_;
  std::shared_ptr<bus::JetStream> js_;
  std::shared_ptr<bus::ObjectStore> manifests_;
  std::shared_ptr<kube::KubeClient> kube_;
  std::string cluster_name_;
  std::string agent_namespace_;
  std::string workspace_;
  StatusReader status_;
  bus::Subscription responder_;
  std::mutex mutex_;
  std::vector<events::RegisterRequest> requests_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Agent> agent_;
  std::map<std::string, int64_t> generations_;
};

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
  EXPECT_GE(metric("heartbeats_total"), 2);
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
  EXPECT_EQ(metric("deploys_total", {{"outcome", "skipped"}}), 1);
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
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "drop"));
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
  Json crd = Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.)" +
                         group + R"("},
    "spec":{"group":")" + group +
                         R"(","scope":"Namespaced",
      "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
      "versions":[{"name":"v1","served":true,"storage":true,
        "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
          "properties":{"size":{"type":"integer"}}}}}}}]}})")
                 .value();
  Json widget = Json::obj({{"apiVersion", group + "/v1"},
                           {"kind", "Widget"},
                           {"metadata", Json::obj({{"name", "w1"}})},
                           {"spec", Json::obj({{"size", 3}})}});
  // The manifest lists the custom resource first: the agent's staging, not the manifest order, must win.
  deploy(bundle, putManifest({widget, crd, namespaceObject(ns)}), Json::obj({{"defaultNamespace", ns}}));
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
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "a"));
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "b"));
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

  // A new instance with a new Kubernetes client and its own handle on the manifests store: nothing in memory.
  startAgent(nullptr, /*wait_ready=*/true, /*lazy_manifests=*/true);
  auto reseeded = status_.waitForState(bundle, "Ready", seconds(20));
  EXPECT_TRUE(reseeded) << "the restarted agent did not re-report the bundle it found";
  auto next = deploy(bundle, putManifest({configMap("a", "", {})}), options);
  auto status =
      status_.waitFor(bundle, [&](const events::StatusEvent& s) { return s.deployment_id == next.deployment_id; });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->state, "Ready") << status->message;
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "a"));
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "b"));
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "c"));
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
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "own"));
}

// A Deployment stays NotReady without controllers; when its status says it is available the resync reports
// Ready without a new deploy event.
TEST_F(AgentTest, ResyncReportsNotReadyToReady) {
  startRegisteredAgent();
  std::string ns = unique("rs");
  std::string bundle = unique("bundle");
  Json deployment = Json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
    "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
      "spec":{"containers":[{"name":"c","image":"nginx"}]}}}})")
                        .value();
  deploy(bundle, putManifest({deployment, configMap("cfg", "", {})}), Json::obj({{"defaultNamespace", ns}}));
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
  // Counted right after the publish returns, which may be a moment after the reader saw the event.
  EXPECT_TRUE(eventually([&] { return metric("resync_state_changes_total") >= 1; }, seconds(5)));
}

// dependsOn: a bundle whose dependency is not deployed yet reports WaitApplied (once) and applies nothing; once
// the dependency is Ready, the redelivered event applies.
TEST_F(AgentTest, DependsOnWaitsForTheDependency) {
  startRegisteredAgent();
  std::string ns = unique("dep");
  std::string infra = unique("infra");
  std::string app = unique("app");
  Json options = Json::obj({{"defaultNamespace", ns}});
  events::DeployEvent event{.cluster = cluster_name_,
                            .workspace = workspace_,
                            .bundle = app,
                            .manifest_id = putManifest({configMap("app", "", {})}),
                            .options = options,
                            .depends_on = Json(Json::Array{Json::obj({{"name", infra}})}),
                            .generation = ++generations_[app]};
  event.deployment_id = model::deploymentID(event.manifest_id, options);
  event.id = events::deployMsgId(cluster_name_, app, event.deployment_id, event.generation);
  event.time = log::nowRfc3339();
  publish(event);
  auto waiting = status_.waitFor(app, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "WaitApplied");
  EXPECT_EQ(waiting->reason, "DependenciesNotReady");
  EXPECT_NE(waiting->message.find("bundle " + infra + " is not deployed"), std::string::npos) << waiting->message;
  ASSERT_TRUE(eventually([&] { return metric("dependency_waits_total") >= 2; }, seconds(10)));
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "app"));
  EXPECT_EQ(status_.all(app).size(), 1u) << "WaitApplied must be reported once, not per redelivery";

  deploy(infra, putManifest({configMap("infra", "", {})}), options);
  ASSERT_TRUE(status_.waitForState(infra, "Ready"));
  auto ready = status_.waitForState(app, "Ready", seconds(30));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->deployment_id, event.deployment_id);
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "app"));
}

// An agent may start before the hub has created the manifests bucket: it opens it on first use, and until then
// a deploy is a transient failure (retried), not an invalid manifest.
TEST(ManifestSourceTest, OpensTheBucketOnFirstUse) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto conn = bus::Connection::connect({.servers = {(*server)->url()}, .name = "manifest-source-test"});
  ASSERT_TRUE(conn.ok());
  auto js = bus::JetStream::create(*conn);
  ASSERT_TRUE(js.ok());
  ManifestSource source(*js);
  auto early = source.get(std::string(64, 'a'));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().kind, ErrorKind::kTransient) << early.error().describe();
  auto store = bus::ObjectStore::open(*js, service::kManifestsObjects, true);
  ASSERT_TRUE(store.ok());
  std::string data = "[]";
  std::string id = model::manifestID(data);
  ASSERT_TRUE((*store)->put(events::manifestObjectName(id), data).ok());
  auto loaded = source.get(id);
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  EXPECT_EQ(*loaded, data);
  EXPECT_EQ(source.get(std::string(64, 'b')).error().kind, ErrorKind::kNotFound);
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
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "a"));
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
  startAgent(nullptr, true, false, options);
  std::string group = randomHex(4) + ".example.com";
  auto crd = [&](const std::string& plural, const std::string& kind) {
    return Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
      "metadata":{"name":")" +
                       plural + "." + group + R"("},
      "spec":{"group":")" +
                       group + R"(","scope":"Cluster",
        "names":{"plural":")" +
                       plural + R"(","kind":")" + kind + R"("},
        "versions":[{"name":"v1","served":true,"storage":true,
          "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})")
        .value();
  };
  ASSERT_TRUE(kube_->apply(crd("widgets", "Widget"), kube::ApplyOptions{.field_manager = "test"}).ok());
  ASSERT_TRUE(eventually(
      [&] {
        auto live = get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group);
        return live.ok() && evaluateHealth(*live).ready;  // Established
      },
      seconds(20)));
  // Same kind under another plural: the API server never accepts its names.
  std::string bundle = unique("bundle");
  Json clash = crd("gizmos", "Widget");
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
  EXPECT_FALSE(exists("v1", "ConfigMap", ns, "old"));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns, "new"));
}

// An API server that cannot be reached is waited out: the message is parked and re-run with backoff, kept alive
// with in-progress acks, so it uses no delivery (it is never terminated for it), and no status is invented.
TEST_F(AgentTest, UnreachableApiServerWaitsWithoutUsingDeliveries) {
  startResponder();
  auto port = harness::freeTcpPort();
  ASSERT_TRUE(port.ok());
  kube::Kubeconfig config = kube::Kubeconfig::load(cluster_->kubeconfigPath()).value();
  config.server = "https://127.0.0.1:" + std::to_string(*port);
  config.port = std::to_string(*port);
  auto client = kube::KubeClient::create(
      config, kube::KubeClientOptions{.request_timeout = milliseconds(2000), .connect_timeout = milliseconds(500)});
  ASSERT_TRUE(client.ok());
  startAgent(std::shared_ptr<kube::KubeClient>(std::move(client).value()));
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
                "--labels", "env=cluster1", "--nats-url", nats_->url(), "--http-addr", "127.0.0.1:0", "--log-level",
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
  bus::ConsumerConfig config{.durable = consumerName(cluster_name_),
                             .filter_subject = events::deploySubject(cluster_name_),
                             .ack_wait = seconds(1),
                             .max_deliver = 3};
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
  auto options = agentOptions();
  options.max_deliveries = 2;
  options.ack_wait = seconds(1);
  startAgent(nullptr, true, false, options);
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
