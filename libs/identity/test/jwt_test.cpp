#include "flotilla/identity/jwt.h"

#include <gtest/gtest.h>

#include "flotilla/core/util.h"

namespace flotilla::identity {
namespace {

struct Chain {
  KeyPair op = KeyPair::generate(KeyType::kOperator).value();
  KeyPair account = KeyPair::generate(KeyType::kAccount).value();
  KeyPair signing = KeyPair::generate(KeyType::kAccount).value();
  KeyPair user = KeyPair::generate(KeyType::kUser).value();
};

TEST(JwtTest, UserJwtSignedByAnAccountSigningKeyVerifiesAndCarriesTheNatsClaims) {
  Chain chain;
  UserClaims claims{.base = {.name = "agent-c1", .expires = Clock::now() + std::chrono::hours(1)},
                    .permissions = {.publish_allow = {"flotilla.status.c1.>"},
                                    .publish_deny = {"$KV.>"},
                                    .subscribe_allow = {"_INBOX.agent-c1.>"}},
                    .issuer_account = chain.account.publicKey()};
  auto jwt = issueUserJwt(chain.signing, chain.user.publicKey(), claims);
  ASSERT_TRUE(jwt.ok()) << jwt.error().describe();
  auto verified = verifyJwt(*jwt);
  ASSERT_TRUE(verified.ok()) << verified.error().describe();
  EXPECT_EQ(verified->header.dump(), R"({"alg":"ed25519-nkey","typ":"JWT"})");
  EXPECT_EQ(verified->issuer(), chain.signing.publicKey());
  EXPECT_EQ(verified->subject(), chain.user.publicKey());
  EXPECT_EQ(verified->type(), "user");
  const Json& nats = *verified->claims.find("nats");
  EXPECT_EQ(nats.getInt("version"), 2);
  EXPECT_EQ(nats.getString("issuer_account"), chain.account.publicKey());
  EXPECT_FALSE(nats.getBool("bearer_token", true));
  EXPECT_EQ(nats.at({"pub", "allow"})->dump(), R"(["flotilla.status.c1.>"])");
  EXPECT_EQ(nats.at({"pub", "deny"})->dump(), R"(["$KV.>"])");
  EXPECT_EQ(nats.at({"sub", "allow"})->dump(), R"(["_INBOX.agent-c1.>"])");
  EXPECT_TRUE(verified->claims.contains("exp"));
  // jti: base32 (no padding) of the SHA-256 of the claims without jti.
  Json without = verified->claims;
  std::string jti = without.getString("jti");
  without.erase("jti");
  EXPECT_EQ(jti, base32Encode(sha256Raw(without.dump())));
}

TEST(JwtTest, AnEmptyAllowListIsWrittenAsDenyEverything) {
  Chain chain;
  auto jwt = issueUserJwt(chain.account, chain.user.publicKey(),
                          {.base = {.name = "mute"}, .permissions = {.publish_allow = {"a"}}});
  auto verified = verifyJwt(jwt.value()).value();
  EXPECT_EQ(verified.claims.at({"nats", "sub", "deny"})->dump(), R"([">"])");
  EXPECT_EQ(verified.claims.at({"nats", "sub", "allow"}), nullptr);
}

TEST(JwtTest, OperatorAndAccountJwts) {
  Chain chain;
  auto op = issueOperatorJwt(chain.op, {.base = {.name = "flotilla"}, .system_account = chain.account.publicKey()});
  auto op_claims = verifyJwt(op.value()).value();
  EXPECT_EQ(op_claims.issuer(), chain.op.publicKey());
  EXPECT_EQ(op_claims.subject(), chain.op.publicKey());
  EXPECT_EQ(op_claims.claims.at({"nats", "system_account"})->asString(), chain.account.publicKey());
  AccountClaims account{.base = {.name = "flotilla"},
                        .signing_keys = {chain.signing.publicKey()},
                        .revocations = {{chain.user.publicKey(), 1700000000}}};
  auto claims = verifyJwt(issueAccountJwt(chain.op, chain.account.publicKey(), account).value()).value();
  EXPECT_EQ(claims.type(), "account");
  EXPECT_EQ(claims.claims.at({"nats", "limits", "disk_storage"})->asInt(), -1);
  EXPECT_EQ(claims.claims.at({"nats", "signing_keys"})->dump(), "[\"" + chain.signing.publicKey() + "\"]");
  EXPECT_EQ(claims.claims.at({"nats", "revocations", chain.user.publicKey()})->asInt(), 1700000000);
  auto system = verifyJwt(issueAccountJwt(chain.op, chain.account.publicKey(), {.jetstream = false}).value()).value();
  EXPECT_EQ(system.claims.at({"nats", "limits", "disk_storage"}), nullptr);
}

TEST(JwtTest, WrongSignerTypesAndSubjectsAreRefused) {
  Chain chain;
  EXPECT_FALSE(issueUserJwt(chain.op, chain.user.publicKey(), {}).ok());
  EXPECT_FALSE(issueAccountJwt(chain.account, chain.account.publicKey(), {}).ok());
  auto bad_subject = issueUserJwt(chain.account, chain.account.publicKey(), {});
  ASSERT_FALSE(bad_subject.ok());
  EXPECT_NE(bad_subject.error().message.find("user"), std::string::npos);
}

TEST(JwtTest, ATamperedOrExpiredJwtDoesNotVerify) {
  Chain chain;
  auto now = Clock::now();
  std::string jwt = issueUserJwt(chain.account, chain.user.publicKey(),
                                 {.base = {.name = "u", .issued_at = now, .expires = now + std::chrono::seconds(60)},
                                  .permissions = {.publish_allow = {"a"}}})
                        .value();
  auto parts = split(jwt, '.');
  std::string forged_claims = base64UrlEncode(R"({"iss":")" + chain.account.publicKey() + R"(","name":"root"})");
  while (forged_claims.back() == '=') {
    forged_claims.pop_back();
  }
  auto tampered = verifyJwt(parts[0] + "." + forged_claims + "." + parts[2]);
  ASSERT_FALSE(tampered.ok());
  EXPECT_NE(tampered.error().message.find("signature"), std::string::npos) << tampered.error().message;
  auto expired = verifyJwt(jwt, now + std::chrono::seconds(61));
  ASSERT_FALSE(expired.ok());
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos) << expired.error().message;
  EXPECT_FALSE(verifyJwt("a.b").ok());
}

TEST(JwtTest, CredsFileRoundTrip) {
  Chain chain;
  std::string jwt = issueUserJwt(chain.account, chain.user.publicKey(), {.base = {.name = "u"}}).value();
  std::string text = credsFile(jwt, chain.user);
  EXPECT_NE(text.find("-----BEGIN NATS USER JWT-----\n" + jwt + "\n------END NATS USER JWT------"), std::string::npos);
  auto creds = parseCredsFile(text);
  ASSERT_TRUE(creds.ok()) << creds.error().describe();
  EXPECT_EQ(creds->jwt, jwt);
  EXPECT_EQ(creds->seed, chain.user.seed());
  EXPECT_FALSE(parseCredsFile("just text").ok());
}

// The role and subject (an agent's cluster) travel as tags in the user JWT; credsIdentity reads them back after the
// JWT verifies, and refuses credentials without a Flotilla role or with an expired JWT.
TEST(JwtTest, CredsIdentityReadsTheRoleAndClusterFromTheTags) {
  Chain chain;
  UserClaims claims{.base = {.name = "agent-east-1"}, .tags = identityTags("agent", "east-1")};
  std::string jwt = issueUserJwt(chain.account, chain.user.publicKey(), claims).value();
  auto verified = verifyJwt(jwt);
  ASSERT_TRUE(verified.ok());
  EXPECT_EQ(verified->claims.at({"nats", "tags"})->dump(), R"(["flotilla-role:agent","flotilla-subject:east-1"])");
  auto identity = credsIdentity(credsFile(jwt, chain.user));
  ASSERT_TRUE(identity.ok()) << identity.error().describe();
  EXPECT_EQ(identity->role, "agent");
  EXPECT_EQ(identity->subject, "east-1");

  UserClaims readonly{.base = {.name = "readonly"}, .tags = identityTags("readonly", "")};
  auto plain =
      credsIdentity(credsFile(issueUserJwt(chain.account, chain.user.publicKey(), readonly).value(), chain.user));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->role, "readonly");
  EXPECT_EQ(plain->subject, "");

