#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bus_test_util.h"
#include "flotilla/core/log.h"
#include "flotilla/harness/poll.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;
using testing::BusTest;

class BusConnectionTest : public BusTest {};

// Nothing listening on the port: the caller is told to retry later.
TEST(BusConnectTest, NothingListeningIsTransient) {
  auto port = harness::freeTcpPort();
  ASSERT_TRUE(port.ok());
  auto conn = Connection::connect({.servers = {"nats://127.0.0.1:" + std::to_string(*port)}, .connect_timeout = 500ms});
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.error().kind, ErrorKind::kTransient) << conn.error().describe();
  EXPECT_EQ(conn.error().where, "natsConnection_Connect");
  EXPECT_NE(conn.error().message.find(std::to_string(*port)), std::string::npos) << conn.error().message;
}

TEST(BusConnectTest, NoServersIsInvalid) {
  auto conn = Connection::connect({.servers = {}});
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.error().kind, ErrorKind::kInvalid);
}

TEST_F(BusConnectionTest, PublishSubscribeWithHeaders) {
  std::promise<std::pair<std::string, std::string>> got;
  auto sub = conn_->subscribe("bus.test.hello", "", [&](Message msg) {
    got.set_value({std::string(msg.data()), msg.header("X-Flotilla").value_or("")});
  });
  ASSERT_TRUE(sub.ok()) << sub.error().describe();
  ASSERT_TRUE(conn_->flush().ok());
  ASSERT_TRUE(conn_->publish("bus.test.hello", "world", {{"X-Flotilla", "yes"}}).ok());
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  auto [data, header] = future.get();
  EXPECT_EQ(data, "world");
  EXPECT_EQ(header, "yes");
  EXPECT_TRUE(conn_->connected());
  EXPECT_NE(conn_->connectedUrl().find(std::to_string(server_->port())), std::string::npos);
}

// flotilla.register works this way: the responder answers on the request's reply subject.
TEST_F(BusConnectionTest, RequestReply) {
  auto sub = conn_->subscribe("bus.test.register", "registrars", [&](Message msg) {
    EXPECT_TRUE(conn_->publish(msg.reply(), "ack:" + std::string(msg.data())).ok());
  });
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(conn_->flush().ok());
  auto reply = conn_->request("bus.test.register", "cluster-1", 5s);
  ASSERT_TRUE(reply.ok()) << reply.error().describe();
  EXPECT_EQ(reply->data(), "ack:cluster-1");
}

// Requests sent without waiting: the answers, with their headers, come to the caller's own inbox subscription.
TEST_F(BusConnectionTest, PublishRequestAnswersArriveOnTheCallersInbox) {
  auto responder = conn_->subscribe("bus.test.echo", "", [&](Message msg) {
    EXPECT_TRUE(
        conn_->publish(msg.reply(), "re:" + std::string(msg.data()), {{"X-Asked", msg.header("X-Ask").value_or("")}})
            .ok());
  });
  ASSERT_TRUE(responder.ok());
  std::mutex mutex;
  std::vector<std::string> answers;
  std::promise<void> both;
  auto inbox = conn_->subscribe("_INBOX.bus-test.>", "", [&](Message msg) {
    std::lock_guard lock(mutex);
    answers.push_back(std::string(msg.subject()) + " " + std::string(msg.data()) + " " +
                      msg.header("X-Asked").value_or(""));
    if (answers.size() == 2) {
      both.set_value();
    }
  });
  ASSERT_TRUE(inbox.ok());
  ASSERT_TRUE(conn_->flush().ok());
  ASSERT_TRUE(conn_->publishRequest("bus.test.echo", "_INBOX.bus-test.1", "a", {{"X-Ask", "one"}}).ok());
  ASSERT_TRUE(conn_->publishRequest("bus.test.echo", "_INBOX.bus-test.2", "b").ok());
  ASSERT_EQ(both.get_future().wait_for(5s), std::future_status::ready);
  std::lock_guard lock(mutex);
  std::sort(answers.begin(), answers.end());
  EXPECT_EQ(answers, (std::vector<std::string>{"_INBOX.bus-test.1 re:a one", "_INBOX.bus-test.2 re:b "}));
  EXPECT_EQ(conn_->publishRequest("bus.test.echo", "", "c").error().kind, ErrorKind::kInvalid);
}

TEST_F(BusConnectionTest, RequestWithoutResponderIsTransient) {
  auto reply = conn_->request("bus.test.nobody." + harness::uniqueName("x"), "?", 2s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().kind, ErrorKind::kTransient) << reply.error().describe();
}

