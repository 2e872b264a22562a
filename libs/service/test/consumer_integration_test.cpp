// The consumer runtime against a real nats-server: poison messages are terminated and reported while other
// messages keep flowing, waiting uses no deliveries, waking parked messages, per-key ordering, the time budget.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/events/terminated.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/hub.h"

namespace flotilla::service {
namespace {

using namespace std::chrono_literals;

bool eventually(const std::function<bool()>& fn, std::chrono::milliseconds timeout = 15s) {
  return harness::waitUntil(fn, timeout, 20ms);
}

class ConsumerTest : public harness::HubTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(startHub("consumer-test")); }

  ConsumerOptions options(int64_t max_deliveries = 3) {
    ConsumerOptions out;
    out.service = "test";
    out.label = "commits";
    out.stream = kCommitsStream;
    out.config.durable = "runtime-test";
    out.config.filter_subject = "flotilla.commit.>";
    out.config.ack_wait = 2s;
    out.max_deliveries = max_deliveries;
    out.fetch_timeout = 200ms;
    return out;
  }

  //! A consumer of the commits stream that reports what it terminates to KV `status`; not started.
  std::unique_ptr<Consumer> reportingConsumer(ConsumerOptions opts, Handler handler) {
    return std::make_unique<Consumer>(hub_.js, std::move(opts), std::move(handler), metrics_,
                                      TerminationReports{.status = hub_.status});
  }

  void publish(const std::string& key, const std::string& body) {
    ASSERT_TRUE(hub_.js->publish("flotilla.commit.ws." + key, body, key + "/" + body).ok());
  }

  //! The terminated records in KV `status`.
  std::vector<events::MessageTerminated> records() {
    std::vector<events::MessageTerminated> out;
    auto keys = hub_.status->keys(events::kTerminatedFilter);
    if (!keys.ok()) {
      return out;
    }
    for (const auto& key : *keys) {
      auto entry = hub_.status->get(key);
      if (entry.ok()) {
        auto json = Json::parse(entry->value);
        if (json.ok()) {
          if (auto record = events::decodeMessageTerminated(*json); record.ok()) {
            out.push_back(*record);
          }
        }
      }
    }
    return out;
  }

  Metrics metrics_{"test"};
};

TEST_F(ConsumerTest, ThrowingAndAlwaysFailingMessagesAreTerminatedAndReportedWhileOthersFlow) {
  std::atomic<int> handled{0};
  std::atomic<int> fail_runs{0};
  auto consumer = reportingConsumer(options(3), [&](const bus::Message& message, const Delivery&) {
    if (message.data() == "throw") {
      throw std::runtime_error("poison");
    }
    if (message.data() == "fail") {
      ++fail_runs;
      return Outcome::retry(10ms);
    }
    ++handled;
    return Outcome::ack("ok");
  });
  ASSERT_TRUE(consumer->start().ok());
  publish("a", "throw");
  publish("b", "fail");
  for (int i = 0; i < 5; ++i) {
    publish("a", "ok" + std::to_string(i));
    publish("b", "ok" + std::to_string(i));
  }
  ASSERT_TRUE(eventually([&] { return records().size() == 2 && handled == 10; })) << handled;
  EXPECT_EQ(fail_runs, 3);
  std::map<std::string, events::MessageTerminated> by_reason;
  for (auto& record : records()) {
    by_reason[record.reason] = record;
  }
  EXPECT_EQ(by_reason.at(std::string(events::kTerminatedThrew)).subject, "flotilla.commit.ws.a");
  EXPECT_EQ(by_reason.at(std::string(events::kTerminatedThrew)).msg_id, "a/throw");
  EXPECT_EQ(by_reason.at(std::string(events::kTerminatedExhausted)).deliveries, 3u);
  EXPECT_EQ(by_reason.at(std::string(events::kTerminatedExhausted)).consumer, "runtime-test");
  EXPECT_EQ(metrics_.value("messages_terminated_total",
                           {{"consumer", "commits"}, {"reason", std::string(events::kTerminatedThrew)}}),
            1);
  // The public event (published after the KV record: wait for both terminations' events).
  EXPECT_TRUE(eventually([&] {
    auto info = hub_.js->streamInfo(kEventsStream);
    return info.ok() && info->messages >= 2;
  }));
  auto event = hub_.js->getLastMessage(kEventsStream, events::terminatedSubject(kCommitsStream, "runtime-test"));
  ASSERT_TRUE(event.ok()) << event.error().describe();
  EXPECT_NE(event->data().find("io.flotilla.message.terminated"), std::string::npos);
  // Nothing is redelivered afterwards.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(fail_runs, 3);
  auto info = hub_.js->consumerInfo(kCommitsStream, "runtime-test");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->num_ack_pending, 0);
}

