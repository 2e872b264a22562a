// `flotilla auth revoke` against a real nats-server in operator mode with the config `flotilla auth init` writes
// (the full resolver): a revoked agent's connection is closed by the server and its reconnect refused while another
// agent and the hub's own users keep working, the revocation survives a restart of the server with its old config,
// a revoked registration token can no longer connect (so it can no longer enroll), a cluster is revoked only once
// its deregistration has finished (or with --wait), and a server without the full resolver does not take the push.
// The clients are raw libnats connections (libs/identity/test nats_client.h) that record the server's errors.
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/harness/poll.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/revocation.h"
#include "flotilla/service/hub.h"
#include "flotilla/testing/temp_dir.h"
#include "nats_client.h"
#include "run_captured.h"

namespace flotilla::cli {
namespace {

using namespace std::chrono_literals;
using identity::testclient::NatsClient;

class AuthRevokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Ran init = runCaptured({"auth", "init", "--dir", dir()});
    ASSERT_EQ(init.code, 0) << init.err;
    ASSERT_NO_FATAL_FAILURE(startServer(readFile(dir() + "/nats-auth.conf").value()));
  }

  void startServer(const std::string& config) {
    auto nats = harness::NatsServer::start({.config = config});
    ASSERT_TRUE(nats.ok()) << nats.error().describe();
    nats_ = std::move(nats).value();
    auto hub = service::connectHub(
        {.servers = {nats_->url()}, .name = "admin", .creds_file = dir() + "/creds/admin.creds", .max_reconnect = 0},
        service::HubAccess::kProvision, nullptr, 20s);
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    admin_ = *hub;
  }

  [[nodiscard]] std::string dir() const { return dir_.path() + "/auth"; }

  //! `auth issue` for an agent of `cluster` (or a registration token with `token`): the creds file.
  std::string issue(const std::string& role, const std::string& flag, const std::string& subject) {
    Ran issued = runCaptured({"auth", "issue", "--dir", dir(), "--role", role, flag, subject});
    EXPECT_EQ(issued.code, 0) << issued.err;
    return dir() + "/creds/" + role + "-" + subject + ".creds";
  }

  static std::string inboxOf(const std::string& creds) {
    auto identity = identity::credsIdentity(readFile(creds).value());
    return identity.ok() ? "_INBOX." + identity->role + "-" + identity->subject : std::string();
  }

  Result<std::unique_ptr<NatsClient>> connect(const std::string& creds) {
    return NatsClient::connect({.url = nats_->url(), .creds_file = creds, .inbox_prefix = inboxOf(creds)});
  }

  Ran revoke(std::vector<std::string> args) {
    args.insert(args.begin(), {"auth", "revoke", "--dir", dir(), "--nats-url", nats_->url()});
    return runCaptured(args);
  }

  //! A tombstone as `flotilla delete cluster` writes it, with the keys the scheduler keeps as it finishes.
  void tombstone(const std::string& cluster, std::vector<std::string> keys = {}) {
    events::ClusterDeregistration record{.cluster = cluster, .time = "2026-12-04T10:00:00Z"};
    record.credential_keys = std::move(keys);
    ASSERT_TRUE(admin_.clusters->put(events::clusterDeregisteredKey(cluster), events::encode(record).dump()).ok());
  }

  //! The hub's own users still work: the admin writes and reads the clusters bucket.
  void expectHubWorks() {
    ASSERT_TRUE(admin_.clusters->put("probe." + randomHex(3), "{}").ok());
    EXPECT_TRUE(admin_.clusters->get(events::clusterDeregisteredKey("c1")).ok());
  }

  flotilla::testing::TempDir dir_{"flotilla-revoke"};
  std::unique_ptr<harness::NatsServer> nats_;
  service::Hub admin_;
};

constexpr std::string_view kRevokedError = "User Authentication Revoked";
constexpr std::string_view kRefusedError = "Authorization Violation";

