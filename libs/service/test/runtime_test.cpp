#include "flotilla/service/runtime.h"

#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/process.h"

namespace flotilla::service {
namespace {

TEST(ConfigTest, FlagsOverrideEnvironmentAndUnknownFlagsAreErrors) {
  setenv("FLOTILLA_NATS_URL", "nats://env:1", 1);
  const char* argv1[] = {"svc", "--poll-workers=4"};
  auto config = Config::parse(2, argv1, {{"poll-workers", "workers"}});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->get("nats-url"), "nats://env:1");
  EXPECT_EQ(config->getInt("poll-workers", 1), 4);
  const char* argv2[] = {"svc", "--nats-url", "nats://flag:2"};
  EXPECT_EQ(Config::parse(3, argv2, {})->get("nats-url"), "nats://flag:2");
  const char* argv3[] = {"svc", "--bogus=1"};
  auto bad = Config::parse(2, argv3, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "unknown flag --bogus");
  unsetenv("FLOTILLA_NATS_URL");
}

TEST(RuntimeTest, ServesHealthAndReadinessAndStopsOnRequest) {
  const char* argv[] = {"svc"};
  auto config = Config::parse(1, argv, {});
  ASSERT_TRUE(config.ok());
  auto runtime = Runtime::start("svctest", *config);
  ASSERT_TRUE(runtime.ok()) << runtime.error().describe();
  std::string base = "http://127.0.0.1:" + std::to_string((*runtime)->httpPort());
  auto status = [&](const std::string& path) {
    auto r = runCommand({.argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", base + path}});
    return r.ok() ? r->out : std::string();
  };
  EXPECT_EQ(status("/healthz"), "200");
  // Before the service registers any readiness check it is starting, not ready.
  EXPECT_EQ(status("/readyz"), "503");
  bool ready = false;
  (*runtime)->addReadinessCheck("nats", [&](std::string& why) {
    why = "not connected";
    return ready;
  });
  EXPECT_EQ(status("/readyz"), "503");
  ready = true;
  EXPECT_EQ(status("/readyz"), "200");
  std::thread stopper([&] { (*runtime)->requestShutdown(); });
  (*runtime)->waitForShutdown();
  stopper.join();
  EXPECT_TRUE((*runtime)->stopping());
}

}  // namespace
}  // namespace flotilla::service
