// Unit tests of the credentials directory: file and directory secrets, Kubernetes Secret manifests, strict keys,
// and that no error message ever carries a secret value.
#include "flotilla/poller/credentials_store.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::poller {
namespace {

constexpr const char* kWs = "fleet-default";

class PollerCredentialsTest : public ::testing::Test {
 protected:
  //! Writes a file of workspace fleet-default's secrets (the workspace of gitrepo()).
  void write(const std::string& relative, const std::string& content) { writeIn("fleet-default", relative, content); }
  void writeIn(const std::string& workspace, const std::string& relative, const std::string& content) {
    const std::string path = dir_ + "/" + workspace + "/" + relative;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    ASSERT_TRUE(writeFile(path, content, 0600).ok());
  }

  static model::GitRepo gitrepo(const std::string& secret) {
    model::GitRepo g;
    g.metadata.ns = "fleet-default";
    g.metadata.name = "app";
    g.spec.repo = "https://h/r";
    g.spec.client_secret_name = secret;
    return g;
  }

  testing::TempDir temp_{"poller-creds"};
  const std::string dir_ = temp_.path();
};

// A directory with a file per key, like a mounted Kubernetes Secret (with its ..data internals).
TEST_F(PollerCredentialsTest, ReadsADirectoryPerSecret) {
  write("basic/username", "alice\n");
  write("basic/password", "s3cret\n");
  write("basic/..data/ignored", "x");
  auto credentials = loadSecret(dir_, kWs, "basic");
  ASSERT_TRUE(credentials.ok()) << credentials.error().describe();
  EXPECT_EQ(credentials->username, "alice");
  EXPECT_EQ(credentials->password, "s3cret");  // trailing newline trimmed
}

// A YAML map of keys, and a whole Secret manifest with base64 data and stringData.
TEST_F(PollerCredentialsTest, ReadsYamlFilesAndSecretManifests) {
  write("token.yaml", "token: tok-123\n");
  auto token = loadSecret(dir_, kWs, "token");
  ASSERT_TRUE(token.ok()) << token.error().describe();
  EXPECT_EQ(token->token, "tok-123");

  write("ssh.yml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ssh\ntype: kubernetes.io/ssh-auth\n"
        "data:\n  ssh-privatekey: " +
            base64Encode("-----BEGIN KEY-----\nabc\n-----END KEY-----\n") +
            "\nstringData:\n  known_hosts: \"[h]:22 ssh-ed25519 AAAA\"\n");
  auto ssh = loadSecret(dir_, kWs, "ssh");
  ASSERT_TRUE(ssh.ok()) << ssh.error().describe();
  EXPECT_EQ(ssh->ssh_private_key, "-----BEGIN KEY-----\nabc\n-----END KEY-----\n");  // newlines kept
  EXPECT_EQ(ssh->known_hosts, "[h]:22 ssh-ed25519 AAAA");
}

TEST_F(PollerCredentialsTest, RejectsUnknownKeysWithoutShowingValues) {
  write("odd/passwrd", "hunter2");
  auto odd = loadSecret(dir_, kWs, "odd");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(odd.error().message.find("unknown key \"passwrd\""), std::string::npos);
  EXPECT_EQ(odd.error().message.find("hunter2"), std::string::npos);
}

TEST_F(PollerCredentialsTest, MalformedFileDoesNotEchoItsContent) {
  write("broken.yaml", "password: [unclosed hunter2");
  auto broken = loadSecret(dir_, kWs, "broken");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().message.find("hunter2"), std::string::npos);
}

