// The bundler's part of issue 10 against a real nats-server: a deleted GitRepo's cascade, commitSequence on every
// event, live bundles before deletions, a path dropped from `paths`, a bundle name another GitRepo holds rendered
// the moment it is released (no new commit, no force-sync), and the Helm release-name note.
#include "bundler_fixture.h"
#include "flotilla/render/external_renderers.h"
#include "test_util.h"

namespace flotilla::bundler {
namespace {

using namespace std::chrono_literals;
using namespace flotilla::bundler::bundler_test;

//! A bundle directory whose fleet.yaml names the bundle `name` (so two GitRepos can claim one name).
std::map<std::string, std::string> namedBundle(const std::string& dir, const std::string& name,
                                               const std::string& object) {
  return {{dir + "/fleet.yaml", "name: " + name + "\n"}, {dir + "/cm.yaml", configMap(object)}};
}

class BundlerCascadeTest : public BundlerIntegrationTest {
 protected:
  //! What the poller publishes when GitRepo `gitrepo` is deleted (its spec removed from KV first).
  void deleteGitRepo(const std::string& gitrepo, uint64_t revision) {
    ASSERT_TRUE(hub_.gitrepos->remove(events::gitRepoKey(ws_, gitrepo)).ok());
    events::CommitEvent event;
    event.workspace = ws_;
    event.gitrepo = gitrepo;
    event.deleted = true;
    event.id = events::commitDeletedMsgId(ws_, gitrepo, revision);
    event.time = log::nowRfc3339();
    auto ack = hub_.js->publish(events::commitSubject(ws_, gitrepo), events::encode(event).dump(), event.id);
    ASSERT_TRUE(ack.ok()) << ack.error().describe();
  }

  std::optional<events::BundleClaim> claim(const std::string& bundle, const std::string& gitrepo) {
    auto entry = hub_.status->get(events::bundleClaimKey(ws_, bundle, gitrepo));
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto decoded = events::parseRecord<events::BundleClaim>(entry->value);
    EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
    return decoded.ok() ? std::optional<events::BundleClaim>(*decoded) : std::nullopt;
  }

  //! gitrepo_ renders bundle "shared" (apps/web) at kCommit1; GitRepo "other" names its svc/ bundle "shared" too at
  //! kCommit2, which is skipped and its claim recorded.
  void otherWaitsForShared() {
    putGitRepoNamed("other");
    startBundler();
    publishCommit(kCommit1, namedBundle("apps/web", "shared", "from-repo"), {"apps/*"});
    ASSERT_EQ(readEvents(1).size(), 1u);
    publishCommitFor("other", kCommit2, namedBundle("svc", "shared", "from-other"));
    ASSERT_TRUE(eventually([&] { return claim("shared", "other").has_value(); }));
  }

  uint64_t commitSequence(size_t nth) {
    auto info = hub_.js->streamInfo(service::kCommitsStream);
    EXPECT_TRUE(info.ok());
    return info.ok() ? info->first_sequence + nth - 1 : 0;
  }
};

// A deleted GitRepo: a deleted BundleEvent for each of its bundles (naming the bundle's last commit and the
// delete's commitSequence), records and render statuses gone, even though its spec is gone from KV.
TEST_F(BundlerCascadeTest, DeletedGitRepoDeletesEveryBundle) {
  auto first = renderFirstCommit();
  ASSERT_EQ(first.size(), 3u);
  for (const auto& event : first) {
    EXPECT_EQ(event.commit_sequence, static_cast<int64_t>(commitSequence(1))) << event.bundle;
  }
  ASSERT_NO_FATAL_FAILURE(deleteGitRepo(gitrepo_, 77));
  auto deleted = readEvents(3);
  ASSERT_EQ(deleted.size(), 3u);
  for (const auto& event : deleted) {
    EXPECT_TRUE(event.deleted) << event.bundle;
    EXPECT_EQ(event.gitrepo, gitrepo_);
    EXPECT_EQ(event.commit, kCommit1);
    EXPECT_EQ(event.commit_sequence, static_cast<int64_t>(commitSequence(2)));
  }
  EXPECT_TRUE(eventually([&] {
    return !record("repo-apps-web") && !record("repo-apps-api") && !record("repo-apps-db") &&
           !renderStatus("repo-apps-web") && !renderStatus("repo-apps-db");
  }));
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "deleted"}}) == 1; }));
  EXPECT_EQ(metrics_.value("bundles_rendered_total", {{"outcome", "deleted"}}), 3);
  expectNoMoreEvents();
}

