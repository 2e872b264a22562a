// The hub as docker-compose.yml runs it (issue 18): `docker compose up` of the hub (auth-init, nats, poller,
// bundler, scheduler) from the images scripts/images builds on this machine (no registry), the compose file's
// agent service pointed at a real kube-apiserver of the test harness, and a commit on a real git server reaching
// that cluster. Nothing is faked: real Docker, images, nats-server in a container with mutual TLS and operator
// mode, the services' containers with their own identities.
//
// The git server and the kube-apiserver of the harness listen on 127.0.0.1 only, so a test override file runs the
// poller and the agent with the host's network (the compose file's own networking for them is unchanged; a user's
// git host and cluster are reachable by name). The NATS port is published on a free port of 127.0.0.1.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/git_server.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/harness/poll.h"

namespace flotilla::e2e {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

std::string sourceDir() {
  return envOr("FLOTILLA_SOURCE_DIR", FLOTILLA_SOURCE_DIR);
}

std::string toolsDir() {
  return envOr("FLOTILLA_TOOLS_DIR", sourceDir() + "/.tools/bin");
}

CommandResult run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                  const std::string& input = {}, std::chrono::milliseconds timeout = minutes(5)) {
  auto ran = runCommand({.argv = argv, .env = env, .cwd = sourceDir(), .input = input, .timeout = timeout});
  return ran.ok() ? *ran : CommandResult{.exit_code = -1, .err = ran.error().describe()};
}

class ComposeUpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(run({"docker", "version", "--format", "{{.Server.Version}}"}).exit_code, 0)
        << "the Docker engine is needed (scripts/setup installs it where it can)";
    compose_ = run({"docker", "compose", "version"}).exit_code == 0 ? std::vector<std::string>{"docker", "compose"}
                                                                    : std::vector<std::string>{"docker-compose"};
    ASSERT_EQ(run(with(compose_, {"version"})).exit_code, 0) << "neither `docker compose` nor docker-compose works";
    // The images of this build (the base is made once and kept; nats and runtime are cheap when nothing changed).
    auto images = run({sourceDir() + "/scripts/images", "--version", kTag, "--build-dir", FLOTILLA_BUILD_DIR}, {}, {},
                      minutes(25));
    ASSERT_EQ(images.exit_code, 0) << images.out << images.err;

    auto git = harness::GitServer::start({.https = false, .git_daemon = false, .ssh = false});
    ASSERT_TRUE(git.ok()) << git.error().describe();
    git_ = std::move(git).value().release();
    auto kube = harness::KubeCluster::start({.name = "compose"});
    ASSERT_TRUE(kube.ok()) << kube.error().describe();
    kube_ = std::move(kube).value().release();
    ASSERT_NO_FATAL_FAILURE(up());
  }

  static void TearDownTestSuite() {
    if (dir_ != nullptr) {
      if (HasFailure()) {
        std::cerr << compose({"logs", "--no-color", "--tail", "60"}).out;
      }
      compose({"--profile", "agent", "down", "-v", "--remove-orphans", "--timeout", "10"});
      std::filesystem::remove_all(*dir_);
    }
    delete dir_;
    delete kube_;
    delete git_;
  }

  static std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  }

  //! docker compose with the project's file, the test's override and its own project name.
  static CommandResult compose(const std::vector<std::string>& args, const std::string& input = {}) {
    auto argv =
        with(compose_, {"-p", project_, "-f", sourceDir() + "/docker-compose.yml", "-f", *dir_ + "/override.yml"});
    return run(with(argv, args), env_, input, minutes(5));
  }

  //! The override: host network for the poller and the agent (the harness servers are on 127.0.0.1), their own
  //! HTTP ports there, NATS on the published port. A kubeconfig the agent's uid can read, with the harness
  //! cluster's certificates embedded.
  static void writeOverride() {
    auto ca = readFile(kube_->caFile());
    auto cert = readFile(kube_->adminCertFile());
    auto key = readFile(kube_->adminKeyFile());
    ASSERT_TRUE(ca.ok() && cert.ok() && key.ok());
    std::ofstream(*dir_ + "/kubeconfig")
        << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " << kube_->serverUrl()
        << "\n    certificate-authority-data: " << base64Encode(*ca) << "\nusers:\n- name: u\n  user:\n"
        << "    client-certificate-data: " << base64Encode(*cert) << "\n    client-key-data: " << base64Encode(*key)
        << "\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
    std::filesystem::permissions(*dir_ + "/kubeconfig", std::filesystem::perms(0644));
    const std::string nats = "tls://127.0.0.1:" + env_.at("FLOTILLA_NATS_PORT");
    std::ofstream(*dir_ + "/override.yml")
        << "services:\n"
        << "  poller:\n    network_mode: host\n    environment:\n      FLOTILLA_NATS_URL: " << nats
        << "\n      FLOTILLA_HTTP_ADDR: 127.0.0.1:" << poller_http_ << "\n    healthcheck:\n      test: "
        << "[\"CMD\", \"flotilla-healthcheck\", \"" << poller_http_ << "\", \"/healthz\"]\n"
        << "  agent:\n    network_mode: host\n    environment:\n      FLOTILLA_NATS_URL: " << nats
        << "\n      FLOTILLA_HTTP_ADDR: 127.0.0.1:" << agent_http_ << "\n    healthcheck:\n      test: "
        << "[\"CMD\", \"flotilla-healthcheck\", \"" << agent_http_ << "\", \"/healthz\"]\n";
  }

  static void up() {
    auto dir = makeTempDir("flotilla-compose");
    ASSERT_TRUE(dir.ok());
    dir_ = new std::string(*dir);
    project_ = "flotilla-e2e-" + randomHex(4);
    auto nats_port = harness::freeTcpPort();
    auto poller_http = harness::freeTcpPort();
    auto agent_http = harness::freeTcpPort();
    ASSERT_TRUE(nats_port.ok() && poller_http.ok() && agent_http.ok());
    poller_http_ = *poller_http;
    agent_http_ = *agent_http;
    env_ = {{"FLOTILLA_TAG", kTag},
            {"FLOTILLA_NATS_PORT", std::to_string(*nats_port)},
            {"FLOTILLA_CLUSTER_NAME", "compose-edge"},
            {"FLOTILLA_KUBECONFIG", *dir_ + "/kubeconfig"}};
    ASSERT_NO_FATAL_FAILURE(writeOverride());
    auto started = compose({"--profile", "agent", "up", "-d"});
    ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  }

  //! `flotilla` inside the scheduler's container, as the admin (the compose file's auth volume holds its creds).
  static CommandResult cli(const std::vector<std::string>& args, const std::string& input = {}) {
    return compose(with({"exec", "-T", "scheduler", "flotilla", "--nats-url", "tls://nats:4222", "--nats-ca",
                         "/auth/tls/ca.pem", "--nats-creds", "/auth/creds/admin.creds", "--nats-cert",
                         "/auth/tls/admin.pem", "--nats-key", "/auth/tls/admin-key.pem"},
                        args),
                   input);
  }

  static CommandResult kubectl(const std::vector<std::string>& args) {
    return run(with({toolsDir() + "/kubectl", "--kubeconfig", kube_->kubeconfigPath()}, args));
  }

  static constexpr const char* kTag = "e2e";
  static inline std::vector<std::string> compose_;
  static inline std::string project_;
  static inline std::map<std::string, std::string> env_;
  static inline std::string* dir_ = nullptr;
  static inline int poller_http_ = 0;
  static inline int agent_http_ = 0;
  static inline harness::GitServer* git_ = nullptr;
  static inline harness::KubeCluster* kube_ = nullptr;
};

