// Integration tests of the poller's webhook receiver and `flotilla force-sync`, against a real nats-server -js
// and a real git server (tests/harness), with curl as an independent HTTP client. GitRepos use disablePolling,
// so a commit event after a push can only come from the webhook.
#include <sstream>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/cli/cli.h"
#include "flotilla/core/process.h"
#include "flotilla/poller/webhook.h"
#include "flotilla/testing/half_request.h"
#include "poller_fixture.h"

namespace flotilla::poller {
namespace {

using namespace flotilla::poller::poller_test;

//! Each provider's own value in the poller's webhook secret "hooks".
const std::map<std::string, std::string> kHookValues = {
    {"github", "gh-secret"},       {"gitlab", "gl-token"},           {"gitea", "gitea-secret"},
    {"gogs", "gogs-secret"},       {"bitbucket", "bb-secret"},       {"bitbucket-server", "bbs-secret"},
    {"generic", "generic-secret"}, {"azure-username", "azure-hook"}, {"azure-password", "azure-pw"}};

//! The receiver's only answers to a request it could identify: no GitRepo, secret or workspace name in them.
const std::string kAcceptedReply = "accepted\n";
const std::string kRejectedReply = "webhook rejected: signature, token or credentials not valid\n";

struct HttpReply {
  int status = 0;
  std::string body;
};

//! A webhook request for `provider` announcing `commit` on `ref` of `url`, signed with `key` (or the provider's
//! value in kHookValues).
struct Hook {
  std::map<std::string, std::string> headers;
  std::string body;
};

//! A JSON list of one element.
Json listOf(Json item) {
  Json list = Json::array();
  list.push(std::move(item));
  return list;
}

Hook makeHook(const std::string& provider, const std::string& url, const std::string& ref, const std::string& commit,
              std::optional<std::string> key = std::nullopt) {
  Hook hook;
  const std::string secret = key.value_or(kHookValues.count(provider) ? kHookValues.at(provider) : "");
  const std::string branch = ref.substr(ref.rfind('/') + 1);
  auto sign = [&](const std::string& body) { return hmacSha256Hex(secret, body); };
  if (provider == "github" || provider == "gitea" || provider == "gogs") {
    hook.body =
        Json::obj({{"ref", ref},
                   {"after", commit},
                   {"repository", Json::obj({{"clone_url", url}, {"html_url", url}, {"default_branch", "main"}})}})
            .dump();
    if (provider == "github") {
      hook.headers = {{"X-GitHub-Event", "push"}, {"X-Hub-Signature-256", "sha256=" + sign(hook.body)}};
    } else if (provider == "gitea") {
      hook.headers = {{"X-GitHub-Event", "push"},
                      {"X-Gogs-Event", "push"},
                      {"X-Gitea-Event", "push"},
                      {"X-Gitea-Signature", sign(hook.body)}};
    } else {
      hook.headers = {{"X-Gogs-Event", "push"}, {"X-Gogs-Signature", sign(hook.body)}};
    }
  } else if (provider == "gitlab") {
    hook.body = Json::obj({{"object_kind", "push"},
                           {"ref", ref},
                           {"checkout_sha", commit},
                           {"project", Json::obj({{"git_http_url", url}, {"default_branch", "main"}})}})
                    .dump();
    hook.headers = {{"X-Gitlab-Event", "Push Hook"}, {"X-Gitlab-Token", secret}};
  } else if (provider == "bitbucket") {
    Json changes = listOf(Json::obj(
        {{"new", Json::obj({{"type", "branch"}, {"name", branch}, {"target", Json::obj({{"hash", commit}})}})}}));
    hook.body = Json::obj({{"repository", Json::obj({{"links", Json::obj({{"html", Json::obj({{"href", url}})}})}})},
                           {"push", Json::obj({{"changes", changes}})}})
                    .dump();
    hook.headers = {{"X-Event-Key", "repo:push"},
                    {"X-Hook-UUID", "0b4d6a1e-0000-4000-8000-000000000000"},
                    {"X-Hub-Signature", "sha256=" + sign(hook.body)}};
  } else if (provider == "bitbucket-server") {
    Json clones = listOf(Json::obj({{"href", url}, {"name", "http"}}));
    Json changes = listOf(Json::obj({{"ref", Json::obj({{"id", ref}})}, {"toHash", commit}, {"type", "UPDATE"}}));
    hook.body =
        Json::obj({{"repository", Json::obj({{"links", Json::obj({{"clone", clones}})}})}, {"changes", changes}})
            .dump();
    hook.headers = {{"X-Event-Key", "repo:refs_changed"},
                    {"X-Request-Id", "r-1"},
                    {"X-Hub-Signature", "sha256=" + sign(hook.body)}};
  } else if (provider == "azure-devops") {
    Json updates = listOf(Json::obj({{"name", ref}, {"newObjectId", commit}}));
    hook.body =
        Json::obj({{"eventType", "git.push"},
                   {"resource", Json::obj({{"refUpdates", updates}, {"repository", Json::obj({{"remoteUrl", url}})}})}})
            .dump();
    const std::string user = kHookValues.at("azure-username");
    const std::string password = key.value_or(kHookValues.at("azure-password"));
    hook.headers = {{"X-Vss-ActivityId", "a-1"}, {"Authorization", "Basic " + base64Encode(user + ":" + password)}};
  } else {
    hook.body = Json::obj({{"repo", url}, {"ref", ref}, {"commit", commit}}).dump();
    hook.headers = {{"X-Flotilla-Signature", "sha256=" + sign(hook.body)}};
  }
  return hook;
}

class PollerWebhookTest : public PollerIntegrationTest {
 protected:
  void SetUp() override {
    PollerIntegrationTest::SetUp();
    creds_ = data_dir_ + "-creds";
    // The GitRepos' workspace holds "hooks"; the poller-wide secret lives in the operator's own workspace.
    for (const char* dir : {"/fleet-default/hooks/", "/flotilla-system/hooks/"}) {
      std::filesystem::create_directories(creds_ + dir);
      for (const auto& [key, value] : kHookValues) {
        ASSERT_TRUE(writeFile(creds_ + dir + key, value + "\n").ok());
      }
    }
  }
  void TearDown() override {
    PollerIntegrationTest::TearDown();
    removeAll(creds_);
  }

