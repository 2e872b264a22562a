// Mirror against the real git server harness: fetch (full, incremental, pruning), resolving refs, reading
// trees and files, tree ids for change detection, and exporting a tree to disk.
#include "flotilla/git/mirror.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/core/util.h"
#include "flotilla/harness/git_server.h"

namespace flotilla::git {
namespace {

namespace fs = std::filesystem;
using harness::CommitRequest;
using harness::GitServer;

class MirrorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = GitServer::start({.git_daemon = false});
    ASSERT_TRUE(started.ok()) << started.error().describe();
    server_ = std::move(*started).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    auto dir = makeTempDir("flotilla-mirror-test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    // Each test gets its own repository, named after the test.
    repo_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(server_->createRepo(repo_).ok());
  }
  void TearDown() override { removeAll(dir_); }

  Mirror openMirror(const std::string& url) {
    auto mirror = Mirror::open(dir_ + "/mirror", url);
    EXPECT_TRUE(mirror.ok()) << mirror.error().describe();
    return std::move(*mirror);
  }
  FetchResult fetchOk(Mirror& mirror, const Credentials& creds = {}, const FetchOptions& options = {}) {
    auto fetched = mirror.fetch(creds, options);
    EXPECT_TRUE(fetched.ok()) << fetched.error().describe() << "\n" << server_->logTail();
    return fetched.ok() ? *fetched : FetchResult{};
  }