// One commit that changes, adds and removes bundles: every live bundle's event comes before any deletion, and every
// event carries the commit's FLOTILLA_COMMITS sequence (so does the record).
TEST_F(BundlerCascadeTest, LiveBundlesComeBeforeDeletionsAndCarryTheCommitSequence) {
  ASSERT_EQ(renderFirstCommit().size(), 3u);
  auto files = threeBundles();
  files.erase("apps/db/db.json");
  files.erase("apps/api/fleet.yaml");
  files.erase("apps/api/svc.yaml");
  files["apps/cache/cm.yaml"] = configMap("cache");
  files["apps/web/cm.yaml"] = configMap("web-a", "v2");
  publishCommit(kCommit2, files, {"apps/*"});
  auto second = readEvents(4);
  ASSERT_EQ(second.size(), 4u);
  const auto sequence = static_cast<int64_t>(commitSequence(2));
  size_t first_deleted = second.size();
  for (size_t i = 0; i < second.size(); ++i) {
    EXPECT_EQ(second[i].commit_sequence, sequence) << second[i].bundle;
    if (second[i].deleted && first_deleted == second.size()) {
      first_deleted = i;
    }
    if (!second[i].deleted) {
      EXPECT_LT(i, first_deleted) << second[i].bundle << " published after a deletion";
    }
  }
  EXPECT_EQ(first_deleted, 2u);
  EXPECT_EQ(record("repo-apps-cache")->commit_sequence, static_cast<uint64_t>(sequence));
  EXPECT_EQ(record("repo-apps-web")->last_good->commit_sequence, sequence);
}

// A path dropped from the GitRepo's `paths` (the poller republishes the commit with the new paths): the bundles
// under it are deleted, the others stay as they were.
TEST_F(BundlerCascadeTest, APathDroppedFromPathsDeletesItsBundles) {
  putGitRepo({"apps/web", "apps/db"});
  startBundler();
  publishCommit(kCommit1, threeBundles(), {"apps/web", "apps/db"});
  auto first = readEvents(2);
  ASSERT_EQ(first.size(), 2u);
  putGitRepo({"apps/web"});
  publishCommit(kCommit2, threeBundles(), {"apps/web"});
  auto second = readEvents(2);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].bundle, "repo-apps-web");
  EXPECT_FALSE(second[0].deleted);
  EXPECT_EQ(second[0].manifest_id, find(first, "repo-apps-web")->manifest_id);
  EXPECT_EQ(second[1].bundle, "repo-apps-db");
  EXPECT_TRUE(second[1].deleted);
  EXPECT_TRUE(eventually([&] { return !record("repo-apps-db"); }));
  expectNoMoreEvents();
}

// GitRepo "other" has a bundle named like one of "repo"'s: it is skipped and its claim recorded. When "repo"'s
// commit removes that bundle, "other"'s bundle is rendered right after the deletion, from other's commit — no new
// commit of "other", no force-sync — and the claim is gone.
TEST_F(BundlerCascadeTest, ANameReleasedByACommitIsRenderedForTheGitRepoWaitingForIt) {
  ASSERT_NO_FATAL_FAILURE(otherWaitsForShared());
  EXPECT_EQ(claim("shared", "other")->owner, gitrepo_);
  EXPECT_EQ(claim("shared", "other")->path, "svc");
  expectNoMoreEvents();
  EXPECT_EQ(record("shared")->gitrepo, gitrepo_);

  std::map<std::string, std::string> without = {{"apps/api/cm.yaml", configMap("api")}};
  publishCommit(kCommit3, without, {"apps/*"});
  auto events = readEvents(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].bundle, "repo-apps-api");
  EXPECT_EQ(events[1].bundle, "shared");
  EXPECT_TRUE(events[1].deleted);
  EXPECT_EQ(events[1].gitrepo, gitrepo_);
  EXPECT_EQ(events[2].bundle, "shared");
  EXPECT_FALSE(events[2].deleted);
  EXPECT_EQ(events[2].gitrepo, "other");
  EXPECT_EQ(events[2].commit, kCommit2);
  EXPECT_EQ(events[2].commit_sequence, static_cast<int64_t>(commitSequence(2)));
  EXPECT_TRUE(eventually([&] { return record("shared") && record("shared")->gitrepo == "other"; }));
  // The claim goes and the metric moves just after the record is written (both after the event): awaited, not
  // read at once (failed once in a full run).
  EXPECT_TRUE(eventually([&] { return !claim("shared", "other").has_value(); }));
  EXPECT_TRUE(eventually([&] { return metrics_.value("claims_total", {{"result", "rendered"}}) == 1; }));
  expectNoMoreEvents();
}

