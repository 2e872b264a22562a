// Revocation in an auth dir (revocation.h): the revised account JWT in account.jwt and nats-auth.conf, the user key
// of a .creds file, the short-lived updater of the system account, and the server's answers to an update. The
// server's side is in cli/test auth_revoke_test.
#include "flotilla/identity/revocation.h"

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::identity {
namespace {

TEST(RevocationTest, RevokingWritesTheRevisedAccountJwtToTheDirectoryAndItsServerConfig) {
  flotilla::testing::TempDir dir{"flotilla-revocation"};
  ASSERT_TRUE(initAuthDir({.dir = dir.path()}).ok());
  auto old_jwt = trim(readFile(dir.path() + "/account.jwt").value());
  auto user = issueFromAuthDir(dir.path(), adminRole(), std::nullopt);
  ASSERT_TRUE(user.ok());
  auto key = credsUserKey(user->creds);
  ASSERT_TRUE(key.ok()) << key.error().describe();
  EXPECT_EQ(*key, user->public_key);

  auto revoked = revokeInAuthDir(dir.path(), {*key});
  ASSERT_TRUE(revoked.ok()) << revoked.error().describe();
  EXPECT_EQ(trim(readFile(dir.path() + "/account.jwt").value()), revoked->jwt);
  std::string conf = readFile(dir.path() + "/nats-auth.conf").value();
  EXPECT_NE(conf.find(revoked->jwt), std::string::npos);
  EXPECT_EQ(conf.find(old_jwt), std::string::npos);
  EXPECT_NE(conf.find("type: full"), std::string::npos);
  EXPECT_NE(conf.find("dir: \"" + dir.path() + "/resolver\""), std::string::npos) << conf;
  auto account = verifyJwt(revoked->jwt).value();
  EXPECT_EQ(account.subject(), revoked->account);
  EXPECT_NE(account.claims.at({"nats", "revocations"})->find(*key), nullptr);

  flotilla::testing::TempDir empty{"flotilla-revocation-empty"};
  auto missing = revokeInAuthDir(empty.path(), {*key});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("operator.nk is missing"), std::string::npos);
}

TEST(RevocationTest, TheUpdaterIsAShortLivedSystemUserThatMayOnlySendUpdates) {
  flotilla::testing::TempDir dir{"flotilla-revocation"};
  ASSERT_TRUE(initAuthDir({.dir = dir.path()}).ok());
  auto updater = issueClaimsUpdater(dir.path(), std::chrono::minutes(5));
  ASSERT_TRUE(updater.ok()) << updater.error().describe();
  auto jwt = verifyJwt(updater->jwt).value();
  auto system = verifyJwt(trim(readFile(dir.path() + "/system-account.jwt").value())).value();
  EXPECT_EQ(jwt.issuer(), system.subject());
  EXPECT_EQ(jwt.claims.getInt("exp") - jwt.claims.getInt("iat"), 300);
  EXPECT_EQ(jwt.claims.at({"nats", "pub", "allow"})->dump(), R"(["$SYS.REQ.CLAIMS.UPDATE"])");
  EXPECT_EQ(jwt.claims.at({"nats", "sub", "allow"})->dump(), R"(["_INBOX.>"])");
}

TEST(RevocationTest, TheServersAnswerToAnUpdate) {
  EXPECT_TRUE(checkClaimsUpdateReply(R"({"data":{"account":"A","code":200,"message":"jwt updated"}})").ok());
  auto refused = checkClaimsUpdateReply(
      R"({"error":{"account":"A","code":500,"description":"jwt validation failed - bad issuer"}})");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "the server refused the account JWT: jwt validation failed - bad issuer");
  EXPECT_FALSE(checkClaimsUpdateReply("not json").ok());
  EXPECT_FALSE(credsUserKey("no creds here").ok());
}

}  // namespace
}  // namespace flotilla::identity
