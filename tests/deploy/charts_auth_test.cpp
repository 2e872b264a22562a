// Unit tests of the charts' NATS identities and TLS (nats.auth in charts/flotilla-hub, nats.credentials/nats.tls and
// nats.insecure in charts/flotilla-agent) and of the hub chart's values.schema.json, with the real helm: the secure
// default refuses to render without its Secrets and says how to make them, each hub service mounts only its own
// identity, mutual TLS adds the client certificates, and bad values are refused naming them. The rendered server
// config running a real nats-server with Secrets from the real CLI: charts_auth_apiserver_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "deploy_util.h"
#include "flotilla/core/util.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

const std::vector<std::string> kOffline{"--set", "nats.auth.lookupSecrets=false"};

// The Secret names of each volume of a workload's pod (projected sources included).
std::vector<std::string> secretVolumes(const Json& workload) {
  std::vector<std::string> names;
  const Json* volumes = workload.at({"spec", "template", "spec", "volumes"});
  for (const auto& volume : volumes ? volumes->asArray() : std::vector<Json>{}) {
    if (const Json* name = volume.at({"secret", "secretName"})) {
      names.push_back(name->asString());
    }
    if (const Json* sources = volume.at({"projected", "sources"})) {
      for (const auto& source : sources->asArray()) {
        if (const Json* name = source.at({"secret", "name"})) {
          names.push_back(name->asString());
        }
      }
    }
  }
  return names;
}

// helm template has no cluster to look the Secrets up in: the default refuses, naming every missing Secret and the
// commands that make them, and the two ways out.
TEST(HubChartAuth, DefaultRefusesWithoutTheAuthSecretsNamingThemAndTheCommand) {
  auto objects = renderChart("flotilla-hub", {}, "hub", "flotilla-system");
  ASSERT_FALSE(objects.ok());
  const std::string& message = objects.error().message;
  for (const char* who : {"server", "poller", "bundler", "scheduler"}) {
    EXPECT_THAT(message, HasSubstr(std::string("Secret hub-flotilla-hub-nats-") + who + " is missing"));
  }
  EXPECT_THAT(message, HasSubstr("flotilla auth init --dir hub-auth --tls"));
  EXPECT_THAT(message,
              HasSubstr("flotilla auth secrets --dir hub-auth --kube-namespace flotilla-system --release hub | "
                        "kubectl apply -f -"));
  EXPECT_THAT(message, HasSubstr("nats.auth.lookupSecrets=false"));
  EXPECT_THAT(message, HasSubstr("nats.auth.enabled=false"));
  auto mutual = renderChart("flotilla-hub", {"--set", "nats.auth.mutualTls=true"});
  ASSERT_FALSE(mutual.ok());
  EXPECT_THAT(mutual.error().message, HasSubstr("flotilla auth init --dir hub-auth --mutual-tls"));
}

// Each hub service mounts its own Secret (creds + CA) and connects with tls:// to the embedded server, which runs the
// chart's config (include of the Secret's accounts, TLS) from a projected volume.
TEST(HubChartAuth, EachServiceMountsItsOwnIdentityAndTheServerRunsOperatorModeWithTls) {
  auto objects = renderChart("flotilla-hub", kOffline);
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  for (const std::string& component : kHubServices) {
    const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-hub-" + component);
    ASSERT_NE(deployment, nullptr) << component;
    const auto args = stringList(firstContainer(*deployment)->find("args"));
    EXPECT_THAT(args, Contains("--nats-url=tls://t-flotilla-hub-nats.flotilla-system.svc:4222"));
    EXPECT_THAT(args, Contains("--nats-creds=/etc/flotilla/nats/nats.creds"));
    EXPECT_THAT(args, Contains("--nats-ca=/etc/flotilla/nats/ca.crt"));
    EXPECT_THAT(args, Not(Contains("--nats-cert=/etc/flotilla/nats/tls.crt")));
    EXPECT_EQ(secretVolumes(*deployment), std::vector<std::string>{"t-flotilla-hub-nats-" + component});
  }
  const Json* nats = findObject(*objects, "StatefulSet", "t-flotilla-hub-nats");
  ASSERT_NE(nats, nullptr);
  EXPECT_THAT(stringList(firstContainer(*nats)->find("args")), Contains("--config=/etc/nats/nats-server.conf"));
  EXPECT_EQ(secretVolumes(*nats), std::vector<std::string>{"t-flotilla-hub-nats-server"});
  const Json* config = findObject(*objects, "ConfigMap", "t-flotilla-hub-nats-config");
  ASSERT_NE(config, nullptr);
  const std::string text = config->at({"data", "nats-server.conf"})->asString();
  EXPECT_THAT(text, HasSubstr("include \"nats-auth.conf\""));
  EXPECT_THAT(text, HasSubstr("cert_file: \"/etc/nats/tls.crt\""));
  EXPECT_THAT(text, HasSubstr("resolver: {\n  type: full\n  dir: \"/data/resolver\"\n  allow_delete: false\n}"));
  EXPECT_THAT(text, Not(HasSubstr("verify: true")));
  EXPECT_NE(nats->at({"spec", "template", "metadata", "annotations", "checksum/nats-config"}), nullptr);
}

