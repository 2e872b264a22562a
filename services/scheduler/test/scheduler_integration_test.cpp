// Integration tests of the scheduler against a real nats-server -js: registrations over request/reply, BundleEvents
// and StatusEvents through the real streams, DeployEvents read by agent-style durables, KV records and summaries.
// The last test runs the flotilla-scheduler binary itself.
#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "flotilla/scheduler/scheduler.h"
#include "scheduler_fixture.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;  // NOLINT(google-build-using-namespace): the shared fixture

class SchedulerTest : public SchedulerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("scheduler-test"));
    startScheduler();
  }

  void startScheduler(int64_t max_deliveries = service::kDefaultMaxDeliveries,
                      std::chrono::milliseconds ack_wait = 5s) {
    auto options = testOptions();
    options.ack_wait = ack_wait;
    options.max_deliveries = max_deliveries;
    options.agent_labels = agent_labels_;
    startSchedulerWith(options);
  }

  //! Which reported labels target (the fixture's default: all, as these tests target by what they register).
  AgentLabelPolicy agent_labels_ = testOptions().agent_labels;

  //! A durable like the agent's: agent-<cluster> on flotilla.deploy.<cluster>.
  bus::PullConsumer agentConsumer(const std::string& cluster) { return harness::agentDurable(hub_, cluster); }

  //! Registers eu-1 (region=eu) and us-1 (region=us) with their durables, and stores the ClusterGroup "europe" of
  //! region=eu, leaving the watcher time to see it before a bundle arrives.
  void europeGroup(bus::PullConsumer& eu, bus::PullConsumer& us, model::ClusterGroup& group) {
    ASSERT_TRUE(registerCluster("eu-1", {{"region", "eu"}}).accepted);
    ASSERT_TRUE(registerCluster("us-1", {{"region", "us"}}).accepted);
    eu = agentConsumer("eu-1");
    us = agentConsumer("us-1");
    auto decoded = model::decodeClusterGroup(Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1",
        "kind":"ClusterGroup","metadata":{"name":"europe","namespace":"fleet-default"},
        "spec":{"selector":{"matchLabels":{"region":"eu"}}}})")
                                                 .value());
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    group = *decoded;
    ASSERT_TRUE(hub_.clusters->put(events::clusterGroupKey(kWs, "europe"), model::encode(group).dump()).ok());
    std::this_thread::sleep_for(300ms);
  }

  //! The record at `key`; nullopt only when the key is not found (another failed read or a value that is not JSON
  //! fails the test), so `!kv(...)` is an honest absence check.
  std::optional<Json> kv(bus::KeyValue& bucket, const std::string& key) {
    auto entry = bucket.get(key);
    if (!entry.ok()) {
      harness::notFound(entry, bucket.bucket() + "/" + key);  // fails the test on anything but NotFound
      return std::nullopt;
    }
    auto json = Json::parse(entry->value);
    EXPECT_TRUE(json.ok()) << bucket.bucket() << "/" << key << ": " << entry->value;
    return json.ok() ? std::optional<Json>(*json) : std::nullopt;
  }

  //! Waits until the KV record exists and `check` holds for it.
  std::optional<Json> kvWhen(bus::KeyValue& bucket, const std::string& key,
                             const std::function<bool(const Json&)>& check, std::chrono::milliseconds timeout = 10s) {
    std::optional<Json> last;
    waitFor(
        [&] {
          last = kv(bucket, key);
          return last && check(*last);
        },
        timeout);
    return last && check(*last) ? last : std::nullopt;
  }
};

// Registration: valid clusters are accepted and recorded with labels and versions; bad names and labels are
// rejected with a reason.
TEST_F(SchedulerTest, RegistersClustersAndRejectsInvalidOnes) {
  auto reply = registerCluster("prod-1", {{"env", "prod"}});
  EXPECT_TRUE(reply.accepted) << reply.message;
  EXPECT_EQ(reply.cluster_id, "prod-1");
  auto record = kv(*hub_.clusters, events::clusterKey("prod-1"));
  ASSERT_TRUE(record.has_value());
  auto cluster = model::decodeCluster(*record);
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  EXPECT_EQ(cluster->metadata.labels.at("env"), "prod");
  EXPECT_EQ(cluster->metadata.ns, kWs);
  EXPECT_EQ(cluster->status.agent.kubernetes_version, "v1.31.2");
  EXPECT_FALSE(cluster->metadata.creation_timestamp.empty());
  // The hub creates the agent's deploy durable before it answers (agents never create consumers).
  auto durable = hub_.js->consumerInfo(service::kDeployStream, "agent-prod-1");
  ASSERT_TRUE(durable.ok()) << durable.error().describe();
  EXPECT_EQ(durable->config.filter_subject, events::deploySubject("prod-1"));
  EXPECT_EQ(durable->config.max_deliver, service::kDefaultMaxDeliveries + 1);
  EXPECT_EQ(durable->config.ack_wait.count(), service::kDefaultAgentAckWait.count());

  auto bad_name = registerCluster("Prod_1", {});
  EXPECT_FALSE(bad_name.accepted);
  EXPECT_NE(bad_name.message.find("DNS-1123"), std::string::npos) << bad_name.message;
  auto bad_label = registerCluster("prod-2", {{"env", "not ok!"}});
  EXPECT_FALSE(bad_label.accepted);
  EXPECT_FALSE(kv(*hub_.clusters, events::clusterKey("prod-2")).has_value());
  EXPECT_FALSE(hub_.js->consumerInfo(service::kDeployStream, "agent-prod-2").ok());
  EXPECT_EQ(metric("registrations_total", {{"result", "rejected"}}), 2);
  EXPECT_EQ(metric("registrations_total", {{"result", "new"}}), 1);

  // A re-registration with another API-version set (a CRD installed) is stored in status.agent.apiVersions;
  // an unsorted set is not a valid request.
  const std::vector<std::string> served = {"example.com/v1", "example.com/v1/Widget", "v1", "v1/ConfigMap"};
  auto again = harness::requestRegistration(hub_, "prod-1", kWs, {{"env", "prod"}}, served);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(events::parsePayload<events::RegisterReply>(again->data())->accepted) << again->data();
  auto updated = model::decodeCluster(*kv(*hub_.clusters, events::clusterKey("prod-1")));
  ASSERT_TRUE(updated.ok()) << updated.error().describe();
  EXPECT_EQ(updated->status.agent.api_versions, served);
  EXPECT_EQ(metric("registrations_total", {{"result", "api-versions"}}), 1);
  auto unsorted = harness::requestRegistration(hub_, "prod-1", kWs, {{"env", "prod"}}, {"v1/ConfigMap", "v1"});
  ASSERT_TRUE(unsorted.ok());
  auto refused = events::parsePayload<events::RegisterReply>(unsorted->data());
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->accepted);
  EXPECT_NE(refused->message.find("apiVersions[1]"), std::string::npos) << refused->message;
}