  static GitServer* server_;
  std::string dir_;
  std::string repo_;
};
GitServer* MirrorTest::server_ = nullptr;

// The first fetch downloads everything; after one more commit the next fetch receives only the new objects.
TEST_F(MirrorTest, IncrementalFetchReceivesOnlyNewObjects) {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 40; ++i) {
    files["manifests/cm-" + std::to_string(i) + ".yaml"] = "kind: ConfigMap\nindex: " + std::to_string(i) + "\n";
  }
  auto first = server_->commitFiles(repo_, "main", files, "forty files");
  ASSERT_TRUE(first.ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  FetchResult initial = fetchOk(mirror);
  EXPECT_GE(initial.stats.received_objects, 42u);  // 40 blobs, 2 trees, 1 commit
  EXPECT_GT(initial.stats.received_bytes, 0u);
  EXPECT_EQ(initial.heads.default_branch, "main");
  EXPECT_EQ(mirror.resolve("main").valueOr(""), *first);

  auto second = server_->commitFiles(repo_, "main", {{"manifests/cm-7.yaml", "kind: ConfigMap\nindex: 700\n"}}, "one");
  ASSERT_TRUE(second.ok());
  FetchResult incremental = fetchOk(mirror);
  EXPECT_GT(incremental.stats.received_objects, 0u);
  EXPECT_LE(incremental.stats.received_objects, 5u) << "commit, 2 trees, 1 blob expected";
  EXPECT_EQ(mirror.resolve("main").valueOr(""), *second);
  EXPECT_EQ(incremental.heads.branch("main").value_or(""), *second);

  FetchResult idle = fetchOk(mirror);
  EXPECT_EQ(idle.stats.received_objects, 0u);
}

// Branches, tags (annotated ones peeled), full and short shas, HEAD and full ref names all resolve to commits.
TEST_F(MirrorTest, ResolvesBranchesTagsAndShas) {
  auto first = server_->commitFiles(repo_, "main", {{"a", "1"}}, "one");
  auto second = server_->commitFiles(repo_, "main", {{"a", "2"}}, "two");
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(server_->createTag(repo_, "v1.0.0", *first, "release").ok());
  ASSERT_TRUE(server_->createTag(repo_, "light", *second).ok());
  ASSERT_TRUE(server_->createBranch(repo_, "release/1.x", *first).ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);

  EXPECT_EQ(mirror.resolve("main").valueOr(""), *second);
  EXPECT_EQ(mirror.resolve("refs/heads/main").valueOr(""), *second);
  EXPECT_EQ(mirror.resolve("HEAD").valueOr(""), *second);
  EXPECT_EQ(mirror.resolve("release/1.x").valueOr(""), *first);
  EXPECT_EQ(mirror.resolve("v1.0.0").valueOr(""), *first) << "annotated tag peels to its commit";
  EXPECT_EQ(mirror.resolve("refs/tags/v1.0.0").valueOr(""), *first);
  EXPECT_EQ(mirror.resolve("light").valueOr(""), *second);
  EXPECT_EQ(mirror.resolve(*first).valueOr(""), *first);
  EXPECT_EQ(mirror.resolve(first->substr(0, 10)).valueOr(""), *first);

  EXPECT_EQ(mirror.resolve("missing").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(mirror.resolve(std::string(40, 'a')).error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(mirror.resolve("main..other").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.resolve("").error().kind, ErrorKind::kInvalid);

  // The tree of a commit is not a commit.
  auto tree = mirror.treeId("main");
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(mirror.resolve(*tree).error().kind, ErrorKind::kInvalid);

  auto refs = mirror.refs();
  ASSERT_TRUE(refs.ok());
  std::vector<std::string> names;
  for (const auto& ref : *refs) {
    names.push_back(ref.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"refs/heads/main", "refs/heads/release/1.x", "refs/tags/light",
                                             "refs/tags/v1.0.0"}));
}

// Files and listings are read at a given commit, not at the branch tip.
TEST_F(MirrorTest, ReadsFilesAndListsTreesAtACommit) {
  auto first = server_->commit(repo_, CommitRequest{.files = {{"apps/web/deploy.yaml", "replicas: 1\n"},
                                                              {"apps/web/run.sh", "#!/bin/sh\n"},
                                                              {"apps/db/fleet.yaml", "namespace: db\n"},
                                                              {"README.md", "docs\n"}},
                                                    .executable = {"apps/web/run.sh"},
                                                    .symlinks = {{"apps/web/shared.yaml", "../db/fleet.yaml"}},
                                                    .message = "first"});
  ASSERT_TRUE(first.ok()) << first.error().describe();
  auto second = server_->commitFiles(repo_, "main", {{"apps/web/deploy.yaml", "replicas: 3\n"}}, "scale");
  ASSERT_TRUE(second.ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);

  EXPECT_EQ(mirror.readFile(*first, "apps/web/deploy.yaml").valueOr(""), "replicas: 1\n");
  EXPECT_EQ(mirror.readFile("main", "apps/web/deploy.yaml").valueOr(""), "replicas: 3\n");
  EXPECT_EQ(mirror.readFile("main", "./apps//web/deploy.yaml").valueOr(""), "replicas: 3\n");
  EXPECT_EQ(mirror.readFile("main", "apps/web/shared.yaml").valueOr(""), "namespace: db\n")
      << "symlinks inside the repository are followed";

  EXPECT_EQ(mirror.readFile("main", "apps/web/missing.yaml").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(mirror.readFile("main", "README.md/x").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(mirror.readFile("main", "apps/web").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.readFile("main", "../etc/passwd").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.readFile("main", "/etc/passwd").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.readFile("main", "apps/web/deploy.yaml", 4).error().kind, ErrorKind::kInvalid)
      << "files over the size limit are refused";

  auto listed = mirror.listFiles(*first, "apps/web");
  ASSERT_TRUE(listed.ok()) << listed.error().describe();
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].path, "apps/web/deploy.yaml");
  EXPECT_EQ((*listed)[0].kind, EntryKind::kFile);
  EXPECT_EQ((*listed)[1].path, "apps/web/run.sh");
  EXPECT_EQ((*listed)[1].kind, EntryKind::kExecutable);
  EXPECT_EQ((*listed)[2].path, "apps/web/shared.yaml");
  EXPECT_EQ((*listed)[2].kind, EntryKind::kSymlink);
  auto all = mirror.listFiles("main");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 5u);
  EXPECT_EQ(mirror.listFiles("main", "nope").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(mirror.listFiles("main", "README.md").error().kind, ErrorKind::kInvalid);
}

// Symlinks that leave the repository or loop are refused when read through.
TEST_F(MirrorTest, SymlinksThatEscapeOrLoopAreRefused) {
  ASSERT_TRUE(server_
                  ->commit(repo_, CommitRequest{.files = {{"ok.yaml", "x: 1\n"}},
                                                .symlinks = {{"escape", "../../etc/passwd"},
                                                             {"absolute", "/etc/passwd"},
                                                             {"loop-a", "loop-b"},
                                                             {"loop-b", "loop-a"},
                                                             {"dirlink", "sub"},
                                                             {"sub/file.yaml", "../ok.yaml"}},
                                                .message = "links"})
                  .ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);
  EXPECT_EQ(mirror.readFile("main", "escape").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.readFile("main", "absolute").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.readFile("main", "loop-a").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(mirror.readFile("main", "dirlink/file.yaml").valueOr(""), "x: 1\n");
}

// A commit that only touches apps/b leaves the tree id of apps/a unchanged: that is how the poller knows
// which paths a commit affected.
TEST_F(MirrorTest, TreeIdOfAPathIsStableWhenOnlyAnotherPathChanges) {
  auto first = server_->commitFiles(repo_, "main", {{"apps/a/x.yaml", "a\n"}, {"apps/b/y.yaml", "b\n"}}, "one");
  auto second = server_->commitFiles(repo_, "main", {{"apps/b/y.yaml", "b2\n"}}, "touch b");
  ASSERT_TRUE(first.ok() && second.ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);
  auto a1 = mirror.treeId(*first, "apps/a");
  auto a2 = mirror.treeId(*second, "apps/a");
  auto b1 = mirror.treeId(*first, "apps/b");
  auto b2 = mirror.treeId(*second, "apps/b");
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok() && b2.ok());
  EXPECT_EQ(*a1, *a2);
  EXPECT_NE(*b1, *b2);
  EXPECT_NE(mirror.treeId(*first).valueOr(""), mirror.treeId(*second).valueOr(""));
  EXPECT_EQ(mirror.treeId(*second, "apps/a/").valueOr(""), *a1);
  EXPECT_EQ(mirror.treeId(*second, "apps/none").error().kind, ErrorKind::kNotFound);
}

// exportTree writes a subdirectory's files with their modes and its symlinks as symlinks.
TEST_F(MirrorTest, ExportTreeWritesFilesModesAndSymlinks) {
  ASSERT_TRUE(server_
                  ->commit(repo_, CommitRequest{.files = {{"deploy/app/a.yaml", "a: 1\n"},
                                                          {"deploy/app/nested/b.yaml", "b: 2\n"},
                                                          {"deploy/app/hook.sh", "#!/bin/sh\necho hi\n"},
                                                          {"other/c.yaml", "c: 3\n"}},
                                                .executable = {"deploy/app/hook.sh"},
                                                .symlinks = {{"deploy/app/link.yaml", "a.yaml"},
                                                             {"deploy/app/escape", "../../../etc/passwd"}},
                                                .message = "export me"})
                  .ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);
  const std::string dest = dir_ + "/out";
  auto stats = mirror.exportTree("main", "deploy/app", dest);
  ASSERT_TRUE(stats.ok()) << stats.error().describe();
  EXPECT_EQ(stats->files, 3u);
  EXPECT_EQ(stats->symlinks, 2u);
  EXPECT_EQ(stats->directories, 1u);
  EXPECT_EQ(readFile(dest + "/a.yaml").valueOr(""), "a: 1\n");
  EXPECT_EQ(readFile(dest + "/nested/b.yaml").valueOr(""), "b: 2\n");
  EXPECT_FALSE(fs::exists(dest + "/c.yaml"));
  EXPECT_FALSE(fs::exists(dest + "/other"));

  struct stat info {};
  ASSERT_EQ(::stat((dest + "/hook.sh").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat((dest + "/a.yaml").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);

  EXPECT_TRUE(fs::is_symlink(dest + "/link.yaml"));
  EXPECT_EQ(fs::read_symlink(dest + "/link.yaml").string(), "a.yaml");
  EXPECT_TRUE(fs::is_symlink(dest + "/escape")) << "written as a link, not followed, for the caller to judge";
  EXPECT_EQ(fs::read_symlink(dest + "/escape").string(), "../../../etc/passwd");

  // A destination that is not empty is refused; so is a tree over the size limit.
  EXPECT_EQ(mirror.exportTree("main", "deploy/app", dest).error().kind, ErrorKind::kInvalid);
  auto limited = mirror.exportTree("main", "", dir_ + "/small", ExportOptions{.max_total_bytes = 10});
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.error().kind, ErrorKind::kInvalid);
  auto whole = mirror.exportTree("main", "", dir_ + "/whole");
  ASSERT_TRUE(whole.ok()) << whole.error().describe();
  EXPECT_EQ(readFile(dir_ + "/whole/other/c.yaml").valueOr(""), "c: 3\n");
}

// Branches and tags deleted on the server disappear from the mirror on the next fetch.
TEST_F(MirrorTest, FetchPrunesDeletedBranchesAndTags) {
  auto first = server_->commitFiles(repo_, "main", {{"a", "1"}}, "one");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(server_->createBranch(repo_, "topic", *first).ok());
  ASSERT_TRUE(server_->createTag(repo_, "old", *first, "old tag").ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);
  ASSERT_TRUE(mirror.resolve("topic").ok());
  ASSERT_TRUE(mirror.resolve("old").ok());

  ASSERT_TRUE(server_->deleteBranch(repo_, "topic").ok());
  ASSERT_TRUE(server_->deleteTag(repo_, "old").ok());
  fetchOk(mirror);
  EXPECT_EQ(mirror.resolve("topic").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(mirror.resolve("old").error().kind, ErrorKind::kNotFound);
  EXPECT_TRUE(mirror.resolve("main").ok());
}

// Explicit refspecs fetch only what they name.
TEST_F(MirrorTest, FetchWithExplicitRefspecs) {
  auto first = server_->commitFiles(repo_, "main", {{"a", "1"}}, "one");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(server_->createBranch(repo_, "other", *first).ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror, {}, FetchOptions{.refspecs = {"+refs/heads/main:refs/heads/main"}});
  EXPECT_TRUE(mirror.resolve("main").ok());
  EXPECT_EQ(mirror.resolve("other").error().kind, ErrorKind::kNotFound);
}

// Commit metadata for status and events.
TEST_F(MirrorTest, CommitInfoHasMessageAuthorAndParents) {
  auto first = server_->commitFiles(repo_, "main", {{"a", "1"}}, "first commit");
  auto second = server_->commitFiles(repo_, "main", {{"a", "2"}}, "Scale web\n\nbecause traffic");
  ASSERT_TRUE(first.ok() && second.ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  fetchOk(mirror);
  auto info = mirror.commitInfo("main");
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->oid, *second);
  EXPECT_EQ(info->summary, "Scale web");
  EXPECT_NE(info->message.find("because traffic"), std::string::npos);
  EXPECT_EQ(info->author_name, "Flotilla Test");
  EXPECT_EQ(info->author_email, "test@flotilla.invalid");
  EXPECT_GT(info->commit_time, 1700000000);
  EXPECT_EQ(info->parents, std::vector<std::string>{*first});
}

// Mirrors work over HTTPS with a private CA and over SSH, with credentials given per fetch.
TEST_F(MirrorTest, FetchOverHttpsAndSsh) {
  auto first = server_->commitFiles(repo_, "main", {{"a", "1"}}, "one");
  ASSERT_TRUE(first.ok());
  auto https = Mirror::open(dir_ + "/https", server_->httpsUrl(repo_));
  ASSERT_TRUE(https.ok());
  auto fetched = https->fetch(Credentials{.ca_bundle = server_->caPem()});
  ASSERT_TRUE(fetched.ok()) << fetched.error().describe();
  EXPECT_EQ(https->resolve("main").valueOr(""), *first);
  auto rejected = https->fetch(Credentials{});
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().kind, ErrorKind::kPermanent);

  auto ssh = Mirror::open(dir_ + "/ssh", server_->sshUrl(repo_));
  ASSERT_TRUE(ssh.ok());
  auto over_ssh =
      ssh->fetch(Credentials{.ssh_private_key = server_->sshPrivateKey(), .known_hosts = server_->knownHostsLine()});
  ASSERT_TRUE(over_ssh.ok()) << over_ssh.error().describe() << "\n" << server_->logTail();
  EXPECT_EQ(ssh->resolve("main").valueOr(""), *first);
}

// Reopening a mirror with another URL repoints it; refs from the old URL are pruned by the next fetch.
TEST_F(MirrorTest, OpenRepointsAMirrorWhoseUrlChanged) {
  ASSERT_TRUE(server_->commitFiles(repo_, "main", {{"a", "1"}}, "one").ok());
  ASSERT_TRUE(server_->createBranch(repo_, "only-in-old", "main").ok());
  ASSERT_TRUE(server_->createRepo(repo_ + "-new").ok());
  auto other = server_->commitFiles(repo_ + "-new", "main", {{"b", "2"}}, "other");
  ASSERT_TRUE(other.ok());
  {
    Mirror mirror = openMirror(server_->httpUrl(repo_));
    fetchOk(mirror);
  }
  Mirror mirror = openMirror(server_->httpUrl(repo_ + "-new"));
  EXPECT_EQ(mirror.url(), server_->httpUrl(repo_ + "-new"));
  fetchOk(mirror);
  EXPECT_EQ(mirror.resolve("main").valueOr(""), *other);
  EXPECT_EQ(mirror.resolve("only-in-old").error().kind, ErrorKind::kNotFound);
}

// A directory that holds something else than a git repository is not silently overwritten.
TEST_F(MirrorTest, OpenRefusesANonRepositoryDirectory) {
  fs::create_directories(dir_ + "/junk");
  ASSERT_TRUE(writeFile(dir_ + "/junk/file.txt", "x").ok());
  auto mirror = Mirror::open(dir_ + "/junk", server_->httpUrl(repo_));
  ASSERT_FALSE(mirror.ok());
  EXPECT_EQ(mirror.error().kind, ErrorKind::kInternal) << mirror.error().describe();
}

// A fetch that runs past its deadline stops with a transient error (checked in libgit2's progress callbacks).
TEST_F(MirrorTest, FetchPastItsDeadlineIsTransient) {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 200; ++i) {
    files["f" + std::to_string(i)] = randomHex(512);
  }
  ASSERT_TRUE(server_->commitFiles(repo_, "main", files, "bulk").ok());
  Mirror mirror = openMirror(server_->httpUrl(repo_));
  auto fetched = mirror.fetch({}, FetchOptions{.timeout = std::chrono::milliseconds(1)});
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.error().kind, ErrorKind::kTransient) << fetched.error().describe();
  EXPECT_NE(fetched.error().message.find("timed out"), std::string::npos) << fetched.error().describe();
  // The mirror is still usable afterwards.
  fetchOk(mirror);
  EXPECT_TRUE(mirror.resolve("main").ok());
}

}  // namespace
}  // namespace flotilla::git
