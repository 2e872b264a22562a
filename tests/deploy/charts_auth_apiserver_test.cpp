// The hub chart's nats.auth end to end, with nothing mocked: the real `flotilla auth init` and `flotilla auth
// secrets` make the material, kubectl applies the Secrets to a real kube-apiserver, `helm install` (which looks them
// up) installs the chart there, and the NATS server config the chart rendered, together with the Secrets' contents
// as the apiserver stores them, starts the pinned nats-server: a hub service connecting the way its Deployment says
// (its own mounted creds and the CA, tls://) gets in, a client without creds (or, with mutual TLS, without a client
// certificate) is refused. An install into a namespace without the Secrets is refused naming them.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_suite.h"
#include "flotilla/bus/connection.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/harness/poll.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

class ChartsAuthOnApiserver : public ApiserverSuite {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(ApiserverSuite::SetUpTestSuite());
    helm_ = toolPath("helm");
    ASSERT_FALSE(helm_.empty()) << "helm missing: run scripts/setup --no-run";
  }

  static CommandResult helm(std::vector<std::string> args) {
    args.insert(args.begin(), helm_);
    args.insert(args.end(), {"--kubeconfig", cluster_->kubeconfigPath()});
    return run(args);
  }

  static CommandResult flotilla(std::vector<std::string> args) {
    args.insert(args.begin(), FLOTILLA_CLI_BINARY);
    return run(args);
  }

  // The Secret's data as the apiserver returns it, decoded, written as files into `dir` (a pod's mount).
  static void writeSecretFiles(const std::string& ns, const std::string& name, const std::string& dir) {
    auto got = kubectl({"get", "secret", name, "-n", ns, "-o", "json"});
    ASSERT_EQ(got.exit_code, 0) << got.err;
    auto secret = Json::parse(got.out);
    ASSERT_TRUE(secret.ok()) << secret.error().describe();
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    ASSERT_FALSE(error) << dir;
    for (const auto& [key, value] : secret->find("data")->asObject()) {
      auto decoded = base64Decode(value.asString());
      ASSERT_TRUE(decoded.ok()) << name << "/" << key;
      ASSERT_TRUE(writeFile(dir + "/" + key, *decoded, 0600).ok());
    }
  }

  // The objects helm installed for `release`.
  static std::vector<Json> installedObjects(const std::string& release, const std::string& ns) {
    auto manifest = helm({"get", "manifest", release, "-n", ns});
    EXPECT_EQ(manifest.exit_code, 0) << manifest.err;
    auto objects = parseObjects(manifest.out, "helm get manifest " + release);
    EXPECT_TRUE(objects.ok()) << (objects.ok() ? "" : objects.error().describe());
    return objects.ok() ? *objects : std::vector<Json>{};
  }

  // The embedded server as release "hub" in `ns` runs it: the chart's ConfigMap next to the files of its Secret in
  // `etc_nats`, as the projected volume lays out /etc/nats.
  static void startChartServer(const std::string& ns, const std::vector<Json>& objects, const std::string& etc_nats,
                               std::unique_ptr<harness::NatsServer>& server);

  // init → secrets → kubectl apply → helm install → the rendered server config with the stored Secrets runs
  // nats-server; the poller's identity (as its Deployment mounts it) connects, no creds / no client cert do not.
  static void installAndServe(const std::string& ns, bool mutual);

  static inline std::string helm_;
};

// The directory a Deployment's mount `mount` maps to on this machine: the Secret of the volume mounted there.
std::string volumeSecret(const Json& workload, const std::string& mount) {
  const Json* container = firstContainer(workload);
  std::string volume;
  for (const auto& m : container->find("volumeMounts")->asArray()) {
    if (m.getString("mountPath") == mount) {
      volume = m.getString("name");
    }
  }
  for (const auto& v : workload.at({"spec", "template", "spec", "volumes"})->asArray()) {
    if (v.getString("name") == volume && v.at({"secret", "secretName"}) != nullptr) {
      return v.at({"secret", "secretName"})->asString();
    }
  }
  return {};
}