// The cluster of a registration is its subject's, which the server binds to the agent's credentials: a body naming
// another cluster is refused (logged, counted), and neither cluster is touched. The shared subject flotilla.register
// is gone.
TEST_F(SchedulerTest, ARegistrationNamingAnotherClusterThanItsSubjectIsRefused) {
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  events::RegisterRequest forged{.id = events::newEventId(),
                                 .time = log::nowRfc3339(),
                                 .cluster = "prod-1",
                                 .workspace = kWs,
                                 .labels = {{"env", "stolen"}},
                                 .kubernetes_version = "v1.31.2",
                                 .agent_version = "0.1.0"};
  auto reply =
      hub_.connection->request("flotilla.register.evil-1", events::encode(forged).dump(), std::chrono::seconds(5));
  ASSERT_TRUE(reply.ok()) << reply.error().describe();
  auto decoded = events::parsePayload<events::RegisterReply>(reply->data());
  ASSERT_TRUE(decoded.ok()) << reply->data();
  EXPECT_FALSE(decoded->accepted);
  EXPECT_NE(decoded->message.find("names cluster \"prod-1\""), std::string::npos) << decoded->message;
  EXPECT_EQ(metric("registrations_total", {{"result", "impersonation"}}), 1);
  auto cluster = model::decodeCluster(*kv(*hub_.clusters, events::clusterKey("prod-1")));
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->metadata.labels.at("env"), "prod");
  EXPECT_FALSE(kv(*hub_.clusters, events::clusterKey("evil-1")).has_value());
  EXPECT_FALSE(hub_.js->consumerInfo(service::kDeployStream, "agent-evil-1").ok());
  auto shared =
      hub_.connection->request(events::kRegisterSubject, events::encode(forged).dump(), std::chrono::milliseconds(500));
  EXPECT_FALSE(shared.ok()) << "nothing answers on the shared subject";
}

// The labels that target are the hub's. With the default --agent-labels (none), a registration's labels are kept in
// status.agent.labels only (logged, counted) and a bundle selecting them does not reach the cluster. A scheduler
// started with `env` allowed re-filters the stored record (the flag changed) and the bundle then deploys.
TEST_F(SchedulerTest, OnlyLabelsTheHubAllowsTarget) {
  scheduler_->stop();
  scheduler_.reset();
  agent_labels_ = AgentLabelPolicy{};
  startScheduler();
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}, {"team", "web"}}).accepted);
  auto stored = model::decodeCluster(*kv(*hub_.clusters, events::clusterKey("prod-1")));
  ASSERT_TRUE(stored.ok()) << stored.error().describe();
  EXPECT_TRUE(stored->metadata.labels.empty());
  EXPECT_EQ(stored->status.agent.labels, (model::Labels{{"env", "prod"}, {"team", "web"}}));
  EXPECT_EQ(metric("agent_labels_left_out_total"), 2);
  auto prod = agentConsumer("prod-1");
  auto event = bundleEvent("repo-app", kManifestA, prodOnly());
  scheduler_->handleBundle(events::encode(event).dump());
  EXPECT_TRUE(noMoreDeploys(prod, 500ms)) << "an agent's own env=prod does not target";

  scheduler_->stop();
  scheduler_.reset();
  auto only_env = AgentLabelPolicy::parse("env");
  ASSERT_TRUE(only_env.ok()) << only_env.error().describe();
  agent_labels_ = *only_env;
  startScheduler();
  auto refiltered = kvWhen(*hub_.clusters, events::clusterKey("prod-1"), [](const Json& record) {
    const Json* labels = record.at({"metadata", "labels"});
    return labels != nullptr && labels->size() == 1;
  });
  ASSERT_TRUE(refiltered.has_value());
  EXPECT_EQ(refiltered->at({"metadata", "labels", "env"})->asString(), "prod");
  EXPECT_EQ(metric("agent_labels_enforced_total", {{"result", "rewritten"}}), 1);
  publishBundle(event);
  auto sent = deploys(prod, 1);
  ASSERT_EQ(sent.size(), 1u) << "allowed now: env=prod targets";
  EXPECT_EQ(sent[0].bundle, "repo-app");
}

// Targeting by clusterSelector: one DeployEvent, to the matching cluster only, and the BD record; the same
// BundleEvent again (redelivery) sends nothing; a new manifest sends a new DeployEvent with a higher generation.
TEST_F(SchedulerTest, DeploysToSelectedClusterOnceAndAgainOnNewManifest) {
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  ASSERT_TRUE(registerCluster("dev-1", {{"env", "dev"}}).accepted);
  auto prod = agentConsumer("prod-1");
  auto dev = agentConsumer("dev-1");

  auto event = bundleEvent("repo-app", kManifestA, prodOnly());
  publishBundle(event);
  auto sent = deploys(prod, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_FALSE(sent[0].remove);
  EXPECT_EQ(sent[0].cluster, "prod-1");
  EXPECT_EQ(sent[0].bundle, "repo-app");
  EXPECT_EQ(sent[0].manifest_id, kManifestA);
  EXPECT_EQ(sent[0].deployment_id, model::deploymentID(kManifestA, event.options));
  EXPECT_EQ(sent[0].id, events::deployMsgId("prod-1", "repo-app", sent[0].deployment_id, sent[0].generation));
  EXPECT_TRUE(noMoreDeploys(dev, 300ms));

  auto record =
      kvWhen(*hub_.deployments, events::deploymentKey("prod-1", kWs, "repo-app"), [](const Json&) { return true; });
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->getString("deploymentID"), sent[0].deployment_id);
  EXPECT_EQ(record->getInt("generation"), sent[0].generation);
  EXPECT_EQ(record->getString("commit"), kCommit1);
  EXPECT_FALSE(kv(*hub_.deployments, events::deploymentKey("dev-1", kWs, "repo-app")).has_value());

  // Redelivery (a different Msg-Id, so JetStream does not drop it): nothing new is sent.
  publishBundle(event, "/redelivered");
  ASSERT_TRUE(waitFor([&] {
    return metric("messages_total", {{"consumer", "bundles"}, {"outcome", "unchanged"}}) >= 1;
  }));
  EXPECT_EQ(scheduler_->handleBundle(events::encode(event).dump()).result, "unchanged");
  EXPECT_TRUE(noMoreDeploys(prod));

  // The same content at a newer commit: no DeployEvent, but the record follows the commit.
  auto same_content = bundleEvent("repo-app", kManifestA, prodOnly(), std::string(40, '9'));
  publishBundle(same_content);
  EXPECT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("prod-1", kWs, "repo-app"),
                     [](const Json& r) { return r.getString("commit") == std::string(40, '9'); }));
  EXPECT_TRUE(noMoreDeploys(prod, 300ms));

  auto next = bundleEvent("repo-app", kManifestB, prodOnly(), kCommit2);
  publishBundle(next);
  auto again = deploys(prod, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].manifest_id, kManifestB);
  EXPECT_GT(again[0].generation, sent[0].generation);
  EXPECT_TRUE(noMoreDeploys(dev, 300ms));
  EXPECT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("prod-1", kWs, "repo-app"), [&](const Json& r) {
                return r.getString("manifestID") == kManifestB;
              }).has_value());
}

// A replica that lost the scheduler lease (may_publish false) publishes no DeployEvent and writes no record: the
// bundle event is handed back (counted, logged) and deployed once the lease is held again.
TEST_F(SchedulerTest, AReplicaWithoutTheLeasePublishesNothingAndTheWorkWaits) {
  auto holding = std::make_shared<std::atomic<bool>>(true);
  SchedulerOptions options = testOptions();
  options.may_publish = [holding] { return holding->load(); };
  stopScheduler();
  ASSERT_NO_FATAL_FAILURE(startSchedulerWith(options));
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  auto prod = agentConsumer("prod-1");

  holding->store(false);
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  ASSERT_TRUE(waitFor([&] { return metric("deploys_fenced_total") >= 1; })) << "the bundle event was not refused";
  EXPECT_TRUE(noMoreDeploys(prod, 300ms));
  EXPECT_FALSE(kv(*hub_.deployments, events::deploymentKey("prod-1", kWs, "repo-app")).has_value());

  holding->store(true);
  auto sent = deploys(prod, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].manifest_id, kManifestA);
  EXPECT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("prod-1", kWs, "repo-app"), [](const Json&) {
                return true;
              }).has_value());
  EXPECT_TRUE(noMoreDeploys(prod));
}

