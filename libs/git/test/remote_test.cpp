// lsRemote against the real git server harness: every transport, TLS and SSH trust, auth, outages.
#include "flotilla/git/remote.h"

#include <atomic>
#include <initializer_list>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/harness/git_server.h"

namespace flotilla::git {
namespace {

using harness::GitServer;

// One server for the tests that do not stop it or need auth.
class LsRemoteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = GitServer::start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
    server_ = std::move(*started).release();
    ASSERT_TRUE(server_->createRepo("app").ok());
    auto first = server_->commitFiles("app", "main", {{"README.md", "hello\n"}}, "first");
    ASSERT_TRUE(first.ok()) << first.error().describe();
    first_ = *first;
    auto second = server_->commitFiles("app", "main", {{"README.md", "hello again\n"}}, "second");
    ASSERT_TRUE(second.ok());
    main_ = *second;
    ASSERT_TRUE(server_->createBranch("app", "feature", first_).ok());
    ASSERT_TRUE(server_->createTag("app", "v1", first_, "release 1").ok());
    ASSERT_TRUE(server_->createTag("app", "light", main_).ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static Credentials sshCredentials() {
    return Credentials{.ssh_private_key = server_->sshPrivateKey(), .known_hosts = server_->knownHostsLine() + "\n"};
  }

  // ls-remote of "app" over SSH with `creds` fails with `kind`, the message naming each of `parts`, and the
  // private key never shows in the error.
  static void expectSshRejected(const Credentials& creds, ErrorKind kind,
                                std::initializer_list<std::string_view> parts) {
    auto heads = lsRemote(server_->sshUrl("app"), creds);
    ASSERT_FALSE(heads.ok());
    EXPECT_EQ(heads.error().kind, kind);
    for (auto part : parts) {
      EXPECT_NE(heads.error().message.find(part), std::string::npos) << heads.error().describe();
    }
    EXPECT_EQ(heads.error().describe().find("PRIVATE KEY"), std::string::npos);
  }

  static GitServer* server_;
  static std::string first_;
  static std::string main_;
};
GitServer* LsRemoteTest::server_ = nullptr;
std::string LsRemoteTest::first_;
std::string LsRemoteTest::main_;

void expectAppHeads(const RemoteHeads& heads, const std::string& main, const std::string& first) {
  EXPECT_EQ(heads.default_branch, "main");
  EXPECT_EQ(heads.head_oid, main);
  EXPECT_EQ(heads.branch("main").value_or(""), main);
  EXPECT_EQ(heads.branch("feature").value_or(""), first);
  EXPECT_FALSE(heads.branch("missing").has_value());
  const RemoteRef* v1 = heads.find("refs/tags/v1");
  ASSERT_NE(v1, nullptr);
  EXPECT_NE(v1->oid, first) << "an annotated tag advertises its own object";
  EXPECT_EQ(v1->peeled, first);
  EXPECT_EQ(v1->commit(), first);
  const RemoteRef* light = heads.find("refs/tags/light");
  ASSERT_NE(light, nullptr);
  EXPECT_EQ(light->commit(), main);
  EXPECT_TRUE(light->peeled.empty());
  EXPECT_EQ(heads.find("refs/tags/v1^{}"), nullptr) << "peel lines are folded into their tag";
}

// Smart HTTP: branches, tags (peeled) and the default branch from the HEAD symref, without fetching.
TEST_F(LsRemoteTest, HttpListsBranchesTagsAndDefaultBranch) {
  auto heads = lsRemote(server_->httpUrl("app"), {});
  ASSERT_TRUE(heads.ok()) << heads.error().describe() << "\n" << server_->logTail();
  expectAppHeads(*heads, main_, first_);
}

// git:// through git daemon.
TEST_F(LsRemoteTest, GitDaemonListsRefs) {
  auto heads = lsRemote(server_->gitUrl("app"), {});
  ASSERT_TRUE(heads.ok()) << heads.error().describe() << "\n" << server_->logTail();
  expectAppHeads(*heads, main_, first_);
}

// A repository whose default branch is not "main", and one whose HEAD moves.
TEST_F(LsRemoteTest, DetectsOtherDefaultBranches) {
  ASSERT_TRUE(server_->createRepo("trunky", "trunk").ok());
  ASSERT_TRUE(server_->commitFiles("trunky", "trunk", {{"a", "1"}}, "one").ok());
  ASSERT_TRUE(server_->createBranch("trunky", "release", "trunk").ok());
  auto heads = lsRemote(server_->httpUrl("trunky"), {});
  ASSERT_TRUE(heads.ok()) << heads.error().describe();
  EXPECT_EQ(heads->default_branch, "trunk");
  ASSERT_TRUE(server_->setDefaultBranch("trunky", "release").ok());
  heads = lsRemote(server_->gitUrl("trunky"), {});
  ASSERT_TRUE(heads.ok()) << heads.error().describe();
  EXPECT_EQ(heads->default_branch, "release");
}

// An empty repository has no refs and no HEAD commit; that is not an error.
TEST_F(LsRemoteTest, EmptyRepositoryHasNoRefs) {
  ASSERT_TRUE(server_->createRepo("empty").ok());
  auto heads = lsRemote(server_->httpUrl("empty"), {});
  ASSERT_TRUE(heads.ok()) << heads.error().describe();
  EXPECT_TRUE(heads->refs.empty());
  EXPECT_TRUE(heads->head_oid.empty());
}

// HTTPS with the server's private CA given per call, by IP and by host name.
TEST_F(LsRemoteTest, HttpsWithCustomCaBundle) {
  Credentials creds{.ca_bundle = server_->caPem()};
  auto heads = lsRemote(server_->httpsUrl("app"), creds);
  ASSERT_TRUE(heads.ok()) << heads.error().describe() << "\n" << server_->logTail();
  expectAppHeads(*heads, main_, first_);
  auto by_name = lsRemote(server_->httpsUrl("app", "localhost"), creds);
  ASSERT_TRUE(by_name.ok()) << by_name.error().describe();
}

// Without the CA the certificate is not trusted: a permanent certificate error.
TEST_F(LsRemoteTest, HttpsWithoutCaFailsWithCertificateError) {
  auto heads = lsRemote(server_->httpsUrl("app"), {});
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.error().kind, ErrorKind::kPermanent) << heads.error().describe();
  EXPECT_NE(heads.error().message.find("certificate"), std::string::npos) << heads.error().describe();
}

// A CA bundle that did not sign the server's certificate is no better.
TEST_F(LsRemoteTest, HttpsWithWrongCaIsRejected) {
  auto heads = lsRemote(server_->httpsUrl("app"), Credentials{.ca_bundle = server_->otherCaPem()});
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(heads.error().message.find("certificate"), std::string::npos) << heads.error().describe();
}

// A CA bundle that is not PEM is bad input, reported before connecting.
TEST_F(LsRemoteTest, MalformedCaBundleIsInvalid) {
  auto heads = lsRemote(server_->httpsUrl("app"), Credentials{.ca_bundle = "not a certificate"});
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.error().kind, ErrorKind::kInvalid) << heads.error().describe();
}

