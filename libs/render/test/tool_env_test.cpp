// helm and kustomize run with a scrubbed environment: nothing of the bundler's own environment but what a tool
// needs to run (and, for fetch steps, the operator's proxies). Checked by running `env` the way the renderers run
// their tools.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "tool_run.h"

namespace flotilla::render::detail {
namespace {

//! Sets variables for the test's duration (the test is single-threaded; nothing else reads the environment then).
class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::string> values) : values_(std::move(values)) {
    for (const auto& [name, value] : values_) {
      ::setenv(name.c_str(), value.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): single-threaded test
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : values_) {
      ::unsetenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): single-threaded test
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::string> values_;
};

std::map<std::string, std::string> environmentOf(const std::string& scratch, Network network) {
  auto result = run("/usr/bin/env", {}, scratch, RenderLimits{}, "env", network);
  EXPECT_TRUE(result.ok());
  std::map<std::string, std::string> env;
  if (result.ok()) {
    for (const auto& line : split(result->out, '\n')) {
      if (auto eq = line.find('='); eq != std::string::npos) {
        env[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
  }
  return env;
}

TEST(ToolEnvironment, ToolsSeeNoCredentialsOfTheBundlersEnvironment) {
  ScopedEnv secrets({{"FLOTILLA_NATS_USER", "bundler"},
                     {"FLOTILLA_NATS_PASSWORD", "nats-password"},
                     {"NATS_CREDS", "/etc/flotilla/nats.creds"},
                     {"AWS_SECRET_ACCESS_KEY", "aws-secret"},
                     {"HTTPS_PROXY", "http://proxy.internal:3128"}});
  auto scratch = makeTempDir("tool-env");
  ASSERT_TRUE(scratch.ok());
  for (Network network : {Network::kOffline, Network::kAllowed}) {
    SCOPED_TRACE(network == Network::kOffline ? "render" : "fetch");
    const auto env = environmentOf(*scratch, network);
    ASSERT_FALSE(env.empty());
    for (const auto& [name, value] : env) {
      EXPECT_FALSE(startsWith(name, "FLOTILLA_")) << name;
      EXPECT_FALSE(startsWith(name, "NATS_")) << name;
      EXPECT_FALSE(startsWith(name, "AWS_")) << name;
      EXPECT_EQ(value.find("nats-password"), std::string::npos) << name;
    }
    EXPECT_EQ(env.at("HOME"), *scratch);
    EXPECT_EQ(env.count("PATH"), 1u);
    // A render has no way out; a fetch goes through the operator's proxy.
    EXPECT_EQ(env.at("HTTPS_PROXY"),
              network == Network::kOffline ? "http://127.0.0.1:9" : "http://proxy.internal:3128");
  }
  removeAll(*scratch);
}

}  // namespace
}  // namespace flotilla::render::detail