// Public CloudEvents go out in batches, with the summaries or from the watch loop; a batch no stream takes is
// dropped, counted and logged, and the pipeline carries on without waiting for it.
TEST_F(SchedulerTest, PublicEventsGoOutInBatchesAndAFailedBatchHoldsUpNothing) {
  std::atomic<int> public_events{0};
  auto subscription =
      hub_.connection->subscribe("flotilla.events.>", "", [&](const bus::Message&) { ++public_events; });
  ASSERT_TRUE(subscription.ok()) << subscription.error().describe();
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  auto prod = agentConsumer("prod-1");
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  ASSERT_EQ(deploys(prod, 1).size(), 1u);
  EXPECT_TRUE(waitFor([&] { return public_events.load() >= 2; })) << "registration and deployment at least";
  EXPECT_EQ(metric("public_event_failures_total"), 0);

  ASSERT_TRUE(hub_.js->deleteStream(events::kEventsStream).ok());
  publishBundle(bundleEvent("repo-app", kManifestB, prodOnly(), kCommit2));
  ASSERT_EQ(deploys(prod, 1).size(), 1u) << "the deploy does not wait for its public event";
  EXPECT_TRUE(waitFor([&] { return metric("public_event_failures_total") >= 1; }));
}

// Before any cluster registered, a bundle is NoTargets (0/0) — in its summary and in its public event — never
// io.flotilla.bundle.ready; once a cluster has it applied, io.flotilla.bundle.ready says 1 of 1.
TEST_F(SchedulerTest, ABundleBeforeAnyClusterIsAnnouncedAsNoTargetsNeverReady) {
  std::mutex mutex;
  std::vector<events::CloudEvent> announced;
  auto subscription = hub_.connection->subscribe("flotilla.events.bundle.>", "", [&](const bus::Message& message) {
    auto event = events::decodeCloudEvent(Json::parse(message.data()).value());
    std::lock_guard lock(mutex);
    announced.push_back(event.ok() ? *event : events::CloudEvent{});
  });
  ASSERT_TRUE(subscription.ok()) << subscription.error().describe();
  auto typesSeen = [&] {
    std::lock_guard lock(mutex);
    std::vector<std::string> types;
    for (const auto& event : announced) {
      types.push_back(event.type);
    }
    return types;
  };
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  auto alone = kvWhen(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"),
                      [](const Json& s) { return s.getString("state") == "NoTargets"; });
  ASSERT_TRUE(alone.has_value());
  EXPECT_EQ(alone->getString("readyClusters"), "0/0");
  ASSERT_TRUE(waitFor([&] { return !typesSeen().empty(); }));
  EXPECT_EQ(typesSeen(), std::vector<std::string>{"io.flotilla.bundle.notargets"});

  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  auto prod = agentConsumer("prod-1");
  auto sent = deploys(prod, 1);
  ASSERT_EQ(sent.size(), 1u);
  publishStatus("prod-1", "repo-app", sent[0].deployment_id, sent[0].generation, "Ready");
  ASSERT_TRUE(waitFor([&] {
    auto types = typesSeen();
    return !types.empty() && types.back() == "io.flotilla.bundle.ready";
  })) << join(typesSeen(), ", ");
  std::lock_guard lock(mutex);
  for (const auto& event : announced) {
    if (event.type == "io.flotilla.bundle.ready") {
      EXPECT_EQ(event.data.find("summary")->getInt("desiredReady"), 1);
      EXPECT_EQ(event.data.find("summary")->getInt("ready"), 1);
    }
  }
}

// A cluster that registers after the bundle gets every bundle that targets it; a label change that takes it out
// of the target sends a delete DeployEvent, and the record goes when the agent reports the delete.
TEST_F(SchedulerTest, LateClusterGetsBundlesAndLabelChangeRemovesThem) {
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  auto first = agentConsumer("prod-1");
  ASSERT_EQ(deploys(first, 1).size(), 1u);

  auto late = agentConsumer("prod-2");
  ASSERT_TRUE(registerCluster("prod-2", {{"env", "prod"}}).accepted);
  auto sent = deploys(late, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].manifest_id, kManifestA);
  ASSERT_TRUE(
      kvWhen(*hub_.deployments, events::deploymentKey("prod-2", kWs, "repo-app"), [](const Json&) { return true; }));

  // Re-registering unchanged sends nothing.
  ASSERT_TRUE(registerCluster("prod-2", {{"env", "prod"}}).accepted);
  EXPECT_TRUE(noMoreDeploys(late));

  ASSERT_TRUE(registerCluster("prod-2", {{"env", "dev"}}).accepted);
  auto removed = deploys(late, 1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(removed[0].remove);
  EXPECT_GT(removed[0].generation, sent[0].generation);
  EXPECT_EQ(removed[0].id, events::deployMsgId("prod-2", "repo-app", "deleted", removed[0].generation));
  EXPECT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("prod-2", kWs, "repo-app"),
                     [](const Json& r) { return r.getBool("deleting"); }));
  publishStatus("prod-2", "repo-app", "", removed[0].generation, "Ready");
  EXPECT_TRUE(waitFor([&] { return !kv(*hub_.deployments, events::deploymentKey("prod-2", kWs, "repo-app")); }));
  EXPECT_TRUE(noMoreDeploys(first, 300ms));
}

// ClusterGroup targeting: a group written to clusters/group.<ws>.<name> (as `flotilla apply` does) selects its
// members; changing the group's selector moves the bundle.
TEST_F(SchedulerTest, ClusterGroupTargeting) {
  bus::PullConsumer eu;
  bus::PullConsumer us;
  model::ClusterGroup group;
  ASSERT_NO_FATAL_FAILURE(europeGroup(eu, us, group));

  publishBundle(bundleEvent("repo-app", kManifestA, Json::parse(R"([{"clusterGroup":"europe"}])").value()));
  ASSERT_EQ(deploys(eu, 1).size(), 1u);
  EXPECT_TRUE(noMoreDeploys(us, 300ms));

  group.spec.selector = model::parseSelector("region=us").value();
  ASSERT_TRUE(hub_.clusters->put(events::clusterGroupKey(kWs, "europe"), model::encode(group).dump()).ok());
  auto to_us = deploys(us, 1);
  ASSERT_EQ(to_us.size(), 1u);
  EXPECT_FALSE(to_us[0].remove);
  auto from_eu = deploys(eu, 1);
  ASSERT_EQ(from_eu.size(), 1u);
  EXPECT_TRUE(from_eu[0].remove);
}

// A GitRepo without targets deploys to every cluster of its workspace (Fleet's default target and the implicit
// "default" group).
TEST_F(SchedulerTest, NoTargetsMeansEveryClusterOfTheWorkspace) {
  ASSERT_TRUE(registerCluster("a-1", {{"env", "a"}}).accepted);
  ASSERT_TRUE(registerCluster("b-1", {}).accepted);
  auto a = agentConsumer("a-1");
  auto b = agentConsumer("b-1");
  publishBundle(bundleEvent("repo-app", kManifestA, Json::array()));
  EXPECT_EQ(deploys(a, 1).size(), 1u);
  EXPECT_EQ(deploys(b, 1).size(), 1u);
}

