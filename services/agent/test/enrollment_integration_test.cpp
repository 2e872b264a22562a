// Registration tokens (docs/pipeline.md "Registration tokens") on a real nats-server in operator mode with the
// config `flotilla auth init` writes: the scheduler's registrar (services/scheduler enrollment.h) with the hub's
// registrar signing key, and the agent's CredentialsKeeper (enrollment.h) asking it with a token's credentials.
// Expiry is real (short TTLs, waited for); nothing asserts how long anything took.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "flotilla/agent/enrollment.h"
#include "flotilla/bus/connection.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/enrollment.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/identity/revocation.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/kube/client.h"
#include "flotilla/kube/kubeconfig.h"
#include "flotilla/scheduler/enrollment.h"
#include "flotilla/service/hub.h"
#include "flotilla/testing/temp_dir.h"
#include "nats_client.h"

namespace flotilla::agent {
namespace {

using namespace std::chrono_literals;
using identity::Clock;
namespace testclient = identity::testclient;

//! Sleeps until the credentials in `creds_text` have expired (plus a second for the server's clock).
void waitForExpiry(const std::string& creds_text) {
  auto lifetime = identity::credsLifetime(creds_text);
  ASSERT_TRUE(lifetime.ok() && lifetime->expires);
  std::this_thread::sleep_until(*lifetime->expires + 1500ms);
}

//! enrollmentOptionsFrom for these flags (and the common ones), or the error's message.
std::string flagsProblem(std::vector<std::string> args) {
  auto known = enrollmentFlags();
  known["cluster-name"] = "";
  std::vector<const char*> argv = {"agent"};
  for (const auto& arg : args) {
    argv.push_back(arg.c_str());
  }
  auto config = service::Config::parse(static_cast<int>(argv.size()), argv.data(), known);
  if (!config.ok()) {
    return config.error().message;
  }
  auto options = enrollmentOptionsFrom(*config);
  return options.ok() ? std::string() : options.error().message;
}

TEST(EnrollmentFlagsTest, TheFlagsGoTogetherAndNameWhatIsMissing) {
  EXPECT_EQ(flagsProblem({"--cluster-name=c1"}), "");
  EXPECT_EQ(flagsProblem({"--registration-creds=t", "--creds-store=s", "--cluster-name=c1",
                          "--creds-secret=flotilla-system/agent-creds"}),
            "");
  EXPECT_EQ(flagsProblem({"--registration-creds=t", "--cluster-name=c1"}), "--registration-creds needs --creds-store");
  EXPECT_EQ(flagsProblem({"--creds-store=s", "--cluster-name=c1"}), "--creds-store needs --registration-creds");
  EXPECT_EQ(flagsProblem({"--creds-secret=ns/n", "--cluster-name=c1"}),
            "--creds-secret needs --registration-creds and --creds-store");
  EXPECT_NE(flagsProblem({"--registration-creds=t", "--creds-store=s"}).find("needs --cluster-name"),
            std::string::npos);
  EXPECT_NE(flagsProblem({"--registration-creds=t", "--creds-store=s", "--cluster-name=c1", "--nats-creds=x"})
                .find("exclude each other"),
            std::string::npos);
  EXPECT_NE(flagsProblem({"--registration-creds=t", "--creds-store=s", "--cluster-name=c1", "--creds-secret=nons"})
                .find("--creds-secret \"nons\": expected <namespace>/<name>"),
            std::string::npos);
}

class EnrollmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(identity::initAuthDir({.dir = dir_.path()}).ok());
    auto config = readFile(dir_.path() + "/nats-auth.conf");
    ASSERT_TRUE(config.ok());
    auto nats = harness::NatsServer::start({.config = *config});
    ASSERT_TRUE(nats.ok()) << nats.error().describe();
    nats_ = std::move(nats).value();
    admin_ = connect("admin");
    scheduler_ = connect("scheduler");
    ASSERT_TRUE(admin_ && scheduler_);
    startRegistrar(1h);
  }
  void TearDown() override {
    if (registrar_) {
      registrar_->stop();
    }
  }