TEST_F(ComposeUpTest, EveryServiceBecomesHealthyAndACommitReachesTheAgentsCluster) {
  // Every long-running container reports healthy through its image's own probe.
  std::string states;
  EXPECT_TRUE(harness::waitUntil(
      [&] {
        // docker-compose 1.29 (Debian's) has no --format: its table says "Up (healthy)" per container.
        auto ps = compose({"ps"});
        states = ps.out;
        for (const char* service : {"nats", "poller", "bundler", "scheduler", "agent"}) {
          bool healthy = false;
          for (const auto& line : split(states, '\n')) {
            healthy = healthy || (line.find("_" + std::string(service) + "_1 ") != std::string::npos &&
                                  line.find("(healthy)") != std::string::npos);
          }
          if (!healthy) {
            return false;
          }
        }
        return true;
      },
      minutes(3), seconds(2)))
      << states;

  auto repo = git_->createRepo("compose-app");
  ASSERT_TRUE(repo.ok()) << repo.error().describe();
  auto sha = git_->commitFiles("compose-app", "main",
                               {{"app/fleet.yaml", "defaultNamespace: compose-app\n"},
                                {"app/cm.yaml",
                                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n"
                                 "  greeting: from-compose\n"}},
                               "first");
  ASSERT_TRUE(sha.ok()) << sha.error().describe();
  auto applied = cli({"apply", "-f", "-"},
                     "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: "
                     "compose-app\n  namespace: fleet-default\nspec:\n  repo: " +
                         repo->http + "\n  branch: main\n  paths: [app]\n");
  ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;

  std::string greeting;
  EXPECT_TRUE(harness::waitUntil(
      [&] {
        greeting = kubectl({"get", "configmap", "-n", "compose-app", "hello", "-o", "jsonpath={.data.greeting}"}).out;
        return greeting == "from-compose";
      },
      minutes(2), seconds(1)))
      << greeting << compose({"logs", "--no-color", "--tail", "40", "poller", "bundler", "scheduler", "agent"}).out;
  // The hub saw it land: the cluster registered from its container and the GitRepo is Ready at that commit.
  auto clusters = cli({"get", "clusters"});
  EXPECT_NE(clusters.out.find("compose-edge"), std::string::npos) << clusters.out << clusters.err;
  EXPECT_TRUE(harness::waitUntil(
      [&] {
        auto got = cli({"get", "gitrepos"});
        return got.out.find("compose-app") != std::string::npos && got.out.find("Ready") != std::string::npos;
      },
      minutes(1), seconds(1)));
}

}  // namespace
}  // namespace flotilla::e2e