// StatusEvents become bd status records and roll up into the bundle, GitRepo and cluster summaries (counts per
// state, worst state, non-ready details); a public CloudEvent is published for each state change.
TEST_F(SchedulerTest, StatusRollsUpIntoSummaries) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  ASSERT_TRUE(registerCluster("c-2", {{"env", "prod"}}).accepted);
  auto c1 = agentConsumer("c-1");
  auto c2 = agentConsumer("c-2");
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  auto d1 = deploys(c1, 1);
  auto d2 = deploys(c2, 1);
  ASSERT_EQ(d1.size(), 1u);
  ASSERT_EQ(d2.size(), 1u);

  // Sent, no status yet: WaitApplied.
  auto waiting = kvWhen(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"),
                        [](const Json& s) { return s.find("summary")->getInt("waitApplied") == 2; });
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(waiting->getString("state"), "WaitApplied");
  // The bundle event's time -> each of its two DeployEvents stored (docs/pipeline.md "Stage latency").
  EXPECT_EQ(metric("stage_latency_seconds", {{"stage", "bundle_to_deploy"}}), 2);

  publishStatus("c-1", "repo-app", d1[0].deployment_id, d1[0].generation, "Ready");
  publishStatus("c-2", "repo-app", d2[0].deployment_id, d2[0].generation, "NotReady", "1 of 3 replicas available");

  auto bd = kvWhen(*hub_.status, events::bundleDeploymentStatusKey("c-2", kWs, "repo-app"),
                   [](const Json& s) { return s.getString("state") == "NotReady"; });
  ASSERT_TRUE(bd.has_value());
  EXPECT_EQ(bd->getString("deploymentID"), d2[0].deployment_id);
  EXPECT_FALSE(bd->getBool("stale"));
  // Each report's time -> its bd record written.
  EXPECT_TRUE(waitFor([&] { return metric("stage_latency_seconds", {{"stage", "status_to_recorded"}}) == 2; }));

  auto bundle = kvWhen(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"), [](const Json& s) {
    return s.find("summary")->getInt("ready") == 1 && s.find("summary")->getInt("notReady") == 1;
  });
  ASSERT_TRUE(bundle.has_value());
  EXPECT_EQ(bundle->getString("state"), "NotReady");
  EXPECT_EQ(bundle->getString("readyClusters"), "1/2");
  EXPECT_EQ(bundle->find("summary")->getInt("desiredReady"), 2);
  const Json& detail = bundle->find("summary")->find("nonReadyResources")->asArray()[0];
  EXPECT_EQ(detail.getString("name"), "c-2");
  EXPECT_EQ(detail.getString("message"), "1 of 3 replicas available");

  auto gitrepo = kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"),
                        [](const Json& s) { return s.getString("readyBundleDeployments") == "1/2"; });
  ASSERT_TRUE(gitrepo.has_value());
  EXPECT_EQ(gitrepo->getString("state"), "NotReady");
  EXPECT_EQ(gitrepo->getInt("readyClusters"), 1);

  auto cluster = kvWhen(*hub_.status, events::clusterSummaryKey("c-1"),
                        [](const Json& s) { return s.getString("readyBundles") == "1/1"; });
  ASSERT_TRUE(cluster.has_value());
  EXPECT_EQ(cluster->getString("state"), "Ready");
  EXPECT_EQ(cluster->getString("kubernetesVersion"), "v1.31.2");

  // Public events: a bundledeployment state event for each report.
  ASSERT_TRUE(waitFor([&] {
    auto info = hub_.js->streamInfo(service::kEventsStream, "flotilla.events.bundledeployment.>");
    return info.ok() && info->subjects.count(events::eventsSubject("bundledeployment", {"c-2", "repo-app"})) &&
           info->subjects.at(events::eventsSubject("bundledeployment", {"c-2", "repo-app"})) >= 2;
  }));
  auto last =
      hub_.js->getLastMessage(service::kEventsStream, events::eventsSubject("bundledeployment", {"c-2", "repo-app"}));
  ASSERT_TRUE(last.ok());
  auto cloud = events::decodeCloudEvent(Json::parse(last->data()).value());
  ASSERT_TRUE(cloud.ok()) << cloud.error().describe();
  EXPECT_EQ(cloud->type, "io.flotilla.bundledeployment.notready");
}

// A report about an older deployment does not overwrite the current one's state.
TEST_F(SchedulerTest, StaleStatusIsDropped) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  auto c1 = agentConsumer("c-1");
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  auto first = deploys(c1, 1);
  ASSERT_EQ(first.size(), 1u);
  publishBundle(bundleEvent("repo-app", kManifestB, prodOnly(), kCommit2));
  auto second = deploys(c1, 1);
  ASSERT_EQ(second.size(), 1u);

  publishStatus("c-1", "repo-app", second[0].deployment_id, second[0].generation, "Ready");
  ASSERT_TRUE(kvWhen(*hub_.status, events::bundleDeploymentStatusKey("c-1", kWs, "repo-app"),
                     [&](const Json& s) { return s.getString("deploymentID") == second[0].deployment_id; }));
  publishStatus("c-1", "repo-app", first[0].deployment_id, first[0].generation, "ErrApplied", "old failure");
  ASSERT_TRUE(waitFor([&] { return metric("status_events_total", {{"result", "stale-dropped"}}) == 1; }));
  auto bd = kv(*hub_.status, events::bundleDeploymentStatusKey("c-1", kWs, "repo-app"));
  ASSERT_TRUE(bd.has_value());
  EXPECT_EQ(bd->getString("state"), "Ready");
  auto summary = kv(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"));
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->getString("state"), "Ready");
}

// A report's bd.* record is written without mutex_ (other reports and bundle events go on meanwhile). When a new
// deployment is released in that gap, the report is handled again against it: stored as stale, not as the new
// deployment's state.
TEST_F(SchedulerTest, AReportOvertakenByANewDeploymentWhileItsRecordIsWrittenIsJudgedAgain) {
  stopScheduler();
  std::atomic<int> gaps{0};
  SchedulerOptions with_gap = testOptions();
  with_gap.after_status_write = [&](const std::string& cluster, const std::string&) {
    if (cluster != "c-1" || gaps++ > 0) {
      return;
    }
    // A new commit's deployment is released while the first report's record is written.
    publishBundle(bundleEvent("repo-app", kManifestB, prodOnly(), kCommit2));
    EXPECT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"),
                       [](const Json& r) { return r.getString("manifestID") == kManifestB; }));
  };
  startSchedulerWith(with_gap);
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  auto c1 = agentConsumer("c-1");
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  auto first = deploys(c1, 1);
  ASSERT_EQ(first.size(), 1u);

  publishStatus("c-1", "repo-app", first[0].deployment_id, first[0].generation, "Ready");
  ASSERT_TRUE(waitFor([&] { return metric("status_reports_overtaken_total") == 1; }));
  auto second = deploys(c1, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0].deployment_id, first[0].deployment_id);
  // Handled again: a report about the older deployment, kept as the latest word (stale) until the new one reports.
  auto bd = kvWhen(*hub_.status, events::bundleDeploymentStatusKey("c-1", kWs, "repo-app"),
                   [](const Json& s) { return s.getBool("stale"); });
  ASSERT_TRUE(bd.has_value());
  EXPECT_EQ(bd->getString("deploymentID"), first[0].deployment_id);
  auto summary = kvWhen(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"),
                        [](const Json& s) { return s.getString("state") == "WaitApplied"; });
  EXPECT_TRUE(summary.has_value()) << "the new deployment has no report yet";
}