//! Waits until the server has closed `client`'s connection; then what libnats recorded: the asynchronous errors
//! and the connection's last error.
std::string closedWith(NatsClient& client) {
  if (!harness::waitUntil([&] { return natsConnection_IsClosed(client.connection()); }, 10s)) {
    return "still connected";
  }
  const char* last = nullptr;
  natsConnection_GetLastError(client.connection(), &last);
  return join(client.errors(), "\n") + "\nlast error: " + (last != nullptr ? last : "");
}

TEST_F(AuthRevokeTest, ARevokedAgentIsDisconnectedAndRefusedWhileOthersKeepWorking) {
  const std::string c1 = issue("agent", "--cluster", "c1");
  const std::string c2 = issue("agent", "--cluster", "c2");
  auto agent1 = connect(c1);
  auto agent2 = connect(c2);
  ASSERT_TRUE(agent1.ok() && agent2.ok()) << (agent1.ok() ? agent2.error() : agent1.error()).describe();
  ASSERT_NO_FATAL_FAILURE(tombstone("c1"));

  Ran revoked = revoke({"--cluster", "c1"});
  ASSERT_EQ(revoked.code, 0) << revoked.err;
  EXPECT_NE(revoked.out.find("took the new account JWT"), std::string::npos) << revoked.out;
  EXPECT_NE(readFile(dir() + "/nats-auth.conf")->find(trim(readFile(dir() + "/account.jwt").value())),
            std::string::npos)
      << "nats-auth.conf preloads the revised account JWT";

  // The server tells the connected client why and closes its connection; a new connect is refused.
  const std::string closed = closedWith(**agent1);
  EXPECT_NE(closed.find(std::string(kRevokedError)), std::string::npos) << closed;
  auto again = connect(c1);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find(std::string(kRefusedError)), std::string::npos) << again.error().message;

  // The other agent and the hub are untouched.
  EXPECT_FALSE(natsConnection_IsClosed((*agent2)->connection()));
  EXPECT_TRUE((*agent2)->publish("flotilla.status.c2.=").ok());
  EXPECT_TRUE(connect(c2).ok());
  expectHubWorks();
}

TEST_F(AuthRevokeTest, TheRevocationSurvivesARestartOfTheServerWithItsOldConfig) {
  const std::string c1 = issue("agent", "--cluster", "c1");
  const std::string c2 = issue("agent", "--cluster", "c2");
  ASSERT_NO_FATAL_FAILURE(tombstone("c1"));
  ASSERT_EQ(revoke({"--cluster", "c1"}).code, 0);
  // The harness restarts the server with the config it was started with, whose preloaded account JWT has no
  // revocation: the newer JWT the full resolver stored wins over it.
  ASSERT_TRUE(nats_->restart().ok()) << nats_->logTail();
  auto refused = connect(c1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find(std::string(kRefusedError)), std::string::npos) << refused.error().message;
  EXPECT_TRUE(connect(c2).ok());
}

TEST_F(AuthRevokeTest, ARevokedRegistrationTokenCanNoLongerConnectBeforeItsTtl) {
  Ran issued = runCaptured({"auth", "issue", "--dir", dir(), "--role", "registration", "--token", "t1", "--ttl", "1h"});
  ASSERT_EQ(issued.code, 0) << issued.err;
  const std::string token = dir() + "/creds/registration-t1.creds";
  auto before = connect(token);
  ASSERT_TRUE(before.ok()) << before.error().describe();
  EXPECT_TRUE((*before)->publish(identity::registrationRequestSubject("t1")).ok());

  Ran revoked = revoke({"--token", "t1"});
  ASSERT_EQ(revoked.code, 0) << revoked.err;
  EXPECT_NE(revoked.out.find("registration-t1"), std::string::npos) << revoked.out;
  const std::string closed = closedWith(**before);
  EXPECT_NE(closed.find(std::string(kRevokedError)), std::string::npos) << closed;
  // An agent enrolls by connecting with the token: refused now, an hour before the token expires.
  auto after = connect(token);
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.error().message.find(std::string(kRefusedError)), std::string::npos) << after.error().message;

  Ran unknown = revoke({"--token", "t2"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("registration-t2.creds does not exist"), std::string::npos) << unknown.err;
}