void ChartsAuthOnApiserver::startChartServer(const std::string& ns, const std::vector<Json>& objects,
                                             const std::string& etc_nats,
                                             std::unique_ptr<harness::NatsServer>& server) {
  const Json* config = findObject(objects, "ConfigMap", "hub-flotilla-hub-nats-config");
  const Json* nats = findObject(objects, "StatefulSet", "hub-flotilla-hub-nats");
  ASSERT_TRUE(config != nullptr && nats != nullptr);
  EXPECT_THAT(stringList(firstContainer(*nats)->find("args")), Contains("--config=/etc/nats/nats-server.conf"));
  writeSecretFiles(ns, "hub-flotilla-hub-nats-server", etc_nats);
  std::string conf = config->at({"data", "nats-server.conf"})->asString();
  // The data volume's resolver directory (/data/resolver) goes into the temp dir too.
  conf =
      replaceAll(replaceAll(conf, "/etc/nats/", etc_nats + "/"), "\"/data/resolver\"", "\"" + etc_nats + "/resolver\"");
  ASSERT_TRUE(writeFile(etc_nats + "/nats-server.conf", conf).ok());
  auto started = harness::NatsServer::start({.extra_args = {"-c", etc_nats + "/nats-server.conf"}, .scheme = "tls"});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  server = std::move(started).value();
}