// A render error is shown in the bundle and GitRepo summaries while the last good deployment stays.
TEST_F(SchedulerTest, RenderErrorKeepsTheLastGoodDeployment) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  auto c1 = agentConsumer("c-1");
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  auto sent = deploys(c1, 1);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(
      kvWhen(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"), [](const Json&) { return true; }));

  auto broken = bundleEvent("repo-app", "", Json::array(), kCommit2);
  broken.id = events::bundleMsgId(kWs, "repo-app", kCommit2, "error");
  broken.options = Json::object();
  broken.error = events::RenderError{.file = "app/fleet.yaml", .line = 12, .message = "helm.chart: expected a string"};
  publishBundle(broken);

  auto gitrepo =
      kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"), [](const Json& s) { return s.getBool("error"); });
  ASSERT_TRUE(gitrepo.has_value());
  ASSERT_EQ(gitrepo->find("renderErrors")->size(), 1u);
  const Json& error = gitrepo->find("renderErrors")->asArray()[0];
  EXPECT_EQ(error.getString("bundle"), "repo-app");
  EXPECT_EQ(error.getString("file"), "app/fleet.yaml");
  EXPECT_EQ(error.getInt("line"), 12);
  EXPECT_EQ(error.getString("commit"), kCommit2);
  EXPECT_NE(gitrepo->getString("message").find("app/fleet.yaml:12"), std::string::npos)
      << gitrepo->getString("message");
  auto bundle = kv(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"));
  ASSERT_TRUE(bundle.has_value());
  EXPECT_TRUE(bundle->getBool("error"));

  // The deployment is untouched: same record, no delete.
  auto record = kv(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->getString("deploymentID"), sent[0].deployment_id);
  EXPECT_TRUE(noMoreDeploys(c1));

  // The next good rendering clears the error.
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly(), std::string(40, '3')));
  EXPECT_TRUE(
      kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"), [](const Json& s) { return !s.getBool("error"); }));
}

// A deleted bundle: a delete DeployEvent per cluster; the records, bd statuses and summaries stay until each agent
// reports the delete, then go.
TEST_F(SchedulerTest, DeletedBundleIsRemovedEverywhere) {
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  ASSERT_TRUE(registerCluster("c-2", {}).accepted);
  auto c1 = agentConsumer("c-1");
  auto c2 = agentConsumer("c-2");
  publishBundle(bundleEvent("repo-app", kManifestA, Json::array()));
  ASSERT_EQ(deploys(c1, 1).size(), 1u);
  ASSERT_EQ(deploys(c2, 1).size(), 1u);
  ASSERT_TRUE(kvWhen(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"), [](const Json&) { return true; }));

  auto gone = bundleEvent("repo-app", "", Json::array(), kCommit2);
  gone.id = events::bundleMsgId(kWs, "repo-app", kCommit2, "deleted");
  gone.deleted = true;
  publishBundle(gone);
  auto r1 = deploys(c1, 1);
  auto r2 = deploys(c2, 1);
  ASSERT_EQ(r1.size(), 1u);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_TRUE(r1[0].remove);
  EXPECT_TRUE(r2[0].remove);
  ASSERT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("c-2", kWs, "repo-app"),
                     [](const Json& r) { return r.getBool("deleting"); }));
  EXPECT_TRUE(kv(*hub_.status, events::bundleSummaryKey(kWs, "repo-app")).has_value());
  publishStatus("c-1", "repo-app", "", r1[0].generation, "Ready");
  publishStatus("c-2", "repo-app", "", r2[0].generation, "Ready");
  EXPECT_TRUE(waitFor([&] {
    return !kv(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app")) &&
           !kv(*hub_.deployments, events::deploymentKey("c-2", kWs, "repo-app")) &&
           !kv(*hub_.status, events::bundleDeploymentStatusKey("c-1", kWs, "repo-app")) &&
           !kv(*hub_.status, events::bundleSummaryKey(kWs, "repo-app")) &&
           !kv(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"));
  }));
}

// Heartbeats, on the status stream (flotilla.status.<cluster>.=) or as the agent's KV key, update the cluster
// summary's last heartbeat.
TEST_F(SchedulerTest, HeartbeatsUpdateTheClusterSummary) {
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  events::Heartbeat beat{
      .id = events::newEventId(), .time = "2099-01-01T00:00:00.000Z", .cluster = "c-1", .agent_version = "0.1.0"};
  auto ack = hub_.js->publish(events::statusSubject("c-1", ""), events::encode(beat).dump(), beat.id);
  ASSERT_TRUE(ack.ok()) << ack.error().describe();
  EXPECT_TRUE(kvWhen(*hub_.status, events::clusterSummaryKey("c-1"),
                     [](const Json& s) { return s.getString("lastHeartbeat") == "2099-01-01T00:00:00.000Z"; }));

  beat.time = "2099-01-02T00:00:00.000Z";
  ASSERT_TRUE(hub_.clusters->put(events::heartbeatKey("c-1"), events::encode(beat).dump()).ok());
  EXPECT_TRUE(kvWhen(*hub_.status, events::clusterSummaryKey("c-1"),
                     [](const Json& s) { return s.getString("lastHeartbeat") == "2099-01-02T00:00:00.000Z"; }));
  EXPECT_EQ(scheduler_->lastHeartbeat("c-1"), "2099-01-02T00:00:00.000Z");

  // A heartbeat alone rewrites the summary at most every Scheduler::kHeartbeatRefresh (5 minutes; 10,000 clusters
  // would otherwise write 333 summaries a second); offline detection uses the time kept in memory.
  auto beatAt = [&](const std::string& time) {
    beat.time = time;
    return scheduler_->handleStatus(events::statusSubject("c-1", ""), events::encode(beat).dump()).action;
  };
  ASSERT_EQ(beatAt("2099-01-02T00:01:00.000Z"), Outcome::Action::kAck);
  EXPECT_EQ(scheduler_->lastHeartbeat("c-1"), "2099-01-02T00:01:00.000Z");
  EXPECT_EQ(kv(*hub_.status, events::clusterSummaryKey("c-1"))->getString("lastHeartbeat"), "2099-01-02T00:00:00.000Z");
  ASSERT_EQ(beatAt("2099-01-02T00:05:00.000Z"), Outcome::Action::kAck);
  EXPECT_EQ(kv(*hub_.status, events::clusterSummaryKey("c-1"))->getString("lastHeartbeat"), "2099-01-02T00:05:00.000Z");

  // Another cluster's heartbeat on this cluster's subject is not trusted.
  beat.cluster = "c-2";
  auto spoofed = scheduler_->handleStatus(events::statusSubject("c-1", ""), events::encode(beat).dump());
  EXPECT_EQ(spoofed.action, Outcome::Action::kReject);
}

// Invalid messages are term'd and counted; handlers never throw them back.
TEST_F(SchedulerTest, InvalidMessagesAreRejected) {
  EXPECT_EQ(scheduler_->handleBundle("not json").action, Outcome::Action::kReject);
  EXPECT_EQ(scheduler_->handleBundle(R"({"apiVersion":"events.flotilla.io/v1","kind":"BundleEvent"})").action,
            Outcome::Action::kReject);
  EXPECT_EQ(scheduler_->handleStatus("flotilla.status.c-1.app", "{}").action, Outcome::Action::kReject);
  EXPECT_EQ(scheduler_->handleStatus("flotilla.deploy.c-1", "{}").action, Outcome::Action::kReject);
  EXPECT_EQ(metric("invalid_messages_total", {{"consumer", "bundles"}}), 2);
  EXPECT_EQ(metric("invalid_messages_total", {{"consumer", "status"}}), 2);

  // Invalid targets: reported like a render error, term'd.
  auto bad = bundleEvent("repo-app", kManifestA, Json::parse(R"([{"clusterSelectr":{}}])").value());
  EXPECT_EQ(scheduler_->handleBundle(events::encode(bad).dump()).action, Outcome::Action::kReject);
  auto summary =
      kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"), [](const Json& s) { return s.getBool("error"); });
  ASSERT_TRUE(summary.has_value());
  EXPECT_NE(summary->getString("message").find("clusterSelectr"), std::string::npos);
}

// After a restart the scheduler rebuilds its state from KV: a redelivered event sends nothing, and a cluster that
// registers later still gets the bundles (read from the bundler's KV record).
TEST_F(SchedulerTest, RestartRebuildsStateFromKv) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "prod"}}).accepted);
  auto c1 = agentConsumer("c-1");
  auto event = bundleEvent("repo-app", kManifestA, prodOnly());
  publishBundle(event);
  ASSERT_EQ(deploys(c1, 1).size(), 1u);
  // What the bundler keeps in KV bundles (its BundleRecord: the last good event as published).
  Json record = Json::obj({{"apiVersion", "bundler.flotilla.io/v1"},
                           {"kind", "BundleRecord"},
                           {"workspace", kWs},
                           {"gitrepo", "repo"},
                           {"bundle", "repo-app"},
                           {"path", "app"},
                           {"commit", kCommit1},
                           {"commitSequence", 1},
                           {"manifestID", kManifestA},
                           {"lastGood", events::encode(event)}});
  ASSERT_TRUE(hub_.bundles->put(events::bundleKey(kWs, "repo-app"), record.dump()).ok());
  ASSERT_TRUE(
      kvWhen(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"), [](const Json&) { return true; }));

  scheduler_->stop();
  scheduler_.reset();
  startScheduler();
  // Before any new BundleEvent: the new instance knows the bundle only from KV.
  auto c2 = agentConsumer("c-2");
  ASSERT_TRUE(registerCluster("c-2", {{"env", "prod"}}).accepted);
  auto sent = deploys(c2, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].manifest_id, kManifestA);

  // Another message ID: the stream's duplicate window would drop the same one before the scheduler saw it.
  publishBundle(event, "/after-restart");
  ASSERT_TRUE(waitFor([&] {
    return metric("messages_total", {{"consumer", "bundles"}, {"outcome", "unchanged"}}) >= 1;
  }));
  EXPECT_TRUE(noMoreDeploys(c1));
  EXPECT_TRUE(noMoreDeploys(c2, 300ms));
}