TEST(HubChartAuth, MutualTlsGivesEachServiceItsClientCertificateAndTheServerVerifies) {
  auto objects = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.auth.mutualTls=true"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  expectHubServiceArgs(*objects, {"--nats-cert=/etc/flotilla/nats/tls.crt", "--nats-key=/etc/flotilla/nats/tls.key"});
  const Json* config = findObject(*objects, "ConfigMap", "t-flotilla-hub-nats-config");
  ASSERT_NE(config, nullptr);
  EXPECT_THAT(config->at({"data", "nats-server.conf"})->asString(), HasSubstr("verify: true"));
}

// Secret names are values; an external NATS uses the per-service Secrets too unless one shared identity is given.
TEST(HubChartAuth, SecretNamesAreValuesAndExternalNatsKeepsTheSharedCredentials) {
  auto named = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.auth.secrets.poller=my-poller", "--set",
                                                           "nats.auth.secrets.server=my-server"}));
  ASSERT_TRUE(named.ok()) << named.error().describe();
  EXPECT_EQ(secretVolumes(*findObject(*named, "Deployment", "t-flotilla-hub-poller")),
            std::vector<std::string>{"my-poller"});
  EXPECT_EQ(secretVolumes(*findObject(*named, "StatefulSet", "t-flotilla-hub-nats")),
            std::vector<std::string>{"my-server"});
  auto external = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.embedded.enabled=false", "--set",
                                                              "nats.url=tls://nats.example:4222"}));
  ASSERT_TRUE(external.ok()) << external.error().describe();
  EXPECT_EQ(secretVolumes(*findObject(*external, "Deployment", "t-flotilla-hub-bundler")),
            std::vector<std::string>{"t-flotilla-hub-nats-bundler"});
  auto shared = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.embedded.enabled=false", "--set",
                                                            "nats.url=tls://nats.example:4222", "--set",
                                                            "nats.credentials.secretName=hub-nats"}));
  ASSERT_TRUE(shared.ok()) << shared.error().describe();
  EXPECT_THAT(hubServiceArgs(*shared, "bundler"), Contains("--nats-creds=/etc/flotilla/nats-credentials/nats.creds"));
  EXPECT_EQ(secretVolumes(*findObject(*shared, "Deployment", "t-flotilla-hub-bundler")),
            std::vector<std::string>{"hub-nats"});
}

// Combinations that would leave a value unused are refused, naming it.
TEST(HubChartAuth, ValuesThatWouldBeIgnoredAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "nats.credentials.secretName=x"},
       "nats.credentials, nats.userPassword and nats.tls are for an external"},
      {{"--set", "nats.embedded.configSecret=x"}, "nats.embedded.configSecret replaces the server config"},
      {{"--set", "nats.auth.enabled=false", "--set", "nats.auth.mutualTls=true"}, "nats.auth.mutualTls needs"},
      {{"--set", "nats.embedded.enabled=false", "--set", "nats.url=tls://n:4222", "--set", "nats.tls.secretName=ca"},
       "nats.tls goes with nats.credentials or nats.userPassword"},
  };
  for (const auto& [args, message] : cases) {
    auto objects = renderChart("flotilla-hub", with(kOffline, args));
    ASSERT_FALSE(objects.ok()) << message;
    EXPECT_THAT(objects.error().message, HasSubstr(message));
  }
}

