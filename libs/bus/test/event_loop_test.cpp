// Connections on a shared event loop (ConnectOptions::event_loop) against a real nats-server: they publish, request,
// subscribe and pull as usual, start no threads of their own, reconnect after a server restart, and leave the loop
// when closed.
#include "flotilla/bus/event_loop.h"

#include <atomic>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "bus_test_util.h"
#include "flotilla/harness/poll.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;
using testing::BusTest;

int processThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      return std::stoi(line.substr(8));
    }
  }
  return -1;
}

class BusEventLoopTest : public BusTest {
 protected:
  void setUpBus() override {
    auto loop = EventLoop::start();
    ASSERT_TRUE(loop.ok()) << loop.error().describe();
    loop_ = *loop;
  }

  Result<std::shared_ptr<Connection>> connectOnLoop(const std::string& name) {
    return Connection::connect(
        {.servers = {server_->url()}, .name = name, .global_message_delivery = true, .event_loop = loop_});
  }

  std::shared_ptr<EventLoop> loop_;
};

// 40 connections: each asks a responder (request/reply), receives on its own subscription (publishRequest), and the
// process gains far fewer than the 80 reader and flusher threads they would start without the loop.
TEST_F(BusEventLoopTest, ManyConnectionsShareOneThreadAndWorkAsUsual) {
  auto responder = conn_->subscribe("bus.loop.echo", "", [&](Message msg) {
    EXPECT_TRUE(conn_->publish(msg.reply(), "echo:" + std::string(msg.data())).ok());
  });
  ASSERT_TRUE(responder.ok()) << responder.error().describe();
  ASSERT_TRUE(conn_->flush().ok());

  const int threads_before = processThreads();
  constexpr int kConnections = 40;
  std::vector<std::shared_ptr<Connection>> clients;
  std::vector<Subscription> inboxes;
  std::atomic<int> answered{0};
  for (int i = 0; i < kConnections; ++i) {
    auto client = connectOnLoop("loop-" + std::to_string(i));
    ASSERT_TRUE(client.ok()) << client.error().describe();
    auto inbox = (*client)->subscribe("bus.loop.inbox." + std::to_string(i), "", [&](Message msg) {
      if (msg.data() == "echo:async") {
        ++answered;
      }
    });
    ASSERT_TRUE(inbox.ok()) << inbox.error().describe();
    inboxes.push_back(std::move(inbox).value());
    clients.push_back(*client);
  }
  EXPECT_EQ(loop_->attached(), static_cast<uint64_t>(kConnections));
  const int threads_after = processThreads();
  EXPECT_LT(threads_after - threads_before, 10) << "threads before " << threads_before << ", after " << threads_after;

  for (int i = 0; i < kConnections; ++i) {
    auto answer = clients[i]->request("bus.loop.echo", "sync-" + std::to_string(i), 5s);
    ASSERT_TRUE(answer.ok()) << answer.error().describe();
    EXPECT_EQ(answer->data(), "echo:sync-" + std::to_string(i));
    ASSERT_TRUE(clients[i]->publishRequest("bus.loop.echo", "bus.loop.inbox." + std::to_string(i), "async").ok());
  }
  harness::waitUntil([&] { return answered == kConnections; }, 5s, 20ms);
  EXPECT_EQ(answered.load(), kConnections);

  inboxes.clear();
  clients.clear();
  EXPECT_EQ(loop_->attached(), 0u);
}

// A JetStream publish and a pull on a connection of the loop: the simulated agents pull their deploy events this way.
TEST_F(BusEventLoopTest, JetStreamPublishAndPullOnTheLoop) {
  const std::string stream = "LOOP_" + std::to_string(::getpid());
  auto client = connectOnLoop("loop-js");
  ASSERT_TRUE(client.ok()) << client.error().describe();
  auto js = JetStream::create(*client);
  ASSERT_TRUE(js.ok()) << js.error().describe();
  ASSERT_TRUE((*js)->ensureStream({.name = stream, .subjects = {"bus.loopjs.>"}}).ok());
  ASSERT_TRUE((*js)->ensureConsumer(stream, {.durable = "pull", .filter_subject = "bus.loopjs.>"}).ok());
  auto consumer = (*js)->bindPull(stream, "pull");
  ASSERT_TRUE(consumer.ok()) << consumer.error().describe();
  auto ack = (*js)->publish("bus.loopjs.a", "one");
  ASSERT_TRUE(ack.ok()) << ack.error().describe();
  auto messages = consumer->fetch(4, 5s);
  ASSERT_TRUE(messages.ok()) << messages.error().describe();
  ASSERT_EQ(messages->size(), 1u);
  EXPECT_EQ((*messages)[0].data(), "one");
  EXPECT_TRUE((*messages)[0].ackSync().ok());
  EXPECT_TRUE((*js)->deleteStream(stream).ok());
}

// The server restarts: the connection reconnects on the loop (a new socket, the same watch) and works again.
TEST(BusEventLoopReconnectTest, AConnectionOnTheLoopReconnectsAfterAServerRestart) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto loop = EventLoop::start();
  ASSERT_TRUE(loop.ok()) << loop.error().describe();
  auto metrics = std::make_shared<Metrics>("bustest");
  auto conn = Connection::connect({.servers = {(*server)->url()},
                                   .name = "loop-reconnect",
                                   .reconnect_wait = 100ms,
                                   .global_message_delivery = true,
                                   .event_loop = *loop,
                                   .metrics = metrics});
  ASSERT_TRUE(conn.ok()) << conn.error().describe();
  auto responder = (*conn)->subscribe("bus.loop.again", "",
                                      [&](Message msg) { EXPECT_TRUE((*conn)->publish(msg.reply(), "here").ok()); });
  ASSERT_TRUE(responder.ok());

  ASSERT_TRUE((*server)->restart().ok()) << (*server)->logTail();
  ASSERT_TRUE(harness::waitUntil(
      [&] {
        return (*conn)->connected() && metrics->value("nats_reconnects_total", {{"client", "loop-reconnect"}}) >= 1;
      },
      10s));
  auto answer = (*conn)->request("bus.loop.again", "?", 5s);
  ASSERT_TRUE(answer.ok()) << answer.error().describe();
  EXPECT_EQ(answer->data(), "here");
  EXPECT_EQ((*loop)->attached(), 1u);
  responder->unsubscribe();
  conn->reset();
  EXPECT_EQ((*loop)->attached(), 0u);
}

}  // namespace
}  // namespace flotilla::bus