  std::optional<service::Hub> connect(const std::string& role) {
    auto hub = service::connectHub({.servers = {nats_->url()},
                                    .name = role,
                                    .creds_file = dir_.path() + "/creds/" + role + ".creds",
                                    .max_reconnect = 0},
                                   service::HubAccess::kProvision, nullptr, 20s);
    EXPECT_TRUE(hub.ok()) << hub.error().describe();
    return hub.ok() ? std::optional(*hub) : std::nullopt;
  }

  //! The registrar as the scheduler's flags configure it (auth init's registrar key and account JWT).
  void startRegistrar(std::chrono::seconds ttl) {
    if (registrar_) {
      registrar_->stop();
    }
    std::string key = "--registration-signing-key=" + dir_.path() + "/registrar-signing.nk";
    std::string account = "--registration-account=" + dir_.path() + "/account.jwt";
    std::string ttl_flag = "--agent-creds-ttl=" + std::to_string(ttl.count()) + "s";
    const char* argv[] = {"scheduler", key.c_str(), account.c_str(), ttl_flag.c_str()};
    auto config = service::Config::parse(4, argv, scheduler::registrarFlags());
    ASSERT_TRUE(config.ok()) << config.error().describe();
    auto options = scheduler::registrarOptionsFrom(*config);
    ASSERT_TRUE(options.ok() && *options) << (options.ok() ? "" : options.error().describe());
    registrar_ =
        std::make_unique<scheduler::Registrar>(scheduler_->connection, scheduler_->clusters, metrics_, **options);
    ASSERT_TRUE(registrar_->start().ok());
  }

  //! A registration token's credentials file (auth issue --role registration --token <token> --ttl <ttl>).
  std::string token(const std::string& id, std::chrono::seconds ttl) {
    auto role = identity::registrationRole(id);
    EXPECT_TRUE(role.ok());
    auto issued = identity::issueFromAuthDir(dir_.path(), *role, ttl);
    EXPECT_TRUE(issued.ok()) << issued.error().describe();
    std::string path = dir_.path() + "/" + identity::credsFileName(*role);
    EXPECT_TRUE(identity::writeSecretFile(path, issued->creds).ok());
    return path;
  }

  std::unique_ptr<CredentialsKeeper> keeper(const std::string& cluster, const std::string& token_file) {
    EnrollmentOptions options{.registration_creds = token_file,
                              .creds_store = dir_.path() + "/store-" + cluster + ".creds",
                              .cluster = cluster,
                              .connect = {.servers = {nats_->url()}, .max_reconnect = 0}};
    options.request_timeout = 5s;
    options.retry_base = 100ms;
    return std::make_unique<CredentialsKeeper>(options, agent_metrics_);
  }

  std::string stored(const std::string& cluster) {
    auto text = readFile(dir_.path() + "/store-" + cluster + ".creds");
    EXPECT_TRUE(text.ok());
    return text.ok() ? *text : std::string();
  }

  void tombstone(const std::string& cluster) {
    events::ClusterDeregistration record{.cluster = cluster, .time = log::nowRfc3339()};
    ASSERT_TRUE(admin_->clusters->put(events::clusterDeregisteredKey(cluster), events::encode(record).dump()).ok());
  }

  double enrollments(const char* request, const char* result) {
    return metrics_.value("enrollments_total", {{"request", request}, {"result", result}});
  }

  flotilla::testing::TempDir dir_{"flotilla-enrollment"};
  std::unique_ptr<harness::NatsServer> nats_;
  std::optional<service::Hub> admin_;
  std::optional<service::Hub> scheduler_;
  Metrics metrics_{"scheduler"};
  Metrics agent_metrics_{"agent"};
  std::unique_ptr<scheduler::Registrar> registrar_;
};