void ChartsAuthOnApiserver::installAndServe(const std::string& ns, bool mutual) {
  flotilla::testing::TempDir temp("flotilla-chart-auth");
  const std::string auth = temp.path() + "/hub-auth";
  auto init = flotilla({"auth", "init", "--dir", auth, mutual ? "--mutual-tls" : "--tls"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  auto secrets = flotilla({"auth", "secrets", "--dir", auth, "--kube-namespace", ns, "--release", "hub"});
  ASSERT_EQ(secrets.exit_code, 0) << secrets.err;
  const std::string signing_seed = trim(readFile(auth + "/account-signing.nk").valueOr("?"));
  EXPECT_THAT(secrets.out, ::testing::Not(HasSubstr(signing_seed))) << "the account signing key stays in the directory";
  createNamespace(ns);
  auto applied = kubectl({"apply", "-f", "-"}, secrets.out);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  std::vector<std::string> install{"install", "hub", chartDir("flotilla-hub"), "-n", ns};
  if (mutual) {
    install.insert(install.end(), {"--set", "nats.auth.mutualTls=true"});
  }
  auto installed = helm(install);
  ASSERT_EQ(installed.exit_code, 0) << installed.err << installed.out;
  EXPECT_THAT(installed.out, HasSubstr("Operator mode with TLS"));
  auto objects = installedObjects("hub", ns);

  std::unique_ptr<harness::NatsServer> server;
  startChartServer(ns, objects, temp.path() + "/etc-nats", server);
  ASSERT_NE(server, nullptr);

  // The poller connects as its Deployment says: its args' files, from the Secret mounted at /etc/flotilla/nats.
  const Json* poller = findObject(objects, "Deployment", "hub-flotilla-hub-poller");
  ASSERT_NE(poller, nullptr);
  const std::string secret = volumeSecret(*poller, "/etc/flotilla/nats");
  EXPECT_EQ(secret, "hub-flotilla-hub-nats-poller");
  const std::string mount = temp.path() + "/poller-nats";
  writeSecretFiles(ns, secret, mount);
  bus::ConnectOptions options;
  options.servers = {server->url()};
  options.max_reconnect = 0;
  const std::vector<std::pair<std::string, std::string*>> flags = {{"--nats-creds=", &options.creds_file},
                                                                   {"--nats-ca=", &options.ca_file},
                                                                   {"--nats-cert=", &options.cert_file},
                                                                   {"--nats-key=", &options.key_file}};
  for (const auto& arg : stringList(firstContainer(*poller)->find("args"))) {
    for (const auto& [flag, target] : flags) {
      if (arg.starts_with(flag)) {
        *target = replaceAll(arg.substr(flag.size()), "/etc/flotilla/nats/", mount + "/");
      }
    }
  }
  ASSERT_FALSE(options.creds_file.empty() || options.ca_file.empty());
  EXPECT_EQ(options.cert_file.empty(), !mutual);
  auto connected = bus::Connection::connect(options);
  ASSERT_TRUE(connected.ok()) << connected.error().describe() << "\n" << server->logTail();

  // Each refusal adds its own line to the server's log (the harness' readiness probe left a handshake error too).
  const std::string refused_auth = "authentication error";
  const size_t auth_errors = occurrences(server->logText(), refused_auth);
  auto anonymous = options;
  anonymous.creds_file.clear();
  EXPECT_FALSE(bus::Connection::connect(anonymous).ok()) << "a client without creds must be refused";
  EXPECT_EQ(occurrences(server->logText(), refused_auth), auth_errors + 1) << server->logTail();
  if (mutual) {
    const size_t handshake_errors = occurrences(server->logText(), "TLS handshake error");
    auto no_cert = options;
    no_cert.cert_file.clear();
    no_cert.key_file.clear();
    EXPECT_FALSE(bus::Connection::connect(no_cert).ok()) << "mutual TLS: a client without a certificate";
    EXPECT_GT(occurrences(server->logText(), "TLS handshake error"), handshake_errors) << server->logTail();
  }

  // The rendered config runs the full resolver: `flotilla auth revoke` pushes a revised account JWT to it (over TLS
  // with the directory's CA, and the admin's client certificate with mutual TLS).
  ASSERT_EQ(flotilla({"auth", "issue", "--dir", auth, "--role", "registration", "--token", "t1"}).exit_code, 0);
  auto revoked = flotilla({"auth", "revoke", "--dir", auth, "--token", "t1", "--nats-url", server->url()});
  EXPECT_EQ(revoked.exit_code, 0) << revoked.err << "\n" << server->logTail();
  EXPECT_THAT(revoked.out, HasSubstr("took the new account JWT"));
}

TEST_F(ChartsAuthOnApiserver, InstallWithoutTheAuthSecretsIsRefusedNamingThem) {
  createNamespace("auth-missing");
  auto installed = helm({"install", "hub", chartDir("flotilla-hub"), "-n", "auth-missing"});
  ASSERT_NE(installed.exit_code, 0) << installed.out;
  EXPECT_THAT(installed.err, HasSubstr("Secret hub-flotilla-hub-nats-server is missing"));
  EXPECT_THAT(installed.err,
              HasSubstr("flotilla auth secrets --dir hub-auth --kube-namespace auth-missing --release hub"));
  // A Secret with a key missing is named too.
  auto partial = kubectl({"create", "secret", "generic", "hub-flotilla-hub-nats-poller", "-n", "auth-missing",
                          "--from-literal=nats.creds=x"});
  ASSERT_EQ(partial.exit_code, 0) << partial.err;
  auto again = helm({"install", "hub", chartDir("flotilla-hub"), "-n", "auth-missing"});
  ASSERT_NE(again.exit_code, 0);
  EXPECT_THAT(again.err, HasSubstr("Secret hub-flotilla-hub-nats-poller has no key ca.crt"));
}

TEST_F(ChartsAuthOnApiserver, CliSecretsInstallAndTheRenderedServerAdmitsOnlyTheirIdentities) {
  installAndServe("auth-tls", false);
}

TEST_F(ChartsAuthOnApiserver, MutualTlsInstallsAndRefusesAClientWithoutACertificate) {
  installAndServe("auth-mtls", true);
}

// The agent's Secret from `flotilla auth issue` + `auth secrets --agent` applies, and the agent chart installed with
// it passes the apiserver.
TEST_F(ChartsAuthOnApiserver, AgentSecretFromTheCliInstallsTheAgentChart) {
  flotilla::testing::TempDir temp("flotilla-chart-agent-auth");
  const std::string auth = temp.path() + "/hub-auth";
  ASSERT_EQ(flotilla({"auth", "init", "--dir", auth, "--mutual-tls"}).exit_code, 0);
  auto missing = flotilla({"auth", "secrets", "--dir", auth, "--kube-namespace", "agent-auth", "--agent", "edge-1"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("flotilla auth issue --dir " + auth + " --role agent --cluster edge-1"));
  ASSERT_EQ(
      flotilla({"auth", "issue", "--dir", auth, "--role", "agent", "--cluster", "edge-1", "--client-cert"}).exit_code,
      0);
  auto secrets = flotilla({"auth", "secrets", "--dir", auth, "--kube-namespace", "agent-auth", "--agent", "edge-1"});
  ASSERT_EQ(secrets.exit_code, 0) << secrets.err;
  EXPECT_THAT(secrets.err, HasSubstr("nats.tls.clientCert=true"));
  createNamespace("agent-auth");
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, secrets.out).exit_code, 0);
  auto stored = kubectl({"get", "secret", "flotilla-agent-nats", "-n", "agent-auth", "-o", "jsonpath={.data}"});
  for (const char* key : {"nats.creds", "ca.crt", "tls.crt", "tls.key"}) {
    EXPECT_THAT(stored.out, HasSubstr(key));
  }
  auto installed =
      helm({"install", "agent", chartDir("flotilla-agent"), "-n", "agent-auth", "--set", "clusterName=edge-1", "--set",
            "nats.url=tls://hub.example:4222", "--set", "nats.credentials.secretName=flotilla-agent-nats", "--set",
            "nats.tls.secretName=flotilla-agent-nats", "--set", "nats.tls.clientCert=true"});
  ASSERT_EQ(installed.exit_code, 0) << installed.err;
  EXPECT_THAT(installed.out, HasSubstr("and a client certificate (mutual TLS)"));
}

// A workload's container args as this machine runs them: each mount prefix replaced by a local directory, the
// NATS URL and the HTTP address by the test's, plus `extra`.
std::vector<std::string> argsAsRunHere(const Json& workload, const std::map<std::string, std::string>& mounts,
                                       const std::string& nats_url, std::vector<std::string> extra) {
  std::vector<std::string> args;
  for (std::string arg : stringList(firstContainer(workload)->find("args"))) {
    if (arg.starts_with("--nats-url=")) {
      arg = "--nats-url=" + nats_url;
    } else if (arg.starts_with("--http-addr=")) {
      arg = "--http-addr=127.0.0.1:0";
    }
    for (const auto& [mount, dir] : mounts) {
      arg = replaceAll(arg, mount, dir);
    }
    args.push_back(arg);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Registration tokens through both charts, with nothing mocked: `auth secrets --registrar` and `--registration`
// make the Secrets, the hub chart (nats.auth.registrar) and the agent chart (nats.registration) install them, and
// the real scheduler and agent run with the args and Secrets their Deployments name. The agent, given only the
// token, enrolls: the credentials the registrar signed land in its store and in the Secret the chart named, and it
// registers its cluster with them (the admin sees the cluster).
TEST_F(ChartsAuthOnApiserver, ARegistrationTokenEnrollsTheAgentTheChartsInstall) {
  flotilla::testing::TempDir temp("flotilla-chart-registration");
  const std::string auth = temp.path() + "/hub-auth";
  ASSERT_EQ(flotilla({"auth", "init", "--dir", auth, "--tls"}).exit_code, 0);
  ASSERT_EQ(flotilla({"auth", "issue", "--dir", auth, "--role", "registration", "--token", "batch-1", "--ttl", "1h"})
                .exit_code,
            0);
  createNamespace("reg-hub");
  auto hub_secrets =
      flotilla({"auth", "secrets", "--dir", auth, "--kube-namespace", "reg-hub", "--release", "hub", "--registrar"});
  ASSERT_EQ(hub_secrets.exit_code, 0) << hub_secrets.err;
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, hub_secrets.out).exit_code, 0);
  auto hub = helm({"install", "hub", chartDir("flotilla-hub"), "-n", "reg-hub", "--set",
                   "nats.auth.registrar.enabled=true", "--set", "nats.auth.registrar.agentCredsTtl=2h"});
  ASSERT_EQ(hub.exit_code, 0) << hub.err << hub.out;
  auto hub_objects = installedObjects("hub", "reg-hub");
  std::unique_ptr<harness::NatsServer> server;
  startChartServer("reg-hub", hub_objects, temp.path() + "/etc-nats", server);
  ASSERT_NE(server, nullptr);

  // The scheduler with its identity and the registrar Secret at the paths its Deployment mounts them.
  const Json* scheduler = findObject(hub_objects, "Deployment", "hub-flotilla-hub-scheduler");
  ASSERT_NE(scheduler, nullptr);
  writeSecretFiles("reg-hub", volumeSecret(*scheduler, "/etc/flotilla/nats"), temp.path() + "/scheduler-nats");
  writeSecretFiles("reg-hub", volumeSecret(*scheduler, "/etc/flotilla/registrar"), temp.path() + "/registrar");
  auto scheduler_args = argsAsRunHere(*scheduler,
                                      {{"/etc/flotilla/nats/", temp.path() + "/scheduler-nats/"},
                                       {"/etc/flotilla/registrar/", temp.path() + "/registrar/"}},
                                      server->url(), {});
  EXPECT_THAT(scheduler_args, Contains("--agent-creds-ttl=2h"));
  scheduler_args.insert(scheduler_args.begin(), FLOTILLA_SCHEDULER_BINARY);
  auto scheduler_process =
      Process::start({.argv = scheduler_args, .output_file = temp.path() + "/scheduler.log", .kill_with_parent = true});
  ASSERT_TRUE(scheduler_process.ok()) << scheduler_process.error().describe();

  // The agent chart with the token's Secret; the agent with the token, its store and the cluster's kubeconfig.
  createNamespace("reg-agent");
  auto agent_secret =
      flotilla({"auth", "secrets", "--dir", auth, "--kube-namespace", "reg-agent", "--registration", "batch-1"});
  ASSERT_EQ(agent_secret.exit_code, 0) << agent_secret.err;
  ASSERT_EQ(kubectl({"apply", "-f", "-"}, agent_secret.out).exit_code, 0);
  auto agent =
      helm({"install", "agent", chartDir("flotilla-agent"), "-n", "reg-agent", "--set", "clusterName=edge-7", "--set",
            "nats.url=tls://hub.example:4222", "--set", "nats.registration.secretName=flotilla-agent-nats", "--set",
            "nats.tls.secretName=flotilla-agent-nats"});
  ASSERT_EQ(agent.exit_code, 0) << agent.err << agent.out;
  EXPECT_THAT(agent.out, HasSubstr("enrolls with the registration token in Secret flotilla-agent-nats"));
  const auto agent_objects = installedObjects("agent", "reg-agent");
  const Json* deployment = findObject(agent_objects, "Deployment", "agent-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  writeSecretFiles("reg-agent", "flotilla-agent-nats", temp.path() + "/agent-secret");
  const std::string store = temp.path() + "/agent-store";
  std::filesystem::create_directories(store);
  auto agent_args = argsAsRunHere(*deployment,
                                  {{"/etc/flotilla/nats-registration/", temp.path() + "/agent-secret/"},
                                   {"/etc/flotilla/nats-tls/", temp.path() + "/agent-secret/"},
                                   {"/var/lib/flotilla/credentials/", store + "/"}},
                                  server->url(), {"--kubeconfig=" + cluster_->kubeconfigPath()});
  agent_args.insert(agent_args.begin(), FLOTILLA_AGENT_BINARY);
  auto agent_process =
      Process::start({.argv = agent_args, .output_file = temp.path() + "/agent.log", .kill_with_parent = true});
  ASSERT_TRUE(agent_process.ok()) << agent_process.error().describe();

  auto logs = [&] {
    return "scheduler:\n" + readFile(temp.path() + "/scheduler.log").valueOr("") + "\nagent:\n" +
           readFile(temp.path() + "/agent.log").valueOr("");
  };
  // Enrolled: the Secret the chart named holds credentials of edge-7's agent, and the agent registered with them.
  const bool stored = harness::waitUntil(
      [&] {
        auto got = kubectl(
            {"get", "secret", "agent-flotilla-agent-credentials", "-n", "reg-agent", "-o", "jsonpath={.data.creds}"});
        return got.exit_code == 0 && !got.out.empty();
      },
      std::chrono::seconds(60), std::chrono::milliseconds(500));
  ASSERT_TRUE(stored) << logs();
  EXPECT_TRUE(std::filesystem::exists(store + "/agent.creds"));
  const std::vector<std::string> admin = {"--nats-url",         server->url(),  "--nats-ca",
                                          auth + "/tls/ca.pem", "--nats-creds", auth + "/creds/admin.creds"};
  const bool registered = harness::waitUntil(
      [&] {
        std::vector<std::string> get = admin;
        get.insert(get.end(), {"get", "clusters"});
        auto got = flotilla(get);
        return got.exit_code == 0 && got.out.find("edge-7") != std::string::npos;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(500));
  EXPECT_TRUE(registered) << logs();
  EXPECT_THAT(readFile(temp.path() + "/agent.log").valueOr(""), Not(HasSubstr("--nats-creds")));
  agent_process->stop();
  scheduler_process->stop();
}

}  // namespace
}  // namespace flotilla::deploy_test