// The explicit insecure value renders a plain nats:// hub (ClusterIP only, see HubChart.ExposingUnauthenticatedNats).
TEST(HubChartAuth, InsecureIsExplicitAndPlain) {
  auto objects = renderChart("flotilla-hub", {"--set", "nats.auth.enabled=false"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(findObject(*objects, "ConfigMap", "t-flotilla-hub-nats-config"), nullptr);
  const auto args = hubServiceArgs(*objects, "poller");
  EXPECT_THAT(args, Contains("--nats-url=nats://t-flotilla-hub-nats.flotilla-system.svc:4222"));
  for (const auto& arg : args) {
    EXPECT_THAT(arg, Not(HasSubstr("--nats-creds")));
  }
}

// values.schema.json: unknown keys, wrong types, out-of-range and malformed values fail naming the value.
TEST(HubChartSchema, RejectsBadValuesNamingThem) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "nats.auth.enable=true"}, "additional properties 'enable' not allowed"},
      {{"--set", "nats.auth.enabled=yes"}, "/nats/auth/enabled"},
      {{"--set", "nats.auth.secrets.agent=x"}, "additional properties 'agent' not allowed"},
      {{"--set", "nats.auth.secrets.poller=Bad_Name"}, "/nats/auth/secrets/poller"},
      {{"--set", "logLevel=verbose"}, "/logLevel"},
      {{"--set", "httpPort=70000"}, "/httpPort"},
      {{"--set", "store.maxBytes=lots"}, "/store/maxBytes"},
      {{"--set", "store.limits.everything=1GiB"}, "/store/limits"},
      {{"--set", "gc.grace=1 hour"}, "/gc/grace"},
      {{"--set", "nats.embedded.service.type=ExternalName"}, "/nats/embedded/service/type"},
      {{"--set", "bundler.workers=0"}, "/bundler/workers"},
      {{"--set", "poller.persistence.sizee=1Gi"}, "additional properties 'sizee' not allowed"},
      {{"--set", "unknownTopLevel=1"}, "additional properties 'unknownTopLevel' not allowed"},
  };
  for (const auto& [args, message] : cases) {
    auto objects = renderChart("flotilla-hub", with(kOffline, args));
    ASSERT_FALSE(objects.ok()) << message;
    EXPECT_THAT(objects.error().message, HasSubstr(message)) << args[1];
  }
}

std::vector<std::string> agentBase() {
  return {"--set", "clusterName=edge-1", "--set", "nats.url=nats://hub:4222"};
}

// The agent chart needs the agent's own creds and TLS, or the explicit nats.insecure.
TEST(AgentChartAuth, RefusesWithoutCredentialsOrTlsUnlessInsecure) {
  auto bare = renderChart("flotilla-agent", agentBase());
  ASSERT_FALSE(bare.ok());
  EXPECT_THAT(bare.error().message, HasSubstr("nats.credentials is required"));
  EXPECT_THAT(bare.error().message, HasSubstr("flotilla auth issue --dir hub-auth --role agent --cluster edge-1"));
  EXPECT_THAT(bare.error().message,
              HasSubstr("flotilla auth secrets --dir hub-auth --agent edge-1 --kube-namespace flotilla-system"));
  auto plain = renderChart("flotilla-agent", with(agentBase(), {"--set", "nats.credentials.secretName=edge-1-nats"}));
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.error().message, HasSubstr("nats.tls.secretName is required"));
  auto insecure = renderChart("flotilla-agent", with(agentBase(), {"--set", "nats.insecure=true"}));
  EXPECT_TRUE(insecure.ok()) << insecure.error().describe();
  auto schema = renderChart("flotilla-agent", with(agentBase(), {"--set", "nats.insecure=maybe"}));
  ASSERT_FALSE(schema.ok());
  EXPECT_THAT(schema.error().message, HasSubstr("/nats/insecure"));
}