TEST_F(EnrollmentTest, ATokenGivesAnAgentCredentialsWithOnlyTheAgentPermissions) {
  auto agent = keeper("c1", token("t1", 1h));
  auto result = agent->enrollOnce();
  ASSERT_TRUE(result.ok()) << result.error().describe() << "\n" << nats_->logTail();
  EXPECT_EQ(*result, CredentialsResult::kIssued);
  struct stat info {};
  ASSERT_EQ(::stat(agent->credsFile().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  auto owner = identity::credsIdentity(stored("c1"));
  ASSERT_TRUE(owner.ok()) << owner.error().describe();
  EXPECT_EQ(owner->role, "agent");
  EXPECT_EQ(owner->subject, "c1");
  EXPECT_EQ(enrollments("enroll", "issued"), 1);
  EXPECT_EQ(agent_metrics_.value("credentials_requests_total", {{"request", "enroll"}, {"result", "issued"}}), 1);

  // The server holds them to the agent role of c1: its own status subject, not another cluster's or the KV.
  auto client = testclient::NatsClient::connect(
      {.url = nats_->url(), .creds_file = agent->credsFile(), .inbox_prefix = agent->inboxPrefix()});
  ASSERT_TRUE(client.ok()) << client.error().describe();
  ASSERT_TRUE((*client)->publish("flotilla.status.c1.x").ok());
  ASSERT_TRUE((*client)->publish("flotilla.status.c2.x").ok());
  EXPECT_TRUE((*client)->awaitError("Permissions Violation for Publish to \"flotilla.status.c2.x\""));
  ASSERT_TRUE((*client)->publish("$KV.clusters.enrollment.c1").ok());
  EXPECT_TRUE((*client)->awaitError("Permissions Violation for Publish to \"$KV.clusters.enrollment.c1\""));
  for (const auto& error : (*client)->errors()) {
    EXPECT_EQ(error.find("flotilla.status.c1"), std::string::npos) << error;
  }
}

TEST_F(EnrollmentTest, AnExpiredTokenIsRefusedByTheServer) {
  std::string token_file = token("short", 2s);
  auto text = readFile(token_file);
  ASSERT_TRUE(text.ok());
  waitForExpiry(*text);
  auto agent = keeper("c1", token_file);
  auto result = agent->enrollOnce();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("--registration-creds"), std::string::npos) << result.error().message;
  EXPECT_NE(result.error().message.find("expired"), std::string::npos) << result.error().message;
  EXPECT_EQ(enrollments("enroll", "issued"), 0);
  EXPECT_FALSE(readFile(agent->credsFile()).ok()) << "nothing stored";
}

TEST_F(EnrollmentTest, RenewalGivesNewWorkingCredentialsAndRetiresTheOldOnes) {
  auto agent = keeper("c1", token("t1", 1h));
  ASSERT_TRUE(agent->enrollOnce().ok());
  const std::string first = stored("c1");
  auto renewed = agent->renewOnce();
  ASSERT_TRUE(renewed.ok()) << renewed.error().describe();
  const std::string second = stored("c1");
  EXPECT_NE(identity::parseCredsFile(first)->seed, identity::parseCredsFile(second)->seed) << "a new key";
  ASSERT_TRUE(agent->renewOnce().ok());
  EXPECT_EQ(enrollments("renew", "issued"), 2);
  auto client = testclient::NatsClient::connect(
      {.url = nats_->url(), .creds_file = agent->credsFile(), .inbox_prefix = agent->inboxPrefix()});
  ASSERT_TRUE(client.ok()) << client.error().describe();

  // The first credentials were replaced twice: they are not renewed any more.
  auto key = identity::generateClientUserKey();
  ASSERT_TRUE(key.ok());
  auto request = identity::renewRequest(first, *key);
  ASSERT_TRUE(request.ok());
  auto reply = registrar_->answerRenew(identity::agentRenewSubject("c1"), identity::encode(*request).dump());
  EXPECT_FALSE(reply.accepted);
  EXPECT_EQ(reply.reason, identity::kRefusedRevoked) << reply.message;
  EXPECT_EQ(enrollments("renew", "revoked"), 1);
}

TEST_F(EnrollmentTest, TheHubConnectionOutlivesTheFirstCredentialsByRenewal) {
  startRegistrar(4s);
  auto agent = keeper("c1", token("t1", 1h));
  ASSERT_TRUE(agent->enrollOnce().ok());
  const std::string first = stored("c1");
  auto connection = bus::Connection::connect({.servers = {nats_->url()},
                                              .creds_file = agent->credsFile(),
                                              .inbox_prefix = agent->inboxPrefix(),
                                              .reconnect_wait = 200ms});
  ASSERT_TRUE(connection.ok()) << connection.error().describe();
  agent->start();  // renews at two thirds of the 4 s
  waitForExpiry(first);
  // The server closed the connection when the first credentials expired; it reconnected with the renewed ones.
  bool flushed = false;
  for (int i = 0; i < 50 && !flushed; ++i) {
    flushed = (*connection)->flush(1s).ok();
    if (!flushed) {
      std::this_thread::sleep_for(200ms);
    }
  }
  EXPECT_TRUE(flushed) << nats_->logTail();
  EXPECT_TRUE((*connection)->publish("flotilla.status.c1.x", "x").ok());
  agent->stop();
  EXPECT_GE(enrollments("renew", "issued"), 1);
  EXPECT_NE(stored("c1"), first);
}

TEST_F(EnrollmentTest, ADeregisteredClusterIsNotRenewedOnceItsCascadeFinished) {
  auto agent = keeper("c1", token("t1", 1h));
  ASSERT_TRUE(agent->enrollOnce().ok());
  // While the cascade runs (tombstone and registration record both there) the agent must keep its credentials.
  ASSERT_TRUE(admin_->clusters->put(events::clusterKey("c1"), "{}").ok());
  tombstone("c1");
  auto renewed = agent->renewOnce();
  ASSERT_TRUE(renewed.ok()) << renewed.error().describe() << "\n" << nats_->logTail();
  // The cascade finished: the registration record is gone.
  ASSERT_TRUE(admin_->clusters->remove(events::clusterKey("c1")).ok());
  auto refused = agent->renewOnce();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("deregistered"), std::string::npos) << refused.error().message;
  EXPECT_EQ(enrollments("renew", "deregistered"), 1);
  EXPECT_FALSE(admin_->clusters->get(scheduler::enrollmentKey("c1")).ok()) << "the enrollment record is removed";
  // ... and the keys of the credentials it gave (the first and the renewed) stay with the tombstone, for `flotilla
  // auth revoke --cluster c1`.
  auto kept = events::parseRecord<events::ClusterDeregistration>(
      admin_->clusters->get(events::clusterDeregisteredKey("c1"))->value);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->credential_keys.size(), 2u);
  EXPECT_EQ(kept->credential_keys.front(), identity::credsUserKey(stored("c1")).value());
  // Withdrawing the deregistration does not bring these credentials back.
  ASSERT_TRUE(admin_->clusters->remove(events::clusterDeregisteredKey("c1")).ok());
  auto revoked = agent->renewOnce();
  ASSERT_FALSE(revoked.ok());
  EXPECT_EQ(enrollments("renew", "revoked"), 1) << revoked.error().message;
}

