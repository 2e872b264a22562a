// Integration tests of the cluster records a hub admin writes (real nats-server -js): Cluster documents
// (clusters/spec.<name>: hub labels re-target, spec.paused holds and releases deployments) and deregistration
// (clusters/deregistered.<name>: deletes to a connected agent and records removed as its reports arrive, records of a
// disconnected agent removed at once, registrations refused, a deregistration withdrawn, a restart half-way), and
// clusters going Offline when their agent falls silent.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"
#include "flotilla/scheduler/enrollment.h"
#include "flotilla/scheduler/scheduler.h"
#include "scheduler_fixture.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;  // NOLINT(google-build-using-namespace): the shared fixture

//! A BundleEvent of bundle repo-app.
events::BundleEvent appEvent(const std::string& manifest, Json targets, const std::string& commit = kCommit1) {
  return scheduler_test::bundleEvent("repo-app", manifest, std::move(targets), commit);
}

//! A Cluster document as `flotilla apply` stores it.
std::string clusterDocument(const std::string& name, const std::string& labels_json, bool paused) {
  auto document = model::decodeClusterDocument(
      Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster","metadata":{"name":")" + name +
                  R"(","labels":)" + labels_json + R"(},"spec":{"paused":)" + (paused ? "true" : "false") + "}}")
          .value());
  EXPECT_TRUE(document.ok()) << document.error().describe();
  return model::encode(*document).dump();
}

class ClusterRecordsTest : public SchedulerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("cluster-records-test"));
    startScheduler();
  }

  void startScheduler(std::chrono::milliseconds heartbeat_interval = 10s) {
    auto options = testOptions();
    options.heartbeat_interval = heartbeat_interval;
    startSchedulerWith(options);
  }

  bool exists(bus::KeyValue& bucket, const std::string& key) { return bucket.get(key).ok(); }
  //! Only kNotFound is "gone"; another error fails the test.
  bool absent(bus::KeyValue& bucket, const std::string& key) {
    return harness::notFound(bucket.get(key), bucket.bucket() + "/" + key);
  }

  //! What an agent publishes after handling `deploy` (a delete answers with state Ready).
  void answer(const events::DeployEvent& deploy, const std::string& state = "Ready") {
    publishStatus(deploy.cluster, deploy.bundle, deploy.deployment_id, deploy.generation, state);
  }

  void putTombstone(const std::string& cluster, bool keep_resources) {
    events::ClusterDeregistration tombstone{
        .cluster = cluster, .time = log::nowRfc3339(), .keep_resources = keep_resources};
    ASSERT_TRUE(hub_.clusters->put(events::clusterDeregisteredKey(cluster), events::encode(tombstone).dump()).ok());
  }

  //! Every record of the cluster is gone: deployment, bd status, summary, registration.
  bool clusterGone(const std::string& cluster) {
    return absent(*hub_.deployments, events::deploymentKey(cluster, kWs, "repo-app")) &&
           absent(*hub_.status, events::bundleDeploymentStatusKey(cluster, kWs, "repo-app")) &&
           absent(*hub_.status, events::clusterSummaryKey(cluster)) &&
           absent(*hub_.clusters, events::clusterKey(cluster)) && !scheduler_->cluster(cluster).has_value();
  }
};

