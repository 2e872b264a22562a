// The registration-token messages (enrollment.h): strict codecs, and what checkRenewal accepts.
#include "flotilla/identity/enrollment.h"

#include <gtest/gtest.h>

#include "flotilla/identity/permissions.h"

namespace flotilla::identity {
namespace {

struct Fixture {
  KeyPair registrar = KeyPair::generate(KeyType::kAccount).value();
  KeyPair account = KeyPair::generate(KeyType::kAccount).value();
  KeyPair user = generateClientUserKey().value();

  [[nodiscard]] AgentSigner signer() const { return AgentSigner{.key = registrar, .account = account.publicKey()}; }
  [[nodiscard]] std::string creds(const std::string& cluster, std::chrono::seconds ttl = std::chrono::hours(1)) const {
    return credsFile(issueAgentJwt(signer(), cluster, user.publicKey(), ttl).value(), user);
  }
};

TEST(EnrollmentCodecTest, RequestsRoundTripAndUnknownFieldsAreRefused) {
  Fixture f;
  EnrollRequest request{.cluster = "c1", .public_key = f.user.publicKey()};
  auto decoded = parseEnrollRequest(encode(request).dump());
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(decoded->cluster, "c1");
  auto unknown = parseEnrollRequest(R"({"cluster":"c1","publicKey":")" + f.user.publicKey() + R"(","x":1})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("unknown field"), std::string::npos) << unknown.error().message;
  auto account_key = parseEnrollRequest(R"({"cluster":"c1","publicKey":")" + f.account.publicKey() + R"("})");
  ASSERT_FALSE(account_key.ok());
  EXPECT_NE(account_key.error().message.find("publicKey"), std::string::npos) << account_key.error().message;
  EXPECT_FALSE(parseRenewRequest(R"({"jwt":"a"})").ok());
  EXPECT_EQ(agentRenewSubject("c1"), "flotilla.register.c1.renew");
}

TEST(EnrollmentCodecTest, IssuedAgentCredentialsCarryTheAgentRoleAndTheAccount) {
  Fixture f;
  auto owner = credsIdentity(f.creds("c1"));
  ASSERT_TRUE(owner.ok()) << owner.error().describe();
  EXPECT_EQ(owner->role, "agent");
  EXPECT_EQ(owner->subject, "c1");
  auto jwt = verifyJwt(parseCredsFile(f.creds("c1"))->jwt).value();
  EXPECT_EQ(jwt.claims.at({"nats", "issuer_account"})->asString(), f.account.publicKey());
  auto lifetime = credsLifetime(f.creds("c1", std::chrono::seconds(90)));
  ASSERT_TRUE(lifetime.ok() && lifetime->expires);
  EXPECT_EQ(*lifetime->expires - lifetime->issued, std::chrono::seconds(90));
  EXPECT_FALSE(issueAgentJwt(f.signer(), "Not A Name", f.user.publicKey(), std::chrono::hours(1)).ok());
}

TEST(EnrollmentCodecTest, ARenewalIsCheckedForSignerClusterAndProofOfPossession) {
  Fixture f;
  KeyPair next = generateClientUserKey().value();
  auto request = renewRequest(f.creds("c1"), next).value();
  auto checked = checkRenewal(request, "c1", f.registrar.publicKey());
  ASSERT_TRUE(checked.ok()) << checked.error().describe();
  EXPECT_EQ(checked->current_key, f.user.publicKey());
  // Another cluster's subject, another signer, a swapped key.
  EXPECT_EQ(checkRenewal(request, "c2", f.registrar.publicKey()).error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(checkRenewal(request, "c1", f.account.publicKey()).error().kind, ErrorKind::kPermanent);
  RenewRequest swapped = request;
  swapped.public_key = generateClientUserKey()->publicKey();
  auto forged = checkRenewal(swapped, "c1", f.registrar.publicKey());
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.error().message.find("signature"), std::string::npos) << forged.error().message;
}

// The server fills the template with the user's flotilla-subject tag: for a DNS-1123 label that is agentRole's lists.
TEST(EnrollmentCodecTest, TheAgentTemplateIsTheAgentRoleOfTheTaggedCluster) {
  auto fill = [](std::vector<std::string> subjects) {
    for (auto& subject : subjects) {
      for (size_t at = subject.find(kAgentTemplateCluster); at != std::string::npos;
           at = subject.find(kAgentTemplateCluster)) {
        subject.replace(at, kAgentTemplateCluster.size(), "edge-7");
      }
    }
    return subjects;
  };
  Permissions filled = agentTemplatePermissions();
  Permissions role = agentRole("edge-7")->permissions;
  EXPECT_EQ(fill(filled.publish_allow), role.publish_allow);
  EXPECT_EQ(fill(filled.publish_deny), role.publish_deny);
  EXPECT_EQ(fill(filled.subscribe_allow), role.subscribe_allow);
  EXPECT_EQ(filled.allow_responses, role.allow_responses);
}

TEST(EnrollmentCodecTest, AScopedRegistrarKeySignsAgentsWithoutPermissionsOfTheirOwn) {
  Fixture f;
  KeyPair op = KeyPair::generate(KeyType::kOperator).value();
  KeyPair plain = KeyPair::generate(KeyType::kAccount).value();
  auto account_jwt = issueAccountJwt(
      op, f.account.publicKey(),
      {.base = {.name = "flotilla"},
       .signing_keys = {plain.publicKey()},
       .scoped_signing_keys = {
           {.key = f.registrar.publicKey(), .role = "agent", .permissions = agentTemplatePermissions()}}});
  ASSERT_TRUE(account_jwt.ok()) << account_jwt.error().describe();
  auto account = verifyJwt(*account_jwt).value();
  const Json* keys = account.claims.at({"nats", "signing_keys"});
  ASSERT_TRUE(keys != nullptr && keys->size() == 2);
  EXPECT_EQ(keys->asArray()[1].getString("kind"), "user_scope");
  const Json* allow = keys->asArray()[1].at({"template", "pub", "allow"});
  ASSERT_NE(allow, nullptr);
  EXPECT_EQ(allow->asArray()[0].asString(), "flotilla.status.{{tag(flotilla-subject)}}.>");

  auto scoped = agentSignerFor(f.registrar, *account_jwt);
  ASSERT_TRUE(scoped.ok()) << scoped.error().describe();
  EXPECT_TRUE(scoped->scoped);
  EXPECT_EQ(scoped->account, f.account.publicKey());
  auto jwt = verifyJwt(issueAgentJwt(*scoped, "c1", f.user.publicKey(), std::chrono::hours(1)).value()).value();
  EXPECT_EQ(jwt.claims.at({"nats", "pub"}), nullptr) << "the server applies the template";
  EXPECT_EQ(jwt.claims.at({"nats", "subs"}), nullptr);
  EXPECT_NE(jwt.claims.at({"nats", "tags"}), nullptr);

  auto unscoped = agentSignerFor(plain, *account_jwt);
  ASSERT_TRUE(unscoped.ok());
  EXPECT_FALSE(unscoped->scoped);
  auto stranger = agentSignerFor(KeyPair::generate(KeyType::kAccount).value(), *account_jwt);
  ASSERT_FALSE(stranger.ok());
  EXPECT_NE(stranger.error().message.find("does not list the signing key"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::identity
