// The fixture the scheduler's integration tests share (real nats-server -js through harness::HubTest): a scheduler
// with short test timings, registrations over request/reply, BundleEvents and StatusEvents published to the real
// streams, and DeployEvents read from agent-style durables.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler::scheduler_test {

inline const std::string kWs = "fleet-default";
inline const std::string kCommit1(40, '1');
inline const std::string kCommit2(40, '2');
inline const std::string kManifestA(64, 'a');
inline const std::string kManifestB(64, 'b');

inline bool waitFor(const std::function<bool()>& check,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  return harness::waitUntil(check, timeout);
}

//! A BundleEvent of GitRepo "repo" in kWs, path "app", default namespace "app".
inline events::BundleEvent bundleEvent(const std::string& bundle, const std::string& manifest, Json targets,
                                       const std::string& commit = kCommit1) {
  events::BundleEvent event;
  event.id = events::bundleMsgId(kWs, bundle, commit, manifest);
  event.time = log::nowRfc3339();
  event.workspace = kWs;
  event.gitrepo = "repo";
  event.bundle = bundle;
  event.path = "app";
  event.commit = commit;
  event.manifest_id = manifest;
  event.options = Json::obj({{"defaultNamespace", "app"}});
  event.targets = std::move(targets);
  return event;
}

//! Targets that select only clusters labelled env=prod.
inline Json prodOnly() {
  return Json::parse(R"([{"name":"prod","clusterSelector":{"matchLabels":{"env":"prod"}}}])").value();
}

class SchedulerFixture : public harness::HubTest {
 protected:
  //! The timings every test starts from: short fetches and retries, a 5 s ack wait.
  static SchedulerOptions testOptions() {
    return SchedulerOptions{.fetch_timeout = std::chrono::milliseconds(200),
                            .ack_wait = std::chrono::seconds(5),
                            .retry_base = std::chrono::milliseconds(100),
                            .retry_max = std::chrono::seconds(1),
                            // The tests target by the labels their registrations report.
                            .agent_labels = AgentLabelPolicy::all()};
  }

  //! Creates and starts a scheduler with `options` and waits until it caught up with the hub.
  void startSchedulerWith(const SchedulerOptions& options) {
    metrics_ = std::make_unique<Metrics>("scheduler");
    auto created = Scheduler::create(hub_, *metrics_, options);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    scheduler_ = std::move(created).value();
    auto started = scheduler_->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
    ASSERT_TRUE(waitFor([&] { return scheduler_->caughtUp(); }, std::chrono::seconds(20)));
  }

  //! Binds `consumer` to the scheduler's durable `durable` on `stream` (filter `filter`, a 1 s ack wait, 3
  //! deliveries) before the scheduler starts: a "process" that takes messages and dies holding them.
  void bindCrashingDurable(std::string_view stream, std::string_view durable, std::string_view filter,
                           bus::PullConsumer& consumer) {
    bindDurable(stream,
                {.durable = std::string(durable),
                 .filter_subject = std::string(filter),
                 .ack_wait = std::chrono::seconds(1),
                 .max_deliver = 3},
                consumer);
  }

  void stopScheduler() {
    if (scheduler_) {
      scheduler_->stop();
    }
    scheduler_.reset();
  }

  void TearDown() override {
    stopScheduler();
    stopHub();
  }

  events::RegisterReply registerCluster(const std::string& name, events::StringMap labels) {
    auto reply = harness::requestRegistration(hub_, name, kWs, std::move(labels));
    EXPECT_TRUE(reply.ok()) << reply.error().describe();
    if (!reply.ok()) {
      return {};
    }
    auto decoded = events::parsePayload<events::RegisterReply>(reply->data());
    EXPECT_TRUE(decoded.ok());
    return decoded.ok() ? *decoded : events::RegisterReply{};
  }

  void publishBundle(const events::BundleEvent& event, const std::string& msg_id_suffix = "") {
    auto ack = hub_.js->publish(events::bundleSubject(event.workspace, event.bundle), events::encode(event).dump(),
                                event.id + msg_id_suffix);
    ASSERT_TRUE(ack.ok()) << ack.error().describe();
  }

  //! Reads DeployEvents until `count` arrived or `timeout` passed (acking them).
  std::vector<events::DeployEvent> deploys(bus::PullConsumer& consumer, size_t count,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return harness::fetchPayloads<events::DeployEvent>(
        consumer, {.count = count, .timeout = timeout, .wait = std::chrono::milliseconds(200)},
        [](const bus::Message& message, const Result<events::DeployEvent>& event) {
          EXPECT_TRUE(event.ok()) << message.data();
          return true;
        });
  }

  //! True when nothing more arrives within `quiet`.
  bool noMoreDeploys(bus::PullConsumer& consumer, std::chrono::milliseconds quiet = std::chrono::milliseconds(700)) {
    auto more = deploys(consumer, 1, quiet);
    for (const auto& event : more) {
      ADD_FAILURE() << "unexpected DeployEvent: " << events::encode(event).dump();
    }
    return more.empty();
  }

  //! Registers c-1 (no labels), publishes bundle repo-app (kManifestA) for every cluster and reads c-1's DeployEvent
  //! into `first` (from c-1's agent durable, bound to `c1`).
  void deployToC1(bus::PullConsumer& c1, events::DeployEvent& first) {
    ASSERT_TRUE(registerCluster("c-1", {}).accepted);
    c1 = harness::agentDurable(hub_, "c-1");
    publishBundle(bundleEvent("repo-app", kManifestA, Json::array()));
    auto sent = deploys(c1, 1);
    ASSERT_EQ(sent.size(), 1u);
    first = sent[0];
  }

  //! Publishes an agent's report (reason "Test" unless Ready); its stream sequence (0 when the publish failed,
  //! which fails the test). `sent`, when given, receives the event.
  uint64_t publishStatus(const std::string& cluster, const std::string& bundle, const std::string& deployment_id,
                         int64_t generation, const std::string& state, const std::string& message = "",
                         events::StatusEvent* sent = nullptr) {
    static int64_t sequence = 0;
    ++sequence;
    events::StatusEvent event{.id = events::statusMsgId(cluster, bundle, deployment_id, state, sequence),
                              .time = log::nowRfc3339(),
                              .cluster = cluster,
                              .workspace = kWs,
                              .bundle = bundle,
                              .deployment_id = deployment_id,
                              .generation = generation,
                              .sequence = sequence,
                              .state = state,
                              .reason = state == "Ready" ? "" : "Test",
                              .message = message,
                              .agent_version = "0.1.0"};
    if (sent != nullptr) {
      *sent = event;
    }
    auto ack = hub_.js->publish(events::statusSubject(cluster, bundle), events::encode(event).dump(), event.id);
    EXPECT_TRUE(ack.ok()) << ack.error().describe();
    return ack.ok() ? ack->sequence : 0;
  }

  //! What an agent sends every --agent-heartbeat-interval.
  void heartbeat(const std::string& cluster) {
    events::Heartbeat beat{
        .id = events::newEventId(), .time = log::nowRfc3339(), .cluster = cluster, .agent_version = "0.1.0"};
    ASSERT_TRUE(hub_.js->publish(events::statusSubject(cluster, ""), events::encode(beat).dump(), beat.id).ok());
  }

  double metric(std::string_view name, const prometheus::Labels& labels = {}) { return metrics_->value(name, labels); }

  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace flotilla::scheduler::scheduler_test