// The hub's labels win over the agent's: a Cluster document re-targets like a registration change, the agent's
// record stays as it reported, a re-registration with the old labels moves nothing, and removing the document
// brings the agent's labels back.
TEST_F(ClusterRecordsTest, ClusterDocumentLabelsRetarget) {
  ASSERT_TRUE(registerCluster("c-1", {{"env", "dev"}, {"arch", "arm64"}}).accepted);
  auto c1 = harness::agentDurable(hub_, "c-1");
  publishBundle(appEvent(kManifestA, prodOnly()));
  EXPECT_TRUE(noMoreDeploys(c1));

  ASSERT_TRUE(
      hub_.clusters->put(events::clusterSpecKey("c-1"), clusterDocument("c-1", R"({"env":"prod"})", false)).ok());
  auto sent = deploys(c1, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_FALSE(sent[0].remove);
  auto effective = scheduler_->cluster("c-1");
  ASSERT_TRUE(effective.has_value());
  EXPECT_EQ(effective->metadata.labels, (model::Labels{{"env", "prod"}, {"arch", "arm64"}}));
  auto stored = model::decodeCluster(Json::parse(hub_.clusters->get(events::clusterKey("c-1"))->value).value());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->metadata.labels.at("env"), "dev") << "the registration record is what the agent reported";

  ASSERT_TRUE(registerCluster("c-1", {{"env", "dev"}, {"arch", "arm64"}}).accepted);
  EXPECT_TRUE(noMoreDeploys(c1));
  EXPECT_EQ(metric("cluster_documents_total", {{"change", "applied"}}), 1);

  ASSERT_TRUE(hub_.clusters->remove(events::clusterSpecKey("c-1")).ok());
  auto removed = deploys(c1, 1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(removed[0].remove);
}

// spec.paused holds new deployments of the cluster (staged in the record, OutOfSync) like a paused bundle, and
// unpausing releases them.
TEST_F(ClusterRecordsTest, PausedClusterHoldsNewDeploymentsUntilResumed) {
  bus::PullConsumer c1;
  events::DeployEvent first;
  ASSERT_NO_FATAL_FAILURE(deployToC1(c1, first));
  answer(first);

  ASSERT_TRUE(hub_.clusters->put(events::clusterSpecKey("c-1"), clusterDocument("c-1", "{}", true)).ok());
  ASSERT_TRUE(waitFor([&] { return scheduler_->cluster("c-1") && scheduler_->cluster("c-1")->spec.paused; }));
  publishBundle(appEvent(kManifestB, Json::array(), kCommit2));
  ASSERT_TRUE(waitFor([&] {
    auto record = scheduler_->deployment("c-1", kWs, "repo-app");
    return record && !record->staged_deployment_id.empty();
  }));
  EXPECT_TRUE(noMoreDeploys(c1));
  EXPECT_EQ(scheduler_->deployment("c-1", kWs, "repo-app")->manifest_id, kManifestA);
  ASSERT_TRUE(waitFor([&] {
    auto summary = hub_.status->get(events::bundleSummaryKey(kWs, "repo-app"));
    return summary.ok() && Json::parse(summary->value)->getString("state") == "OutOfSync";
  }));

  ASSERT_TRUE(hub_.clusters->put(events::clusterSpecKey("c-1"), clusterDocument("c-1", "{}", false)).ok());
  auto released = deploys(c1, 1);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].manifest_id, kManifestB);
  EXPECT_GT(released[0].generation, first.generation);
}