// The Secret `flotilla auth secrets --agent` prints holds creds, CA and (mutual TLS) the client certificate: one
// Secret name serves nats.credentials and nats.tls.
TEST(AgentChartAuth, OneSecretCarriesCredsCaAndClientCertificate) {
  auto objects =
      renderChart("flotilla-agent", {"--set", "clusterName=edge-1", "--set", "nats.url=tls://hub.example:4222", "--set",
                                     "nats.credentials.secretName=flotilla-agent-nats", "--set",
                                     "nats.tls.secretName=flotilla-agent-nats", "--set", "nats.tls.clientCert=true"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  expectArgs(containerArgs(*deployment),
             {"--nats-creds=/etc/flotilla/nats-credentials/nats.creds", "--nats-ca=/etc/flotilla/nats-tls/ca.crt",
              "--nats-cert=/etc/flotilla/nats-tls/tls.crt", "--nats-key=/etc/flotilla/nats-tls/tls.key"});
  EXPECT_EQ(secretVolumes(*deployment), (std::vector<std::string>{"flotilla-agent-nats", "flotilla-agent-nats"}));
}

CommandResult flotilla(std::vector<std::string> args) {
  args.insert(args.begin(), FLOTILLA_CLI_BINARY);
  return run(args);
}

// `flotilla auth secrets` prints the Secrets under the names the hub chart expects for the release, each with the
// keys the chart mounts; the material stays base64 in `data` and nothing else reaches stdout.
TEST(AuthSecretsCli, PrintsTheSecretsTheHubChartExpects) {
  flotilla::testing::TempDir temp("flotilla-auth-secrets");
  const std::string dir = temp.path() + "/hub-auth";
  ASSERT_EQ(flotilla({"auth", "init", "--dir", dir, "--mutual-tls"}).exit_code, 0);
  auto printed = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "flotilla-system", "--release", "prod",
                           "--san", "nats.example.com"});
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  auto objects = parseObjects(printed.out, "auth secrets");
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 5u);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"prod-flotilla-hub-nats-server", {"ca.crt", "nats-auth.conf", "tls.crt", "tls.key"}},
      {"prod-flotilla-hub-nats-poller", {"ca.crt", "nats.creds", "tls.crt", "tls.key"}},
      {"prod-flotilla-hub-nats-bundler", {"ca.crt", "nats.creds", "tls.crt", "tls.key"}},
      {"prod-flotilla-hub-nats-scheduler", {"ca.crt", "nats.creds", "tls.crt", "tls.key"}},
      {"prod-flotilla-hub-nats-gateway", {"ca.crt", "nats.creds", "tls.crt", "tls.key"}}};
  for (const auto& [name, keys] : expected) {
    const Json* secret = findObject(*objects, "Secret", name);
    ASSERT_NE(secret, nullptr) << name;
    EXPECT_EQ(secret->at({"metadata", "namespace"})->asString(), "flotilla-system");
    std::vector<std::string> got;
    for (const auto& [key, value] : secret->find("data")->asObject()) {
      got.push_back(key);
    }
    EXPECT_EQ(got, keys) << name;
  }
  const Json* server = findObject(*objects, "Secret", "prod-flotilla-hub-nats-server");
  auto conf = base64Decode(server->at({"data", "nats-auth.conf"})->asString());
  ASSERT_TRUE(conf.ok());
  EXPECT_THAT(*conf, HasSubstr("resolver_preload: {"));
  EXPECT_THAT(*conf, Not(HasSubstr("resolver:")));  // the chart's own config sets the full resolver
  EXPECT_THAT(*conf, Not(HasSubstr("tls {")));      // the chart's own config has the TLS block, with its mount paths
  EXPECT_THAT(printed.err, HasSubstr("--set nats.auth.mutualTls=true"));
  const std::string seed = trim(readFile(dir + "/account-signing.nk").valueOr("?"));
  EXPECT_THAT(printed.out + printed.err, Not(HasSubstr(seed)));
}

