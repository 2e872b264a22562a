// The Secret-shaped credentials directory: every accepted layout, and errors that never carry a value.
#include "flotilla/secrets/secret_store.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace flotilla::secrets {
namespace {

namespace fs = std::filesystem;

fs::path freshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("secrets-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(SecretStoreTest, ReadsADirectoryWithOneFilePerKeySkippingHiddenEntries) {
  fs::path dir = freshDir("dir");
  fs::create_directories(dir / "repo-creds" / "..data");
  std::ofstream(dir / "repo-creds" / "username") << "bot\n";
  std::ofstream(dir / "repo-creds" / "password") << "s3cret\n";
  std::ofstream(dir / "repo-creds" / ".swp") << "x";
  auto data = readSecret(dir.string(), "repo-creds");
  ASSERT_TRUE(data.ok()) << data.error().describe();
  EXPECT_EQ(data->size(), 2u);
  EXPECT_EQ(data->at("username"), "bot\n");  // raw: the caller decides about trailing newlines
}

TEST(SecretStoreTest, ReadsAMapFileAndASecretManifest) {
  fs::path dir = freshDir("files");
  std::ofstream(dir / "plain.yaml") << "username: u\ntoken: t\n";
  std::ofstream(dir / "manifest") << "apiVersion: v1\nkind: Secret\nmetadata: {name: manifest}\n"
                                     "data: {password: cGFzcw==}\nstringData: {username: admin}\n";
  std::ofstream(dir / "js.json") << R"({"cacerts": "PEM"})";
  auto plain = readSecret(dir.string(), "plain");
  ASSERT_TRUE(plain.ok()) << plain.error().describe();
  EXPECT_EQ(plain->at("token"), "t");
  auto manifest = readSecret(dir.string(), "manifest");
  ASSERT_TRUE(manifest.ok()) << manifest.error().describe();
  EXPECT_EQ(manifest->at("password"), "pass");
  EXPECT_EQ(manifest->at("username"), "admin");
  EXPECT_EQ(readSecret(dir.string(), "js")->at("cacerts"), "PEM");
}

TEST(SecretStoreTest, ErrorsNameTheSecretAndNeverAValue) {
  fs::path dir = freshDir("errors");
  std::ofstream(dir / "broken.yaml") << "password: [hunter2\n";
  std::ofstream(dir / "badb64.yaml") << "kind: Secret\ndata: {password: '%%hunter2%%'}\n";
  auto broken = readSecret(dir.string(), "broken");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(broken.error().message.find("\"broken\""), std::string::npos);
  EXPECT_EQ(broken.error().message.find("hunter2"), std::string::npos);
  auto badb64 = readSecret(dir.string(), "badb64");
  ASSERT_FALSE(badb64.ok());
  EXPECT_EQ(badb64.error().message.find("hunter2"), std::string::npos);
  EXPECT_EQ(readSecret(dir.string(), "absent").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(readSecret("", "any").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(readSecret(dir.string(), "../etc").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(readSecret(dir.string(), "a/b").error().kind, ErrorKind::kInvalid);
}

}  // namespace
}  // namespace flotilla::secrets
