// The fixture of the agent's integration tests (agent_integration_test.cpp, handover_integration_test.cpp): a
// real nats-server -js and a real kube-apiserver (tests/harness). The scheduler is played by the test: a NATS
// responder answers flotilla.register, the test puts manifests in the object store, writes the deployment record
// of each DeployEvent it makes (as the scheduler does) and publishes them, and reads StatusEvents back from
// FLOTILLA_STATUS. The agent gets its manifests from the scheduler's real ManifestServer, which reads those records.
// Tests share one kube-apiserver per process; each uses its own cluster name, agent namespace, bundles and namespaces.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bus_test_util.h"
#include "flotilla/agent/agent.h"
#include "flotilla/agent/health.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/identity.h"
#include "flotilla/scheduler/manifest_server.h"
#include "flotilla/service/hub.h"

namespace flotilla::agent::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

inline std::string unique(const std::string& prefix) {
  return prefix + "-" + randomHex(4);
}

inline bool eventually(const std::function<bool()>& condition, milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return condition();
}

inline Json configMap(const std::string& name, const std::string& ns, std::map<std::string, Json> data) {
  Json o = Json::obj({{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", Json::obj({{"name", name}})}});
  if (!ns.empty()) {
    o["metadata"]["namespace"] = ns;
  }
  for (auto& [k, v] : data) {
    o["data"][k] = v;
  }
  return o;
}

//! Deployment `name` with one nginx pod labelled app=web. It stays NotReady: no controller runs against the test
//! API server.
inline Json webDeployment(const std::string& name = "web") {
  Json object = Json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
    "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
      "spec":{"containers":[{"name":"c","image":"nginx"}]}}}})")
                    .value();
  object["metadata"]["name"] = Json(name);
  return object;
}

inline Json namespaceObject(const std::string& name) {
  return Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", name}})}});
}

//! A cluster-scoped CRD `<plural>.<group>` of `kind`, version v1, any fields accepted.
inline Json crd(const std::string& group, const std::string& plural, const std::string& kind) {
  Json schema =
      Json::obj({{"openAPIV3Schema", Json::obj({{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}})}});
  Json version = Json::obj({{"name", "v1"}, {"served", true}, {"storage", true}, {"schema", std::move(schema)}});
  return Json::obj({{"apiVersion", "apiextensions.k8s.io/v1"},
                    {"kind", "CustomResourceDefinition"},
                    {"metadata", Json::obj({{"name", plural + "." + group}})},
                    {"spec", Json::obj({{"group", group},
                                        {"scope", "Cluster"},
                                        {"names", Json::obj({{"plural", plural}, {"kind", kind}})},
                                        {"versions", Json(Json::Array{std::move(version)})}})}});
}