// A paused bundle holds new deployments (OutOfSync) until it is resumed.
TEST_F(SchedulerTest, PausedBundleHoldsNewDeployments) {
  bus::PullConsumer c1;
  events::DeployEvent first;
  ASSERT_NO_FATAL_FAILURE(deployToC1(c1, first));
  publishStatus("c-1", "repo-app", first.deployment_id, first.generation, "Ready");

  auto paused = bundleEvent("repo-app", kManifestB, Json::array(), kCommit2);
  paused.paused = true;
  publishBundle(paused);
  auto summary = kvWhen(*hub_.status, events::bundleSummaryKey(kWs, "repo-app"),
                        [](const Json& s) { return s.getString("state") == "OutOfSync"; });
  ASSERT_TRUE(summary.has_value());
  EXPECT_TRUE(noMoreDeploys(c1));

  auto resumed = bundleEvent("repo-app", kManifestB, Json::array(), kCommit2);
  resumed.id += "-resumed";
  publishBundle(resumed);
  auto released = deploys(c1, 1);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].manifest_id, kManifestB);
}

// A cluster record that disappears (no registered agent to report a delete): the delete is still sent, and its
// records go at once instead of waiting.
TEST_F(SchedulerTest, AnUnregisteredClusterDoesNotWaitForADeleteReport) {
  bus::PullConsumer c1;
  events::DeployEvent first;
  ASSERT_NO_FATAL_FAILURE(deployToC1(c1, first));
  ASSERT_TRUE(
      kvWhen(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"), [](const Json&) { return true; }));
  ASSERT_TRUE(hub_.clusters->remove(events::clusterKey("c-1")).ok());
  auto removed = deploys(c1, 1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(removed[0].remove);
  EXPECT_TRUE(waitFor([&] { return !kv(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app")); }));
}

// NATS goes away: a handler that cannot publish asks for a retry (nak with backoff) and changes nothing; once NATS
// is back (same store) the connection recovers and the work goes through.
TEST_F(SchedulerTest, RetriesWhileNatsIsDownAndRecovers) {
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  auto event = bundleEvent("repo-app", kManifestA, Json::array());
  nats_->kill9();
  auto outcome = scheduler_->handleBundle(events::encode(event).dump());
  EXPECT_EQ(outcome.action, Outcome::Action::kRetry);
  EXPECT_FALSE(scheduler_->deployment("c-1", kWs, "repo-app").has_value());

  ASSERT_TRUE(nats_->restart().ok());
  ASSERT_TRUE(waitFor([&] { return hub_.connection->connected(); }, 20s));
  auto c1 = agentConsumer("c-1");
  ASSERT_TRUE(waitFor(
      [&] {
        return hub_.js->publish(events::bundleSubject(kWs, "repo-app"), events::encode(event).dump(), event.id).ok();
      },
      20s));
  auto sent = deploys(c1, 1, 20s);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].manifest_id, kManifestA);
}

// The binary: starts with the e2e flags, answers registrations, serves /readyz, exits 0 on SIGTERM.
TEST_F(SchedulerTest, BinaryRunsAndStopsCleanly) {
  scheduler_->stop();
  scheduler_.reset();
  auto port = harness::freeTcpPort();
  ASSERT_TRUE(port.ok());
  auto dir = makeTempDir("scheduler-bin");
  ASSERT_TRUE(dir.ok());
  std::string log_file = *dir + "/scheduler.log";
  auto process = Process::start({.argv = {FLOTILLA_SCHEDULER_BINARY, "--nats-url", nats_->url(), "--http-addr",
                                          "127.0.0.1:" + std::to_string(*port), "--log-level", "info"},
                                 .output_file = log_file});
  ASSERT_TRUE(process.ok()) << process.error().describe();
  bool ready = waitFor(
      [&] {
        auto curl = runCommand(
            {.argv = {"curl", "-sf", "http://127.0.0.1:" + std::to_string(*port) + "/readyz"}, .timeout = 2s});
        return curl.ok() && curl->exit_code == 0;
      },
      20s);
  EXPECT_TRUE(ready) << readFile(log_file).valueOr("");
  EXPECT_TRUE(registerCluster("c-1", {}).accepted);
  auto metrics = runCommand({.argv = {"curl", "-sf", "http://127.0.0.1:" + std::to_string(*port) + "/metrics"}});
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->out.find("flotilla_scheduler_registrations_total"), std::string::npos);
  EXPECT_EQ(process->stop(10s), 0) << readFile(log_file).valueOr("");
  removeAll(*dir);
}

// A BundleEvent that kills the scheduler every time it is handled (each "process" takes it and dies without
// settling it) is terminated and reported on the delivery after the maximum, and the scheduler keeps scheduling.
TEST_F(SchedulerTest, APoisonBundleEventIsTerminatedAndReportedWhileOthersSchedule) {
  scheduler_->stop();
  scheduler_.reset();
  bus::PullConsumer crashing;
  ASSERT_NO_FATAL_FAILURE(
      bindCrashingDurable(service::kBundlesStream, kBundleConsumer, events::kBundleFilter, crashing));
  auto poison = bundleEvent("poison", kManifestA, prodOnly());
  publishBundle(poison);
  uint64_t sequence = 0;
  ASSERT_NO_FATAL_FAILURE(harness::deliverUnsettled(crashing, 2, sequence));
  crashing = bus::PullConsumer();
  startScheduler(2, 1s);
  auto key = events::terminatedKey(service::kBundlesStream, kBundleConsumer, sequence);
  ASSERT_TRUE(waitFor([&] { return hub_.status->get(key).ok(); }, 20s));
  auto record = events::decodeMessageTerminated(*kv(*hub_.status, key));
  ASSERT_TRUE(record.ok()) << record.error().describe();
  EXPECT_EQ(record->reason, events::kTerminatedExhausted);
  EXPECT_EQ(record->msg_id, poison.id);
  EXPECT_EQ(metric("messages_terminated_total",
                   {{"consumer", "bundles"}, {"reason", std::string(events::kTerminatedExhausted)}}),
            1);
  EXPECT_FALSE(scheduler_->deployment("prod-1", kWs, "poison").has_value());
  // Still serving.
  ASSERT_TRUE(registerCluster("prod-1", {{"env", "prod"}}).accepted);
  auto prod = agentConsumer("prod-1");
  publishBundle(bundleEvent("repo-app", kManifestA, prodOnly()));
  EXPECT_EQ(deploys(prod, 1).size(), 1u);
}

// An agent reports a deploy it terminated on its own status subject; the scheduler stores the record and
// publishes the public event, and rejects a report about another cluster's consumer.
TEST_F(SchedulerTest, StoresTerminatedDeploysAgentsReportAndRejectsSpoofedOnes) {
  events::MessageTerminated record{.id = events::newEventId(),
                                   .time = log::nowRfc3339(),
                                   .service = "agent",
                                   .stream = service::kDeployStream,
                                   .consumer = "agent-c-1",
                                   .subject = events::deploySubject("c-1"),
                                   .stream_sequence = 7,
                                   .msg_id = "deploy/c-1/app/x/1",
                                   .deliveries = 10,
                                   .reason = std::string(events::kTerminatedThrew),
                                   .message = "handler threw: boom"};
  auto spoofed = record;
  spoofed.consumer = "agent-c-2";
  spoofed.stream_sequence = 8;
  ASSERT_TRUE(hub_.js->publish(events::statusSubject("c-1", ""), events::encode(spoofed).dump(), "t-8").ok());
  ASSERT_TRUE(hub_.js->publish(events::statusSubject("c-1", ""), events::encode(record).dump(), "t-7").ok());
  auto key = events::terminatedKey(service::kDeployStream, "agent-c-1", 7);
  ASSERT_TRUE(waitFor([&] { return hub_.status->get(key).ok(); }));
  EXPECT_EQ(events::decodeMessageTerminated(*kv(*hub_.status, key)).value(), record);
  const auto spoofed_key = events::terminatedKey(service::kDeployStream, "agent-c-2", 8);
  EXPECT_TRUE(harness::notFound(hub_.status->get(spoofed_key), "status/" + spoofed_key));
  EXPECT_EQ(metric("messages_total", {{"consumer", "status"}, {"outcome", "spoofed"}}), 1);
  // The event follows the KV record.
  EXPECT_TRUE(waitFor([&] {
    return hub_.js
        ->getLastMessage(service::kEventsStream, events::terminatedSubject(service::kDeployStream, "agent-c-1"))
        .ok();
  }));
}

// ---- issue 10: deletes that cascade, DeployEvent fields, fault point ----

// What the bundler publishes for a bundle of a deleted GitRepo (or one that left the repository).
events::BundleEvent deletedBundle(const std::string& bundle, int64_t commit_sequence) {
  auto gone = bundleEvent(bundle, "", Json::array(), kCommit2);
  gone.id = events::bundleMsgId(kWs, bundle, kCommit2, "deleted");
  gone.deleted = true;
  gone.commit_sequence = commit_sequence;
  return gone;
}

// A GitRepo deleted (the bundler's cascade: a deleted BundleEvent for each of its bundles): every cluster gets a
// delete carrying the GitRepo, the release's commitSequence and labels; the GitRepo summary is Deleting and counts
// the deployments left as the agents report (a failed delete keeps its deployment and shows the error); when the
// last one is reported the GitRepo and bundle summaries, the bd statuses and the records are gone.
TEST_F(SchedulerTest, GitRepoCascadeIsDeletingUntilEveryAgentReported) {
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  ASSERT_TRUE(registerCluster("c-2", {}).accepted);
  auto c1 = agentConsumer("c-1");
  auto c2 = agentConsumer("c-2");
  auto a = bundleEvent("repo-a", kManifestA, Json::array());
  a.commit_sequence = 5;
  a.labels = {{"app", "a"}};
  auto b = bundleEvent("repo-b", kManifestB, Json::array());
  b.commit_sequence = 5;
  publishBundle(a);
  publishBundle(b);
  auto on1 = deploys(c1, 2);
  auto on2 = deploys(c2, 2);
  ASSERT_EQ(on1.size(), 2u);
  ASSERT_EQ(on2.size(), 2u);
  for (const auto* sent : {&on1, &on2}) {
    for (const auto& d : *sent) {
      publishStatus(d.cluster, d.bundle, d.deployment_id, d.generation, "Ready");
    }
  }
  ASSERT_TRUE(kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"),
                     [](const Json& s) { return s.getString("state") == "Ready"; }));

  publishBundle(deletedBundle("repo-a", 9));
  publishBundle(deletedBundle("repo-b", 9));
  auto removed1 = deploys(c1, 2);
  auto removed2 = deploys(c2, 2);
  ASSERT_EQ(removed1.size(), 2u);
  ASSERT_EQ(removed2.size(), 2u);
  for (const auto& d : removed1) {
    EXPECT_TRUE(d.remove);
    EXPECT_EQ(d.gitrepo, "repo");
    EXPECT_EQ(d.commit_sequence, 5) << "the release's, kept in the record";
    EXPECT_EQ(d.labels, (d.bundle == "repo-a" ? events::StringMap{{"app", "a"}} : events::StringMap{}));
  }
  auto deleting = kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"), [](const Json& s) {
    return s.getString("state") == "Deleting" && s.getString("message") == "deleting: 4 deployments left on 2 clusters";
  });
  ASSERT_TRUE(deleting.has_value());
  EXPECT_TRUE(events::decodeRecord<events::GitRepoSummary>(*deleting).ok());

  for (const auto& d : removed1) {
    publishStatus("c-1", d.bundle, "", d.generation, "Ready");
  }
  ASSERT_TRUE(kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"), [](const Json& s) {
    return s.getString("message") == "deleting: 2 deployments left on 1 cluster";
  }));
  EXPECT_FALSE(kv(*hub_.status, events::bundleDeploymentStatusKey("c-1", kWs, "repo-a")).has_value());
  EXPECT_FALSE(kv(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-a")).has_value());

  const events::DeployEvent& a2 = removed2[0].bundle == "repo-a" ? removed2[0] : removed2[1];
  const events::DeployEvent& b2 = removed2[0].bundle == "repo-a" ? removed2[1] : removed2[0];
  publishStatus("c-2", "repo-a", "", a2.generation, "ErrApplied", "failed to delete 1 object");
  ASSERT_TRUE(kvWhen(*hub_.status, events::gitRepoSummaryKey(kWs, "repo"), [](const Json& s) {
    return s.getString("state") == "Deleting" &&
           s.getString("message").find("failed to delete 1 object") != std::string::npos;
  })) << kv(*hub_.status, events::gitRepoSummaryKey(kWs, "repo")).value_or(Json()).dump();
  EXPECT_TRUE(kv(*hub_.deployments, events::deploymentKey("c-2", kWs, "repo-a")).has_value());
  // The failed delete is sent again after a backoff (delete_retry.cpp), with a newer generation.
  auto resent = deploys(c2, 1);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_TRUE(resent[0].remove);
  EXPECT_EQ(resent[0].bundle, "repo-a");
  EXPECT_GT(resent[0].generation, a2.generation);
  EXPECT_TRUE(waitFor([&] { return metric("delete_retries_total") == 1; }));  // counted right after the publish

  publishStatus("c-2", "repo-a", "", resent[0].generation, "Ready");
  publishStatus("c-2", "repo-b", "", b2.generation, "Ready");
  EXPECT_TRUE(waitFor([&] {
    return !kv(*hub_.status, events::gitRepoSummaryKey(kWs, "repo")) &&
           !kv(*hub_.status, events::bundleSummaryKey(kWs, "repo-a")) &&
           !kv(*hub_.status, events::bundleSummaryKey(kWs, "repo-b")) &&
           !kv(*hub_.status, events::bundleDeploymentStatusKey("c-2", kWs, "repo-a")) &&
           !kv(*hub_.deployments, events::deploymentKey("c-2", kWs, "repo-a")) &&
           !kv(*hub_.deployments, events::deploymentKey("c-2", kWs, "repo-b"));
  }));
  EXPECT_EQ(metric("deployments_deleting"), 0);
  EXPECT_TRUE(noMoreDeploys(c1, 300ms));
  EXPECT_TRUE(noMoreDeploys(c2, 300ms));
}

// A GitRepo renamed by creating the new one and deleting the old (docs/pipeline.md "Ownership handover", rule
// retiring): while both specs exist the new GitRepo's DeployEvent lists nothing as retiring; once the old GitRepo's
// spec is gone from the gitrepos bucket, it lists the old GitRepo's bundle on that cluster.
TEST_F(SchedulerTest, DeployEventsListBundlesWhoseGitRepoIsGoneAsRetiring) {
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  auto c1 = agentConsumer("c-1");
  ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(kWs, "old"), "{}").ok());
  ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(kWs, "new"), "{}").ok());
  auto old_bundle = bundleEvent("old-app", kManifestA, Json::array());
  old_bundle.gitrepo = "old";
  publishBundle(old_bundle);
  ASSERT_EQ(deploys(c1, 1).size(), 1u);

  auto both_live = bundleEvent("new-app", kManifestA, Json::array());
  both_live.gitrepo = "new";
  publishBundle(both_live);
  auto first = deploys(c1, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].retiring.empty());

  ASSERT_TRUE(hub_.gitrepos->remove(events::gitRepoKey(kWs, "old")).ok());
  auto renamed = bundleEvent("new-app", kManifestB, Json::array(), kCommit2);
  renamed.gitrepo = "new";
  publishBundle(renamed);
  auto second = deploys(c1, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].retiring, std::vector<std::string>{"old-app"});
}