TEST_F(AuthRevokeTest, AClusterIsRevokedOnlyOnceItsDeregistrationHasFinished) {
  const std::string c1 = issue("agent", "--cluster", "c1");
  auto agent = connect(c1);
  ASSERT_TRUE(agent.ok());
  Ran registered = revoke({"--cluster", "c1"});
  EXPECT_EQ(registered.code, 1);
  EXPECT_NE(registered.err.find("is not deregistered: run flotilla delete cluster c1 first"), std::string::npos)
      << registered.err;

  // The cascade runs: registration and enrollment records are still there.
  ASSERT_TRUE(admin_.clusters->put(events::clusterKey("c1"), "{}").ok());
  ASSERT_TRUE(admin_.clusters->put(events::clusterEnrollmentKey("c1"), "{}").ok());
  ASSERT_NO_FATAL_FAILURE(tombstone("c1"));
  Ran running = revoke({"--cluster", "c1"});
  EXPECT_EQ(running.code, 1);
  EXPECT_NE(running.err.find("has not finished (its registration record is still there"), std::string::npos)
      << running.err;
  EXPECT_NE(running.err.find("pass --wait DURATION"), std::string::npos) << running.err;
  ASSERT_TRUE(admin_.clusters->remove(events::clusterKey("c1")).ok());
  EXPECT_NE(revoke({"--cluster", "c1", "--wait", "1s"}).err.find("its enrollment record is still there"),
            std::string::npos);
  EXPECT_FALSE(natsConnection_IsClosed((*agent)->connection())) << "nothing was revoked while the cascade ran";

  // The scheduler finishes: it keeps the keys the registrar gave in the tombstone, then removes the records.
  auto enrolled = identity::KeyPair::generate(identity::KeyType::kUser);
  ASSERT_TRUE(enrolled.ok());
  auto waiting = std::async(std::launch::async, [&] { return revoke({"--cluster", "c1", "--wait", "30s"}); });
  std::this_thread::sleep_for(1500ms);
  ASSERT_NO_FATAL_FAILURE(tombstone("c1", {enrolled->publicKey()}));
  ASSERT_TRUE(admin_.clusters->remove(events::clusterEnrollmentKey("c1")).ok());
  Ran finished = waiting.get();
  ASSERT_EQ(finished.code, 0) << finished.err;
  EXPECT_NE(finished.out.find("revoked 2 user key(s) of agent-c1: " + enrolled->publicKey()), std::string::npos)
      << finished.out;
  const std::string closed = closedWith(**agent);
  EXPECT_NE(closed.find(std::string(kRevokedError)), std::string::npos) << closed;
}

TEST_F(AuthRevokeTest, AServerWithoutTheFullResolverDoesNotTakeTheRevocation) {
  // Restart on a config with the memory resolver (as auth init wrote before the full resolver).
  std::string config = readFile(dir() + "/nats-auth.conf").value();
  const size_t start = config.find("resolver: {");
  const size_t end = config.find("}\n", start);
  ASSERT_NE(start, std::string::npos);
  config.replace(start, end + 2 - start, "resolver: MEMORY\n");
  nats_.reset();
  ASSERT_NO_FATAL_FAILURE(startServer(config));
  issue("registration", "--token", "t1");

  Ran revoked = revoke({"--token", "t1"});
  EXPECT_EQ(revoked.code, 1);
  EXPECT_NE(revoked.err.find("did not take it: no answer on $SYS.REQ.CLAIMS.UPDATE"), std::string::npos) << revoked.err;
  EXPECT_NE(revoked.err.find("full resolver"), std::string::npos) << revoked.err;
  auto key = identity::credsUserKey(readFile(dir() + "/creds/registration-t1.creds").value());
  ASSERT_TRUE(key.ok());
  EXPECT_NE(readFile(dir() + "/account.jwt")->size(), 0u);
  auto account = identity::verifyJwt(trim(readFile(dir() + "/account.jwt").value()));
  ASSERT_TRUE(account.ok());
  EXPECT_NE(account->claims.at({"nats", "revocations"})->find(*key), nullptr) << "written for a later push";
}

}  // namespace
}  // namespace flotilla::cli