  //! The receiver's options for these tests: no rate limit (the tests send from one address, fast).
  PollerOptions webhookOptions() {
    PollerOptions options = defaultOptions();
    options.credentials_dir = creds_;
    options.webhook_address = "127.0.0.1";
    options.webhook_rate = 0;
    return options;
  }

  Poller& startWebhookPoller(size_t max_body = 10u << 20, Millis coalesce = Millis(100)) {
    PollerOptions options = webhookOptions();
    options.webhook_max_body = max_body;
    options.webhook_coalesce = coalesce;
    Poller& poller = startPoller(options);
    port_ = poller.webhookPort();
    EXPECT_GT(port_, 0);
    return poller;
  }

  HttpReply post(const Hook& hook) {
    CommandOptions command;
    command.argv = {"curl", "-sS",  "-o",
                    "-",    "-w",   "\n%{http_code}",
                    "-X",   "POST", "--data-binary",
                    "@-",   "-H",   "Content-Type: application/json"};
    for (const auto& [name, value] : hook.headers) {
      command.argv.push_back("-H");
      command.argv.push_back(name + ": " + value);
    }
    command.argv.push_back("http://127.0.0.1:" + std::to_string(port_) + "/webhook");
    command.input = hook.body;
    command.timeout = seconds(30);
    auto result = runCommand(command);
    EXPECT_TRUE(result.ok());
    HttpReply reply;
    if (!result.ok()) {
      return reply;
    }
    const auto newline = result->out.rfind('\n');
    reply.body = result->out.substr(0, newline);
    reply.status = std::atoi(result->out.substr(newline + 1).c_str());
    return reply;
  }

  double webhookMetric(const std::string& provider, const std::string& outcome) {
    return metric("webhook_requests_total", {{"provider", provider}, {"outcome", outcome}});
  }

  std::string hookedGitRepo(const std::string& name, const std::string& extra = "") {
    return gitRepoJson(name, git_->httpUrl("app"), R"(,"disablePolling":true,"webhookSecret":"hooks")" + extra);
  }

  //! Starts a webhook poller, puts webhook-only GitRepo "app" and waits for its first commit event.
  void followHookedApp() {
    ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 0\n"}}, "zero").ok());
    startWebhookPoller();
    putGitRepo("app", hookedGitRepo("app"));
    ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  }

