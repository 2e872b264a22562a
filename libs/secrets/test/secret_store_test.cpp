// The Secret-shaped credentials directory: every accepted layout, workspace scoping, the refused flat layout, and
// errors that never carry a value.
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
  fs::create_directories(dir / "fleet-default" / "repo-creds" / "..data");
  std::ofstream(dir / "fleet-default" / "repo-creds" / "username") << "bot\n";
  std::ofstream(dir / "fleet-default" / "repo-creds" / "password") << "s3cret\n";
  std::ofstream(dir / "fleet-default" / "repo-creds" / ".swp") << "x";
  auto data = readSecret(dir.string(), "fleet-default", "repo-creds");
  ASSERT_TRUE(data.ok()) << data.error().describe();
  EXPECT_EQ(data->size(), 2u);
  EXPECT_EQ(data->at("username"), "bot\n");  // raw: the caller decides about trailing newlines
  EXPECT_TRUE(checkLayout(dir.string()).ok());
}

TEST(SecretStoreTest, ReadsAMapFileAndASecretManifest) {
  fs::path dir = freshDir("files");
  fs::create_directories(dir / "ws");
  std::ofstream(dir / "ws" / "plain.yaml") << "username: u\ntoken: t\n";
  std::ofstream(dir / "ws" / "manifest.yml") << "apiVersion: v1\nkind: Secret\nmetadata: {name: manifest}\n"
                                                "data: {password: cGFzcw==}\nstringData: {username: admin}\n";
  std::ofstream(dir / "ws" / "js.json") << R"({"cacerts": "PEM"})";
  auto plain = readSecret(dir.string(), "ws", "plain");
  ASSERT_TRUE(plain.ok()) << plain.error().describe();
  EXPECT_EQ(plain->at("token"), "t");
  auto manifest = readSecret(dir.string(), "ws", "manifest");
  ASSERT_TRUE(manifest.ok()) << manifest.error().describe();
  EXPECT_EQ(manifest->at("password"), "pass");
  EXPECT_EQ(manifest->at("username"), "admin");
  EXPECT_EQ(readSecret(dir.string(), "ws", "js")->at("cacerts"), "PEM");
  EXPECT_TRUE(checkLayout(dir.string()).ok());
}

// A secret of another workspace is not found, with exactly the message of a secret that exists nowhere.
TEST(SecretStoreTest, ASecretOfAnotherWorkspaceIsNotFoundLikeAMissingOne) {
  fs::path dir = freshDir("workspaces");
  fs::create_directories(dir / "team-a" / "deploy-key");
  std::ofstream(dir / "team-a" / "deploy-key" / "password") << "team-a-only\n";
  fs::create_directories(dir / "team-b");
  ASSERT_TRUE(readSecret(dir.string(), "team-a", "deploy-key").ok());
  auto other = readSecret(dir.string(), "team-b", "deploy-key");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().kind, ErrorKind::kNotFound);
  auto missing = readSecret(dir.string(), "team-b", "no-such-key");
  auto unknown_workspace = readSecret(dir.string(), "team-c", "deploy-key");
  EXPECT_EQ(other.error().message, "secret \"deploy-key\" not found in workspace \"team-b\"");
  EXPECT_EQ(unknown_workspace.error().message, "secret \"deploy-key\" not found in workspace \"team-c\"");
  EXPECT_EQ(missing.error().message, "secret \"no-such-key\" not found in workspace \"team-b\"");
  // No path tricks through the workspace either.
  EXPECT_EQ(readSecret(dir.string(), "..", "deploy-key").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(readSecret(dir.string(), "team-a/deploy-key", "password").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(readSecret(dir.string(), "", "deploy-key").error().kind, ErrorKind::kInvalid);
}

// The flat layout of earlier versions (<dir>/<name>) is refused with the place the secret belongs to.
TEST(SecretStoreTest, TheFlatLayoutIsRefusedNamingTheEntry) {
  fs::path files = freshDir("flat-files");
  std::ofstream(files / "github-token.yaml") << "token: hunter2\n";
  auto file = checkLayout(files.string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(file.error().message.find("\"github-token.yaml\" is a file"), std::string::npos) << file.error().message;
  EXPECT_NE(file.error().message.find("<dir>/<workspace>/github-token.yaml"), std::string::npos);
  EXPECT_EQ(file.error().message.find("hunter2"), std::string::npos);

  fs::path dirs = freshDir("flat-dirs");
  fs::create_directories(dirs / "basic" / "..data");  // a Secret volume mounted at <dir>/<name>
  std::ofstream(dirs / "basic" / "password") << "hunter2\n";
  auto dir = checkLayout(dirs.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("\"basic\" holds the key file \"password\""), std::string::npos)
      << dir.error().message;
  EXPECT_TRUE(checkLayout("").ok());
  EXPECT_TRUE(checkLayout((dirs / "absent").string()).ok());
}

TEST(SecretStoreTest, ErrorsNameTheSecretAndNeverAValue) {
  fs::path dir = freshDir("errors");
  fs::create_directories(dir / "ws");
  std::ofstream(dir / "ws" / "broken.yaml") << "password: [hunter2\n";
  std::ofstream(dir / "ws" / "badb64.yaml") << "kind: Secret\ndata: {password: '%%hunter2%%'}\n";
  auto broken = readSecret(dir.string(), "ws", "broken");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(broken.error().message.find("\"broken\""), std::string::npos);
  EXPECT_EQ(broken.error().message.find("hunter2"), std::string::npos);
  auto badb64 = readSecret(dir.string(), "ws", "badb64");
  ASSERT_FALSE(badb64.ok());
  EXPECT_EQ(badb64.error().message.find("hunter2"), std::string::npos);
  EXPECT_EQ(readSecret(dir.string(), "ws", "absent").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(readSecret("", "ws", "any").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(readSecret(dir.string(), "ws", "../etc").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(readSecret(dir.string(), "ws", "a/b").error().kind, ErrorKind::kInvalid);
}

}  // namespace
}  // namespace flotilla::secrets