TEST(AuthSecretsCli, RefusesBadNamesAndMissingMaterialNamingThem) {
  flotilla::testing::TempDir temp("flotilla-auth-secrets-bad");
  const std::string dir = temp.path() + "/hub-auth";
  ASSERT_EQ(flotilla({"auth", "init", "--dir", dir}).exit_code, 0);  // no --tls: no CA
  auto no_ca = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns"});
  EXPECT_EQ(no_ca.exit_code, 1);
  EXPECT_THAT(no_ca.err, HasSubstr(dir + "/tls/ca.pem is missing: the charts need TLS: run auth init with --tls"));
  EXPECT_TRUE(no_ca.out.empty());
  auto bad_ns = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "Bad_NS"});
  EXPECT_EQ(bad_ns.exit_code, 2);
  EXPECT_THAT(bad_ns.err, HasSubstr("--kube-namespace \"Bad_NS\": expected a Kubernetes namespace name"));
  auto bad_release = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns", "--release", "a.b"});
  EXPECT_EQ(bad_release.exit_code, 2);
  EXPECT_THAT(bad_release.err, HasSubstr("--release \"a.b\""));
  auto name_alone = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns", "--name", "x"});
  EXPECT_EQ(name_alone.exit_code, 2);
  EXPECT_THAT(name_alone.err, HasSubstr("--name requires --agent"));
  auto bad_cluster = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns", "--agent", "Edge_1"});
  EXPECT_EQ(bad_cluster.exit_code, 2);
  EXPECT_THAT(bad_cluster.err, HasSubstr("Edge_1"));
}

// The accounts config is re-rendered from the directory's JWTs, each verified: a missing or altered one is named.
TEST(AuthSecretsCli, AMissingOrAlteredAccountJwtIsNamed) {
  flotilla::testing::TempDir temp("flotilla-auth-secrets-jwt");
  const std::string dir = temp.path() + "/hub-auth";
  ASSERT_EQ(flotilla({"auth", "init", "--dir", dir, "--tls"}).exit_code, 0);
  const std::string jwt = readFile(dir + "/account.jwt").valueOr("");
  ASSERT_TRUE(
      writeFile(dir + "/account.jwt", jwt.substr(0, jwt.size() / 2) + "x" + jwt.substr(jwt.size() / 2 + 1)).ok());
  auto altered = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns"});
  EXPECT_EQ(altered.exit_code, 1);
  EXPECT_THAT(altered.err, HasSubstr(dir + "/account.jwt: "));
  EXPECT_TRUE(altered.out.empty()) << "nothing to apply when a Secret would be wrong";
  ASSERT_EQ(::unlink((dir + "/account.jwt").c_str()), 0);
  auto missing = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr(dir + "/account.jwt is missing: run auth init --dir " + dir));
}

// nats.auth.registrar: the scheduler runs the registrar with the key and account JWT of its own Secret; the install
// looks that Secret up like the others; it needs the per-service identities, and its TTL needs it on.
TEST(HubChartRegistrar, TheSchedulerRunsTheRegistrarWithItsOwnSecret) {
  auto objects = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.auth.registrar.enabled=true", "--set",
                                                             "nats.auth.registrar.agentCredsTtl=168h"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* scheduler = findObject(*objects, "Deployment", "t-flotilla-hub-scheduler");
  ASSERT_NE(scheduler, nullptr);
  expectArgs(containerArgs(*scheduler),
             {"--registration-signing-key=/etc/flotilla/registrar/registrar-signing.nk",
              "--registration-account=/etc/flotilla/registrar/account.jwt", "--agent-creds-ttl=168h"});
  EXPECT_EQ(secretVolumes(*scheduler),
            (std::vector<std::string>{"t-flotilla-hub-nats-scheduler", "t-flotilla-hub-nats-registrar"}));
  for (const std::string other : {"poller", "bundler"}) {  // the key reaches the scheduler only
    EXPECT_EQ(secretVolumes(*findObject(*objects, "Deployment", "t-flotilla-hub-" + other)),
              std::vector<std::string>{"t-flotilla-hub-nats-" + other});
  }
  auto off = renderChart("flotilla-hub", kOffline);
  ASSERT_TRUE(off.ok()) << off.error().describe();
  for (const auto& arg :
       stringList(firstContainer(*findObject(*off, "Deployment", "t-flotilla-hub-scheduler"))->find("args"))) {
    EXPECT_THAT(arg, Not(HasSubstr("registration"))) << "the registrar is off by default";
  }
  auto missing = renderChart("flotilla-hub", {"--set", "nats.auth.registrar.enabled=true"}, "hub");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("Secret hub-flotilla-hub-nats-registrar is missing"));
  EXPECT_THAT(missing.error().message, HasSubstr("--release hub --registrar | kubectl apply -f -"));
}