// Destroying a subscription waits for a running callback, so what it captured can be freed right after.
TEST_F(BusConnectionTest, UnsubscribeWaitsForRunningCallback) {
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  auto sub = conn_->subscribe("bus.test.slow", "", [&](Message) {
    started = true;
    std::this_thread::sleep_for(300ms);
    finished = true;
  });
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(conn_->flush().ok());
  ASSERT_TRUE(conn_->publish("bus.test.slow", "x").ok());
  for (int i = 0; i < 500 && !started; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(started);
  sub->unsubscribe();
  EXPECT_TRUE(finished);
}

// A handler may drop its own subscription without deadlocking. (Everything the handler touches lives on the
// heap: this unsubscribe does not wait, so the test body may be gone before the handler returns.)
TEST_F(BusConnectionTest, UnsubscribeFromInsideTheCallback) {
  struct Shared {
    std::mutex mutex;
    Subscription sub;
    std::promise<void> done;
    int calls = 0;
  };
  auto shared = std::make_shared<Shared>();
  auto created = conn_->subscribe("bus.test.self", "", [shared](Message) {
    std::lock_guard lock(shared->mutex);
    if (++shared->calls == 1) {
      shared->sub.unsubscribe();
      shared->done.set_value();
    }
  });
  ASSERT_TRUE(created.ok());
  {
    std::lock_guard lock(shared->mutex);
    shared->sub = std::move(*created);
  }
  ASSERT_TRUE(conn_->flush().ok());
  ASSERT_TRUE(conn_->publish("bus.test.self", "x").ok());
  ASSERT_EQ(shared->done.get_future().wait_for(5s), std::future_status::ready);
  ASSERT_TRUE(conn_->publish("bus.test.self", "y").ok());
  ASSERT_TRUE(conn_->flush().ok());
  std::this_thread::sleep_for(100ms);
  std::lock_guard lock(shared->mutex);
  EXPECT_EQ(shared->calls, 1);
}

TEST(BusConnectTest, GlobalMessageDeliveryDeliversInOrder) {
  auto server = harness::sharedNatsServer();
  ASSERT_TRUE(server.ok());
  auto conn = Connection::connect({.servers = {(*server)->url()}, .global_message_delivery = true});
  ASSERT_TRUE(conn.ok()) << conn.error().describe();
  std::mutex mutex;
  std::vector<std::string> got;
  std::promise<void> done;
  auto sub = (*conn)->subscribe("bus.test.global", "", [&](Message msg) {
    std::lock_guard lock(mutex);
    got.emplace_back(msg.data());
    if (got.size() == 50) {
      done.set_value();
    }
  });
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE((*conn)->flush().ok());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*conn)->publish("bus.test.global", std::to_string(i)).ok());
  }
  ASSERT_EQ(done.get_future().wait_for(5s), std::future_status::ready);
  sub->unsubscribe();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], std::to_string(i));
  }
}

