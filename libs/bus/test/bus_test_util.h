// libs/bus/test/bus_test_util.h
//
// Shared setup for the bus integration tests: a connection and JetStream context on the process-wide
// nats-server from the harness. Each test names its streams and buckets with uniqueName() so tests never
// see each other's data. A fixture that owns streams or buckets makes them in setUpBus() (run only once the
// connection is up) and removes them in tearDownBus() (run only when the connection was made).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/harness/nats_server.h"

namespace flotilla::bus::testing {

class BusTest : public ::testing::Test {
 protected:
  //! `connection_name`: the NATS client name of the test's connection.
  explicit BusTest(std::string connection_name = "bus-test") : connection_name_(std::move(connection_name)) {}

  void SetUp() override {
    auto server = harness::sharedNatsServer();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    server_ = *server;
    auto conn = Connection::connect({.servers = {server_->url()}, .name = connection_name_});
    ASSERT_TRUE(conn.ok()) << conn.error().describe();
    conn_ = *conn;
    auto js = JetStream::create(conn_);
    ASSERT_TRUE(js.ok()) << js.error().describe();
    js_ = *js;
    setUpBus();
  }
  void TearDown() override {
    if (js_) {
      tearDownBus();
    }
  }

  virtual void setUpBus() {}
  virtual void tearDownBus() {}

  // Stores the value of a result that must succeed, failing the test with its error otherwise.
  template <class R, class T>
  static void assignOk(R result, T& out) {
    ASSERT_TRUE(result.ok()) << result.error().describe();
    out = *result;
  }

  std::string connection_name_;
  harness::NatsServer* server_ = nullptr;
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<JetStream> js_;
};

}  // namespace flotilla::bus::testing