  std::string creds_;
  uint16_t port_ = 0;
};

// Every provider: a valid push makes the GitRepo (webhook-only: disablePolling) publish the new commit at once;
// status records the announced commit.
TEST_F(PollerWebhookTest, EachProvidersPushTriggersAnImmediatePoll) {
  ASSERT_NO_FATAL_FAILURE(followHookedApp());
  const std::string url = git_->httpUrl("app");
  uint64_t expected = 1;
  for (const char* provider :
       {"github", "gitlab", "gitea", "gogs", "bitbucket", "bitbucket-server", "azure-devops", "generic"}) {
    SCOPED_TRACE(provider);
    auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", std::string("v: ") + provider + "\n"}}, provider);
    ASSERT_TRUE(head.ok());
    // The same repository spelled differently by the host (".git", trailing slash) still matches.
    const HttpReply reply = post(makeHook(provider, url + "/", "refs/heads/main", *head));
    EXPECT_EQ(reply.status, 202) << reply.body;
    EXPECT_EQ(reply.body, kAcceptedReply);
    ++expected;
    ASSERT_TRUE(waitFor([&] { return commitCount() == expected; }, seconds(10))) << provider;
    EXPECT_EQ(commitEvent(expected).first.commit, *head);
    EXPECT_EQ(webhookMetric(provider, "accepted"), 1);
    ASSERT_TRUE(waitFor([&] { return status("app") && status("app")->webhook_commit == *head; }));
    EXPECT_FALSE(status("app")->last_webhook_time.empty());
  }
  // Each push's commit is measured from the push's receipt, the first commit from its poll (docs/pipeline.md
  // "Stage latency").
  EXPECT_TRUE(waitFor([&] {
    return metric("stage_latency_seconds", {{"stage", "webhook_to_commit"}}) == double(expected - 1);
  })) << metric("stage_latency_seconds", {{"stage", "webhook_to_commit"}});
  EXPECT_EQ(metric("stage_latency_seconds", {{"stage", "poll_to_commit"}}), 1);
  // A push to another branch is genuine but concerns no GitRepo: the same 202, nothing polled.
  ASSERT_TRUE(git_->commitFiles("app", "dev", {{"simple/a.yaml", "dev\n"}}, "dev").ok());
  const double polls =
      metric("polls_total", {{"outcome", "unchanged"}}) + metric("polls_total", {{"outcome", "published"}});
  const HttpReply other = post(makeHook("github", url, "refs/heads/dev", std::string(40, '1')));
  EXPECT_EQ(other.status, 202) << other.body;
  EXPECT_EQ(other.body, kAcceptedReply);
  EXPECT_EQ(webhookMetric("github", "ignored"), 1);
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(metric("polls_total", {{"outcome", "unchanged"}}) + metric("polls_total", {{"outcome", "published"}}),
            polls);
  EXPECT_EQ(commitCount(), expected);
}

// A forged push (wrong secret, missing signature, wrong token, wrong basic auth) gets 401, a log line and a metric,
// and no poll; an unknown sender gets 400; a body is parsed only once its signature is right.
TEST_F(PollerWebhookTest, ForgedWebhooksAreRejectedAndDoNotSync) {
  ASSERT_NO_FATAL_FAILURE(followHookedApp());
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  const std::string url = git_->httpUrl("app");
  for (const char* provider :
       {"github", "gitlab", "gitea", "gogs", "bitbucket", "bitbucket-server", "azure-devops", "generic"}) {
    SCOPED_TRACE(provider);
    const HttpReply forged = post(makeHook(provider, url, "refs/heads/main", *head, "attacker-guess"));
    EXPECT_EQ(forged.status, 401) << forged.body;
    EXPECT_EQ(forged.body, kRejectedReply);
    EXPECT_EQ(forged.body.find(kHookValues.count(provider) ? kHookValues.at(provider) : "azure-pw"), std::string::npos);
    EXPECT_EQ(webhookMetric(provider, "unauthorized"), 1);
  }
  Hook unsigned_hook = makeHook("github", url, "refs/heads/main", *head);
  unsigned_hook.headers.erase("X-Hub-Signature-256");
  const HttpReply missing = post(unsigned_hook);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.body, kRejectedReply);
  EXPECT_EQ(post(Hook{{}, "{}"}).status, 400);
  EXPECT_EQ(webhookMetric("unknown", "bad_request"), 1);
  // Not JSON, signed for another body: refused by its signature, never parsed (no bad_request).
  Hook garbage = makeHook("github", url, "refs/heads/main", *head);
  garbage.body = "not json";
  EXPECT_EQ(post(garbage).status, 401);
  EXPECT_EQ(webhookMetric("github", "bad_request"), 0);
  // Signed properly, the same body is parsed, and its problem is told to the sender who holds the secret.
  garbage.headers["X-Hub-Signature-256"] = "sha256=" + hmacSha256Hex(kHookValues.at("github"), garbage.body);
  const HttpReply unreadable = post(garbage);
  EXPECT_EQ(unreadable.status, 400);
  EXPECT_EQ(webhookMetric("github", "bad_request"), 1);

