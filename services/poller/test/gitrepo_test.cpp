// Unit tests of what the poller derives from a GitRepo: keys, mirror ids, path selection, wanted commit,
// spec hash and Msg-Id.
#include "flotilla/poller/gitrepo.h"

#include <gtest/gtest.h>

#include "flotilla/events/subjects.h"

namespace flotilla::poller {
namespace {

TEST(PollerGitRepoTest, ParsesKeysWithEscapedTokens) {
  auto id = parseGitRepoKey(events::gitRepoKey("prod.eu", "my-app"));
  ASSERT_TRUE(id.ok()) << id.error().describe();
  EXPECT_EQ(id->workspace, "prod.eu");
  EXPECT_EQ(id->name, "my-app");
  EXPECT_FALSE(parseGitRepoKey("only-one-token").ok());
  EXPECT_FALSE(parseGitRepoKey("a.b.c").ok());
  EXPECT_FALSE(parseGitRepoKey("ws.bad=zz").ok());
}

TEST(PollerGitRepoTest, StatusKeyEscapesNames) {
  EXPECT_EQ(pollStatusKey("fleet-default", "app"), "gitrepo.fleet-default.app");
  EXPECT_EQ(pollStatusKey("prod.eu", "a.b"), "gitrepo.prod=2Eeu.a=2Eb");
}

// Spellings of one repository share a mirror; different repositories do not.
TEST(PollerGitRepoTest, NormalizesRepoUrls) {
  EXPECT_EQ(normalizeRepoUrl("https://GitHub.com/rancher/fleet-examples.git/"),
            "https://github.com/rancher/fleet-examples");
  EXPECT_EQ(normalizeRepoUrl("https://github.com:443/rancher/fleet-examples"),
            "https://github.com/rancher/fleet-examples");
  EXPECT_EQ(normalizeRepoUrl("HTTP://127.0.0.1:8080/app.git"), "http://127.0.0.1:8080/app");
  EXPECT_EQ(normalizeRepoUrl("git@GitHub.com:Org/Repo.git"), "git@github.com:Org/Repo");
  EXPECT_EQ(normalizeRepoUrl("ssh://git@Host:22/x/y.git"), "ssh://git@host/x/y");
  EXPECT_EQ(mirrorId("https://github.com/a/b.git"), mirrorId("https://GITHUB.com/a/b"));
  EXPECT_NE(mirrorId("https://github.com/a/b"), mirrorId("https://github.com/a/c"));
  // Path case matters on most servers.
  EXPECT_NE(mirrorId("https://github.com/a/B"), mirrorId("https://github.com/a/b"));
  EXPECT_EQ(mirrorId("x").size(), 64u);
}

TEST(PollerGitRepoTest, EmptyPathsSelectEverything) {
  PathSelector all(std::vector<std::string>{});
  EXPECT_TRUE(all.selectsAll());
  EXPECT_TRUE(all.selects("anything/at/all.yaml"));
  EXPECT_TRUE(PathSelector({"/"}).selectsAll());
  EXPECT_TRUE(PathSelector({"./"}).selectsAll());
  EXPECT_TRUE(PathSelector({"apps", "."}).selectsAll());
  EXPECT_TRUE(PathSelector({"apps", "."}).patterns().empty());
}

TEST(PollerGitRepoTest, PathsSelectDirectoriesAndGlobs) {
  PathSelector selector({"./simple/", "/multi-cluster/*", "single.yaml"});
  EXPECT_FALSE(selector.selectsAll());
  EXPECT_EQ(selector.patterns(), (std::vector<std::string>{"simple", "multi-cluster/*", "single.yaml"}));
  EXPECT_TRUE(selector.selects("simple/deployment.yaml"));
  EXPECT_TRUE(selector.selects("simple/sub/dir/x.yaml"));
  EXPECT_TRUE(selector.selects("multi-cluster/hello/fleet.yaml"));
  EXPECT_TRUE(selector.selects("multi-cluster/README.md"));  // matches the glob itself
  EXPECT_TRUE(selector.selects("single.yaml"));
  EXPECT_FALSE(selector.selects("simple2/x.yaml"));       // not a prefix match on names
  EXPECT_FALSE(selector.selects("other/simple/x.yaml"));  // anchored at the root
  EXPECT_FALSE(selector.selects("multi-cluster"));        // '*' needs a path element below
  EXPECT_FALSE(selector.selects("README.md"));
}

TEST(PollerGitRepoTest, BundlesAddTheirBaseAndOptionsFile) {
  model::GitRepoSpec spec;
  spec.bundles = {{.base = "charts/web", .options = "options/web.yaml"}};
  PathSelector selector = PathSelector::forSpec(spec);
  EXPECT_TRUE(selector.selects("charts/web/Chart.yaml"));
  EXPECT_TRUE(selector.selects("options/web.yaml"));
  EXPECT_FALSE(selector.selects("options/other.yaml"));
  spec.bundles.clear();
  EXPECT_TRUE(PathSelector::forSpec(spec).selectsAll());
}

git::RemoteHeads sampleHeads() {
  git::RemoteHeads heads;
  heads.default_branch = "main";
  heads.head_oid = std::string(40, 'a');
  heads.refs = {{"refs/heads/dev", std::string(40, 'd'), ""},
                {"refs/heads/main", std::string(40, 'a'), ""},
                {"refs/tags/v1", std::string(40, '1'), std::string(40, 'c')},  // annotated tag
                {"refs/tags/v2", std::string(40, '2'), ""}};
  return heads;
}

TEST(PollerGitRepoTest, WantsTheDefaultBranchWhenNoneIsSet) {
  model::GitRepoSpec spec;
  auto wanted = wantedCommit(spec, sampleHeads(), "https://h/r");
  ASSERT_TRUE(wanted.ok()) << wanted.error().describe();
  EXPECT_EQ(wanted->ref, "refs/heads/main");
  EXPECT_EQ(wanted->commit, std::string(40, 'a'));
  EXPECT_FALSE(wanted->needs_mirror);
}

TEST(PollerGitRepoTest, WantsTheNamedBranch) {
  model::GitRepoSpec spec;
  spec.branch = "dev";
  auto wanted = wantedCommit(spec, sampleHeads(), "https://h/r");
  ASSERT_TRUE(wanted.ok());
  EXPECT_EQ(wanted->commit, std::string(40, 'd'));
  spec.branch = "missing";
  auto missing = wantedCommit(spec, sampleHeads(), "https://h/r");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(missing.error().message.find("branch \"missing\" not found in https://h/r"), std::string::npos);
}

TEST(PollerGitRepoTest, RevisionMayBeATagOrACommit) {
  model::GitRepoSpec spec;
  spec.revision = "v1";
  auto tag = wantedCommit(spec, sampleHeads(), "u");
  ASSERT_TRUE(tag.ok());
  EXPECT_EQ(tag->commit, std::string(40, 'c'));  // peeled
  EXPECT_EQ(tag->ref, "refs/tags/v1");
  spec.revision = "v2";
  EXPECT_EQ(wantedCommit(spec, sampleHeads(), "u")->commit, std::string(40, '2'));

  spec.revision = "ABCDEF1";
  auto sha = wantedCommit(spec, sampleHeads(), "u");
  ASSERT_TRUE(sha.ok());
  EXPECT_TRUE(sha->needs_mirror);
  EXPECT_EQ(sha->ref, "abcdef1");
  EXPECT_TRUE(sha->commit.empty());  // short: only the mirror can expand it

  spec.revision = std::string(40, 'e');
  EXPECT_EQ(wantedCommit(spec, sampleHeads(), "u")->commit, std::string(40, 'e'));

  spec.revision = "no-such-tag";
  auto missing = wantedCommit(spec, sampleHeads(), "u");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
}

TEST(PollerGitRepoTest, EmptyRepositoryIsNotFound) {
  model::GitRepoSpec spec;
  auto wanted = wantedCommit(spec, git::RemoteHeads{}, "u");
  ASSERT_FALSE(wanted.ok());
  EXPECT_EQ(wanted.error().kind, ErrorKind::kNotFound);
}

TEST(PollerGitRepoTest, SpecHashIgnoresPollingOnlyFields) {
  model::GitRepo base;
  base.metadata.name = "app";
  base.metadata.ns = "fleet-default";
  base.spec.repo = "https://h/r";
  base.spec.paths = {"simple"};
  const std::string hash = sourceSpecHash(base);
  EXPECT_EQ(hash.size(), 64u);

  model::GitRepo polling = base;
  polling.spec.polling_interval = std::chrono::seconds(1);
  polling.spec.disable_polling = true;
  polling.spec.client_secret_name = "creds";
  polling.spec.force_sync_generation = 7;
  polling.spec.insecure_skip_tls_verify = true;
  EXPECT_EQ(sourceSpecHash(polling), hash);

  model::GitRepo paths = base;
  paths.spec.paths = {"other"};
  EXPECT_NE(sourceSpecHash(paths), hash);
  model::GitRepo targets = base;
  targets.spec.target_namespace = "ns";
  EXPECT_NE(sourceSpecHash(targets), hash);
  model::GitRepo labels = base;
  labels.metadata.labels["team"] = "a";
  EXPECT_NE(sourceSpecHash(labels), hash);
  // Re-created under the same name: a new uid, so its first commit is not a duplicate of the deleted one's.
  model::GitRepo recreated = base;
  recreated.metadata.uid = "0123456789abcdef";
  EXPECT_NE(sourceSpecHash(recreated), hash);
}

TEST(PollerGitRepoTest, MsgIdFollowsThePipelineShape) {
  const std::string spec_hash(64, 'f');
  EXPECT_EQ(commitMsgId("fleet-default", "app", std::string(40, 'a'), 3, spec_hash),
            "commit/fleet-default/app/" + std::string(40, 'a') + "/3/ffffffffffff");
  EXPECT_EQ(commitMsgId("prod", "a", "c", 0, "0123456789abcdef"), "commit/prod/a/c/0/0123456789ab");
  // The pipeline's id is a prefix, so tools that know only docs/pipeline.md still recognise it.
  EXPECT_EQ(commitMsgId("ws", "a", "c", 1, "0123456789abcdef").rfind(events::commitMsgId("ws", "a", "c", 1), 0), 0u);
}

}  // namespace
}  // namespace flotilla::poller