// A connected agent (a recent heartbeat) gets a delete for each deployment (keepResources from the tombstone); the
// records stay until its report answers the delete, then the cluster's records go; a registration under the name
// is refused meanwhile and afterwards.
TEST_F(ClusterRecordsTest, DeregisteringAConnectedClusterDeletesThenRemovesRecordsAsReportsArrive) {
  bus::PullConsumer c1;
  events::DeployEvent first;
  ASSERT_NO_FATAL_FAILURE(deployToC1(c1, first));
  answer(first);
  heartbeat("c-1");
  ASSERT_TRUE(waitFor([&] { return exists(*hub_.status, events::bundleDeploymentStatusKey("c-1", kWs, "repo-app")); }));
  ASSERT_TRUE(waitFor([&] { return !scheduler_->lastHeartbeat("c-1").empty(); }));

  putTombstone("c-1", true);
  auto removal = deploys(c1, 1);
  ASSERT_EQ(removal.size(), 1u);
  EXPECT_TRUE(removal[0].remove);
  EXPECT_GT(removal[0].generation, first.generation);
  EXPECT_TRUE(removal[0].options.getBool("keepResources"));
  EXPECT_EQ(removal[0].options.getString("defaultNamespace"), "app");
  EXPECT_TRUE(exists(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app")))
      << "the record stays until the agent answers";

  auto refused = registerCluster("c-1", {});
  EXPECT_FALSE(refused.accepted);
  EXPECT_NE(refused.message.find("deregistered"), std::string::npos) << refused.message;
  EXPECT_EQ(metric("registrations_total", {{"result", "deregistered"}}), 1);

  // A new bundle version does not reach a deregistering cluster, and a late report about the old deployment is not
  // taken for the answer.
  publishBundle(appEvent(kManifestB, Json::array(), kCommit2));
  answer(first, "NotReady");
  EXPECT_TRUE(noMoreDeploys(c1));
  EXPECT_TRUE(exists(*hub_.deployments, events::deploymentKey("c-1", kWs, "repo-app")));

  answer(removal[0]);
  ASSERT_TRUE(waitFor([&] { return clusterGone("c-1"); }));
  EXPECT_EQ(metric("deregistrations_total", {{"result", "completed"}}), 1);
  EXPECT_GE(metric("status_events_total", {{"result", "deregistering"}}), 1);
  EXPECT_FALSE(hub_.js->consumerInfo(service::kDeployStream, "agent-c-1").ok()) << "the durable goes with the cluster";
  EXPECT_EQ(metric("agent_consumers_deleted_total"), 1);
  EXPECT_FALSE(registerCluster("c-1", {}).accepted);
  EXPECT_TRUE(exists(*hub_.clusters, events::clusterDeregisteredKey("c-1"))) << "the tombstone is the CLI's";
}

// An agent that shows no sign of life within 3 heartbeat intervals gets nothing: its records go at once. One that
// stops answering half-way has its remaining records removed once it counts as disconnected.
TEST_F(ClusterRecordsTest, DeregisteringADisconnectedClusterRemovesRecordsAtOnce) {
  stopScheduler();
  startScheduler(300ms);
  ASSERT_TRUE(registerCluster("gone-1", {}).accepted);
  ASSERT_TRUE(registerCluster("quiet-1", {}).accepted);
  // As if a registration token had enrolled it (enrollment.h): the record goes with the cluster, so the
  // credentials it names are never renewed again, and their keys stay with the tombstone (flotilla auth revoke).
  EnrollmentRecord enrolled{
      .cluster = "gone-1", .token = "t1", .key = "UNEW", .previous_key = "UOLD", .expires = "2099-01-01T00:00:00Z"};
  ASSERT_TRUE(hub_.clusters->put(enrollmentKey("gone-1"), encode(enrolled).dump()).ok());
  ASSERT_TRUE(hub_.clusters->put(enrollmentKey("quiet-1"), "{}").ok());  // unreadable: counted, still removed
  auto gone = harness::agentDurable(hub_, "gone-1");
  auto quiet = harness::agentDurable(hub_, "quiet-1");
  publishBundle(appEvent(kManifestA, Json::array()));
  ASSERT_EQ(deploys(gone, 1).size(), 1u);
  ASSERT_EQ(deploys(quiet, 1).size(), 1u);

  std::this_thread::sleep_for(1500ms);  // > 3 heartbeat intervals without a sign of life
  putTombstone("gone-1", false);
  ASSERT_TRUE(waitFor([&] { return clusterGone("gone-1"); }));
  EXPECT_TRUE(noMoreDeploys(gone));
  EXPECT_EQ(metric("deregistration_records_removed_total", {{"reason", "agent-disconnected"}}), 1);
  EXPECT_EQ(hub_.clusters->get(enrollmentKey("gone-1")).error().kind, ErrorKind::kNotFound);
  auto tombstone = events::parseRecord<events::ClusterDeregistration>(
      hub_.clusters->get(events::clusterDeregisteredKey("gone-1"))->value);
  ASSERT_TRUE(tombstone.ok());
  EXPECT_EQ(tombstone->credential_keys, (std::vector<std::string>{"UNEW", "UOLD"}));

  ASSERT_TRUE(registerCluster("quiet-1", {}).accepted);  // a sign of life: connected now
  putTombstone("quiet-1", false);
  auto removal = deploys(quiet, 1);
  ASSERT_EQ(removal.size(), 1u);
  EXPECT_TRUE(removal[0].remove);
  // No answer: once the agent counts as disconnected, the periodic check removes the rest.
  ASSERT_TRUE(waitFor([&] { return clusterGone("quiet-1"); }));
  EXPECT_EQ(metric("deregistration_records_removed_total", {{"reason", "agent-disconnected"}}), 2);
  EXPECT_EQ(hub_.clusters->get(enrollmentKey("quiet-1")).error().kind, ErrorKind::kNotFound);
  EXPECT_GE(metric("invalid_records_total", {{"bucket", "clusters"}}), 1);
}

// A cluster whose agent falls silent for 3 heartbeat intervals is Offline in its summary (the bundles' counts kept),
// counted and gauged; its deploys stay in its durable, and the next heartbeat brings it back at once. A cluster that
// keeps beating never goes offline.
TEST_F(ClusterRecordsTest, ASilentClusterGoesOfflineAndItsNextHeartbeatBringsItBack) {
  stopScheduler();
  startScheduler(300ms);  // offline after 900 ms
  ASSERT_TRUE(registerCluster("quiet-1", {}).accepted);
  ASSERT_TRUE(registerCluster("busy-1", {}).accepted);
  auto quiet = harness::agentDurable(hub_, "quiet-1");
  publishBundle(appEvent(kManifestA, Json::array()));
  auto sent = deploys(quiet, 1);
  ASSERT_EQ(sent.size(), 1u);
  answer(sent[0]);
  auto summaryOf = [&](const std::string& cluster) -> Result<events::ClusterSummary> {
    auto entry = hub_.status->get(events::clusterSummaryKey(cluster));
    FLOTILLA_TRY(entry);
    auto json = Json::parse(entry->value);
    FLOTILLA_TRY(json);
    return events::decodeRecord<events::ClusterSummary>(*json);
  };
  auto offline = [&](const std::string& cluster) {
    auto summary = summaryOf(cluster);
    return summary.ok() && summary->offline && summary->state == events::kOfflineState &&
           summary->message.find("no sign of life since") != std::string::npos && summary->ready_bundles == "1/1";
  };
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < until && !offline("quiet-1")) {
    heartbeat("busy-1");
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(offline("quiet-1")) << (summaryOf("quiet-1").ok() ? events::encode(*summaryOf("quiet-1")).dump()
                                                                : summaryOf("quiet-1").error().describe());
  EXPECT_TRUE(scheduler_->offline("quiet-1"));
  EXPECT_FALSE(scheduler_->offline("busy-1")) << "it kept beating";
  EXPECT_EQ(metric("clusters_offline"), 1);
  EXPECT_EQ(metric("cluster_offline_transitions_total", {{"to", "offline"}}), 1);

  // A change for an offline cluster waits in its durable, as for any agent that is away.
  publishBundle(appEvent(kManifestB, Json::array(), kCommit2));
  ASSERT_EQ(deploys(quiet, 1).size(), 1u);

  heartbeat("quiet-1");
  ASSERT_TRUE(waitFor([&] {
    auto summary = summaryOf("quiet-1");
    return summary.ok() && !summary->offline && summary->state != events::kOfflineState;
  }));
  EXPECT_FALSE(scheduler_->offline("quiet-1"));
  EXPECT_EQ(metric("clusters_offline"), 0);
  EXPECT_EQ(metric("cluster_offline_transitions_total", {{"to", "online"}}), 1);
}

// A scheduler that comes back to a backlog of heartbeats (10,000 agents beat while it was away) judges silence
// only up to where its status consumer has read: while it works through heartbeats stored before any cluster was
// silent for long, no cluster goes Offline, though by the clock they have all been silent for longer than that.
TEST_F(ClusterRecordsTest, ABacklogOfHeartbeatsMakesNoClusterOffline) {
  stopScheduler();
  startScheduler(500ms);  // offline after 1.5 s
  ASSERT_TRUE(registerCluster("early-1", {}).accepted);
  ASSERT_TRUE(registerCluster("late-1", {}).accepted);
  stopScheduler();
  // The backlog, stored well within 1.5 s of the registrations (plain publishes the stream captures): early-1's
  // heartbeats first, late-1's one heartbeat at the very end.
  auto beat = [&](const std::string& cluster) {
    events::Heartbeat heartbeat{.id = events::newEventId(), .time = log::nowRfc3339(), .cluster = cluster};
    ASSERT_TRUE(hub_.connection->publish(events::statusSubject(cluster, ""), events::encode(heartbeat).dump()).ok());
  };
  constexpr int kBacklog = 10000;
  for (int i = 0; i < kBacklog; ++i) {
    beat("early-1");
  }
  beat("late-1");
  ASSERT_TRUE(hub_.connection->flush().ok());
  std::this_thread::sleep_for(2s);  // by the clock, both have now been silent for longer than 1.5 s
  // Live heartbeats go on behind the backlog, as the agents' would.
  std::atomic<bool> beating{true};
  std::thread agents([&] {
    while (beating) {
      beat("early-1");
      beat("late-1");
      std::this_thread::sleep_for(200ms);
    }
  });
  startScheduler(500ms);
  EXPECT_TRUE(waitFor([&] { return metric("heartbeats_total", {{"result", "recorded"}}) >= kBacklog + 3; }, 60s));
  std::this_thread::sleep_for(1500ms);  // more offline checks, now against the clock
  beating = false;
  agents.join();
  EXPECT_EQ(metric("cluster_offline_transitions_total", {{"to", "offline"}}), 0)
      << "a heartbeat still unread is not silence";
  EXPECT_FALSE(scheduler_->offline("early-1"));
  EXPECT_FALSE(scheduler_->offline("late-1"));
  EXPECT_EQ(metric("status_read_lag_seconds"), 0) << "caught up";
  EXPECT_GE(metric("status_lag_episodes_total"), 1) << "it read heartbeats stored more than 1.5 s before";
}

// A status report from an agent whose cluster record is gone (not deregistered) asks that agent to register again,
// like its heartbeat does (at most every 10 s per cluster).
TEST_F(ClusterRecordsTest, AReportFromAnUnregisteredClusterAsksItsAgentToRegisterAgain) {
  std::atomic<int> asked{0};
  auto subscription = hub_.connection->subscribe(identity::agentReregisterSubject("ghost-1"), "",
                                                 [&](const bus::Message&) { ++asked; });
  ASSERT_TRUE(subscription.ok()) << subscription.error().describe();
  publishStatus("ghost-1", "repo-app", "m:o", 1, "Ready");
  EXPECT_TRUE(waitFor([&] { return asked.load() == 1; }));
  EXPECT_EQ(metric("reregister_requests_total", {{"result", "sent"}}), 1);
  publishStatus("ghost-1", "repo-app", "m:o", 1, "NotReady");
  EXPECT_TRUE(waitFor([&] { return metric("status_events_total", {{"result", "no-deployment"}}) >= 2; }));
  EXPECT_EQ(asked.load(), 1) << "one ask per window";
}

// Removing the tombstone half-way (a Cluster document applied again) withdraws the deregistration: the deployment
// already told to delete is deployed again, and the agent may register.
TEST_F(ClusterRecordsTest, AWithdrawnDeregistrationDeploysAgain) {
  bus::PullConsumer c1;
  events::DeployEvent first;
  ASSERT_NO_FATAL_FAILURE(deployToC1(c1, first));
  putTombstone("c-1", false);
  auto removal = deploys(c1, 1);
  ASSERT_EQ(removal.size(), 1u);
  ASSERT_TRUE(removal[0].remove);

  ASSERT_TRUE(hub_.clusters->put(events::clusterSpecKey("c-1"), clusterDocument("c-1", "{}", false)).ok());
  ASSERT_TRUE(hub_.clusters->remove(events::clusterDeregisteredKey("c-1")).ok());
  auto again = deploys(c1, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].remove);
  EXPECT_EQ(again[0].manifest_id, kManifestA);
  EXPECT_GT(again[0].generation, removal[0].generation);
  EXPECT_EQ(metric("deregistrations_total", {{"result", "withdrawn"}}), 1);
  EXPECT_TRUE(registerCluster("c-1", {}).accepted);
  // The agent's answer to the old delete arrives late: it does not remove the new deployment.
  answer(removal[0]);
  EXPECT_TRUE(noMoreDeploys(c1));
  EXPECT_TRUE(scheduler_->deployment("c-1", kWs, "repo-app").has_value());
}

// A tombstone written while the scheduler is down is acted on at start: the delete is sent and the records go when
// it is answered.
TEST_F(ClusterRecordsTest, ADeregistrationContinuesAfterARestart) {
  bus::PullConsumer c1;
  events::DeployEvent first;
  ASSERT_NO_FATAL_FAILURE(deployToC1(c1, first));
  stopScheduler();
  putTombstone("c-1", false);
  startScheduler();
  auto removal = deploys(c1, 1);
  ASSERT_EQ(removal.size(), 1u);
  EXPECT_TRUE(removal[0].remove);
  answer(removal[0]);
  ASSERT_TRUE(waitFor([&] { return clusterGone("c-1"); }));
}

}  // namespace
}  // namespace flotilla::scheduler
