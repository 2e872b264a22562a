// Poison messages on the scheduler's `scheduler-status` durable, through the real consumer runtime against a real
// nats-server -js: a status report that fails on every delivery, and one whose handling kills the process each
// time, are terminated after the maximum delivery count and reported (KV record status/terminated.*, a log line
// naming the message id and subject, messages_terminated_total, the io.flotilla.message.terminated event), while
// the scheduler keeps storing the other reports.
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/poll.h"
#include "flotilla/scheduler/scheduler.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;

const std::string kWs = "fleet-default";
const std::string kManifest(64, 'a');

bool waitFor(const std::function<bool()>& check, std::chrono::milliseconds timeout = 20s) {
  return harness::waitUntil(check, timeout);
}

class SchedulerStatusPoisonTest : public harness::HubTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("status-poison-test"));
    log::setSink([this](std::string_view line) {
      std::lock_guard lock(log_mutex_);
      log_lines_.emplace_back(line);
    });
  }

  void TearDown() override {
    if (scheduler_) {
      scheduler_->stop();
    }
    scheduler_.reset();
    log::setSink(nullptr);
    stopHub();
  }

  //! A scheduler whose status durable allows `max_deliveries`; a report ahead of its deployment record is retried
  //! for `ahead_retries` deliveries before it is stored as stale.
  void startScheduler(int64_t max_deliveries, uint64_t ahead_retries) {
    metrics_ = std::make_unique<Metrics>("scheduler");
    SchedulerOptions options{.fetch_timeout = 200ms, .ack_wait = 1s, .retry_base = 100ms, .retry_max = 1s};
    options.agent_labels = AgentLabelPolicy::all();  // they target by the labels their registrations report
    options.max_deliveries = max_deliveries;
    options.ahead_retries = ahead_retries;
    auto created = Scheduler::create(hub_, *metrics_, options);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    scheduler_ = std::move(created).value();
    auto started = scheduler_->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
    ASSERT_TRUE(waitFor([&] { return scheduler_->caughtUp(); }));
  }

  //! Registers `cluster`, publishes a bundle for every cluster and waits for its deployment record.
  DeploymentRecord deployed(const std::string& cluster, const std::string& bundle) {
    EXPECT_TRUE(harness::requestRegistration(hub_, cluster, kWs, {}).ok());
    events::BundleEvent event;
    event.id = events::bundleMsgId(kWs, bundle, std::string(40, '1'), kManifest);
    event.time = log::nowRfc3339();
    event.workspace = kWs;
    event.gitrepo = "repo";
    event.bundle = bundle;
    event.path = "app";
    event.commit = std::string(40, '1');
    event.manifest_id = kManifest;
    auto ack = hub_.js->publish(events::bundleSubject(kWs, bundle), events::encode(event).dump(), event.id);
    EXPECT_TRUE(ack.ok()) << ack.error().describe();
    std::optional<DeploymentRecord> record;
    EXPECT_TRUE(waitFor([&] {
      record = scheduler_->deployment(cluster, kWs, bundle);
      return record && !record->deployment_id.empty();
    })) << cluster
        << "/" << bundle << " was not deployed";
    return record.value_or(DeploymentRecord{});
  }

  //! Publishes an agent's report; its stream sequence (0 when the publish failed, which fails the test).
  uint64_t report(const std::string& cluster, const std::string& bundle, const std::string& deployment_id,
                  int64_t generation, const std::string& state, events::StatusEvent* sent = nullptr) {
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
                              .message = state == "Ready" ? "" : "test report",
                              .agent_version = "0.1.0"};
    if (sent != nullptr) {
      *sent = event;
    }
    auto ack = hub_.js->publish(events::statusSubject(cluster, bundle), events::encode(event).dump(), event.id);
    EXPECT_TRUE(ack.ok()) << ack.error().describe();
    return ack.ok() ? ack->sequence : 0;
  }

  //! The stored report state of (cluster, bundle) ("" while there is none).
  std::string storedState(const std::string& cluster, const std::string& bundle) {
    auto key = events::bundleDeploymentStatusKey(cluster, kWs, bundle);
    auto entry = hub_.status->get(key);
    if (!entry.ok()) {
      harness::notFound(entry, "status/" + key);  // fails the test on anything but NotFound
      return {};
    }
    auto status = events::parseRecord<events::BdStatus>(entry->value);
    EXPECT_TRUE(status.ok()) << entry->value;
    return status.ok() ? status->state : std::string();
  }

  //! The terminated record of the status durable's message at `sequence`, once it is stored.
  std::optional<events::MessageTerminated> terminatedRecord(uint64_t sequence) {
    auto key = events::terminatedKey(service::kStatusStream, kStatusConsumer, sequence);
    EXPECT_TRUE(waitFor([&] { return hub_.status->get(key).ok(); })) << "no record " << key;
    auto entry = hub_.status->get(key);
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto record = events::decodeMessageTerminated(Json::parse(entry->value).valueOr(Json()));
    EXPECT_TRUE(record.ok()) << entry->value;
    return record.ok() ? std::optional(*record) : std::nullopt;
  }

  //! Checks the report of a terminated status message besides its KV record: the log line, the metric and the event.
  void expectReported(const events::MessageTerminated& record) {
    EXPECT_EQ(record.service, "scheduler");
    EXPECT_EQ(record.stream, service::kStatusStream);
    EXPECT_EQ(record.consumer, kStatusConsumer);
    EXPECT_EQ(record.reason, events::kTerminatedExhausted);
    EXPECT_EQ(metrics_->value("messages_terminated_total",
                              {{"consumer", "status"}, {"reason", std::string(events::kTerminatedExhausted)}}),
              1);
    EXPECT_TRUE(loggedTermination(record)) << "no log line names " << record.msg_id << " on " << record.subject;
    auto event = hub_.js->getLastMessage(service::kEventsStream,
                                         events::terminatedSubject(service::kStatusStream, kStatusConsumer));
    ASSERT_TRUE(event.ok()) << event.error().describe();
    EXPECT_NE(event->data().find(record.msg_id), std::string::npos) << event->data();
  }

  bool loggedTermination(const events::MessageTerminated& record) {
    std::lock_guard lock(log_mutex_);
    for (const auto& line : log_lines_) {
      auto json = Json::parse(line);
      if (json.ok() && json->getString("msg").find("message terminated") != std::string::npos &&
          json->getString("msg_id") == record.msg_id && json->getString("subject") == record.subject) {
        return true;
      }
    }
    return false;
  }

  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  std::mutex log_mutex_;
  std::vector<std::string> log_lines_;
};

