// Unit tests of the webhook rules (webhook.h): provider detection, signature and token checks per provider,
// payload parsing for every provider's push shape, URL matching across URL forms, ref matching, and the webhook
// secret format in the credentials store.
#include "flotilla/poller/webhook.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/poller/credentials_store.h"

namespace flotilla::poller {
namespace {

http::Request request(std::map<std::string, std::string> headers, std::string body = "{}") {
  http::Request r;
  r.method = "POST";
  r.path = "/webhook";
  r.headers = std::move(headers);
  r.body = std::move(body);
  return r;
}

const char* kGitHubPush = R"({"ref":"refs/heads/main","after":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "repository":{"clone_url":"https://github.com/org/app.git","ssh_url":"git@github.com:org/app.git",
  "html_url":"https://github.com/org/app","default_branch":"main"}})";

TEST(WebhookTest, DetectsProvidersByHeaders) {
  EXPECT_EQ(detectProvider(request({{"x-github-event", "push"}})), WebhookProvider::kGitHub);
  // Gitea also sends the Gogs and GitHub event headers: its own wins.
  EXPECT_EQ(detectProvider(request({{"x-github-event", "push"}, {"x-gogs-event", "push"}, {"x-gitea-event", "push"}})),
            WebhookProvider::kGitea);
  EXPECT_EQ(detectProvider(request({{"x-github-event", "push"}, {"x-gogs-event", "push"}})), WebhookProvider::kGogs);
  EXPECT_EQ(detectProvider(request({{"x-gitlab-event", "Push Hook"}})), WebhookProvider::kGitLab);
  EXPECT_EQ(detectProvider(request({{"x-event-key", "repo:push"}, {"x-hook-uuid", "u"}})),
            WebhookProvider::kBitbucketCloud);
  EXPECT_EQ(detectProvider(request({{"x-event-key", "repo:refs_changed"}, {"x-request-id", "r"}})),
            WebhookProvider::kBitbucketServer);
  EXPECT_EQ(detectProvider(request({{"x-vss-activityid", "a"}})), WebhookProvider::kAzureDevOps);
  EXPECT_EQ(detectProvider(request({{"x-flotilla-signature", "sha256=00"}})), WebhookProvider::kGeneric);
  EXPECT_EQ(detectProvider(request({{"content-type", "application/json"}})), std::nullopt);
}

