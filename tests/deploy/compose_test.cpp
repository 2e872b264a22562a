// Unit tests of the Docker side: docker-compose.yml validates and defines the hub services the way the images
// expect; scripts/images parses; the container health probe (docker/healthcheck) reports a real HTTP server's
// /healthz and /readyz correctly.
#include <atomic>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "deploy_util.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/yaml.h"
#include "flotilla/http/server.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// `docker compose` (v2 plugin) when it works, else docker-compose (v1); empty when neither is installed.
std::vector<std::string> composeCommand() {
  auto v2 = runCommand({.argv = {"docker", "compose", "version"}, .timeout = std::chrono::seconds(30)});
  if (v2.ok() && v2->exit_code == 0) {
    return {"docker", "compose"};
  }
  auto v1 = runCommand({.argv = {"docker-compose", "version"}, .timeout = std::chrono::seconds(30)});
  if (v1.ok() && v1->exit_code == 0) {
    return {"docker-compose"};
  }
  return {};
}

TEST(Compose, ConfigValidatesAndDefinesTheHub) {
  auto compose = composeCommand();
  if (compose.empty()) {
    GTEST_SKIP() << "neither `docker compose` nor docker-compose is installed";
  }
  // config only reads the file: no daemon, image or network is needed.
  compose.insert(compose.end(), {"-f", sourceDir() + "/docker-compose.yml", "config"});
  auto result = run(compose);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto config = parseYaml(result.out, "docker-compose config");
  ASSERT_TRUE(config.ok()) << config.error().describe();
  const Json* services = config->find("services");
  ASSERT_NE(services, nullptr);
  for (const std::string name : {"nats", "poller", "bundler", "scheduler", "agent"}) {
    const Json* service = services->find(name);
    ASSERT_NE(service, nullptr) << name;
    EXPECT_EQ(service->getString("restart"), "unless-stopped") << name;
    const Json* test = service->at({"healthcheck", "test"});
    ASSERT_NE(test, nullptr) << name;
    EXPECT_THAT(stringList(test), Contains("flotilla-healthcheck")) << name;
    EXPECT_THAT(stringList(test), Contains("/healthz")) << name;
  }
  EXPECT_THAT(stringList(services->at({"nats", "command"})), Contains("--jetstream"));
  // The identities are on by default: auth-init writes them once into the `auth` volume, nats-server runs with the
  // generated config (operator mode, mutual TLS unless FLOTILLA_NATS_MUTUAL_TLS=false), and each service has its
  // own creds, client certificate and the CA.
  const Json* init = services->find("auth-init");
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(init->getString("restart"), "no");
  EXPECT_EQ(init->find("profiles"), nullptr);
  const std::string script = stringList(init->find("command")).front();
  EXPECT_THAT(script, HasSubstr("tls=--mutual-tls"));
  EXPECT_THAT(script, HasSubstr("flotilla auth init --dir /auth"));
  EXPECT_THAT(script, HasSubstr("--san nats"));
  EXPECT_THAT(script, HasSubstr("flotilla auth issue --dir /auth --role agent"));
  EXPECT_THAT(script, HasSubstr("--client-cert"));
  EXPECT_THAT(script, HasSubstr("chown 10001:10001 /auth/registrar-signing.nk"));
  EXPECT_EQ(init->at({"environment", "FLOTILLA_NATS_MUTUAL_TLS"})->asString(), "true");
  EXPECT_THAT(stringList(services->at({"nats", "command"})), Contains("/auth/nats-auth.conf"));
  EXPECT_EQ(services->at({"nats", "depends_on", "auth-init", "condition"})->asString(),
            "service_completed_successfully");
  // Short (v1) or long (v2) volume syntax: the auth volume is mounted at /auth either way.
  EXPECT_THAT(services->at({"nats", "volumes"})->dump(), HasSubstr("/auth"));
  for (const std::string name : {"poller", "bundler", "scheduler", "agent"}) {
    const Json* service = services->find(name);
    EXPECT_EQ(service->getString("image"), "flotilla/runtime:latest") << name;
    EXPECT_EQ(stringList(service->find("command")).front(), "flotilla-" + name);
    EXPECT_EQ(service->at({"environment", "FLOTILLA_NATS_URL"})->asString(), "tls://nats:4222") << name;
    EXPECT_EQ(service->at({"environment", "FLOTILLA_NATS_CA"})->asString(), "/auth/tls/ca.pem") << name;
    const std::string creds = name == "agent" ? "agent-local" : name;
    EXPECT_EQ(service->at({"environment", "FLOTILLA_NATS_CREDS"})->asString(), "/auth/creds/" + creds + ".creds")
        << name;
    EXPECT_EQ(service->at({"environment", "FLOTILLA_NATS_CERT"})->asString(), "/auth/tls/" + creds + ".pem") << name;
    EXPECT_EQ(service->at({"environment", "FLOTILLA_NATS_KEY"})->asString(), "/auth/tls/" + creds + "-key.pem") << name;
    EXPECT_EQ(service->at({"depends_on", "nats", "condition"})->asString(), "service_healthy") << name;
    EXPECT_EQ(service->at({"depends_on", "auth-init", "condition"})->asString(), "service_completed_successfully")
        << name;
    EXPECT_THAT(service->find("volumes")->dump(), HasSubstr("/auth")) << name;
  }
  // The scheduler runs the registrar: agents elsewhere enroll with a registration token.
  EXPECT_EQ(services->at({"scheduler", "environment", "FLOTILLA_REGISTRATION_SIGNING_KEY"})->asString(),
            "/auth/registrar-signing.nk");
  EXPECT_EQ(services->at({"scheduler", "environment", "FLOTILLA_REGISTRATION_ACCOUNT"})->asString(),
            "/auth/account.jwt");
  // The agent's cluster is the one of its creds: no --cluster-name to contradict them.
  EXPECT_EQ(services->at({"agent", "environment", "FLOTILLA_CLUSTER_NAME"}), nullptr);
  EXPECT_NE(config->at({"volumes", "auth"}), nullptr);
  // The agent needs a cluster: it only runs with its profile.
  EXPECT_THAT(stringList(services->at({"agent", "profiles"})), Contains("agent"));
  EXPECT_EQ(services->at({"poller", "profiles"}), nullptr);
  EXPECT_NE(config->at({"volumes", "nats-data"}), nullptr);
}