TEST(HubChartRegistrar, ValuesThatCannotWorkAreRefused) {
  auto insecure =
      renderChart("flotilla-hub", {"--set", "nats.auth.enabled=false", "--set", "nats.auth.registrar.enabled=true"});
  ASSERT_FALSE(insecure.ok());
  EXPECT_THAT(insecure.error().message, HasSubstr("nats.auth.registrar needs nats.auth.enabled"));
  auto shared = renderChart(
      "flotilla-hub",
      with(kOffline, {"--set", "nats.embedded.enabled=false", "--set", "nats.url=tls://nats:4222", "--set",
                      "nats.credentials.secretName=hub-creds", "--set", "nats.auth.registrar.enabled=true"}));
  ASSERT_FALSE(shared.ok());
  EXPECT_THAT(shared.error().message, HasSubstr("nats.auth.registrar needs nats.auth.enabled and the per-service"));
  auto ttl_alone = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.auth.registrar.agentCredsTtl=1h"}));
  ASSERT_FALSE(ttl_alone.ok());
  EXPECT_THAT(ttl_alone.error().message, HasSubstr("agentCredsTtl is used only with nats.auth.registrar.enabled"));
  auto bad_ttl = renderChart("flotilla-hub", with(kOffline, {"--set", "nats.auth.registrar.enabled=true", "--set",
                                                             "nats.auth.registrar.agentCredsTtl=a week"}));
  ASSERT_FALSE(bad_ttl.ok());
  EXPECT_THAT(bad_ttl.error().message, HasSubstr("/nats/auth/registrar/agentCredsTtl"));
}

std::vector<std::string> registrationAgent(const std::vector<std::string>& more = {}) {
  return with(with(agentBase(), {"--set", "nats.registration.secretName=flotilla-agent-nats", "--set",
                                 "nats.tls.secretName=flotilla-agent-nats"}),
              more);
}

// nats.registration: the token's creds, a writable store and the Secret the agent keeps its credentials in.
TEST(AgentChartRegistration, ATokenGivesTheEnrollmentFlagsAndAWritableStore) {
  auto objects = renderChart("flotilla-agent", registrationAgent());
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  const auto args = containerArgs(*deployment);
  expectArgs(args, {"--registration-creds=/etc/flotilla/nats-registration/registration.creds",
                    "--creds-store=/var/lib/flotilla/credentials/agent.creds",
                    "--creds-secret=flotilla-system/t-flotilla-agent-credentials"});
  for (const auto& arg : args) {
    EXPECT_FALSE(arg.starts_with("--nats-creds=")) << arg;
  }
  bool store_mounted = false;
  for (const auto& mount : firstContainer(*deployment)->find("volumeMounts")->asArray()) {
    if (mount.getString("mountPath") == "/var/lib/flotilla/credentials") {
      store_mounted = mount.find("readOnly") == nullptr || !mount.find("readOnly")->asBool();
    }
  }
  EXPECT_TRUE(store_mounted) << "the store is written (and renewed) in place";
  // applyAll (default) covers the Secret; rules gets a Role for exactly it.
  EXPECT_EQ(findObject(*objects, "Role", "t-flotilla-agent-credentials"), nullptr);
  auto rules =
      renderChart("flotilla-agent",
                  registrationAgent({"--set", "rbac.mode=rules", "--set", "nats.registration.credsSecret=edge-creds"}));
  ASSERT_TRUE(rules.ok()) << rules.error().describe();
  const Json* role = findObject(*rules, "Role", "t-flotilla-agent-credentials");
  ASSERT_NE(role, nullptr);
  EXPECT_EQ(role->at({"rules"})->asArray().front().at({"resourceNames"})->asArray().front().asString(), "edge-creds");
  EXPECT_NE(findObject(*rules, "RoleBinding", "t-flotilla-agent-credentials"), nullptr);
  EXPECT_THAT(stringList(firstContainer(*findObject(*rules, "Deployment", "t-flotilla-agent"))->find("args")),
              Contains("--creds-secret=flotilla-system/edge-creds"));
}