  std::this_thread::sleep_for(seconds(2));
  EXPECT_EQ(commitCount(), 1u);
  EXPECT_EQ(status("app")->webhook_commit, "");
  // The genuine push still works afterwards.
  EXPECT_EQ(post(makeHook("github", url, "refs/heads/main", *head)).status, 202);
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
}

// A GitRepo without webhookSecret, on a poller without --webhook-secret, cannot be triggered: 401 (why is logged,
// not told).
TEST_F(PollerWebhookTest, GitRepoWithoutAnySecretIsNotTriggered) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 0\n"}}, "zero").ok());
  startWebhookPoller();
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app"), R"(,"disablePolling":true)"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  const HttpReply reply = post(makeHook("github", git_->httpUrl("app"), "refs/heads/main", std::string(40, 'a')));
  EXPECT_EQ(reply.status, 401);
  EXPECT_EQ(reply.body, kRejectedReply);
  EXPECT_EQ(webhookMetric("github", "unauthorized"), 1);
}

// The poller-wide secret (--webhook-secret) serves GitRepos without their own.
TEST_F(PollerWebhookTest, PollerWideSecretServesGitReposWithoutTheirOwn) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 0\n"}}, "zero").ok());
  PollerOptions options = webhookOptions();
  options.webhook_secret = "flotilla-system/hooks";
  port_ = startPoller(options).webhookPort();
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app"), R"(,"disablePolling":true)"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(post(makeHook("gitlab", git_->httpUrl("app"), "refs/heads/main", *head)).status, 202);
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  // A push for a repository no GitRepo uses is checked against the poller-wide secret too.
  EXPECT_EQ(post(makeHook("gitlab", "https://elsewhere.example/x", "refs/heads/main", "", "bad")).status, 401);
  EXPECT_EQ(post(makeHook("gitlab", "https://elsewhere.example/x", "refs/heads/main", "")).status, 202);
}

// The reply says nothing about the configuration: a verified push gets the same answer whether a GitRepo uses the
// repository or not, and a forged one the same answer for a known and an unknown repository.
TEST_F(PollerWebhookTest, UnknownAndKnownRepositoriesGetTheSameAnswers) {
  ASSERT_NO_FATAL_FAILURE(followHookedApp());
  const std::string known = git_->httpUrl("app");
  const std::string unknown = "https://git.example.com/nobody/uses-this";
  for (const char* provider : {"github", "gitlab", "generic"}) {
    SCOPED_TRACE(provider);
    const HttpReply known_ok = post(makeHook(provider, known, "refs/heads/main", std::string(40, 'b')));
    const HttpReply unknown_ok = post(makeHook(provider, unknown, "refs/heads/main", std::string(40, 'b')));
    EXPECT_EQ(known_ok.status, 202);
    EXPECT_EQ(unknown_ok.status, known_ok.status);
    EXPECT_EQ(unknown_ok.body, known_ok.body);
    const HttpReply known_forged = post(makeHook(provider, known, "refs/heads/main", "", "guess"));
    const HttpReply unknown_forged = post(makeHook(provider, unknown, "refs/heads/main", "", "guess"));
    EXPECT_EQ(known_forged.status, 401);
    EXPECT_EQ(unknown_forged.status, known_forged.status);
    EXPECT_EQ(unknown_forged.body, known_forged.body);
    for (const auto& reply : {known_ok, unknown_ok, known_forged, unknown_forged}) {
      for (const char* name : {"hooks", "fleet-default", "app"}) {
        EXPECT_EQ(reply.body.find(name), std::string::npos) << reply.body;
      }
    }
  }
}