TEST_F(EnrollmentTest, ARegisteredAgentRestartsWithItsStoredCredentialsWithoutTheToken) {
  std::string token_file = token("t1", 1h);
  ASSERT_TRUE(keeper("c1", token_file)->enrollOnce().ok());
  ASSERT_EQ(::unlink(token_file.c_str()), 0);
  auto restarted = keeper("c1", token_file);
  auto result = restarted->enrollOnce();
  ASSERT_TRUE(result.ok()) << result.error().describe();
  EXPECT_EQ(*result, CredentialsResult::kStored);
  EXPECT_EQ(enrollments("enroll", "issued"), 1);
}

TEST_F(EnrollmentTest, ATokenCannotEnrollADeregisteredOrTakenName) {
  tombstone("gone");
  auto result = keeper("gone", token("t1", 1h))->enrollOnce();
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("was deregistered"), std::string::npos) << result.error().message;
  EXPECT_EQ(enrollments("enroll", "deregistered"), 1);

  // c1 enrolled by t1: another token cannot take the name over; t1 itself may enroll it again.
  ASSERT_TRUE(keeper("c1", token("t1", 1h))->enrollOnce().ok());
  ASSERT_EQ(::unlink((dir_.path() + "/store-c1.creds").c_str()), 0);
  auto other = keeper("c1", token("t2", 1h))->enrollOnce();
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("enrolled by another registration token"), std::string::npos)
      << other.error().message;
  EXPECT_TRUE(keeper("c1", token("t1", 1h))->enrollOnce().ok());
  // A cluster registered with credentials of `auth issue` is not a token's to take.
  ASSERT_TRUE(admin_->clusters->put(events::clusterKey("static"), "{}").ok());
  auto taken = keeper("static", token("t1", 1h))->enrollOnce();
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(enrollments("enroll", "taken"), 2);
}