// insecure_skip_tls_verify accepts the unknown certificate and says so in the log.
TEST_F(LsRemoteTest, HttpsInsecureSkipVerifyIsLogged) {
  std::vector<std::string> lines;
  log::setSink([&](std::string_view line) { lines.emplace_back(line); });
  auto heads = lsRemote(server_->httpsUrl("app"), Credentials{.insecure_skip_tls_verify = true});
  log::setSink(nullptr);
  ASSERT_TRUE(heads.ok()) << heads.error().describe();
  bool warned = false;
  for (const auto& line : lines) {
    warned = warned || line.find("verification is disabled") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

// SSH with the server's host key in known_hosts and an authorized key given as text.
TEST_F(LsRemoteTest, SshWithKnownHostsAndKey) {
  auto heads = lsRemote(server_->sshUrl("app"), sshCredentials());
  ASSERT_TRUE(heads.ok()) << heads.error().describe() << "\n" << server_->logTail();
  expectAppHeads(*heads, main_, first_);
}

// A known_hosts entry for this host with another key: refused as a possible man-in-the-middle.
TEST_F(LsRemoteTest, SshWrongKnownHostsIsRejected) {
  Credentials creds = sshCredentials();
  creds.known_hosts = server_->wrongKnownHostsLine() + "\n";
  expectSshRejected(creds, ErrorKind::kPermanent, {"host key", "does not match"});
}

// known_hosts that only names other hosts/ports: the host is unknown.
TEST_F(LsRemoteTest, SshHostMissingFromKnownHostsIsRejected) {
  Credentials creds = sshCredentials();
  std::string line = server_->knownHostsLine();
  creds.known_hosts = "[127.0.0.1]:1" + line.substr(line.find(' ')) + "\n";
  expectSshRejected(creds, ErrorKind::kPermanent, {"no known_hosts entry"});
}

// No known_hosts at all: refused before connecting (trusting any key is opt-in).
TEST_F(LsRemoteTest, SshWithoutKnownHostsIsRefused) {
  Credentials creds = sshCredentials();
  creds.known_hosts.clear();
  ASSERT_NO_FATAL_FAILURE(expectSshRejected(creds, ErrorKind::kInvalid, {"known_hosts"}));

  creds.insecure_ignore_host_key = true;
  auto insecure = lsRemote(server_->sshUrl("app"), creds);
  EXPECT_TRUE(insecure.ok()) << insecure.error().describe();
}

// A key that is not authorized: authentication failed, and the key never shows in the error.
TEST_F(LsRemoteTest, SshWrongKeyIsRejected) {
  Credentials creds = sshCredentials();
  creds.ssh_private_key = server_->unauthorizedSshPrivateKey();
  expectSshRejected(creds, ErrorKind::kPermanent, {"authentication failed"});
}

// No key at all for an SSH URL: the server's demand is reported as missing credentials.
TEST_F(LsRemoteTest, SshWithoutKeyReportsMissingCredentials) {
  Credentials creds = sshCredentials();
  creds.ssh_private_key.clear();
  expectSshRejected(creds, ErrorKind::kPermanent, {"authentication required"});
}

// A repository that does not exist is kNotFound over HTTP and git://.
TEST_F(LsRemoteTest, MissingRepositoryIsNotFound) {
  auto http = lsRemote(server_->httpUrl("nope"), {});
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(http.error().kind, ErrorKind::kNotFound) << http.error().describe();
  auto daemon = lsRemote(server_->gitUrl("nope"), {});
  ASSERT_FALSE(daemon.ok());
  EXPECT_EQ(daemon.error().kind, ErrorKind::kNotFound) << daemon.error().describe();
}

// An anonymous redirect (e.g. a renamed repository) is followed.
TEST_F(LsRemoteTest, FollowsInitialRedirectWithoutCredentials) {
  auto heads = lsRemote(server_->httpRedirectUrl("app"), {});
  ASSERT_TRUE(heads.ok()) << heads.error().describe() << "\n" << server_->logTail();
  expectAppHeads(*heads, main_, first_);
}

// Credentials and CAs are per call: parallel calls with and without the CA never see each other's settings.
TEST_F(LsRemoteTest, CredentialsArePerCallAcrossThreads) {
  std::atomic<int> trusted_ok{0};
  std::atomic<int> untrusted_rejected{0};
  auto run = [&](bool with_ca) {
    for (int i = 0; i < 6; ++i) {
      auto heads =
          lsRemote(server_->httpsUrl("app"), with_ca ? Credentials{.ca_bundle = server_->caPem()} : Credentials{});
      if (with_ca && heads.ok()) {
        ++trusted_ok;
      }
      if (!with_ca && !heads.ok() && heads.error().kind == ErrorKind::kPermanent) {
        ++untrusted_rejected;
      }
    }
  };
  std::thread a(run, true);
  std::thread b(run, false);
  a.join();
  b.join();
  EXPECT_EQ(trusted_ok.load(), 6);
  EXPECT_EQ(untrusted_rejected.load(), 6);
}

// Bad URLs are rejected before any network traffic; an embedded password never appears in the message.
TEST_F(LsRemoteTest, InvalidUrlsAreInvalid) {
  for (const std::string url :
       {"", "not a url", "ftp://127.0.0.1/x.git", "/etc", "file:///etc", "https://user:hunter2@127.0.0.1/x.git"}) {
    auto heads = lsRemote(url, {});
    ASSERT_FALSE(heads.ok()) << url;
    EXPECT_EQ(heads.error().kind, ErrorKind::kInvalid) << url << ": " << heads.error().describe();
    EXPECT_EQ(heads.error().describe().find("hunter2"), std::string::npos);
  }
}

// HTTPS basic auth: the right password works; a wrong one is a permanent "authentication failed" error
// that names the URL but never the password; no credentials at all is "authentication required".
TEST(LsRemoteAuthTest, BasicAuthAndTokens) {
  auto started = GitServer::start({.git_daemon = false,
                                   .ssh = false,
                                   .basic_user = "alice",
                                   .basic_password = "correct-horse",
                                   .token = "tok-0123456789"});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  auto& server = **started;
  ASSERT_TRUE(server.createRepo("private").ok());
  ASSERT_TRUE(server.commitFiles("private", "main", {{"a", "1"}}, "one").ok());
  const std::string url = server.httpsUrl("private");

  auto good = lsRemote(url, Credentials{.username = "alice", .password = "correct-horse", .ca_bundle = server.caPem()});
  ASSERT_TRUE(good.ok()) << good.error().describe() << "\n" << server.logTail();
  EXPECT_TRUE(good->branch("main").has_value());

  auto wrong =
      lsRemote(url, Credentials{.username = "alice", .password = "wrong-battery", .ca_bundle = server.caPem()});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(wrong.error().message.find("authentication failed"), std::string::npos) << wrong.error().describe();
  EXPECT_NE(wrong.error().message.find(url), std::string::npos) << wrong.error().describe();
  EXPECT_EQ(wrong.error().describe().find("wrong-battery"), std::string::npos);

  auto none = lsRemote(url, Credentials{.ca_bundle = server.caPem()});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(none.error().message.find("authentication required"), std::string::npos) << none.error().describe();

  // A token is sent as the basic-auth password with a default user name.
  auto token = lsRemote(url, Credentials{.token = "tok-0123456789", .ca_bundle = server.caPem()});
  EXPECT_TRUE(token.ok()) << token.error().describe();
  auto bad_token = lsRemote(server.httpUrl("private"), Credentials{.token = "tok-wrong-000"});
  ASSERT_FALSE(bad_token.ok());
  EXPECT_EQ(bad_token.error().kind, ErrorKind::kPermanent);
  EXPECT_EQ(bad_token.error().describe().find("tok-wrong-000"), std::string::npos);
}

// A redirect to another host name: fine without credentials, but a secret is never sent to the new host.
TEST(LsRemoteAuthTest, CredentialsAreNotSentToARedirectedHost) {
  auto started = GitServer::start(
      {.https = false, .git_daemon = false, .ssh = false, .basic_user = "alice", .basic_password = "correct-horse"});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  auto& server = **started;
  ASSERT_TRUE(server.createRepo("private").ok());
  ASSERT_TRUE(server.commitFiles("private", "main", {{"a", "1"}}, "one").ok());
  auto redirected =
      lsRemote(server.httpRedirectUrl("private"), Credentials{.username = "alice", .password = "correct-horse"});
  ASSERT_FALSE(redirected.ok());
  EXPECT_EQ(redirected.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(redirected.error().message.find("refusing to send credentials to localhost"), std::string::npos)
      << redirected.error().describe();
  const std::string log = server.logTail(200);
  EXPECT_NE(log.find("credentials offered: no"), std::string::npos) << log;
  EXPECT_EQ(log.find("credentials offered: yes"), std::string::npos) << log;
  EXPECT_EQ(log.find("authenticated as"), std::string::npos) << log;
  auto direct = lsRemote(server.httpUrl("private"), Credentials{.username = "alice", .password = "correct-horse"});
  EXPECT_TRUE(direct.ok()) << direct.error().describe();
}

// The server goes away: kTransient (retry later); it comes back on the same port: works again.
TEST(LsRemoteOutageTest, ServerDownIsTransientThenRecovers) {
  auto started = GitServer::start({.https = false, .ssh = false});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  auto& server = **started;
  ASSERT_TRUE(server.createRepo("app").ok());
  ASSERT_TRUE(server.commitFiles("app", "main", {{"a", "1"}}, "one").ok());
  ASSERT_TRUE(lsRemote(server.httpUrl("app"), {}).ok());

  server.stopHttp();
  server.stopGitDaemon();
  auto http = lsRemote(server.httpUrl("app"), {});
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(http.error().kind, ErrorKind::kTransient) << http.error().describe();
  EXPECT_TRUE(http.error().retryable());
  auto daemon = lsRemote(server.gitUrl("app"), {});
  ASSERT_FALSE(daemon.ok());
  EXPECT_EQ(daemon.error().kind, ErrorKind::kTransient) << daemon.error().describe();

  ASSERT_TRUE(server.startHttp().ok()) << server.logTail();
  ASSERT_TRUE(server.startGitDaemon().ok()) << server.logTail();
  auto back = lsRemote(server.httpUrl("app"), {});
  EXPECT_TRUE(back.ok()) << back.error().describe();
  auto daemon_back = lsRemote(server.gitUrl("app"), {});
  EXPECT_TRUE(daemon_back.ok()) << daemon_back.error().describe();
}

}  // namespace
}  // namespace flotilla::git