// A long fetch costs neither latency nor shutdown time: a message published while the consumer waits is handled
// at once, and stop() wakes the waiting fetch instead of waiting out its 60 s; the next consumer on the durable
// gets what was published after the stop.
TEST_F(ConsumerTest, ALongFetchHandsOverAtOnceAndStopWakesIt) {
  ConsumerOptions opts = options();
  opts.fetch_timeout = 60s;
  std::atomic<int> handled{0};
  auto consumer = reportingConsumer(opts, [&](const bus::Message&, const Delivery&) {
    ++handled;
    return Outcome::ack("ok");
  });
  ASSERT_TRUE(consumer->start().ok());
  std::this_thread::sleep_for(300ms);  // the fetch is waiting
  auto published = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(publish("a", "1"));
  ASSERT_TRUE(eventually([&] { return handled.load() == 1; }, 30s));
  EXPECT_LT(std::chrono::steady_clock::now() - published, 30s) << "the message waited for the fetch to end";
  auto stopping = std::chrono::steady_clock::now();
  consumer->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 30s) << "stop() waited out the fetch";
  EXPECT_EQ(metrics_.value("fetch_errors_total", {{"consumer", "commits"}}), 0) << "a woken fetch is not an error";

  ASSERT_NO_FATAL_FAILURE(publish("b", "2"));
  auto next = reportingConsumer(opts, [&](const bus::Message&, const Delivery&) {
    ++handled;
    return Outcome::ack("ok");
  });
  ASSERT_TRUE(next->start().ok());
  EXPECT_TRUE(eventually([&] { return handled.load() == 2; }, 30s));
  next->stop();
}

TEST_F(ConsumerTest, WaitingUsesNoDeliveriesAndDoesNotBlockOtherKeys) {
  std::atomic<int> others{0};
  std::atomic<uint64_t> last_count{0};
  std::atomic<uint64_t> last_attempt{0};
  std::atomic<bool> acked{false};
  auto consumer = reportingConsumer(options(2), [&](const bus::Message& message, const Delivery& delivery) {
    if (message.data() != "waiter") {
      ++others;
      return Outcome::ack("ok");
    }
    last_count = delivery.delivery_count;
    last_attempt = delivery.attempt;
    if (delivery.attempt < 6) {
      return Outcome::wait(50ms);
    }
    acked = true;
    return Outcome::ack("done");
  });
  ASSERT_TRUE(consumer->start().ok());
  publish("a", "waiter");
  publish("b", "other1");
  publish("a", "other2");
  ASSERT_TRUE(eventually([&] { return acked.load() && others == 2; }));
  EXPECT_EQ(last_count, 1u);
  EXPECT_EQ(last_attempt, 6u);
  EXPECT_TRUE(records().empty());
}

// wakeParked() runs parked messages again at once, long before their park delay (an hour here), in stream order
// for one key; it may be called from inside a handler, which does not wake its own message.
TEST_F(ConsumerTest, WakeParkedRunsParkedMessagesAgainNow) {
  std::mutex mutex;
  std::vector<std::string> runs;  // "<body>/<attempt>"
  std::atomic<bool> release{false};
  std::unique_ptr<Consumer> consumer;
  consumer = reportingConsumer(options(2), [&](const bus::Message& message, const Delivery& delivery) {
    const std::string body(message.data());
    {
      std::lock_guard lock(mutex);
      runs.push_back(body + "/" + std::to_string(delivery.attempt));
    }
    if (body == "waker") {
      consumer->wakeParked();  // from inside a handler: no deadlock
    }
    return release ? Outcome::ack("ok") : Outcome::wait(1h);
  });
  ASSERT_TRUE(consumer->start().ok());
  publish("a", "first");
  publish("a", "second");
  ASSERT_TRUE(eventually([&] {
    return metrics_.value("settled_total", {{"consumer", "commits"}, {"action", "wait"}}) == 2;
  }));
  release = true;
  publish("b", "waker");  // its handler wakes both parked messages of key a
  ASSERT_TRUE(eventually([&] {
    return metrics_.value("settled_total", {{"consumer", "commits"}, {"action", "ack"}}) == 3;
  }));
  std::lock_guard lock(mutex);
  std::vector<std::string> woken;
  for (const auto& run : runs) {
    if (run.ends_with("/2")) {
      woken.push_back(run);
    }
  }
  EXPECT_EQ(woken, (std::vector<std::string>{"first/2", "second/2"}));
  EXPECT_EQ(metrics_.value("wakes_total", {{"consumer", "commits"}}), 2);
  auto info = hub_.js->consumerInfo(kCommitsStream, "runtime-test");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->num_redelivered, 0);
}