// The same when the holder is a GitRepo that is deleted (the cascade frees the name); and a claim the waiting
// GitRepo no longer makes (its next commit drops the directory) is removed.
TEST_F(BundlerCascadeTest, ANameReleasedByACascadeIsRenderedAndStaleClaimsAreDropped) {
  ASSERT_NO_FATAL_FAILURE(otherWaitsForShared());

  ASSERT_NO_FATAL_FAILURE(deleteGitRepo(gitrepo_, 5));
  auto events = readEvents(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].deleted);
  EXPECT_EQ(events[1].gitrepo, "other");
  EXPECT_FALSE(events[1].deleted);
  EXPECT_TRUE(eventually([&] { return !claim("shared", "other").has_value(); }));

  // "other" now holds "shared"; a third GitRepo claims it, then drops the directory: its claim goes.
  putGitRepoNamed("third");
  publishCommitFor("third", kCommit1, namedBundle("x", "shared", "from-third"));
  ASSERT_TRUE(eventually([&] { return claim("shared", "third").has_value(); }));
  publishCommitFor("third", kCommit3, {{"y/cm.yaml", configMap("y")}}, {"y"});
  auto third = readEvents(1);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].bundle, "third-y");
  EXPECT_TRUE(eventually([&] { return !claim("shared", "third").has_value(); }));
  EXPECT_GE(metrics_.value("claims_total", {{"result", "dropped"}}), 1);
}

// Fault point bundler.commit.published: the binary dies (SIGKILL) after a commit's live bundles and before its
// deletions; the restarted bundler redoes the commit: JetStream drops the live events published again (same
// Msg-Ids), and the deletion follows.
TEST_F(BundlerCascadeTest, KilledBetweenLiveBundlesAndDeletionsConvergesOnRestart) {
  ASSERT_EQ(renderFirstCommit().size(), 3u);
  bundler_->stop();
  bundler_.reset();
  auto log_dir = makeTempDir("bundler-fault");
  ASSERT_TRUE(log_dir.ok());
  auto process = Process::start({.argv = {FLOTILLA_BUNDLER_BINARY, "--work-dir", work_dir_, "--nats-url", nats_->url(),
                                          "--http-addr", "127.0.0.1:0", "--log-level", "info"},
                                 .env = {{"FLOTILLA_FAULT_POINTS", std::string(kFaultCommitPublished)}},
                                 .output_file = *log_dir + "/bundler.log",
                                 .kill_with_parent = true});
  ASSERT_TRUE(process.ok()) << process.error().describe();
  auto files = threeBundles();
  files.erase("apps/db/db.json");
  files["apps/cache/cm.yaml"] = configMap("cache");
  publishCommit(kCommit2, files, {"apps/*"});
  auto code = process->wait(30s);
  ASSERT_TRUE(code.has_value()) << readFile(*log_dir + "/bundler.log").valueOr("");
  EXPECT_EQ(*code, 128 + SIGKILL);
  auto live = readEvents(3);
  ASSERT_EQ(live.size(), 3u);
  for (const auto& event : live) {
    EXPECT_FALSE(event.deleted) << event.bundle;
  }
  expectNoMoreEvents();
  EXPECT_TRUE(record("repo-apps-db").has_value()) << "not deleted before the kill";

  startBundler();
  auto rest = readEvents(1, 90s);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].bundle, "repo-apps-db");
  EXPECT_TRUE(rest[0].deleted);
  EXPECT_TRUE(eventually([&] { return !record("repo-apps-db"); }));
  expectNoMoreEvents();
  EXPECT_GE(metrics_.value("events_published_total", {{"result", "duplicate"}}), 3);
  removeAll(*log_dir);
}

// One commit removes a Helm bundle and adds another whose release name follows the bundle name: the new bundle's
// render status notes that objects named from .Release.Name are created anew (and how to keep them).
TEST_F(BundlerCascadeTest, AHelmRenameWithoutAPinnedReleaseNameIsNoted) {
  REQUIRE_TOOL(helm, "helm");
  render::RendererBinaries binaries;
  binaries.helm = helm;
  renderers_ = render::makeRenderers(binaries);
  auto chart = [](const std::string& dir) {
    return std::map<std::string, std::string>{
        {dir + "/fleet.yaml", "defaultNamespace: web\n"},
        {dir + "/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"},
        {dir + "/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"}};
  };
  startBundler();
  publishCommit(kCommit1, chart("one"));
  auto first = readEvents(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(record("repo-one")->release_name, "repo-one");
  publishCommit(kCommit2, chart("two"));
  auto second = readEvents(2);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].bundle, "repo-two");
  EXPECT_TRUE(second[1].deleted);
  auto status = renderStatus("repo-two");
  ASSERT_TRUE(status.has_value());
  ASSERT_EQ(status->notes.size(), 1u);
  EXPECT_NE(status->notes[0].find("set helm.releaseName: repo-one"), std::string::npos) << status->notes[0];
  EXPECT_NE(status->notes[0].find(".Release.Name"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::bundler