// A report that answers a newer DeployEvent than the deployment record (as if the record's write were in flight)
// fails on every delivery when the scheduler waits for the record longer than the delivery limit: it is nak'd on
// each, terminated on the last and reported, and the report of another bundle sent after it is stored meanwhile.
TEST_F(SchedulerStatusPoisonTest, AReportThatAlwaysFailsIsTerminatedAndReportedWhileOthersAreStored) {
  ASSERT_NO_FATAL_FAILURE(startScheduler(3, 1000));
  const auto app = deployed("c-1", "repo-app");
  const auto web = deployed("c-1", "repo-web");
  ASSERT_FALSE(HasFailure());

  events::StatusEvent poison;
  const uint64_t sequence = report("c-1", "repo-app", "newer:deployment", app.generation + 1, "Ready", &poison);
  ASSERT_NE(sequence, 0u);
  report("c-1", "repo-web", web.deployment_id, web.generation, "Ready");
  EXPECT_TRUE(waitFor([&] { return storedState("c-1", "repo-web") == "Ready"; })) << "the other report was not stored";

  auto record = terminatedRecord(sequence);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->msg_id, poison.id);
  EXPECT_EQ(record->subject, events::statusSubject("c-1", "repo-app"));
  EXPECT_EQ(record->deliveries, 3u);
  EXPECT_NE(record->message.find("gave up after 3 deliveries"), std::string::npos) << record->message;
  EXPECT_EQ(metrics_->value("status_events_total", {{"result", "ahead"}}), 3);
  ASSERT_NO_FATAL_FAILURE(expectReported(*record));
  EXPECT_EQ(storedState("c-1", "repo-app"), "") << "the poison report must not be stored";

  // Still serving: the agent's report about the deployment the record holds is stored.
  report("c-1", "repo-app", app.deployment_id, app.generation, "Ready");
  EXPECT_TRUE(waitFor([&] { return storedState("c-1", "repo-app") == "Ready"; }));
  EXPECT_EQ(metrics_->value("messages_terminated_total",
                            {{"consumer", "status"}, {"reason", std::string(events::kTerminatedExhausted)}}),
            1);
}

// A report whose handling kills the scheduler every time (each "process" takes it and dies without settling it)
// is terminated unrun on the delivery after the maximum and reported; the scheduler then stores the next report.
TEST_F(SchedulerStatusPoisonTest, AReportThatKillsTheSchedulerIsTerminatedAndReported) {
  bus::ConsumerConfig config{.durable = std::string(kStatusConsumer),
                             .filter_subject = std::string(events::kStatusFilter),
                             .ack_wait = 1s,
                             .max_deliver = 3};
  ASSERT_TRUE(hub_.js->ensureConsumer(service::kStatusStream, config).ok());
  auto crashing = hub_.js->bindPull(service::kStatusStream, std::string(kStatusConsumer));
  ASSERT_TRUE(crashing.ok()) << crashing.error().describe();
  events::StatusEvent poison;
  const uint64_t sequence = report("c-1", "repo-app", "m:o", 1, "Ready", &poison);
  ASSERT_NE(sequence, 0u);
  uint64_t delivered = 0;
  ASSERT_NO_FATAL_FAILURE(harness::deliverUnsettled(*crashing, 2, delivered));
  ASSERT_EQ(delivered, sequence);
  crashing = bus::PullConsumer();

  ASSERT_NO_FATAL_FAILURE(startScheduler(2, 5));
  auto record = terminatedRecord(sequence);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->msg_id, poison.id);
  EXPECT_EQ(record->subject, events::statusSubject("c-1", "repo-app"));
  EXPECT_EQ(record->deliveries, 3u);
  EXPECT_NE(record->message.find("did not survive"), std::string::npos) << record->message;
  ASSERT_NO_FATAL_FAILURE(expectReported(*record));

  const auto app = deployed("c-1", "repo-app");
  report("c-1", "repo-app", app.deployment_id, app.generation, "Ready");
  EXPECT_TRUE(waitFor([&] { return storedState("c-1", "repo-app") == "Ready"; }));
}

}  // namespace
}  // namespace flotilla::scheduler