// At start a refusal is retried with backoff (the admin may withdraw the deregistration); after the deadline the
// last error is returned and the agent exits.
TEST_F(EnrollmentTest, AtStartARefusedEnrollmentIsRetriedUntilTheDeadline) {
  tombstone("gone");
  auto agent = keeper("gone", token("t1", 1h));
  Status obtained = agent->obtain(1s);
  ASSERT_FALSE(obtained.ok());
  EXPECT_NE(obtained.error().message.find("--registration-creds"), std::string::npos) << obtained.error().message;
  EXPECT_NE(obtained.error().message.find("deregistered"), std::string::npos) << obtained.error().message;
  EXPECT_GE(agent_metrics_.value("credentials_requests_total", {{"request", "enroll"}, {"result", "deregistered"}}), 2);
}

// --creds-secret: the credentials are kept in a Secret of the downstream cluster and a new pod (no store file)
// restores them from it without the token; a client that may not write Secrets keeps them in the file only.
TEST_F(EnrollmentTest, CredentialsKeptInASecretAreRestoredIntoANewStore) {
  auto cluster = harness::KubeCluster::start({.name = "enroll"});
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  auto client = [&](const std::string& kubeconfig) {
    auto config = kube::Kubeconfig::load(kubeconfig);
    EXPECT_TRUE(config.ok());
    return std::shared_ptr<kube::KubeClient>(kube::KubeClient::create(*config).value());
  };
  auto admin = client((*cluster)->kubeconfigPath());
  std::string token_file = token("t1", 1h);
  auto with_secret = [&](const std::string& name, std::shared_ptr<kube::KubeClient> kube) {
    EnrollmentOptions options{.registration_creds = token_file,
                              .creds_store = dir_.path() + "/store-" + name + ".creds",
                              .cluster = name,
                              .connect = {.servers = {nats_->url()}, .max_reconnect = 0},
                              .secret_namespace = "default",
                              .secret_name = "agent-" + name,
                              .kube = std::move(kube)};
    return std::make_unique<CredentialsKeeper>(options, agent_metrics_);
  };
  ASSERT_EQ(*with_secret("c1", admin)->enrollOnce(), CredentialsResult::kIssued);
  const std::string issued = stored("c1");
  auto secret = admin->get("v1", "Secret", "default", "agent-c1");
  ASSERT_TRUE(secret.ok()) << secret.error().describe();
  EXPECT_EQ(base64Decode(secret->at({"data", "creds"})->asString()).value(), issued);

  ASSERT_EQ(::unlink((dir_.path() + "/store-c1.creds").c_str()), 0);
  ASSERT_EQ(::unlink(token_file.c_str()), 0);
  auto restored = with_secret("c1", admin)->enrollOnce();
  ASSERT_TRUE(restored.ok()) << restored.error().describe();
  EXPECT_EQ(*restored, CredentialsResult::kStored);
  EXPECT_EQ(stored("c1"), issued);
  EXPECT_EQ(agent_metrics_.value("creds_secret_total", {{"step", "read"}, {"result", "restored"}}), 1);

  // No RBAC grant for the token user: the write fails, is logged and counted, the file has the credentials.
  token_file = token("t2", 1h);
  auto denied = with_secret("c2", client((*cluster)->tokenKubeconfigPath()))->enrollOnce();
  ASSERT_TRUE(denied.ok()) << denied.error().describe();
  EXPECT_EQ(*denied, CredentialsResult::kIssued);
  EXPECT_TRUE(identity::credsIdentity(stored("c2")).ok());
  EXPECT_EQ(agent_metrics_.value("creds_secret_total", {{"step", "write"}, {"result", "error"}}), 1);
  EXPECT_EQ(agent_metrics_.value("creds_secret_total", {{"step", "read"}, {"result", "error"}}), 1);
}