TEST(ImagesScript, ParsesAndPrintsUsage) {
  const std::string script = sourceDir() + "/scripts/images";
  auto syntax = run({"bash", "-n", script});
  EXPECT_EQ(syntax.exit_code, 0) << syntax.err;
  auto help = run({script, "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("flotilla/base:bookworm"));
  EXPECT_THAT(help.out, HasSubstr("flotilla/runtime:<version>"));
  auto bad = run({script, "--no-such-flag"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("unknown argument --no-such-flag"));
}

TEST(Healthcheck, ReportsStatusOfARealServer) {
  Metrics metrics("deploytest");
  std::atomic<bool> ready{false};
  auto server = http::Server::start({}, http::standardRoutes(metrics, [&ready](std::string& why) {
                                      why = "not yet";
                                      return ready.load();
                                    }));
  ASSERT_TRUE(server.ok()) << server.error().describe();
  const std::string probe = sourceDir() + "/docker/healthcheck";
  const std::string port = std::to_string((*server)->port());

  EXPECT_EQ(run({probe, port, "/healthz"}).exit_code, 0);
  auto not_ready = run({probe, port, "/readyz"});
  EXPECT_EQ(not_ready.exit_code, 1);
  EXPECT_THAT(not_ready.err, HasSubstr("503"));
  ready = true;
  EXPECT_EQ(run({probe, port, "/readyz"}).exit_code, 0);
  EXPECT_EQ(run({probe, port, "/no-such-path"}).exit_code, 1);

  // Nothing listening: the probe fails instead of hanging.
  (*server)->stop();
  EXPECT_EQ(run({probe, port, "/healthz"}).exit_code, 1);
}

}  // namespace
}  // namespace flotilla::deploy_test