// A wake from another thread while a handler runs is not lost: the message parks and runs again at once.
TEST_F(ConsumerTest, WakeDuringAHandlerIsNotLost) {
  std::atomic<bool> in_handler{false};
  std::atomic<bool> woke{false};
  std::atomic<int> attempts{0};
  auto consumer = reportingConsumer(options(2), [&](const bus::Message&, const Delivery& delivery) {
    attempts = static_cast<int>(delivery.attempt);
    if (delivery.attempt > 1) {
      return Outcome::ack("ok");
    }
    in_handler = true;
    while (!woke) {
      std::this_thread::sleep_for(5ms);
    }
    return Outcome::wait(1h);  // decided before the wake was seen
  });
  ASSERT_TRUE(consumer->start().ok());
  publish("a", "late");
  ASSERT_TRUE(eventually([&] { return in_handler.load(); }));
  consumer->wakeParked();
  woke = true;
  ASSERT_TRUE(eventually([&] { return attempts == 2; }));
  EXPECT_TRUE(eventually([&] {
    return metrics_.value("settled_total", {{"consumer", "commits"}, {"action", "ack"}}) == 1;
  }));
}

TEST_F(ConsumerTest, SameKeyInOrderOtherKeysInParallel) {
  auto opts = options();
  opts.workers = 4;
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> seen;
  std::set<std::string> active;
  std::atomic<int> overlap{0};
  std::atomic<int> max_parallel{0};
  std::atomic<int> done{0};
  Consumer consumer(
      hub_.js, opts,
      [&](const bus::Message& message, const Delivery& delivery) {
        {
          std::lock_guard lock(mutex);
          if (!active.insert(delivery.subject).second) {
            ++overlap;
          }
          max_parallel = std::max<int>(max_parallel, static_cast<int>(active.size()));
          seen[delivery.subject].emplace_back(message.data());
        }
        std::this_thread::sleep_for(30ms);
        {
          std::lock_guard lock(mutex);
          active.erase(delivery.subject);
        }
        ++done;
        return Outcome::ack("ok");
      },
      metrics_);
  ASSERT_TRUE(consumer.start().ok());
  for (int i = 0; i < 6; ++i) {
    for (const char* key : {"a", "b", "c"}) {
      publish(key, std::to_string(i));
    }
  }
  ASSERT_TRUE(eventually([&] { return done == 18; }));
  EXPECT_EQ(overlap, 0);
  EXPECT_GT(max_parallel, 1);
  for (const auto& [key, order] : seen) {
    EXPECT_EQ(order, (std::vector<std::string>{"0", "1", "2", "3", "4", "5"})) << key;
  }
}

TEST_F(ConsumerTest, TimeBudgetTerminatesHungHandlersButNotDeclaredWaits) {
  auto opts = options();
  opts.budget = 300ms;
  std::atomic<int> finished{0};
  auto consumer = reportingConsumer(opts, [&](const bus::Message& message, const Delivery& delivery) {
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(100ms);
      if (message.data() == "patient") {
        delivery.progress();  // an expected wait (a health timeout) declares itself
      }
    }
    ++finished;
    return Outcome::ack("ok");
  });
  ASSERT_TRUE(consumer->start().ok());
  publish("a", "hung");
  publish("b", "patient");
  ASSERT_TRUE(eventually([&] { return finished == 2; }));
  auto terminated = records();
  ASSERT_EQ(terminated.size(), 1u);
  EXPECT_EQ(terminated[0].reason, events::kTerminatedOverBudget);
  EXPECT_EQ(terminated[0].subject, "flotilla.commit.ws.a");
  EXPECT_EQ(metrics_.value("settled_total", {{"consumer", "commits"}, {"action", "ack"}}), 1);
}

TEST_F(ConsumerTest, PendingGaugeShowsTheDurablesLagAndFallsToZeroOnceCaughtUp) {
  for (int i = 0; i < 10; ++i) {
    publish("a", "m" + std::to_string(i));
  }
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool open = false;
  std::atomic<int> handled{0};
  auto consumer = reportingConsumer(options(), [&](const bus::Message&, const Delivery&) {
    std::unique_lock lock(gate_mutex);
    gate_cv.wait(lock, [&] { return open; });
    ++handled;
    return Outcome::ack("ok");
  });
  const prometheus::Labels labels = {{"consumer", "commits"}, {"durable", "runtime-test"}};
  ASSERT_TRUE(consumer->start().ok());
  // The first fetch takes what the slots hold (2 of 10): the rest is the lag, and no fetch runs while they wait.
  ASSERT_TRUE(eventually([&] { return metrics_.value("consumer_pending_messages", labels) > 0; }));
  EXPECT_GE(metrics_.value("consumer_pending_messages", labels), 8);
  EXPECT_LE(metrics_.value("consumer_pending_messages", labels), 9);
  {
    std::lock_guard lock(gate_mutex);
    open = true;
  }
  gate_cv.notify_all();
  ASSERT_TRUE(eventually([&] { return handled == 10; })) << handled;
  EXPECT_TRUE(eventually([&] { return metrics_.value("consumer_pending_messages", labels) == 0; }));
  consumer->stop();
}

}  // namespace
}  // namespace flotilla::service