TEST(WebhookTest, HmacMatchesAKnownVector) {
  // RFC 4231 test case 2.
  EXPECT_EQ(hmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(constantTimeEquals("abc", "abc"));
  EXPECT_FALSE(constantTimeEquals("abc", "abd"));
  EXPECT_FALSE(constantTimeEquals("abc", "abcd"));
}

TEST(WebhookTest, VerifiesEachProvidersSignatureOrToken) {
  const std::string body = kGitHubPush;
  const WebhookSecret secret = {{"token", "s3cret"}, {"azure-username", "hook"}, {"azure-password", "pw"}};
  const std::string mac = hmacSha256Hex("s3cret", body);
  const std::string wrong = hmacSha256Hex("other", body);
  struct Case {
    WebhookProvider provider;
    std::map<std::string, std::string> good;
    std::map<std::string, std::string> bad;
  };
  const std::vector<Case> cases = {
      {WebhookProvider::kGitHub,
       {{"x-hub-signature-256", "sha256=" + mac}},
       {{"x-hub-signature-256", "sha256=" + wrong}}},
      {WebhookProvider::kGitLab, {{"x-gitlab-token", "s3cret"}}, {{"x-gitlab-token", "s3cre"}}},
      {WebhookProvider::kGitea, {{"x-gitea-signature", mac}}, {{"x-gitea-signature", wrong}}},
      {WebhookProvider::kGogs, {{"x-gogs-signature", mac}}, {{"x-gogs-signature", wrong}}},
      {WebhookProvider::kBitbucketCloud,
       {{"x-hub-signature", "sha256=" + mac}},
       {{"x-hub-signature", "sha256=" + wrong}}},
      {WebhookProvider::kBitbucketServer, {{"x-hub-signature", "sha256=" + mac}}, {{"x-hub-signature", mac}}},
      {WebhookProvider::kAzureDevOps,
       {{"authorization", "Basic " + base64Encode("hook:pw")}},
       {{"authorization", "Basic " + base64Encode("hook:nope")}}},
      {WebhookProvider::kGeneric, {{"x-flotilla-signature", "sha256=" + mac}}, {{"x-flotilla-signature", "sha256="}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(providerName(c.provider)));
    std::string why;
    EXPECT_TRUE(verifyWebhook(c.provider, request(c.good, body), secret, why)) << why;
    why.clear();
    EXPECT_FALSE(verifyWebhook(c.provider, request(c.bad, body), secret, why));
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find("s3cret"), std::string::npos) << why;
    why.clear();
    EXPECT_FALSE(verifyWebhook(c.provider, request({}, body), secret, why));
    EXPECT_NE(why.find("missing"), std::string::npos) << why;
    // The signature covers the body: the same header on another body fails.
    if (c.provider != WebhookProvider::kGitLab && c.provider != WebhookProvider::kAzureDevOps) {
      EXPECT_FALSE(verifyWebhook(c.provider, request(c.good, body + " "), secret, why));
    }
  }
}

TEST(WebhookTest, ProviderKeyWinsOverTokenAndMissingKeysAreNamed) {
  const std::string body = "{}";
  std::string why;
  const WebhookSecret both = {{"github", "gh"}, {"token", "generic"}};
  EXPECT_TRUE(verifyWebhook(WebhookProvider::kGitHub,
                            request({{"x-hub-signature-256", "sha256=" + hmacSha256Hex("gh", body)}}, body), both,
                            why));
  EXPECT_FALSE(verifyWebhook(WebhookProvider::kGitHub,
                             request({{"x-hub-signature-256", "sha256=" + hmacSha256Hex("generic", body)}}, body), both,
                             why));
  EXPECT_FALSE(verifyWebhook(WebhookProvider::kGitLab, request({{"x-gitlab-token", "gh"}}), {{"github", "gh"}}, why));
  EXPECT_NE(why.find("\"gitlab\""), std::string::npos) << why;
  EXPECT_FALSE(verifyWebhook(WebhookProvider::kAzureDevOps, request({{"authorization", "Basic eDp5"}}), both, why));
  EXPECT_NE(why.find("azure-username"), std::string::npos) << why;
}

TEST(WebhookTest, ParsesGitHubGiteaGogsPushes) {
  for (auto [provider, header] : {std::pair{WebhookProvider::kGitHub, "x-github-event"},
                                  {WebhookProvider::kGitea, "x-gitea-event"},
                                  {WebhookProvider::kGogs, "x-gogs-event"}}) {
    auto push = parsePush(provider, request({{header, "push"}}, kGitHubPush));
    ASSERT_TRUE(push.ok()) << push.error().describe();
    EXPECT_TRUE(push->is_push);
    EXPECT_EQ(push->repo_urls, (std::vector<std::string>{"https://github.com/org/app.git", "git@github.com:org/app.git",
                                                         "https://github.com/org/app"}));
    ASSERT_EQ(push->refs.size(), 1u);
    EXPECT_EQ(push->refs[0].ref, "refs/heads/main");
    EXPECT_EQ(push->refs[0].commit, std::string(40, 'a'));
    EXPECT_EQ(push->default_branch, "main");
  }
  auto ping = parsePush(WebhookProvider::kGitHub, request({{"x-github-event", "ping"}}, R"({"zen":"x"})"));
  ASSERT_TRUE(ping.ok());
  EXPECT_FALSE(ping->is_push);
  auto broken = parsePush(WebhookProvider::kGitHub, request({{"x-github-event", "push"}}, R"({"ref":"refs/heads/x"})"));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("repository.clone_url"), std::string::npos) << broken.error().message;
  EXPECT_FALSE(parsePush(WebhookProvider::kGitHub, request({{"x-github-event", "push"}}, "not json")).ok());
}

