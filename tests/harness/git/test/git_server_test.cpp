// Checks the git server harness with the git CLI (an independent client), so libs/git tests can trust it.
#include "flotilla/harness/git_server.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"

namespace flotilla::harness {
namespace {

class GitServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = GitServer::start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
    server_ = std::move(*started);
  }

  // `git ls-remote <url>` with the server's environment plus `env`.
  CommandResult lsRemote(const std::string& url, std::map<std::string, std::string> env = {},
                         std::vector<std::string> config = {}) {
    auto merged = server_->gitEnv();
    merged.insert(env.begin(), env.end());
    std::vector<std::string> argv = {"git"};
    for (const auto& item : config) {
      argv.insert(argv.end(), {"-c", item});
    }
    argv.insert(argv.end(), {"ls-remote", "--symref", url});
    auto result = runCommand({.argv = argv, .env = merged, .timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(result.ok());
    return result.ok() ? *result : CommandResult{};
  }

  std::unique_ptr<GitServer> server_;
};

// Every protocol serves the same repo, and the CLI sees the commit and the HEAD symref.
TEST_F(GitServerTest, ServesHttpHttpsGitAndSsh) {
  ASSERT_TRUE(server_->createRepo("app").ok());
  auto sha = server_->commitFiles("app", "main", {{"README.md", "hello\n"}}, "first");
  ASSERT_TRUE(sha.ok()) << sha.error().describe();
  ASSERT_EQ(sha->size(), 40u);

  auto http = lsRemote(server_->httpUrl("app"));
  EXPECT_EQ(http.exit_code, 0) << http.err << server_->logTail();
  EXPECT_NE(http.out.find(*sha + "\trefs/heads/main"), std::string::npos) << http.out;
  EXPECT_NE(http.out.find("ref: refs/heads/main\tHEAD"), std::string::npos) << http.out;

  auto https = lsRemote(server_->httpsUrl("app"), {{"GIT_SSL_CAINFO", server_->caFile()}});
  EXPECT_EQ(https.exit_code, 0) << https.err << server_->logTail();
  EXPECT_NE(https.out.find(*sha), std::string::npos);

  auto https_localhost = lsRemote(server_->httpsUrl("app", "localhost"), {{"GIT_SSL_CAINFO", server_->caFile()}});
  EXPECT_EQ(https_localhost.exit_code, 0) << https_localhost.err;

  auto git = lsRemote(server_->gitUrl("app"));
  EXPECT_EQ(git.exit_code, 0) << git.err << server_->logTail();
  EXPECT_NE(git.out.find(*sha), std::string::npos);

  auto ssh = lsRemote(server_->sshUrl("app"), {{"GIT_SSH_COMMAND", server_->gitSshCommand()}});
  EXPECT_EQ(ssh.exit_code, 0) << ssh.err << server_->logTail();
  EXPECT_NE(ssh.out.find(*sha), std::string::npos);
}

// The HTTPS server's certificate does not verify against an unrelated CA.
TEST_F(GitServerTest, HttpsRejectsUnknownCa) {
  ASSERT_TRUE(server_->createRepo("app").ok());
  ASSERT_TRUE(writeFile(server_->root() + "/other.pem", server_->otherCaPem()).ok());
  auto result = lsRemote(server_->httpsUrl("app"), {{"GIT_SSL_CAINFO", server_->root() + "/other.pem"}});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("certificate"), std::string::npos) << result.err;
}

// An unauthorized key is refused by sshd.
TEST_F(GitServerTest, SshRejectsUnauthorizedKey) {
  ASSERT_TRUE(server_->createRepo("app").ok());
  std::string key = server_->root() + "/other_key";
  ASSERT_TRUE(writeFile(key, server_->unauthorizedSshPrivateKey(), 0600).ok());
  std::string command = server_->gitSshCommand();
  command.replace(command.find(server_->sshPrivateKeyPath()), server_->sshPrivateKeyPath().size(), key);
  auto result = lsRemote(server_->sshUrl("app"), {{"GIT_SSH_COMMAND", command}});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("Permission denied"), std::string::npos) << result.err;
}

// After stopHttp() connections are refused; startHttp() brings the server back on the same port.
TEST_F(GitServerTest, HttpStopsAndRestartsOnTheSamePort) {
  ASSERT_TRUE(server_->createRepo("app").ok());
  ASSERT_TRUE(server_->commitFiles("app", "main", {{"a", "1"}}, "one").ok());
  int port = server_->httpPort();
  server_->stopHttp();
  auto down = lsRemote(server_->httpUrl("app"));
  EXPECT_NE(down.exit_code, 0);
  ASSERT_TRUE(server_->startHttp().ok()) << server_->logTail();
  EXPECT_EQ(server_->httpPort(), port);
  auto up = lsRemote(server_->httpUrl("app"));
  EXPECT_EQ(up.exit_code, 0) << up.err;
}

