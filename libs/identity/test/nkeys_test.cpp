#include "flotilla/identity/nkeys.h"

#include <cstdlib>

#include <gtest/gtest.h>
#include <nats/nats.h>

namespace flotilla::identity {
namespace {

TEST(NkeysTest, Base32MatchesRfc4648WithoutPadding) {
  EXPECT_EQ(base32Encode("foobar"), "MZXW6YTBOI");
  EXPECT_EQ(base32Encode("f"), "MY");
  EXPECT_EQ(base32Decode("MZXW6YTBOI").value(), "foobar");
  EXPECT_FALSE(base32Decode("MZ1W").ok());
}

TEST(NkeysTest, Crc16IsXmodem) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(NkeysTest, GeneratedKeysCarryTheirTypeLetterAndRoundTripThroughTheSeed) {
  for (auto [type, letter] :
       {std::pair{KeyType::kOperator, 'O'}, std::pair{KeyType::kAccount, 'A'}, std::pair{KeyType::kUser, 'U'}}) {
    auto pair = KeyPair::generate(type);
    ASSERT_TRUE(pair.ok()) << pair.error().describe();
    EXPECT_EQ(pair->publicKey().size(), 56U);
    EXPECT_EQ(pair->publicKey()[0], letter);
    std::string seed = pair->seed();
    EXPECT_EQ(seed.size(), 58U);
    EXPECT_EQ(seed[0], 'S');
    EXPECT_EQ(seed[1], letter);
    auto again = KeyPair::fromSeed(seed);
    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ(again->type(), type);
    EXPECT_EQ(again->publicKey(), pair->publicKey());
    EXPECT_EQ(decodePublicKey(pair->publicKey(), type).value().size(), 32U);
  }
}

// The user seed and public key of the nkey example in the NATS server documentation ("NKeys" authentication):
// our decoding of a seed written by the NATS tools derives the same public key.
TEST(NkeysTest, DecodesTheNatsDocumentationSeedToItsPublicKey) {
  auto pair = KeyPair::fromSeed("SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY");
  ASSERT_TRUE(pair.ok()) << pair.error().describe();
  EXPECT_EQ(pair->type(), KeyType::kUser);
  EXPECT_EQ(pair->publicKey(), "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4");
  EXPECT_EQ(pair->seed(), "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY");
}

bool libnatsSigns(const std::string& seed) {
  unsigned char* signature = nullptr;
  int length = 0;
  natsStatus status = nats_Sign(seed.c_str(), "nonce", &signature, &length);
  std::free(signature);
  return status == NATS_OK;
}

// A seed libnats 3.4.1 refuses although it is well formed: this library decodes it, its checksum is right.
TEST(NkeysTest, LibnatsRefusesSomeValidSeedsSoIssuedUserKeysAreChecked) {
  const std::string refused = "SUAMLDZRMBI57IQ2IOVKZH65LXRYU37I3OFOZD2CLADSKKT3BF3IN3MIBU";
  auto pair = KeyPair::fromSeed(refused);
  ASSERT_TRUE(pair.ok()) << pair.error().describe();
  EXPECT_EQ(pair->seed(), refused);
  EXPECT_FALSE(libnatsSigns(refused));
  for (int i = 0; i < 50; ++i) {  // libnats signs slowly (tens of ms)
    auto user = generateClientUserKey();
    ASSERT_TRUE(user.ok()) << user.error().describe();
    ASSERT_TRUE(libnatsSigns(user->seed())) << user->seed();
  }
}

TEST(NkeysTest, AMistypedSeedFailsTheChecksum) {
  std::string seed = KeyPair::generate(KeyType::kUser).value().seed();
  seed[10] = seed[10] == 'A' ? 'B' : 'A';
  auto pair = KeyPair::fromSeed(seed);
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(pair.error().message.find("checksum mismatch"), std::string::npos) << pair.error().message;
}

TEST(NkeysTest, PublicKeysAndTruncatedSeedsAreNotSeeds) {
  auto pair = KeyPair::generate(KeyType::kAccount).value();
  auto from_public = KeyPair::fromSeed(pair.publicKey());
  ASSERT_FALSE(from_public.ok());
  EXPECT_NE(from_public.error().message.find("wrong length"), std::string::npos) << from_public.error().message;
  auto truncated = KeyPair::fromSeed(pair.seed().substr(0, 40));
  ASSERT_FALSE(truncated.ok());
  auto typed = decodePublicKey(pair.publicKey(), KeyType::kUser);
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.error().message.find("another type"), std::string::npos) << typed.error().message;
}

TEST(NkeysTest, SignaturesVerifyOnlyForTheSignerAndTheData) {
  auto alice = KeyPair::generate(KeyType::kUser).value();
  auto bob = KeyPair::generate(KeyType::kUser).value();
  auto signature = alice.sign("nonce");
  ASSERT_TRUE(signature.ok());
  EXPECT_EQ(signature->size(), 64U);
  EXPECT_TRUE(verifySignature(alice.publicKey(), "nonce", *signature).ok());
  EXPECT_FALSE(verifySignature(bob.publicKey(), "nonce", *signature).ok());
  EXPECT_FALSE(verifySignature(alice.publicKey(), "nonce2", *signature).ok());
}

}  // namespace
}  // namespace flotilla::identity