TEST(WebhookTest, ParsesGitLabBitbucketAzureAndGenericPushes) {
  auto gitlab = parsePush(WebhookProvider::kGitLab, request({{"x-gitlab-event", "Tag Push Hook"}}, R"({
    "object_kind":"tag_push","ref":"refs/tags/v1","checkout_sha":"bbbb",
    "project":{"git_http_url":"https://gitlab.com/g/app.git","git_ssh_url":"git@gitlab.com:g/app.git",
               "web_url":"https://gitlab.com/g/app","default_branch":"main"}})"));
  ASSERT_TRUE(gitlab.ok()) << gitlab.error().describe();
  EXPECT_TRUE(gitlab->is_push);
  EXPECT_EQ(gitlab->refs.at(0).ref, "refs/tags/v1");
  EXPECT_EQ(gitlab->refs.at(0).commit, "bbbb");
  EXPECT_EQ(gitlab->repo_urls.size(), 3u);

  auto cloud = parsePush(WebhookProvider::kBitbucketCloud, request({{"x-event-key", "repo:push"}}, R"({
    "repository":{"full_name":"team/app","links":{"html":{"href":"https://bitbucket.org/team/app"}}},
    "push":{"changes":[{"new":{"type":"branch","name":"main","target":{"hash":"cccc"}}},
                       {"new":null,"old":{"type":"tag","name":"v0"}}]}})"));
  ASSERT_TRUE(cloud.ok()) << cloud.error().describe();
  ASSERT_EQ(cloud->refs.size(), 2u);
  EXPECT_EQ(cloud->refs[0].ref, "refs/heads/main");
  EXPECT_EQ(cloud->refs[0].commit, "cccc");
  EXPECT_EQ(cloud->refs[1].ref, "refs/tags/v0");
  EXPECT_EQ(cloud->refs[1].commit, "");
  EXPECT_NE(std::find(cloud->repo_urls.begin(), cloud->repo_urls.end(), "git@bitbucket.org:team/app"),
            cloud->repo_urls.end());

  auto server = parsePush(WebhookProvider::kBitbucketServer, request({{"x-event-key", "repo:refs_changed"}}, R"({
    "repository":{"slug":"app","links":{"clone":[{"href":"ssh://git@bb.example.com:7999/prj/app.git","name":"ssh"},
      {"href":"https://bb.example.com/scm/prj/app.git","name":"http"}]}},
    "changes":[{"ref":{"id":"refs/heads/main","type":"BRANCH"},"toHash":"dddd","type":"UPDATE"}]})"));
  ASSERT_TRUE(server.ok()) << server.error().describe();
  EXPECT_EQ(server->refs.at(0).ref, "refs/heads/main");
  EXPECT_EQ(server->refs.at(0).commit, "dddd");
  EXPECT_EQ(server->repo_urls.size(), 2u);
  auto ping = parsePush(WebhookProvider::kBitbucketServer, request({{"x-event-key", "diagnostics:ping"}}, "{}"));
  ASSERT_TRUE(ping.ok());
  EXPECT_FALSE(ping->is_push);

  auto azure = parsePush(WebhookProvider::kAzureDevOps, request({{"x-vss-activityid", "1"}}, R"({
    "eventType":"git.push","resource":{"refUpdates":[{"name":"refs/heads/main","newObjectId":"eeee"}],
    "repository":{"remoteUrl":"https://org@dev.azure.com/org/prj/_git/app",
                  "sshUrl":"git@ssh.dev.azure.com:v3/org/prj/app","defaultBranch":"refs/heads/main"}}})"));
  ASSERT_TRUE(azure.ok()) << azure.error().describe();
  EXPECT_EQ(azure->refs.at(0).commit, "eeee");
  EXPECT_EQ(azure->default_branch, "main");

  auto generic =
      parsePush(WebhookProvider::kGeneric, request({}, R"({"repo":"https://git.example.com/app","branch":"dev"})"));
  ASSERT_TRUE(generic.ok()) << generic.error().describe();
  EXPECT_EQ(generic->refs.at(0).ref, "refs/heads/dev");
  auto no_ref = parsePush(WebhookProvider::kGeneric, request({}, R"({"repo":"https://git.example.com/app"})"));
  ASSERT_FALSE(no_ref.ok());
  EXPECT_NE(no_ref.error().message.find("ref"), std::string::npos);
}

TEST(WebhookTest, RepoKeyUnifiesUrlForms) {
  const std::string key = "github.com/org/app";
  for (const char* url : {"https://github.com/org/app", "https://GitHub.com/Org/App.git/", "git@github.com:org/app.git",
                          "ssh://git@github.com:22/org/app", "https://user@github.com:443/org/app.git",
                          "http://github.com/org/app?x=1"}) {
    EXPECT_EQ(webhookRepoKey(url), key) << url;
  }
  EXPECT_NE(webhookRepoKey("https://github.com/org/app2"), key);
  EXPECT_EQ(webhookRepoKey("not a url"), "");
}

TEST(WebhookTest, PushMatchesBranchDefaultBranchAndRevision) {
  PushEvent push;
  push.is_push = true;
  push.repo_urls = {"https://github.com/org/app.git"};
  push.refs = {{"refs/heads/main", "1111"}};
  push.default_branch = "main";
  model::GitRepoSpec spec;
  spec.repo = "git@github.com:org/app";
  EXPECT_TRUE(pushMatches(spec, push));  // follows the default branch
  EXPECT_EQ(pushedCommitFor(spec, push), "1111");
  spec.branch = "main";
  EXPECT_TRUE(pushMatches(spec, push));
  spec.branch = "dev";
  EXPECT_FALSE(pushMatches(spec, push));
  spec.branch.clear();
  push.default_branch = "trunk";
  EXPECT_FALSE(pushMatches(spec, push));  // main is not the default branch
  push.default_branch.clear();
  EXPECT_TRUE(pushMatches(spec, push));  // unknown default: poll, ls-remote decides

  push.refs = {{"refs/tags/v1", "2222"}};
  EXPECT_FALSE(pushMatches(spec, push));  // a tag does not move a branch
  spec.revision = "v1";
  EXPECT_TRUE(pushMatches(spec, push));
  spec.revision = "refs/tags/v1";
  EXPECT_TRUE(pushMatches(spec, push));
  spec.revision = "0123abcd";
  EXPECT_FALSE(pushMatches(spec, push));  // a pinned commit never moves

  spec.revision = "v1";
  spec.repo = "https://github.com/org/other";
  EXPECT_FALSE(pushMatches(spec, push));
  spec.repo = "https://github.com/org/app";
  push.is_push = false;
  EXPECT_FALSE(pushMatches(spec, push));
}

TEST(WebhookTest, WebhookSecretsComeFromTheCredentialsStore) {
  auto dir = makeTempDir("webhook-secrets");
  ASSERT_TRUE(dir.ok());
  std::filesystem::create_directories(*dir + "/ws/hooks");
  ASSERT_TRUE(writeFile(*dir + "/ws/hooks/github", "gh-secret\n").ok());
  ASSERT_TRUE(writeFile(*dir + "/ws/hooks/azure-username", "u").ok());
  ASSERT_TRUE(writeFile(*dir + "/ws/typo.yaml", "githbu: x\n").ok());
  auto secret = loadWebhookSecret(*dir, "ws", "hooks");
  ASSERT_TRUE(secret.ok()) << secret.error().describe();
  EXPECT_EQ(secret->at("github"), "gh-secret");
  auto typo = loadWebhookSecret(*dir, "ws", "typo");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().message.find("\"githbu\""), std::string::npos) << typo.error().message;
  EXPECT_EQ(loadWebhookSecret(*dir, "ws", "missing").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(loadWebhookSecret(*dir, "other", "hooks").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(loadWebhookSecret(*dir, "ws", "../etc").error().kind, ErrorKind::kInvalid);
  removeAll(*dir);
}

}  // namespace
}  // namespace flotilla::poller