// Every DeployEvent carries the bundle's GitRepo, commitSequence and labels, and the record keeps them: a labels
// change alone is a new release, and a delete after a restart still sends them.
TEST_F(SchedulerTest, DeployEventsCarryGitRepoCommitSequenceAndLabels) {
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  auto c1 = agentConsumer("c-1");
  auto event = bundleEvent("repo-app", kManifestA, Json::array());
  event.commit_sequence = 17;
  event.labels = {{"team", "web"}};
  publishBundle(event);
  auto sent = deploys(c1, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].gitrepo, "repo");
  EXPECT_EQ(sent[0].commit_sequence, 17);
  EXPECT_EQ(sent[0].labels, (events::StringMap{{"team", "web"}}));
  auto record = kvWhen(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"),
                       [](const Json& r) { return r.getInt("commitSequence") == 17; });
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->find("labels")->getString("team"), "web");

  auto relabelled = bundleEvent("repo-app", kManifestA, Json::array(), kCommit2);
  relabelled.commit_sequence = 18;
  relabelled.labels = {{"team", "web"}, {"tier", "front"}};
  publishBundle(relabelled);
  auto again = deploys(c1, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].deployment_id, sent[0].deployment_id);
  EXPECT_EQ(again[0].commit_sequence, 18);
  EXPECT_EQ(again[0].labels.at("tier"), "front");
  ASSERT_TRUE(kvWhen(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app"),
                     [](const Json& r) { return r.getInt("commitSequence") == 18; }));

  scheduler_->stop();
  scheduler_.reset();
  startScheduler();
  publishBundle(deletedBundle("repo-app", 19));
  auto removed = deploys(c1, 1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(removed[0].remove);
  EXPECT_EQ(removed[0].gitrepo, "repo");
  EXPECT_EQ(removed[0].commit_sequence, 18);
  EXPECT_EQ(removed[0].labels.at("tier"), "front");
}

