// Integration tests of the poller at scale and over SSH, against a real nats-server -js and the real git server
// (tests/harness/git with sshd): SSH key auth with known_hosts checking (right key, wrong host key, unauthorized
// key), 50 GitRepos on one URL (one fetch per new commit, one ls-remote per poll round), and the per-host limit.
#include "poller_fixture.h"

namespace flotilla::poller {
namespace {

using namespace flotilla::poller::poller_test;

// SSH end to end: the key and known_hosts come from the credentials store; a changed host key and an
// unauthorized key give status errors naming the GitRepo and the secret, never the key.
TEST_F(PollerIntegrationTest, SshKeyAuthWithKnownHosts) {
  auto git = harness::GitServer::start({.http = false, .https = false, .git_daemon = false, .ssh = true});
  ASSERT_TRUE(git.ok()) << git.error().describe();
  git_ = std::move(git).value();
  ASSERT_TRUE(git_->createRepo("app").ok());
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  const std::string creds_root = data_dir_ + "/creds";
  const std::string creds = creds_root + "/" + kWs;  // the GitRepos' workspace
  for (const char* name : {"ssh-good", "ssh-wrong-host", "ssh-unauthorized"}) {
    std::filesystem::create_directories(creds + "/" + name);
  }
  ASSERT_TRUE(writeFile(creds + "/ssh-good/ssh-privatekey", git_->sshPrivateKey()).ok());
  ASSERT_TRUE(writeFile(creds + "/ssh-good/known_hosts", git_->knownHostsLine() + "\n").ok());
  ASSERT_TRUE(writeFile(creds + "/ssh-wrong-host/ssh-privatekey", git_->sshPrivateKey()).ok());
  ASSERT_TRUE(writeFile(creds + "/ssh-wrong-host/known_hosts", git_->wrongKnownHostsLine() + "\n").ok());
  ASSERT_TRUE(writeFile(creds + "/ssh-unauthorized/ssh-privatekey", git_->unauthorizedSshPrivateKey()).ok());
  ASSERT_TRUE(writeFile(creds + "/ssh-unauthorized/known_hosts", git_->knownHostsLine() + "\n").ok());
  PollerOptions options = defaultOptions();
  options.credentials_dir = creds_root;
  startPoller(options);
  const std::string url = git_->sshUrl("app");
  putGitRepo("good", gitRepoJson("good", url, R"(,"clientSecretName":"ssh-good")"));
  putGitRepo("wronghost", gitRepoJson("wronghost", url, R"(,"clientSecretName":"ssh-wrong-host")"));
  putGitRepo("unauthorized", gitRepoJson("unauthorized", url, R"(,"clientSecretName":"ssh-unauthorized")"));

  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }, seconds(30))) << git_->logTail();
  auto [event, msg_id] = commitEvent(1);
  EXPECT_EQ(event.gitrepo, "good");
  EXPECT_EQ(event.commit, *head);
  EXPECT_EQ(archive(event.source_object).files.at(0).content, "v: 1\n");

  ASSERT_TRUE(waitFor([&] { return status("wronghost") && !status("wronghost")->last_error.empty(); }));
  const std::string wrong_host = status("wronghost")->last_error;
  EXPECT_NE(wrong_host.find("SSH host key of"), std::string::npos) << wrong_host;
  EXPECT_NE(wrong_host.find("GitRepo fleet-default/wronghost (clientSecretName \"ssh-wrong-host\")"), std::string::npos)
      << wrong_host;
  EXPECT_EQ(status("wronghost")->last_error_kind, "Permanent");

  ASSERT_TRUE(waitFor([&] { return status("unauthorized") && !status("unauthorized")->last_error.empty(); }));
  const std::string unauthorized = status("unauthorized")->last_error;
  EXPECT_NE(unauthorized.find("clientSecretName \"ssh-unauthorized\""), std::string::npos) << unauthorized;
  EXPECT_NE(unauthorized.find("authentication"), std::string::npos) << unauthorized;
  EXPECT_EQ(unauthorized.find("PRIVATE KEY"), std::string::npos) << unauthorized;
  EXPECT_EQ(commitCount(), 1u);

  // A new commit arrives over SSH too.
  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "two");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }, seconds(30)));
  EXPECT_EQ(commitEvent(2).first.commit, *second);
}

// 50 GitRepos on one URL: one fetch per new commit (not 50), and one ls-remote per poll round (their phases are
// keyed by the mirror, so they are due together and served by one sync).
TEST_F(PollerIntegrationTest, FiftyGitReposOnOneUrlFetchOncePerCommit) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  constexpr int kRepos = 50;
  for (int i = 0; i < kRepos; ++i) {
    const std::string name = "app-" + std::to_string(i);
    putGitRepo(name, gitRepoJson(name, git_->httpUrl("app")));
  }
  startPoller();
  ASSERT_TRUE(waitFor([&] { return commitCount() == kRepos; }, seconds(60)));
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(mirrorDirs(), 1u);

  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "two");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2 * kRepos; }, seconds(60)));
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 2);

  // Steady state: 2 rounds of 50 unchanged polls cost about 2 ls-remotes, not 100.
  const double polls = metric("polls_total", {{"outcome", "unchanged"}});
  const double ls_remotes = metric("ls_remotes_total", {{"result", "ok"}});
  ASSERT_TRUE(waitFor([&] { return metric("polls_total", {{"outcome", "unchanged"}}) >= polls + 2 * kRepos; }));
  const double rounds = (metric("polls_total", {{"outcome", "unchanged"}}) - polls) / kRepos;
  EXPECT_LE(metric("ls_remotes_total", {{"result", "ok"}}) - ls_remotes, rounds + 1);
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(commitCount(), 2u * kRepos);
}

// --max-per-host: with 4 workers but a limit of 1, four repositories on one host are synced one at a time; the
// waits are counted, and everything is still published.
TEST_F(PollerIntegrationTest, PerHostLimitBoundsConcurrentGitOperations) {
  for (int i = 0; i < 4; ++i) {
    const std::string repo = "repo" + std::to_string(i);
    ASSERT_TRUE(git_->createRepo(repo).ok());
    ASSERT_TRUE(git_->commitFiles(repo, "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
    putGitRepo(repo, gitRepoJson(repo, git_->httpUrl(repo)));
  }
  PollerOptions options = defaultOptions();
  options.workers = 4;
  options.max_per_host = 1;
  startPoller(options);
  ASSERT_TRUE(waitFor([&] { return commitCount() == 4; }, seconds(30)));
  EXPECT_EQ(metric("host_syncs_peak"), 1);
  EXPECT_EQ(metric("git_network_operations_peak"), 1);
  EXPECT_GE(metric("host_limit_waits_total"), 1);
}

}  // namespace
}  // namespace flotilla::poller
