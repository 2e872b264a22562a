// The API-version tracker's pure parts: the digest of a set and what a CRD event makes the agent expect in
// discovery; and the flags the hub's identities decide (the cluster from the credentials, the durable's settings).
#include "flotilla/agent/api_versions.h"

#include <gtest/gtest.h>

#include "flotilla/agent/flags.h"
#include "flotilla/core/util.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::agent {
namespace {

Json widgetCrd(bool established, bool v2_served) {
  auto crd = Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.example.com"},
    "spec":{"group":"example.com","names":{"kind":"Widget","plural":"widgets"},
      "versions":[{"name":"v1","served":true},{"name":"v2","served":)" +
                         std::string(v2_served ? "true" : "false") + R"(}]},
    "status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":")" +
                         std::string(established ? "True" : "False") + R"("}]}})");
  return crd.ok() ? *crd : Json();
}

TEST(ApiVersionsDigest, EqualSetsHaveEqualDigestsWhateverTheOrder) {
  EXPECT_EQ(apiVersionsDigest({"v1", "apps/v1"}), apiVersionsDigest({"apps/v1", "v1"}));
  EXPECT_NE(apiVersionsDigest({"v1"}), apiVersionsDigest({"v1", "example.com/v1"}));
  EXPECT_NE(apiVersionsDigest({"ab"}), apiVersionsDigest({"a", "b"})) << "entries are separated";
  EXPECT_EQ(apiVersionsDigest({}).size(), 64u);
}

TEST(CrdExpectations, EstablishedServedVersionsArePresentOthersAbsent) {
  auto live = crdExpectations(widgetCrd(true, false), false);
  EXPECT_EQ(live, (std::map<std::string, bool>{{"example.com/v1/Widget", true}, {"example.com/v2/Widget", false}}));
  // Not Established yet: nothing is expected to be served (a later MODIFIED event says when it is).
  auto pending = crdExpectations(widgetCrd(false, true), false);
  EXPECT_TRUE(pending.empty());
  auto pending_unserved = crdExpectations(widgetCrd(false, false), false);
  EXPECT_EQ(pending_unserved, (std::map<std::string, bool>{{"example.com/v2/Widget", false}}));
  // Deleted: every version goes.
  auto deleted = crdExpectations(widgetCrd(true, true), true);
  EXPECT_EQ(deleted, (std::map<std::string, bool>{{"example.com/v1/Widget", false}, {"example.com/v2/Widget", false}}));
  // Not a CRD shape: nothing.
  EXPECT_TRUE(crdExpectations(Json::obj({{"spec", 3}}), false).empty());
  EXPECT_TRUE(crdExpectations(Json(), true).empty());
}

//! The agent's options from a command line (argv[0] added).
Result<AgentOptions> optionsFrom(std::vector<const char*> args) {
  args.insert(args.begin(), "flotilla-agent");
  auto config = service::Config::parse(static_cast<int>(args.size()), args.data(), agentFlags());
  FLOTILLA_TRY(config);
  return agentOptionsFrom(*config);
}

// The deploy durable's ack wait and delivery bound are the hub's (the scheduler creates the durable): the agent
// refuses the flags it used to take for them.
TEST(AgentFlags, AckWaitAndMaxDeliveriesAreTheHubs) {
  for (const char* flag : {"--ack-wait", "--max-deliveries"}) {
    auto refused = optionsFrom({"--cluster-name", "c", flag, "5"});
    ASSERT_FALSE(refused.ok()) << flag;
    EXPECT_NE(refused.error().message.find(std::string(flag).substr(2)), std::string::npos) << refused.error().message;
  }
}

//! An auth directory with the credentials of `role` (subject: the agent's cluster) written to <dir>/<file>.
class AgentCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    auto init = identity::initAuthDir({.dir = dir_ + "/auth", .server_name = "hub"});
    ASSERT_TRUE(init.ok()) << init.error().describe();
  }
  std::string issue(const std::string& role, const std::string& subject) {
    auto made = identity::roleFor(role, subject);
    EXPECT_TRUE(made.ok());
    auto user = identity::issueFromAuthDir(dir_ + "/auth", *made, std::nullopt);
    EXPECT_TRUE(user.ok()) << user.error().describe();
    std::string path = dir_ + "/" + role + "-" + subject + ".creds";
    EXPECT_TRUE(writeFile(path, user.ok() ? user->creds : "", 0600).ok());
    return path;
  }

  flotilla::testing::TempDir temp_{"agent-creds"};
  const std::string dir_ = temp_.path();
};

// The cluster comes from the credentials: --cluster-name may be left out, the same name is fine, another is refused;
// the inbox prefix is the one the credentials may subscribe under.
TEST_F(AgentCredentialsTest, TheClusterIsTheCredentials) {
  std::string creds = issue("agent", "east-1");
  auto from_creds = optionsFrom({"--nats-creds", creds.c_str()});
  ASSERT_TRUE(from_creds.ok()) << from_creds.error().describe();
  EXPECT_EQ(from_creds->cluster_name, "east-1");
  EXPECT_EQ(from_creds->inbox_prefix, "_INBOX.agent-east-1");
  auto same = optionsFrom({"--nats-creds", creds.c_str(), "--cluster-name", "east-1"});
  ASSERT_TRUE(same.ok()) << same.error().describe();
  auto other = optionsFrom({"--nats-creds", creds.c_str(), "--cluster-name", "west-1"});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("--cluster-name west-1 conflicts"), std::string::npos) << other.error().message;
  auto prefix = optionsFrom({"--nats-creds", creds.c_str(), "--nats-inbox-prefix", "_INBOX"});
  ASSERT_FALSE(prefix.ok());
  EXPECT_NE(prefix.error().message.find("--nats-inbox-prefix"), std::string::npos) << prefix.error().message;
}

// Credentials of another role, or no cluster at all: refused, naming what is wrong.
TEST_F(AgentCredentialsTest, OtherCredentialsOrNoClusterAreRefused) {
  auto readonly = optionsFrom({"--nats-creds", issue("readonly", "").c_str()});
  ASSERT_FALSE(readonly.ok());
  EXPECT_NE(readonly.error().message.find("role \"readonly\""), std::string::npos) << readonly.error().message;
  auto missing = optionsFrom({"--nats-creds", (dir_ + "/none.creds").c_str()});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("--nats-creds"), std::string::npos) << missing.error().message;
  auto nothing = optionsFrom({});
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.error().message.find("--cluster-name is required"), std::string::npos) << nothing.error().message;
  auto plain = optionsFrom({"--cluster-name", "c", "--nats-inbox-prefix", "_INBOX.custom"});
  ASSERT_TRUE(plain.ok()) << plain.error().describe();
  EXPECT_EQ(plain->inbox_prefix, "_INBOX.custom");
}

}  // namespace
}  // namespace flotilla::agent
