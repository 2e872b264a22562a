// `flotilla auth init` / `auth issue`: the files they write (modes, contents), that seeds reach stdout only when
// asked, and the refusals (unknown role, bad cluster name, flags that do not fit). The server accepting what init
// writes is libs/identity's identity_nats_test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "flotilla/core/util.h"
#include "flotilla/identity/jwt.h"
#include "flotilla/testing/temp_dir.h"
#include "run_captured.h"

namespace flotilla::cli {
namespace {

int modeOf(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<int>(info.st_mode & 0777) : -1;
}

std::string seedIn(const std::string& path) {
  return trim(readFile(path).valueOr(""));
}

class AuthCommandTest : public ::testing::Test {
 protected:
  flotilla::testing::TempDir temp_{"flotilla-auth-cli"};
  std::string dir_ = temp_.path() + "/auth";
};

TEST_F(AuthCommandTest, InitWritesKeysConfigAndHubCredsWithoutPrintingSeeds) {
  Ran ran = runCaptured({"auth", "init", "--dir", dir_, "--tls", "--san", "nats.example", "--server-name", "hub"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  for (const char* secret :
       {"operator.nk", "system-account.nk", "account.nk", "account-signing.nk", "creds/poller.creds",
        "creds/bundler.creds", "creds/scheduler.creds", "creds/gateway.creds", "creds/admin.creds",
        "creds/readonly.creds", "tls/ca-key.pem", "tls/server-key.pem"}) {
    EXPECT_EQ(modeOf(dir_ + "/" + secret), 0600) << secret;
    EXPECT_NE(ran.out.find(secret), std::string::npos) << secret;
  }
  EXPECT_EQ(modeOf(dir_ + "/tls/server.pem"), 0644);
  EXPECT_EQ(modeOf(dir_), 0700);
  for (const char* seed : {"operator.nk", "account.nk", "account-signing.nk"}) {
    EXPECT_EQ(ran.out.find(seedIn(dir_ + "/" + seed)), std::string::npos) << seed;
  }
  std::string config = readFile(dir_ + "/nats-auth.conf").value();
  EXPECT_NE(config.find("type: full\n  dir: \"" + dir_ + "/resolver\""), std::string::npos) << config;
  EXPECT_NE(config.find("server_name: \"hub\""), std::string::npos);
  EXPECT_NE(config.find("cert_file: \"" + dir_ + "/tls/server.pem\""), std::string::npos) << config;
  EXPECT_EQ(config.find("verify: true"), std::string::npos);
  auto creds = identity::parseCredsFile(readFile(dir_ + "/creds/readonly.creds").value());
  ASSERT_TRUE(creds.ok());
  auto jwt = identity::verifyJwt(creds->jwt);
  ASSERT_TRUE(jwt.ok()) << jwt.error().describe();
  EXPECT_EQ(jwt->claims.getString("name"), "readonly");
  EXPECT_FALSE(jwt->claims.contains("exp"));
}

TEST_F(AuthCommandTest, InitWritesTheResolverDirectoryItIsGiven) {
  Ran ran = runCaptured({"auth", "init", "--dir", dir_, "--resolver-dir", "/data/resolver"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  EXPECT_NE(readFile(dir_ + "/nats-auth.conf")->find("dir: \"/data/resolver\""), std::string::npos);
}

TEST_F(AuthCommandTest, InitRefusesToOverwriteExistingKeys) {
  ASSERT_EQ(runCaptured({"auth", "init", "--dir", dir_}).code, kExitOk);
  std::string before = seedIn(dir_ + "/operator.nk");
  Ran again = runCaptured({"auth", "init", "--dir", dir_});
  EXPECT_EQ(again.code, kExitError);
  EXPECT_NE(again.err.find("already holds NATS keys (operator.nk); refusing to overwrite them"), std::string::npos)
      << again.err;
  EXPECT_EQ(seedIn(dir_ + "/operator.nk"), before);
}

TEST_F(AuthCommandTest, IssueWritesAnAgentsCredsBoundToItsCluster) {
  ASSERT_EQ(runCaptured({"auth", "init", "--dir", dir_}).code, kExitOk);
  Ran ran = runCaptured({"auth", "issue", "--dir", dir_, "--role", "agent", "--cluster", "c1", "--ttl", "24h"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  std::string path = dir_ + "/creds/agent-c1.creds";
  EXPECT_NE(ran.out.find("wrote " + path), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("inbox prefix _INBOX.agent-c1"), std::string::npos) << ran.out;
  EXPECT_EQ(modeOf(path), 0600);
  auto creds = identity::parseCredsFile(readFile(path).value()).value();
  EXPECT_EQ(ran.out.find(creds.seed), std::string::npos);
  auto jwt = identity::verifyJwt(creds.jwt).value();
  EXPECT_EQ(jwt.claims.getString("name"), "agent-c1");
  int64_t lifetime = jwt.claims.getInt("exp") - jwt.claims.getInt("iat");
  EXPECT_EQ(lifetime, 24 * 3600);
  EXPECT_NE(jwt.claims.at({"nats", "pub", "allow"})->dump().find("flotilla.status.c1.>"), std::string::npos);
}

TEST_F(AuthCommandTest, IssuePrintsCredsToStdoutOnlyWithOutDash) {
  ASSERT_EQ(runCaptured({"auth", "init", "--dir", dir_}).code, kExitOk);
  Ran ran = runCaptured({"auth", "issue", "--dir", dir_, "--role", "registration", "--token", "t1", "--out", "-"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  auto creds = identity::parseCredsFile(ran.out);
  ASSERT_TRUE(creds.ok()) << ran.out;
  EXPECT_EQ(identity::verifyJwt(creds->jwt).value().claims.getString("name"), "registration-t1");
  EXPECT_NE(ran.err.find("user registration-t1"), std::string::npos) << ran.err;
}

TEST_F(AuthCommandTest, IssueRefusesUnknownRolesBadNamesAndFlagsThatDoNotFit) {
  ASSERT_EQ(runCaptured({"auth", "init", "--dir", dir_}).code, kExitOk);
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--role", "root"}, "unknown role \"root\""},
           {{"--role", "agent"}, "role agent needs a cluster name"},
           {{"--role", "agent", "--cluster", "Bad_Name"}, "cluster name \"Bad_Name\" is not a Kubernetes name"},
           {{"--role", "admin", "--cluster", "c1"}, "--cluster is for --role agent, not admin"},
           {{"--role", "agent", "--cluster", "c1", "--token", "t"}, "--cluster and --token do not go together"},
           {{"--role", "agent", "--cluster", "c1", "--ttl", "soon"}, "--ttl \"soon\": expected a duration"},
       }) {
    std::vector<std::string> args = {"auth", "issue", "--dir", dir_};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    Ran ran = runCaptured(args);
    EXPECT_EQ(ran.code, kExitUsage) << join(c.extra, " ");
    EXPECT_NE(ran.err.find(c.message), std::string::npos) << ran.err;
  }
}

TEST_F(AuthCommandTest, IssueWithoutAnInitialisedDirAndSansWithoutTlsAreErrors) {
  Ran missing = runCaptured({"auth", "issue", "--dir", dir_, "--role", "admin"});
  EXPECT_EQ(missing.code, kExitError);
  EXPECT_NE(missing.err.find("run auth init --dir"), std::string::npos) << missing.err;
  Ran san = runCaptured({"auth", "init", "--dir", dir_, "--san", "nats.example"});
  EXPECT_EQ(san.code, kExitUsage);
  EXPECT_NE(san.err.find("--san names the server certificate: it needs --tls or --mutual-tls"), std::string::npos)
      << san.err;
  Ran nats = runCaptured({"auth", "init", "--dir", dir_, "--nats-url", "nats://x:4222"});
  EXPECT_EQ(nats.code, kExitUsage) << nats.err;
  EXPECT_NE(nats.err.find("--nats-url does not apply to auth (it does not use the hub)"), std::string::npos)
      << nats.err;
  Ran bare = runCaptured({"auth"});
  EXPECT_EQ(bare.code, kExitUsage) << bare.err;
}

// auth revoke's usage errors, before anything is read or connected (the rest: cli_auth_revoke_test).
TEST_F(AuthCommandTest, RevokeRefusesFlagsThatDoNotFit) {
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "auth revoke needs --cluster C or --token T (one of them)"},
      {{"--cluster", "c1", "--token", "t1"}, "auth revoke needs --cluster C or --token T (one of them)"},
      {{"--cluster", "Bad_Name"}, "--cluster: cluster name \"Bad_Name\" is not a Kubernetes name"},
      {{"--token", "T!"}, "--token: "},
      {{"--cluster", "c1", "--wait", "soon"}, "--wait \"soon\": expected a duration of at least 1s"},
      {{"--token", "t1", "--wait", "1m"}, "--wait is for --cluster (a token has no deregistration to wait for)"},
      {{"--cluster", "c1", "--nats-creds", "x.creds"},
       "--nats-creds does not apply to auth revoke (it connects with the credentials in --dir)"},
      {{"--cluster", "c1", "-n", "ws"}, "-n does not apply to auth"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"auth", "revoke", "--dir", dir_};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    Ran ran = runCaptured(args);
    EXPECT_EQ(ran.code, kExitUsage) << join(c.extra, " ") << "\n" << ran.err;
    EXPECT_NE(ran.err.find(c.message), std::string::npos) << ran.err;
  }
}

}  // namespace
}  // namespace flotilla::cli