  auto untagged = credsIdentity(credsFile(issueUserJwt(chain.account, chain.user.publicKey(), {}).value(), chain.user));
  ASSERT_FALSE(untagged.ok());
  EXPECT_NE(untagged.error().message.find("no Flotilla role"), std::string::npos) << untagged.error().message;
  UserClaims old{.base = {.name = "agent-east-1", .expires = Clock::now() - std::chrono::hours(1)},
                 .tags = identityTags("agent", "east-1")};
  auto expired = credsIdentity(credsFile(issueUserJwt(chain.account, chain.user.publicKey(), old).value(), chain.user));
  ASSERT_FALSE(expired.ok());
  EXPECT_NE(expired.error().message.find("expired"), std::string::npos) << expired.error().message;
  EXPECT_FALSE(credsIdentity("just text").ok());
}

TEST(JwtTest, RevisedAccountJwtAddsRevocationsKeepsEveryOtherClaimAndIsNewer) {
  Chain chain;
  const auto issued = Clock::now();
  AccountClaims claims{.base = {.name = "flotilla", .issued_at = issued},
                       .signing_keys = {chain.signing.publicKey()},
                       .revocations = {{chain.user.publicKey(), 100}}};
  auto original = issueAccountJwt(chain.op, chain.account.publicKey(), claims);
  ASSERT_TRUE(original.ok());
  KeyPair other = KeyPair::generate(KeyType::kUser).value();
  // Within the second the original was issued in: the revision is still one second newer.
  auto revised =
      reviseAccountRevocations(chain.op, *original, {{chain.user.publicKey(), 50}, {other.publicKey(), 200}}, issued);
  ASSERT_TRUE(revised.ok()) << revised.error().describe();
  auto before = verifyJwt(*original).value();
  auto after = verifyJwt(*revised).value();
  EXPECT_EQ(after.issuer(), chain.op.publicKey());
  EXPECT_EQ(after.claims.getInt("iat"), before.claims.getInt("iat") + 1);
  EXPECT_NE(after.claims.getString("jti"), before.claims.getString("jti"));
  const Json* revocations = after.claims.at({"nats", "revocations"});
  ASSERT_NE(revocations, nullptr);
  EXPECT_EQ(revocations->getInt(chain.user.publicKey()), 100) << "the later time of an existing entry stays";
  EXPECT_EQ(revocations->getInt(other.publicKey()), 200);
  for (Json* verified : {&before.claims, &after.claims}) {
    for (const char* volatile_claim : {"iat", "jti"}) {
      verified->erase(volatile_claim);
    }
    verified->find("nats")->erase("revocations");
  }
  EXPECT_EQ(after.claims, before.claims) << "nothing else changed";

  KeyPair stranger = KeyPair::generate(KeyType::kOperator).value();
  auto foreign = reviseAccountRevocations(stranger, *original, {{other.publicKey(), 1}});
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message.find("not by the operator key"), std::string::npos);
  EXPECT_FALSE(reviseAccountRevocations(chain.op, *original, {{"not-a-key", 1}}).ok());
  EXPECT_FALSE(reviseAccountRevocations(chain.op, *original, {}).ok());
}

}  // namespace
}  // namespace flotilla::identity
