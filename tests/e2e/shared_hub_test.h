// tests/e2e/shared_hub_test.h
//
// One Hub for all tests of a suite (a test file): the hub starts in SetUpTestSuite with `Suite::hubOptions()`,
// every test uses its own GitRepos, repositories and namespaces, and a failing test prints every service's log
// tail. Each test gets a StatusLog over the hub's status stream.
#pragma once

#include <iostream>
#include <memory>

#include <gtest/gtest.h>

#include "handover_util.h"
#include "status_log.h"

namespace flotilla::e2e {

template <typename Suite>
class SharedHubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = Hub::start(Suite::hubOptions());
    if (!started.ok()) {
      start_error_ = started.error().describe();
      return;
    }
    hub_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(hub_, nullptr) << "the hub did not start: " << start_error_;
    status_ = std::make_unique<StatusLog>(*hub_);
  }
  void TearDown() override {
    if (HasFailure() && hub_ != nullptr) {
      std::cerr << hub_->allLogs(60);
    }
  }

  static Hub& hub() { return *hub_; }
  StatusLog& status() { return *status_; }
  static std::vector<std::string> clusters() { return clusterNames(*hub_); }

  static inline Hub* hub_ = nullptr;
  static inline std::string start_error_;
  std::unique_ptr<StatusLog> status_;
};

}  // namespace flotilla::e2e
