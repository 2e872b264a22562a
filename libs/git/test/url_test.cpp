#include "flotilla/git/url.h"

#include <gtest/gtest.h>

#include "flotilla/git/credentials.h"

namespace flotilla::git {
namespace {

// The URL forms a GitRepo may use, with host, port, user and path taken apart.
TEST(GitUrlTest, ParsesSupportedForms) {
  auto https = parseGitUrl("https://github.com/rancher/fleet-examples.git");
  ASSERT_TRUE(https.ok());
  EXPECT_EQ(https->scheme, "https");
  EXPECT_EQ(https->host, "github.com");
  EXPECT_EQ(https->effectivePort(), 443);
  EXPECT_EQ(https->path, "/rancher/fleet-examples.git");

  auto ssh = parseGitUrl("ssh://git@127.0.0.1:2222/srv/repo.git");
  ASSERT_TRUE(ssh.ok());
  EXPECT_EQ(ssh->user, "git");
  EXPECT_EQ(ssh->port, 2222);
  EXPECT_EQ(ssh->knownHostsName(), "[127.0.0.1]:2222");

  auto scp = parseGitUrl("git@github.com:org/repo.git");
  ASSERT_TRUE(scp.ok());
  EXPECT_TRUE(scp->scp_like);
  EXPECT_EQ(scp->scheme, "ssh");
  EXPECT_EQ(scp->user, "git");
  EXPECT_EQ(scp->host, "github.com");
  EXPECT_EQ(scp->path, "org/repo.git");
  EXPECT_EQ(scp->knownHostsName(), "github.com");

  auto daemon = parseGitUrl("git://127.0.0.1/x.git");
  ASSERT_TRUE(daemon.ok());
  EXPECT_EQ(daemon->effectivePort(), 9418);

  auto v6 = parseGitUrl("ssh://git@[::1]:2200/x.git");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->knownHostsName(), "[::1]:2200");

  auto plus = parseGitUrl("git+ssh://git@host/x.git");
  ASSERT_TRUE(plus.ok());
  EXPECT_EQ(plus->scheme, "ssh");
}

// Everything else is kInvalid, and passwords never echo back.
TEST(GitUrlTest, RejectsBadUrls) {
  for (const char* url : {"", "has space.git", "ftp://host/x.git", "https://", "https://host", "https://host:99999/x",
                          "https://host:abc/x", "https://[::1/x", "relative/path", "/abs/path", "file:///srv/x.git",
                          "https://user:s3cr3t@host/x.git", "https://host/x.git\n"}) {
    auto parsed = parseGitUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.error().kind, ErrorKind::kInvalid) << url;
    EXPECT_EQ(parsed.error().message.find("s3cr3t"), std::string::npos);
  }
}

// Local repositories are only for tests and demos that ask for them.
TEST(GitUrlTest, LocalUrlsNeedOptIn) {
  EXPECT_TRUE(parseGitUrl("file:///srv/x.git", true).ok());
  EXPECT_TRUE(parseGitUrl("/srv/x.git", true).ok());
  EXPECT_EQ(parseGitUrl("/srv/x.git", true)->scheme, "file");
}

// Logged URLs lose passwords and query strings (where some tools put tokens).
TEST(GitUrlTest, RedactsSecrets) {
  EXPECT_EQ(redactUrl("https://user:pw@host/x.git"), "https://user:***@host/x.git");
  EXPECT_EQ(redactUrl("https://host/x.git?private_token=abc#frag"), "https://host/x.git");
  EXPECT_EQ(redactUrl("https://user@host/a@b.git"), "https://user@host/a@b.git");
  EXPECT_EQ(redactUrl("git@github.com:org/repo.git"), "git@github.com:org/repo.git");
}

// Secrets are scrubbed from any text, every occurrence.
TEST(CredentialsTest, ScrubsEverySecret) {
  Credentials creds{.password = "pw123", .token = "tok456", .ssh_passphrase = "phrase"};
  EXPECT_EQ(creds.secrets().size(), 3u);
  EXPECT_EQ(scrubSecrets("a pw123 b tok456 c pw123 phrase", creds.secrets()),
            "a [REDACTED] b [REDACTED] c [REDACTED] [REDACTED]");
  EXPECT_EQ(scrubSecrets("nothing here", Credentials{}.secrets()), "nothing here");
}

}  // namespace
}  // namespace flotilla::git
