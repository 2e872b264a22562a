#include <gtest/gtest.h>

#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/core/json.h"
#include "flotilla/core/util.h"

namespace flotilla::bus {
namespace {

TEST(BusObjectMetaTest, SubjectsFollowTheNatsLayout) {
  EXPECT_EQ(objectStreamName("manifests"), "OBJ_manifests");
  EXPECT_EQ(objectChunkSubject("manifests", "abc"), "$O.manifests.C.abc");
  // base64url with padding: "a.b" -> "YS5i", "ab" -> "YWI=".
  EXPECT_EQ(objectMetaSubject("manifests", "a.b"), "$O.manifests.M.YS5i");
  EXPECT_EQ(objectMetaSubject("manifests", "ab"), "$O.manifests.M.YWI=");
  // '/' and '+' never appear in a subject token: the URL alphabet uses '_' and '-'.
  EXPECT_EQ(objectMetaSubject("m", "\xff\xfe"), "$O.m.M.__4=");
}

TEST(BusObjectMetaTest, DigestIsBase64UrlPaddedSha256) {
  // sha256("") = e3b0c442...; base64url of the raw digest.
  EXPECT_EQ(objectDigest(sha256Raw("")), "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=");
}

ObjectInfo sampleInfo() {
  return ObjectInfo{.name = "bundle/x.json",
                    .bucket = "manifests",
                    .nuid = "n1",
                    .size = 300000,
                    .chunks = 3,
                    .digest = "SHA-256=abc=",
                    .mtime = "2026-01-02T03:04:05.678Z"};
}

TEST(BusObjectMetaTest, EncodeWritesTheStandardFields) {
  auto json = Json::parse(encodeObjectMeta(sampleInfo()));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->getString("name"), "bundle/x.json");
  EXPECT_EQ(json->getString("bucket"), "manifests");
  EXPECT_EQ(json->getString("nuid"), "n1");
  EXPECT_EQ(json->getInt("size"), 300000);
  EXPECT_EQ(json->getInt("chunks"), 3);
  EXPECT_EQ(json->getString("digest"), "SHA-256=abc=");
  EXPECT_EQ(json->getString("mtime"), "2026-01-02T03:04:05.678Z");
  ASSERT_NE(json->at({"options", "max_chunk_size"}), nullptr);
  EXPECT_EQ(json->at({"options", "max_chunk_size"})->asInt(), 131072);
  // Like other clients, "deleted" only appears when true.
  EXPECT_FALSE(json->contains("deleted"));
}

TEST(BusObjectMetaTest, DecodeRoundTripsAndReadsOtherClientsFields) {
  ObjectInfo info = sampleInfo();
  info.deleted = true;
  auto decoded = decodeObjectMeta(encodeObjectMeta(info));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(decoded->name, "bundle/x.json");
  EXPECT_EQ(decoded->size, 300000u);
  EXPECT_EQ(decoded->chunks, 3u);
  EXPECT_TRUE(decoded->deleted);
  EXPECT_EQ(decoded->max_chunk_size, kObjectChunkSize);

  // A meta as nats.go writes it (extra fields, nanosecond mtime, no digest for an empty object).
  auto go =
      decodeObjectMeta(R"({"name":"x","description":"d","headers":{"A":["b"]},"options":{"max_chunk_size":65536},)"
                       R"("bucket":"blobs","nuid":"Z9","size":0,"mtime":"2023-01-02T15:04:05.123456789Z","chunks":0})");
  ASSERT_TRUE(go.ok()) << go.error().describe();
  EXPECT_EQ(go->max_chunk_size, 65536u);
  EXPECT_EQ(go->digest, "");
  EXPECT_FALSE(go->deleted);
}

TEST(BusObjectMetaTest, DecodeRejectsMalformedMeta) {
  EXPECT_EQ(decodeObjectMeta("not json").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(decodeObjectMeta(R"({"size":1})").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(decodeObjectMeta(R"({"name":"x","size":-4})").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(decodeObjectMeta(R"({"name":"x","chunks":"3"})").error().kind, ErrorKind::kInvalid);
}

TEST(BusObjectMetaTest, BucketNames) {
  for (const char* name : {"manifests", "a-b_C9"}) {
    EXPECT_TRUE(isValidBucketName(name)) << name;
  }
  for (const char* name : {"", "a.b", "a b"}) {
    EXPECT_FALSE(isValidBucketName(name)) << name;
  }
}

TEST(BusKvKeyTest, AllowedCharacters) {
  for (const char* key : {"gitrepos.default.my-repo", "a/b_c=d-e.F9"}) {
    EXPECT_TRUE(isValidKvKey(key)) << key;
  }
  for (const char* key : {"", ".a", "a.", "a b", "a*", "a>"}) {
    EXPECT_FALSE(isValidKvKey(key)) << key;
  }
}

}  // namespace
}  // namespace flotilla::bus