//! What a DeployEvent says about its bundle besides the manifest and options.
struct BundleFacts {
  std::string gitrepo;
  int64_t commit_sequence = 0;
  events::StringMap labels;
  Json depends_on = Json::array();
  std::vector<std::string> retiring;  //!< DeployEvent::retiring: bundles being deleted
};

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

  //! Waits for a new StatusEvent of `bundle` (after the ones of `bundle` already consumed by earlier waits)
  //! matching `pred`. Consumed per bundle: the agent applies bundles in parallel, so the reports of different bundles
  //! arrive in any order.
  std::optional<events::StatusEvent> waitFor(const std::string& bundle,
                                             const std::function<bool(const events::StatusEvent&)>& pred,
                                             milliseconds timeout = seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t& seen = seen_[bundle];
    while (true) {
      for (; seen < statuses_.size(); ++seen) {
        if (statuses_[seen].bundle == bundle && pred(statuses_[seen])) {
          return statuses_[seen++];
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
  std::map<std::string, size_t> seen_;  //!< per bundle: statuses_ before this index are consumed
  int heartbeats_ = 0;
  std::set<std::string> heartbeat_subjects_;
};

//! BusTest's connection to the shared nats-server, plus this fixture's cluster, hub storage and manifest server.
class AgentTest : public bus::testing::BusTest {
 protected:
  AgentTest() : BusTest("agent-test") {}

  void setUpBus() override {
    auto clusters = harness::sharedKubeClusters(1);
    ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
    cluster_ = (*clusters)[0];
    auto topology = service::ensureTopology(*js_);
    ASSERT_TRUE(topology.ok()) << topology.error().describe();
    auto manifests = bus::ObjectStore::open(js_, service::kManifestsObjects, true);
    ASSERT_TRUE(manifests.ok()) << manifests.error().describe();
    manifests_ = *manifests;
    auto deployments = bus::KeyValue::ensure(js_, {.bucket = service::kDeploymentsBucket});
    ASSERT_TRUE(deployments.ok()) << deployments.error().describe();
    deployments_ = *deployments;
    auto reports = bus::KeyValue::ensure(js_, {.bucket = service::kStatusBucket});
    ASSERT_TRUE(reports.ok()) << reports.error().describe();
    manifest_server_ =
        std::make_unique<scheduler::ManifestServer>(conn_, deployments_, *reports, manifests_, hub_metrics_);
    ASSERT_TRUE(manifest_server_->start().ok());
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
    if (manifest_server_) {
      manifest_server_->stop();
    }
    if (HasFailure() && cluster_ != nullptr) {
      auto health = cluster_->healthy();
      if (!health.ok()) {
        std::fprintf(stderr, "%s\n", health.error().message.c_str());
      }
    }
    BusTest::TearDown();
  }

  std::shared_ptr<kube::KubeClient> newKubeClient() {
    auto config = kube::Kubeconfig::load(cluster_->kubeconfigPath());
    EXPECT_TRUE(config.ok());
    auto client = kube::KubeClient::create(*config);
    EXPECT_TRUE(client.ok());
    return client.ok() ? std::shared_ptr<kube::KubeClient>(std::move(client).value()) : nullptr;
  }

  //! Plays the scheduler's part of a registration the agent does not: the cluster's deploy durable, created with
  //! the scheduler's defaults unless the test created it first (then its settings stay).
  void ensureAgentDurable() {
    if (!js_->consumerInfo(service::kDeployStream, consumerName(cluster_name_)).ok()) {
      auto created = js_->ensureConsumer(service::kDeployStream, service::agentDeployConsumer(cluster_name_));
      EXPECT_TRUE(created.ok()) << created.error().describe();
    }
  }

  //! Answers flotilla.register.<cluster> for this test's cluster (plays the scheduler).
  void startResponder(bool accept = true) {
    startResponderAsking([accept] { return accept; });
  }
  //! startResponder that asks `accepts` at each registration (for a hub that refuses for a while).
  void startResponderAsking(std::function<bool()> accepts) {
    auto sub = conn_->subscribe(registerSubject(), "", [this, accepts = std::move(accepts)](bus::Message message) {
      auto request = events::parsePayload<events::RegisterRequest>(message.data());
      if (!request.ok() || request->cluster != cluster_name_) {
        return;
      }
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(*request);
      }
      const bool accept = accepts();
      if (accept && create_durable_) {
        ensureAgentDurable();
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

  //! The subject this test's agent registers on.
  [[nodiscard]] std::string registerSubject() const {
    return std::string(events::kRegisterSubject) + "." + events::escapeToken(cluster_name_);
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
    // Released objects are deleted at once (as a plain prune) unless a test asks for a hold.
    options.retry = DeployHandlerOptions{
        .retry_base = milliseconds(200), .retry_max = milliseconds(2000), .release_hold = milliseconds(0)};
    return options;
  }

  //! A client with this cluster's credentials pointed at a free local port where nothing listens (an API server
  //! that cannot be reached), with short timeouts. Callers wrap it in ASSERT_NO_FATAL_FAILURE.
  void makeUnreachableKubeClient(std::shared_ptr<kube::KubeClient>& out) {
    auto port = harness::freeTcpPort();
    ASSERT_TRUE(port.ok());
    kube::Kubeconfig config = kube::Kubeconfig::load(cluster_->kubeconfigPath()).value();
    config.server = "https://127.0.0.1:" + std::to_string(*port);
    config.port = std::to_string(*port);
    auto client = kube::KubeClient::create(
        config, kube::KubeClientOptions{.request_timeout = milliseconds(2000), .connect_timeout = milliseconds(500)});
    ASSERT_TRUE(client.ok());
    out = std::shared_ptr<kube::KubeClient>(std::move(client).value());
  }

  void startAgent(std::shared_ptr<kube::KubeClient> kube = nullptr, bool wait_ready = true,
                  std::optional<AgentOptions> custom = std::nullopt) {
    metrics_ = std::make_unique<Metrics>("agent");
    auto agent = Agent::create(custom ? *custom : agentOptions(), js_, kube ? kube : newKubeClient(), *metrics_);
    ASSERT_TRUE(agent.ok()) << agent.error().describe();
    agent_ = std::move(agent).value();
    ASSERT_TRUE(agent_->start().ok());
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

  //! The scheduler's record of an apply DeployEvent (deployments/<cluster>.<ws>.<bundle>): what lets the agent
  //! get its manifest from the ManifestServer.
  void recordDeployment(const events::DeployEvent& event) {
    events::DeploymentRecord record{.cluster = event.cluster,
                                    .workspace = event.workspace,
                                    .bundle = event.bundle,
                                    .deployment_id = event.deployment_id,
                                    .manifest_id = event.manifest_id,
                                    .options = event.options,
                                    .generation = event.generation,
                                    .updated = event.time};
    auto put = deployments_->put(events::deploymentKey(event.cluster, event.workspace, event.bundle),
                                 events::encode(record).dump());
    EXPECT_TRUE(put.ok()) << put.error().describe();
  }
  //! An apply (or delete) DeployEvent with the next generation of the bundle, not published; an apply's deployment
  //! record is written (the scheduler writes it right after publishing).
  events::DeployEvent makeEvent(const std::string& bundle, const std::string& manifest_id, const Json& options,
                                bool remove = false, const BundleFacts& facts = {}) {
    events::DeployEvent event{.time = log::nowRfc3339(),
                              .cluster = cluster_name_,
                              .workspace = workspace_,
                              .bundle = bundle,
                              .remove = remove,
                              .deployment_id = manifest_id.empty() ? "" : model::deploymentID(manifest_id, options),
                              .manifest_id = manifest_id,
                              .options = options,
                              .depends_on = facts.depends_on,
                              .generation = ++generations_[bundle],
                              .gitrepo = facts.gitrepo,
                              .commit_sequence = facts.commit_sequence,
                              .labels = facts.labels,
                              .retiring = facts.retiring};
    event.id = events::deployMsgId(cluster_name_, bundle, remove ? "deleted" : event.deployment_id, event.generation);
    if (!remove && !manifest_id.empty()) {
      recordDeployment(event);
    }
    return event;
  }
  //! Publishes an apply (or delete) DeployEvent; returns it.
  events::DeployEvent deploy(const std::string& bundle, const std::string& manifest_id, Json options,
                             bool remove = false, const BundleFacts& facts = {}) {
    auto event = makeEvent(bundle, manifest_id, options, remove, facts);
    publish(event);
    return event;
  }
  //! metadata.uid of a live object ("" when it cannot be read).
  std::string uidOf(const std::string& api_version, const std::string& kind, const std::string& ns,
                    const std::string& name) {
    auto live = get(api_version, kind, ns, name);
    const Json* uid = live.ok() ? live->at({"metadata", "uid"}) : nullptr;
    return uid != nullptr && uid->isString() ? uid->asString() : std::string();
  }
  //! The owner annotation of a live object ("" when it has none or cannot be read).
  std::string ownerOfLive(const std::string& api_version, const std::string& kind, const std::string& ns,
                          const std::string& name) {
    auto live = get(api_version, kind, ns, name);
    return live.ok() ? ownerAnnotation(*live) : std::string();
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
  //! True only when the API server answers NotFound. Any other failed read is not "gone": it fails the test (with
  //! the error) and returns false, so an absence check never passes on an unreachable server or a denied read.
  bool absent(const std::string& api_version, const std::string& kind, const std::string& ns, const std::string& name) {
    auto live = get(api_version, kind, ns, name);
    if (live.ok()) {
      return false;
    }
    if (live.error().kind == ErrorKind::kNotFound) {
      return true;
    }
    ADD_FAILURE() << "reading " << api_version << " " << kind << " " << ns << "/" << name << ": "
                  << live.error().describe();
    return false;
  }
  //! A new namespace made by the test (so it existed before any bundle).
  std::string preexistingNamespace(const std::string& prefix) {
    std::string ns = unique(prefix);
    EXPECT_TRUE(kube_->apply(namespaceObject(ns), kube::ApplyOptions{.field_manager = "test"}).ok());
    return ns;
  }
  //! Applies crd(group, plural, kind) and waits until it is Established. Callers wrap it in ASSERT_NO_FATAL_FAILURE.
  void applyEstablishedCrd(const std::string& group, const std::string& plural, const std::string& kind) {
    ASSERT_TRUE(kube_->apply(crd(group, plural, kind), kube::ApplyOptions{.field_manager = "test"}).ok());
    ASSERT_TRUE(eventually(
        [&] {
          auto live = get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", plural + "." + group);
          return live.ok() && evaluateHealth(*live).ready;  // Established
        },
        seconds(20)));
  }
  //! A merge patch of a ConfigMap's data by `manager` (as `kubectl edit` or a controller would write it).
  Status editData(const std::string& manager, const std::string& ns, const std::string& name, const std::string& key,
                  const Json& value) {
    Json patch = Json::obj({{"data", Json::obj({{key, value}})}});
    auto patched =
        kube_->request("PATCH", "/api/v1/namespaces/" + ns + "/configmaps/" + name + "?fieldManager=" + manager,
                       patch.dump(), "application/merge-patch+json");
    FLOTILLA_TRY(patched);
    return {};
  }
  //! One data key of a live ConfigMap ("" when it or the key is missing).
  std::string dataOf(const std::string& ns, const std::string& name, const std::string& key) {
    auto live = get("v1", "ConfigMap", ns, name);
    const Json* value = live.ok() ? live->at({"data", key}) : nullptr;
    return value != nullptr && value->isString() ? value->asString() : std::string();
  }
  //! Kubernetes Events of `reason` about object `name` in `ns`.
  size_t eventsAbout(const std::string& ns, const std::string& name, const std::string& reason) {
    auto listed = kube_->list("v1", "Event", ns, kube::ListOptions{.field_selector = "involvedObject.name=" + name});
    if (!listed.ok()) {
      return 0;
    }
    return static_cast<size_t>(std::count_if(listed->items.begin(), listed->items.end(),
                                             [&](const Json& e) { return e.getString("reason") == reason; }));
  }
  //! The registrations the responder received so far.
  std::vector<events::RegisterRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  //! Waits until the latest registration satisfies `pred`.
  bool latestRegistration(const std::function<bool(const events::RegisterRequest&)>& pred) {
    return eventually(
        [&] {
          auto all = requests();
          return !all.empty() && pred(all.back());
        },
        seconds(60));
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

  bool create_durable_ = true;  //!< the responder creates the agent's durable on an accepted registration
  harness::KubeCluster* cluster_ = nullptr;
  std::shared_ptr<bus::ObjectStore> manifests_;
  std::shared_ptr<bus::KeyValue> deployments_;
  Metrics hub_metrics_{"scheduler"};
  std::unique_ptr<scheduler::ManifestServer> manifest_server_;
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

}  // namespace flotilla::agent::testing