TEST(AgentChartRegistration, ATokenExcludesOtherCredentials) {
  auto both = renderChart("flotilla-agent", registrationAgent({"--set", "nats.credentials.secretName=x"}));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.error().message, HasSubstr("nats.registration excludes nats.credentials"));
  auto store_alone = renderChart(
      "flotilla-agent", with(agentBase(), {"--set", "nats.insecure=true", "--set", "nats.registration.credsSecret=x"}));
  ASSERT_FALSE(store_alone.ok());
  EXPECT_THAT(store_alone.error().message, HasSubstr("credsSecret is used only with nats.registration.secretName"));
}

// `auth secrets --registrar` adds the registrar's Secret (its scoped key, never the account signing key);
// `--registration T` prints the agent chart's Secret for the token, after `auth issue --role registration`.
TEST(AuthSecretsCli, RegistrarAndRegistrationTokenSecrets) {
  flotilla::testing::TempDir temp("flotilla-auth-secrets-registration");
  const std::string dir = temp.path() + "/hub-auth";
  ASSERT_EQ(flotilla({"auth", "init", "--dir", dir, "--tls"}).exit_code, 0);
  auto hub = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "ns", "--release", "prod", "--registrar"});
  ASSERT_EQ(hub.exit_code, 0) << hub.err;
  auto objects = parseObjects(hub.out, "auth secrets --registrar");
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(objects->size(), 6u);
  const Json* registrar = findObject(*objects, "Secret", "prod-flotilla-hub-nats-registrar");
  ASSERT_NE(registrar, nullptr);
  auto key = base64Decode(registrar->at({"data", "registrar-signing.nk"})->asString());
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, readFile(dir + "/registrar-signing.nk").valueOr("?"));
  EXPECT_NE(registrar->at({"data", "account.jwt"}), nullptr);
  EXPECT_THAT(hub.out + hub.err, Not(HasSubstr(trim(readFile(dir + "/account-signing.nk").valueOr("?")))));
  EXPECT_THAT(hub.err, HasSubstr("--set nats.auth.registrar.enabled=true"));

  auto not_issued = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "edge", "--registration", "t1"});
  EXPECT_EQ(not_issued.exit_code, 1);
  EXPECT_THAT(not_issued.err, HasSubstr("flotilla auth issue --dir " + dir + " --role registration --token t1"));
  ASSERT_EQ(
      flotilla({"auth", "issue", "--dir", dir, "--role", "registration", "--token", "t1", "--ttl", "1h"}).exit_code, 0);
  auto token = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "edge", "--registration", "t1"});
  ASSERT_EQ(token.exit_code, 0) << token.err;
  auto secret = parseObjects(token.out, "auth secrets --registration");
  ASSERT_TRUE(secret.ok()) << secret.error().describe();
  ASSERT_EQ(secret->size(), 1u);
  const Json& only = secret->front();
  EXPECT_EQ(only.at({"metadata", "name"})->asString(), "flotilla-agent-nats");
  EXPECT_NE(only.at({"data", "registration.creds"}), nullptr);
  EXPECT_NE(only.at({"data", "ca.crt"}), nullptr);
  EXPECT_THAT(token.err, HasSubstr("--set nats.registration.secretName=flotilla-agent-nats"));
  auto mixed =
      flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "edge", "--registration", "t1", "--registrar"});
  EXPECT_EQ(mixed.exit_code, 2);
  auto bad_token = flotilla({"auth", "secrets", "--dir", dir, "--kube-namespace", "edge", "--registration", "T.1"});
  EXPECT_EQ(bad_token.exit_code, 2);
  EXPECT_THAT(bad_token.err, HasSubstr("--registration: "));
}

}  // namespace
}  // namespace flotilla::deploy_test