// Commits carry modes, removals and symlinks; tags, branches and the default branch are set as asked.
TEST_F(GitServerTest, CommitHelpersWriteWhatTheyAreAskedTo) {
  ASSERT_TRUE(server_->createRepo("app", "trunk").ok());
  auto first = server_->commit("app", CommitRequest{.branch = "trunk",
                                                    .files = {{"bin/run.sh", "#!/bin/sh\n"},
                                                              {"dir/a.yaml", "a: 1\n"},
                                                              {"dir/b.yaml", "b: 2\n"},
                                                              {"with space.txt", "x"}},
                                                    .executable = {"bin/run.sh"},
                                                    .symlinks = {{"link", "dir/a.yaml"}},
                                                    .message = "first"});
  ASSERT_TRUE(first.ok()) << first.error().describe();
  auto tree = server_->git("app", {"ls-tree", "-r", "trunk"});
  ASSERT_TRUE(tree.ok());
  EXPECT_NE(tree->find("100755 blob"), std::string::npos) << *tree;
  EXPECT_NE(tree->find("120000 blob"), std::string::npos) << *tree;
  EXPECT_NE(tree->find("with space.txt"), std::string::npos) << *tree;

  auto second = server_->deleteFiles("app", "trunk", {"dir"});
  ASSERT_TRUE(second.ok());
  auto after = server_->git("app", {"ls-tree", "-r", "--name-only", "trunk"});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->find("dir/"), std::string::npos) << *after;
  auto parent = server_->git("app", {"rev-parse", "trunk^"});
  ASSERT_TRUE(parent.ok());
  EXPECT_EQ(trim(*parent), *first);

  ASSERT_TRUE(server_->createTag("app", "v1", *first, "release 1").ok());
  ASSERT_TRUE(server_->createTag("app", "light", *first).ok());
  ASSERT_TRUE(server_->createBranch("app", "feature", *first).ok());
  EXPECT_EQ(server_->headCommit("app", "feature").valueOr(""), *first);
  EXPECT_EQ(server_->headCommit("app", "missing").error().kind, ErrorKind::kNotFound);
  ASSERT_TRUE(server_->setDefaultBranch("app", "feature").ok());
  auto listed = lsRemote(server_->httpUrl("app"));
  EXPECT_NE(listed.out.find("ref: refs/heads/feature\tHEAD"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("refs/tags/v1^{}"), std::string::npos) << listed.out;
}

// Basic auth: right password works, anything else gets 401; a token works as password or bearer.
TEST(GitServerAuthTest, HttpRequiresConfiguredCredentials) {
  auto started = GitServer::start(
      {.git_daemon = false, .ssh = false, .basic_user = "alice", .basic_password = "s3cret", .token = "tok-123"});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  auto& server = **started;
  ASSERT_TRUE(server.createRepo("private").ok());
  ASSERT_TRUE(server.commitFiles("private", "main", {{"a", "1"}}, "one").ok());
  auto port = std::to_string(server.httpPort());
  auto run = [&](const std::string& url, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"git"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"ls-remote", url});
    return runCommand({.argv = argv, .env = server.gitEnv()}).value();
  };
  EXPECT_EQ(run("http://alice:s3cret@127.0.0.1:" + port + "/private.git").exit_code, 0);
  EXPECT_NE(run("http://alice:wrong@127.0.0.1:" + port + "/private.git").exit_code, 0);
  EXPECT_NE(run("http://127.0.0.1:" + port + "/private.git").exit_code, 0);
  EXPECT_EQ(run("http://anyone:tok-123@127.0.0.1:" + port + "/private.git").exit_code, 0);
  EXPECT_EQ(run("http://127.0.0.1:" + port + "/private.git", {"-c", "http.extraHeader=Authorization: Bearer tok-123"})
                .exit_code,
            0);
  auto log = server.logTail(200);
  EXPECT_NE(log.find("401"), std::string::npos);
  EXPECT_EQ(log.find("s3cret"), std::string::npos) << "the password must never be logged";
}

// Destroying the server stops its processes and removes its temp dir.
TEST(GitServerLifecycleTest, DestructionRemovesTheTempDir) {
  std::string root;
  int port = 0;
  {
    auto started = GitServer::start({.https = false, .git_daemon = false, .ssh = false});
    ASSERT_TRUE(started.ok()) << started.error().describe();
    root = (*started)->root();
    port = (*started)->httpPort();
    EXPECT_TRUE(std::filesystem::exists(root));
  }
  EXPECT_FALSE(std::filesystem::exists(root));
  auto probe = runCommand({.argv = {"git", "ls-remote", "http://127.0.0.1:" + std::to_string(port) + "/x.git"}});
  ASSERT_TRUE(probe.ok());
  EXPECT_NE(probe->exit_code, 0);
}

}  // namespace
}  // namespace flotilla::harness