TEST_F(EnrollmentTest, UnreadableOrForgedRequestsAreRefused) {
  auto answer = registrar_->answerEnroll(identity::registrationRequestSubject("t1"),
                                         R"({"cluster":"c1","publicKey":"UABC","extra":1})");
  EXPECT_FALSE(answer.accepted);
  EXPECT_EQ(answer.reason, identity::kRefusedInvalid);
  EXPECT_NE(answer.message.find("extra"), std::string::npos) << answer.message;
  auto key = identity::generateClientUserKey();
  ASSERT_TRUE(key.ok());
  answer = registrar_->answerEnroll(identity::registrationRequestSubject("t1"),
                                    identity::encode(identity::EnrollRequest{"Not_A_Name", key->publicKey()}).dump());
  EXPECT_EQ(answer.reason, identity::kRefusedInvalid);
  // Agent credentials from `auth issue` (the account signing key, not the registrar's) are not renewed.
  auto issued = identity::issueFromAuthDir(dir_.path(), identity::agentRole("c1").value(), std::chrono::hours(1));
  ASSERT_TRUE(issued.ok());
  auto request = identity::renewRequest(issued->creds, *key);
  ASSERT_TRUE(request.ok());
  answer = registrar_->answerRenew(identity::agentRenewSubject("c1"), identity::encode(*request).dump());
  EXPECT_EQ(answer.reason, identity::kRefusedUnknown) << answer.message;
  // A renewal signed by another key than the credentials'.
  auto agent = keeper("c1", token("t1", 1h));
  ASSERT_TRUE(agent->enrollOnce().ok());
  request = identity::renewRequest(stored("c1"), *key);
  ASSERT_TRUE(request.ok());
  request->public_key = identity::generateClientUserKey()->publicKey();
  answer = registrar_->answerRenew(identity::agentRenewSubject("c1"), identity::encode(*request).dump());
  EXPECT_EQ(answer.reason, identity::kRefusedInvalid);
  EXPECT_NE(answer.message.find("signature"), std::string::npos) << answer.message;
  // c1's credentials on c2's renewal subject.
  request = identity::renewRequest(stored("c1"), *key);
  answer = registrar_->answerRenew(identity::agentRenewSubject("c2"), identity::encode(*request).dump());
  EXPECT_EQ(answer.reason, identity::kRefusedInvalid);
  EXPECT_GE(enrollments("enroll", "invalid"), 2);
}

}  // namespace
}  // namespace flotilla::agent