// A subscription that outlives its connection is still safe to destroy.
TEST(BusConnectTest, SubscriptionOutlivingItsConnection) {
  auto server = harness::sharedNatsServer();
  ASSERT_TRUE(server.ok());
  auto conn = Connection::connect({.servers = {(*server)->url()}});
  ASSERT_TRUE(conn.ok());
  auto sub = (*conn)->subscribe("bus.test.orphan", "", [](Message) {});
  ASSERT_TRUE(sub.ok());
  conn->reset();
  auto start = std::chrono::steady_clock::now();
  sub->unsubscribe();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// Users and permissions come from a config file; a wrong password is permanent, not worth retrying.
TEST(BusAuthTest, UserPasswordFromConfig) {
  auto server = harness::NatsServer::start({.config = R"(
authorization {
  users = [
    {user: agent, password: s3cret, permissions: {publish: ["flotilla.status.c1.>"], subscribe: ["_INBOX.>"]}}
  ]
}
)"});
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto good = Connection::connect({.servers = {(*server)->url()}, .user = "agent", .password = "s3cret"});
  ASSERT_TRUE(good.ok()) << good.error().describe();
  EXPECT_TRUE((*good)->connected());

  auto bad = Connection::connect({.servers = {(*server)->url()}, .user = "agent", .password = "wrong"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kPermanent) << bad.error().describe();

  // A publish outside the user's permissions is rejected asynchronously: logged and counted.
  auto metrics = std::make_shared<Metrics>("bustest");
  auto limited = Connection::connect(
      {.servers = {(*server)->url()}, .name = "limited", .user = "agent", .password = "s3cret", .metrics = metrics});
  ASSERT_TRUE(limited.ok());
  ASSERT_TRUE((*limited)->publish("flotilla.deploy.c2", "x").ok());
  (void)(*limited)->flush();
  for (int i = 0; i < 100 && metrics->value("nats_async_errors_total", {{"client", "limited"}}) < 1; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GE(metrics->value("nats_async_errors_total", {{"client", "limited"}}), 1);
}

// The client reconnects by itself after the server restarts, logs it, counts it, and JetStream data survives.
TEST(BusReconnectTest, ReconnectsAfterServerRestartAndJetStreamStateSurvives) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  std::mutex log_mutex;
  std::vector<std::string> lines;
  log::setSink([&](std::string_view line) {
    std::lock_guard lock(log_mutex);
    lines.emplace_back(line);
  });
  auto metrics = std::make_shared<Metrics>("bustest");
  auto conn = Connection::connect(
      {.servers = {(*server)->url()}, .name = "reconnect-test", .reconnect_wait = 100ms, .metrics = metrics});
  ASSERT_TRUE(conn.ok()) << conn.error().describe();
  auto js = JetStream::create(*conn);
  ASSERT_TRUE(js.ok());
  ASSERT_TRUE((*js)->ensureStream({.name = "RESTART", .subjects = {"restart.>"}}).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*js)->publish("restart.x", "m" + std::to_string(i)).ok());
  }

  ASSERT_TRUE((*server)->restart().ok()) << (*server)->logTail();
  ASSERT_TRUE(harness::waitUntil(
      [&] {
        return (*conn)->connected() && metrics->value("nats_reconnects_total", {{"client", "reconnect-test"}}) >= 1;
      },
      10s));

  // JetStream needs a moment after the restart to load the stream from the store dir.
  Result<StreamInfo> info = fail(ErrorKind::kInternal, "not asked");
  for (int i = 0; i < 100; ++i) {
    info = (*js)->streamInfo("RESTART");
    if (info.ok()) {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->messages, 3u);
  auto ack = (*js)->publish("restart.x", "after");
  ASSERT_TRUE(ack.ok()) << ack.error().describe();
  EXPECT_EQ(ack->sequence, 4u);
  EXPECT_GE(metrics->value("nats_disconnects_total", {{"client", "reconnect-test"}}), 1);
  log::setSink(nullptr);
  std::lock_guard lock(log_mutex);
  bool logged_disconnect = false;
  bool logged_reconnect = false;
  for (const auto& line : lines) {
    logged_disconnect |= line.find("nats disconnected") != std::string::npos;
    logged_reconnect |= line.find("nats reconnected") != std::string::npos;
  }
  EXPECT_TRUE(logged_disconnect);
  EXPECT_TRUE(logged_reconnect);
}

// While the server is down, calls fail with kTransient instead of hanging, and a crash (kill -9) loses no
// acknowledged JetStream data. A publish that failed may still land later (libnats buffers it and flushes it on
// reconnect), which is why publishers retry with the same Nats-Msg-Id: the stream ends up with one copy.
TEST(BusReconnectTest, CallsFailTransientWhileServerIsDownAndRetriesAreDeduplicated) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto conn = Connection::connect({.servers = {(*server)->url()}, .reconnect_wait = 100ms});
  ASSERT_TRUE(conn.ok());
  auto js = JetStream::create(*conn, {.api_timeout = 1s});
  ASSERT_TRUE(js.ok());
  ASSERT_TRUE((*js)->ensureStream({.name = "CRASH", .subjects = {"crash.>"}}).ok());
  ASSERT_TRUE((*js)->publish("crash.a", "kept", "id-kept").ok());

  (*server)->kill9();
  for (int i = 0; i < 100 && (*conn)->connected(); ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE((*conn)->connected());
  auto down = (*js)->publish("crash.a", "retried", "id-retried");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().kind, ErrorKind::kTransient) << down.error().describe();

  ASSERT_TRUE((*server)->restart().ok()) << (*server)->logTail();
  Result<PublishAck> retry = fail(ErrorKind::kInternal, "not tried");
  for (int i = 0; i < 200; ++i) {
    retry = (*js)->publish("crash.a", "retried", "id-retried");
    if (retry.ok()) {
      break;
    }
    EXPECT_EQ(retry.error().kind, ErrorKind::kTransient) << retry.error().describe();
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(retry.ok()) << retry.error().describe();
  auto info = (*js)->streamInfo("CRASH");
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->messages, 2u);
  auto first = (*js)->getMessage("CRASH", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->data(), "kept");
  auto last = (*js)->getLastMessage("CRASH", "crash.a");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->data(), "retried");
}

}  // namespace
}  // namespace flotilla::bus