// A push verified by one workspace's secret never triggers a GitRepo of another workspace: team-b's GitRepo on the
// same repository names "hooks", which exists only in fleet-default, so it is not triggered (logged and counted).
TEST_F(PollerWebhookTest, APushVerifiedByOneWorkspacesSecretDoesNotTriggerAnothersGitRepo) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 0\n"}}, "zero").ok());
  startWebhookPoller();
  putGitRepo("app", hookedGitRepo("app"));
  std::string other = hookedGitRepo("other");
  other.replace(other.find("fleet-default"), 13, "team-b");
  ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey("team-b", "other"), other).ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  const HttpReply reply = post(makeHook("github", git_->httpUrl("app"), "refs/heads/main", *head));
  EXPECT_EQ(reply.status, 202);
  EXPECT_EQ(reply.body, kAcceptedReply);
  ASSERT_TRUE(waitFor([&] { return commitCount() == 3; }));
  EXPECT_EQ(commitEvent(3).first.gitrepo, "app");
  EXPECT_EQ(webhookMetric("github", "not_verified_for_gitrepo"), 1);
  EXPECT_GE(metric("errors_total", {{"stage", "webhook"}, {"kind", "NotFound"}}), 1);
  std::this_thread::sleep_for(seconds(1));
  EXPECT_EQ(commitCount(), 3u);
}

// Over --webhook-max-connections a connection gets 503 at once, counted and logged; the held one is unaffected.
TEST_F(PollerWebhookTest, ConnectionsOverTheCapGet503) {
  PollerOptions options = webhookOptions();
  options.webhook_max_connections = 1;
  port_ = startPoller(options).webhookPort();
  flotilla::testing::HalfRequest held(port_, "POST /webhook HTTP/1.1\r\nHost: x\r\n");
  ASSERT_TRUE(held.connected());
  // Until the server has accepted the held connection, a request may still be served: wait for the first 503.
  HttpReply refused;
  ASSERT_TRUE(waitFor([&] {
    refused = post(makeHook("github", git_->httpUrl("app"), "refs/heads/main", std::string(40, 'c')));
    return refused.status == 503;
  }));
  EXPECT_EQ(refused.body, "too many connections\n");
  EXPECT_GE(webhookMetric("unknown", "too_many_connections"), 1);
}

// Over --webhook-rate/--webhook-burst a source address gets 429 (its body unread), counted and logged.
TEST_F(PollerWebhookTest, SourcesOverTheRateGet429) {
  PollerOptions options = webhookOptions();
  options.webhook_rate = 1.0 / 86400;  // no refill during the test: the count is exact
  options.webhook_burst = 2;
  options.webhook_secret = "flotilla-system/hooks";
  port_ = startPoller(options).webhookPort();
  const Hook hook = makeHook("github", git_->httpUrl("app"), "refs/heads/main", std::string(40, 'd'));
  EXPECT_EQ(post(hook).status, 202);
  EXPECT_EQ(post(hook).status, 202);
  const HttpReply limited = post(hook);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.body, "too many requests\n");
  EXPECT_EQ(webhookMetric("unknown", "rate_limited"), 1);
  EXPECT_EQ(webhookMetric("github", "ignored"), 2);
}

// Payloads over the cap get 413 and are counted.
TEST_F(PollerWebhookTest, OversizePayloadGets413) {
  startWebhookPoller(64 * 1024);
  Hook hook = makeHook("github", git_->httpUrl("app"), "refs/heads/main", std::string(40, 'a'));
  hook.body = R"({"padding":")" + std::string(100 * 1024, 'x') + R"("})";
  EXPECT_EQ(post(hook).status, 413);
  EXPECT_EQ(webhookMetric("github", "too_large"), 1);
}