// A ClusterGroup deleted: every bundle of its workspace is placed again, so clusters matched only through the
// group get delete DeployEvents; the others are left alone.
TEST_F(SchedulerTest, DeletedClusterGroupRetargetsEveryBundleOfItsWorkspace) {
  bus::PullConsumer eu;
  bus::PullConsumer us;
  model::ClusterGroup group;
  ASSERT_NO_FATAL_FAILURE(europeGroup(eu, us, group));
  const Json to_europe = Json::parse(R"([{"clusterGroup":"europe"}])").value();
  publishBundle(bundleEvent("repo-one", kManifestA, to_europe));
  publishBundle(bundleEvent("repo-two", kManifestB, to_europe));
  publishBundle(bundleEvent("repo-all", kManifestA, Json::array()));
  ASSERT_EQ(deploys(eu, 3).size(), 3u);
  ASSERT_EQ(deploys(us, 1).size(), 1u);

  ASSERT_TRUE(hub_.clusters->remove(events::clusterGroupKey(kWs, "europe")).ok());
  auto removed = deploys(eu, 2);
  ASSERT_EQ(removed.size(), 2u);
  std::set<std::string> bundles;
  for (const auto& d : removed) {
    EXPECT_TRUE(d.remove);
    bundles.insert(d.bundle);
  }
  EXPECT_EQ(bundles, (std::set<std::string>{"repo-one", "repo-two"}));
  EXPECT_TRUE(noMoreDeploys(eu));
  EXPECT_TRUE(noMoreDeploys(us, 300ms));
}

// Fault point scheduler.bundle.deployed: the binary dies (SIGKILL) right after the first cluster's DeployEvent of a
// bundle event; restarted without it, the redelivered event deploys the other cluster, and the first is not sent
// a second deployment.
TEST_F(SchedulerTest, KilledAfterTheFirstDeployEventConvergesOnRestart) {
  scheduler_->stop();
  scheduler_.reset();
  auto dir = makeTempDir("scheduler-fault");
  ASSERT_TRUE(dir.ok());
  const std::string log_file = *dir + "/scheduler.log";
  auto start = [&](std::map<std::string, std::string> env) {
    return Process::start({.argv = {FLOTILLA_SCHEDULER_BINARY, "--nats-url", nats_->url(), "--http-addr", "127.0.0.1:0",
                                    "--log-level", "info", "--ack-wait", "1"},
                           .env = std::move(env),
                           .output_file = log_file});
  };
  auto armed = start({{"FLOTILLA_FAULT_POINTS", std::string(kFaultBundleDeployed)}});
  ASSERT_TRUE(armed.ok()) << armed.error().describe();
  // Registrations get no answer until the binary subscribed.
  ASSERT_TRUE(waitFor([&] { return harness::requestRegistration(hub_, "c-1", kWs, {}).ok(); }, 20s))
      << readFile(log_file).valueOr("");
  ASSERT_TRUE(registerCluster("c-1", {}).accepted);
  ASSERT_TRUE(registerCluster("c-2", {}).accepted);
  auto c1 = agentConsumer("c-1");
  auto c2 = agentConsumer("c-2");
  publishBundle(bundleEvent("repo-app", kManifestA, Json::array()));
  auto code = armed->wait(20s);
  ASSERT_TRUE(code.has_value()) << readFile(log_file).valueOr("");
  EXPECT_EQ(*code, 128 + SIGKILL);
  auto first = deploys(c1, 1, 1s);
  auto second = deploys(c2, 1, 1s);
  ASSERT_EQ(first.size() + second.size(), 1u) << "exactly one cluster got its DeployEvent before the kill";

  auto restarted = start({});
  ASSERT_TRUE(restarted.ok()) << restarted.error().describe();
  auto rest = first.empty() ? deploys(c1, 1, 20s) : deploys(c2, 1, 20s);
  ASSERT_EQ(rest.size(), 1u) << readFile(log_file).valueOr("");
  EXPECT_TRUE(noMoreDeploys(first.empty() ? c2 : c1, 1500ms));
  EXPECT_EQ(restarted->stop(10s), 0);
  removeAll(*dir);
}

}  // namespace
}  // namespace flotilla::scheduler
