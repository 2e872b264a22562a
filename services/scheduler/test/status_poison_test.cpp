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
#include "scheduler_fixture.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;  // NOLINT(google-build-using-namespace): the shared fixture

bool waitFor(const std::function<bool()>& check, std::chrono::milliseconds timeout = 20s) {
  return harness::waitUntil(check, timeout);
}

class SchedulerStatusPoisonTest : public SchedulerFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("status-poison-test"));
    log::setSink([this](std::string_view line) {
      std::lock_guard lock(log_mutex_);
      log_lines_.emplace_back(line);
    });
  }

  void TearDown() override {
    stopScheduler();
    log::setSink(nullptr);
    stopHub();
  }

  //! A scheduler whose status durable allows `max_deliveries`; a report ahead of its deployment record is retried
  //! for `ahead_retries` deliveries before it is stored as stale.
  void startScheduler(int64_t max_deliveries, uint64_t ahead_retries) {
    auto options = testOptions();
    options.ack_wait = 1s;
    options.max_deliveries = max_deliveries;
    options.ahead_retries = ahead_retries;
    startSchedulerWith(options);
  }

  //! Registers `cluster`, publishes a bundle for every cluster and waits for its deployment record.
  DeploymentRecord deployed(const std::string& cluster, const std::string& bundle) {
    EXPECT_TRUE(harness::requestRegistration(hub_, cluster, kWs, {}).ok());
    publishBundle(bundleEvent(bundle, kManifestA, Json::array()));
    std::optional<DeploymentRecord> record;
    EXPECT_TRUE(waitFor([&] {
      record = scheduler_->deployment(cluster, kWs, bundle);
      return record && !record->deployment_id.empty();
    })) << cluster
        << "/" << bundle << " was not deployed";
    return record.value_or(DeploymentRecord{});
  }

  //! Publishes an agent's report ("test report" unless Ready); its stream sequence (0 when the publish failed).
  uint64_t report(const std::string& cluster, const std::string& bundle, const std::string& deployment_id,
                  int64_t generation, const std::string& state, events::StatusEvent* sent = nullptr) {
    return publishStatus(cluster, bundle, deployment_id, generation, state, state == "Ready" ? "" : "test report",
                         sent);
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
    // The event follows the KV record (service/src/termination.cpp): wait for it too.
    auto last_event = [&] {
      return hub_.js->getLastMessage(service::kEventsStream,
                                     events::terminatedSubject(service::kStatusStream, kStatusConsumer));
    };
    EXPECT_TRUE(waitFor([&] { return last_event().ok(); }));
    auto event = last_event();
    ASSERT_TRUE(event.ok()) << event.error().describe();
    EXPECT_NE(event->data().find(record.msg_id), std::string::npos) << event->data();
  }

  //! The c-1/repo-app report `poison`, at `sequence`, was terminated after 3 deliveries (`because` in its message)
  //! and reported.
  void expectTerminated(uint64_t sequence, const events::StatusEvent& poison, std::string_view because) {
    auto record = terminatedRecord(sequence);
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->msg_id, poison.id);
    EXPECT_EQ(record->subject, events::statusSubject("c-1", "repo-app"));
    EXPECT_EQ(record->deliveries, 3u);
    EXPECT_NE(record->message.find(because), std::string::npos) << record->message;
    ASSERT_NO_FATAL_FAILURE(expectReported(*record));
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

  ASSERT_NO_FATAL_FAILURE(expectTerminated(sequence, poison, "gave up after 3 deliveries"));
  EXPECT_EQ(metrics_->value("status_events_total", {{"result", "ahead"}}), 3);
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
  bus::PullConsumer crashing;
  ASSERT_NO_FATAL_FAILURE(
      bindCrashingDurable(service::kStatusStream, kStatusConsumer, events::kStatusFilter, crashing));
  events::StatusEvent poison;
  const uint64_t sequence = report("c-1", "repo-app", "m:o", 1, "Ready", &poison);
  ASSERT_NE(sequence, 0u);
  uint64_t delivered = 0;
  ASSERT_NO_FATAL_FAILURE(harness::deliverUnsettled(crashing, 2, delivered));
  ASSERT_EQ(delivered, sequence);
  crashing = bus::PullConsumer();

  ASSERT_NO_FATAL_FAILURE(startScheduler(2, 5));
  ASSERT_NO_FATAL_FAILURE(expectTerminated(sequence, poison, "did not survive"));

  const auto app = deployed("c-1", "repo-app");
  report("c-1", "repo-app", app.deployment_id, app.generation, "Ready");
  EXPECT_TRUE(waitFor([&] { return storedState("c-1", "repo-app") == "Ready"; }));
}

}  // namespace
}  // namespace flotilla::scheduler