// A burst of pushes for one commit is coalesced: one fetch, one commit event.
TEST_F(PollerWebhookTest, BurstOfPushesIsOneFetch) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 0\n"}}, "zero").ok());
  // A wide coalescing window, so ten curl processes started together on a busy machine land inside it.
  startWebhookPoller(10u << 20, seconds(1));
  putGitRepo("app", hookedGitRepo("app"));
  putGitRepo("web", hookedGitRepo("web", R"(,"branch":"main")"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  ASSERT_EQ(metric("fetches_total", {{"result", "ok"}}), 1);
  const double ls_remotes = metric("ls_remotes_total", {{"result", "ok"}});
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  const Hook hook = makeHook("github", git_->httpUrl("app"), "refs/heads/main", *head);
  std::vector<std::thread> senders;
  std::atomic<int> accepted{0};
  for (int i = 0; i < 10; ++i) {
    senders.emplace_back([&] {
      if (post(hook).status == 202) {
        ++accepted;
      }
    });
  }
  for (auto& sender : senders) {
    sender.join();
  }
  EXPECT_EQ(accepted.load(), 10);
  ASSERT_TRUE(waitFor([&] { return commitCount() == 4; }));
  std::this_thread::sleep_for(seconds(1));
  EXPECT_EQ(commitCount(), 4u);
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 2);
  // One sync for the burst, plus at most one follow-up for pushes that arrived while it ran.
  EXPECT_LE(metric("ls_remotes_total", {{"result", "ok"}}) - ls_remotes, 2);
}

// `flotilla force-sync` bumps forceSyncGeneration in KV; the running poller republishes the current commit.
TEST_F(PollerWebhookTest, ForceSyncCommandRepublishesTheCurrentCommit) {
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 0\n"}}, "zero");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(startFollowingApp(R"(,"disablePolling":true)"));
  auto run = [&](std::vector<std::string> args) {
    std::istringstream in;
    std::ostringstream out;
    std::ostringstream err;
    args.insert(args.begin(), {"--nats-url", nats_->url()});
    const int code = cli::runCli(args, in, out, err);
    return std::make_tuple(code, out.str(), err.str());
  };
  auto [code, out, err] = run({"force-sync", "fleet-default/app"});
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(out.find("forceSyncGeneration 1"), std::string::npos) << out;
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [event, msg_id] = commitEvent(2);
  EXPECT_EQ(event.commit, *head);
  EXPECT_EQ(event.force_sync_generation, 1);
  EXPECT_NE(msg_id, commitEvent(1).second);

  std::tie(code, out, err) = run({"force-sync", "app", "-n", "fleet-default"});
  EXPECT_EQ(code, 0) << err;
  ASSERT_TRUE(waitFor([&] { return commitCount() == 3; }));
  EXPECT_EQ(commitEvent(3).first.force_sync_generation, 2);

  std::tie(code, out, err) = run({"force-sync", "nope"});
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("\"nope\" not found"), std::string::npos) << err;
  std::tie(code, out, err) = run({"force-sync"});
  EXPECT_EQ(code, 2);
}

// Two replicas of the poller, each with its own mirrors (issue 13, "Replicas"): a push announced to one is
// published by it; the same push announced to the other finds the commit in the first one's status record and
// sends nothing. JetStream would drop a copy within its 10-minute dedup window; this check also holds after it.
TEST_F(PollerWebhookTest, AReplicaDoesNotPublishACommitAnotherReplicaPublished) {
  ASSERT_NO_FATAL_FAILURE(followHookedApp());
  const uint16_t first_port = port_;
  PollerOptions options = webhookOptions();
  options.data_dir = data_dir_ + "-replica";
  const uint16_t second_port = startPoller(options).webhookPort();
  ASSERT_GT(second_port, 0);
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  const Hook hook = makeHook("github", git_->httpUrl("app"), "refs/heads/main", *head);

  port_ = first_port;
  EXPECT_EQ(post(hook).status, 202);
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2 && status("app") && status("app")->commit == *head; }));
  port_ = second_port;
  EXPECT_EQ(post(hook).status, 202);
  ASSERT_TRUE(waitFor([&] { return metric("commits_published_by_peer_total") == 1; }));
  EXPECT_EQ(commitCount(), 2U);
  EXPECT_EQ(metric("publish_duplicates_total"), 0) << "the second replica sent nothing";
  pollers_.clear();
  removeAll(options.data_dir);
}

}  // namespace
}  // namespace flotilla::poller