TEST_F(PollerCredentialsTest, MissingSecretAndBadNames) {
  auto missing = loadSecret(dir_, kWs, "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
  EXPECT_FALSE(loadSecret("", kWs, "x").ok());
  auto traversal = loadSecret(dir_, kWs, "../etc");
  ASSERT_FALSE(traversal.ok());
  EXPECT_EQ(traversal.error().kind, ErrorKind::kInvalid);
  EXPECT_FALSE(loadSecret(dir_, kWs, "a/b").ok());
}

// Errors name the GitRepo and the secret; the spec's caBundle and TLS flag are applied.
TEST_F(PollerCredentialsTest, CredentialsForAGitRepo) {
  auto missing = credentialsFor(gitrepo("absent"), dir_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("GitRepo fleet-default/app"), std::string::npos);
  EXPECT_NE(missing.error().message.find("\"absent\""), std::string::npos);

  write("ca/cacerts", "-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n");
  model::GitRepo g = gitrepo("ca");
  g.spec.ca_bundle = base64Encode("-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n");
  g.spec.insecure_skip_tls_verify = true;
  auto credentials = credentialsFor(g, dir_);
  ASSERT_TRUE(credentials.ok()) << credentials.error().describe();
  EXPECT_NE(credentials->ca_bundle.find("\nA\n"), std::string::npos);
  EXPECT_NE(credentials->ca_bundle.find("\nB\n"), std::string::npos);
  EXPECT_TRUE(credentials->insecure_skip_tls_verify);

  model::GitRepo plain = gitrepo("");
  plain.spec.ca_bundle = "-----BEGIN CERTIFICATE-----\nC\n-----END CERTIFICATE-----\n";
  EXPECT_TRUE(credentialsFor(plain, "").ok());
  plain.spec.ca_bundle = "not base64 or pem!";
  auto bad = credentialsFor(plain, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("spec.caBundle"), std::string::npos);
}

// A GitRepo names only its own workspace's secrets: one of another workspace gets the very message a missing one
// gets, naming the GitRepo, the field and the secret, never a value.
TEST_F(PollerCredentialsTest, AGitRepoNamingAnotherWorkspacesSecretGetsNotFound) {
  writeIn("team-a", "deploy-key/password", "team-a-password\n");
  model::GitRepo own = gitrepo("deploy-key");
  own.metadata.ns = "team-a";
  ASSERT_TRUE(credentialsFor(own, dir_).ok());

  auto other = credentialsFor(gitrepo("deploy-key"), dir_);  // fleet-default
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(
      other.error().message,
      "GitRepo fleet-default/app: clientSecretName: secret \"deploy-key\" not found in workspace \"fleet-default\"");
  auto missing = credentialsFor(gitrepo("never-written"), dir_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "GitRepo fleet-default/app: clientSecretName: secret \"never-written\" not "
            "found in workspace \"fleet-default\"");
  EXPECT_EQ(other.error().message.find("team-a"), std::string::npos);
}

// Credentials never go over plain http:// unless the GitRepo opts in with spec.insecureAllowHTTP.
TEST_F(PollerCredentialsTest, CredentialsOverPlainHttpNeedTheOptIn) {
  write("basic/password", "hunter2\n");
  model::GitRepo g = gitrepo("basic");
  g.spec.repo = "HTTP://git.internal/r.git";
  auto refused = credentialsFor(g, dir_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(refused.error().message.find("GitRepo fleet-default/app: spec.repo is a plain http:// URL"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("clientSecretName \"basic\""), std::string::npos);
  EXPECT_NE(refused.error().message.find("spec.insecureAllowHTTP"), std::string::npos);
  EXPECT_EQ(refused.error().message.find("hunter2"), std::string::npos);
  g.spec.insecure_allow_http = true;
  auto allowed = credentialsFor(g, dir_);
  ASSERT_TRUE(allowed.ok()) << allowed.error().describe();
  EXPECT_EQ(allowed->password, "hunter2");
  // Without credentials, http:// is fine: nothing secret is sent.
  model::GitRepo anonymous = gitrepo("");
  anonymous.spec.repo = "http://git.internal/r.git";
  EXPECT_TRUE(credentialsFor(anonymous, dir_).ok());
}

TEST_F(PollerCredentialsTest, WebhookSecretNamesAreWorkspaceSlashName) {
  auto scoped = splitWebhookSecretName("flotilla-system/hooks");
  ASSERT_TRUE(scoped.has_value());
  EXPECT_EQ(scoped->workspace, "flotilla-system");
  EXPECT_EQ(scoped->name, "hooks");
  for (const char* bad : {"hooks", "/hooks", "ws/", "Ws/hooks", "ws/a/b", "../hooks"}) {
    EXPECT_FALSE(splitWebhookSecretName(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace flotilla::poller
