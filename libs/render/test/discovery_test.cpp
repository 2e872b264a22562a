#include "flotilla/render/discovery.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::configMap;
using testing::TempTree;

std::vector<std::string> pathsOf(const Result<std::vector<BundleDir>>& bundles) {
  std::vector<std::string> out;
  if (!bundles.ok()) {
    ADD_FAILURE() << bundles.error().describe();
    return out;
  }
  for (const auto& b : *bundles) {
    out.push_back(b.path);
  }
  return out;
}

// A repository shaped like fleet-examples: nested fleet.yaml dirs, a plain dir, and non-manifest files.
class DiscoveryTest : public ::testing::Test {
 protected:
  TempTree tree{{"README.md", "# repo"},
                {"apps/web/fleet.yaml", "defaultNamespace: web\n"},
                {"apps/web/deploy.yaml", configMap("web")},
                {"apps/web/nested/fleet.yaml", "{}\n"},
                {"apps/web/nested/cm.yaml", configMap("nested")},
                {"apps/api/svc.yaml", configMap("api")},
                {"apps/api/more/extra.json", R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}})"},
                {".github/workflows/ci.yaml", "on: push\n"}};
};

TEST_F(DiscoveryTest, EmptyPathsScanTheWholeRepository) {
  // The root has loose manifests (apps/api has no fleet.yaml), so it is a bundle too, like Fleet's apply.
  EXPECT_EQ(pathsOf(discoverBundles(tree.root(), {})), (std::vector<std::string>{".", "apps/web", "apps/web/nested"}));
}

TEST_F(DiscoveryTest, APathWithFleetYamlDirsYieldsEachOfThem) {
  EXPECT_EQ(pathsOf(discoverBundles(tree.root(), {"apps/web"})),
            (std::vector<std::string>{"apps/web", "apps/web/nested"}));
}

TEST_F(DiscoveryTest, APathWithoutAnyFleetYamlIsOneBundle) {
  EXPECT_EQ(pathsOf(discoverBundles(tree.root(), {"apps/api"})), (std::vector<std::string>{"apps/api"}));
}

TEST_F(DiscoveryTest, GlobPathsMatchDirectories) {
  EXPECT_EQ(pathsOf(discoverBundles(tree.root(), {"apps/*"})),
            (std::vector<std::string>{"apps/api", "apps/web", "apps/web/nested"}));
}

TEST_F(DiscoveryTest, PathsAreNormalisedAndDeduplicated) {
  EXPECT_EQ(pathsOf(discoverBundles(tree.root(), {"/apps/api/", "./apps/api", "apps/api"})),
            (std::vector<std::string>{"apps/api"}));
}

TEST_F(DiscoveryTest, MissingPathsYieldNothing) {
  EXPECT_TRUE(pathsOf(discoverBundles(tree.root(), {"nope", "apps/*/nope"})).empty());
}

TEST_F(DiscoveryTest, FleetYamlIsRecorded) {
  auto bundles = discoverBundles(tree.root(), {"apps"});
  ASSERT_TRUE(bundles.ok());
  ASSERT_EQ(bundles->size(), 3u);
  EXPECT_EQ((*bundles)[0], (BundleDir{"apps", ""}));
  EXPECT_EQ((*bundles)[1], (BundleDir{"apps/web", "apps/web/fleet.yaml"}));
}

TEST(Discovery, RootWithOnlyNestedBundlesIsNotABundle) {
  TempTree tree{{"a/fleet.yaml", "{}"}, {"a/x.yaml", configMap("x")}, {"docs/readme.md", "hi"}};
  EXPECT_EQ(pathsOf(discoverBundles(tree.root(), {})), (std::vector<std::string>{"a"}));
}

TEST(Discovery, FleetYmlCountsAsFleetYaml) {
  TempTree tree{{"a/fleet.yml", "{}"}, {"a/x.yaml", configMap("x")}};
  auto bundles = discoverBundles(tree.root(), {});
  ASSERT_TRUE(bundles.ok());
  ASSERT_EQ(bundles->size(), 1u);
  EXPECT_EQ((*bundles)[0].fleet_yaml, "a/fleet.yml");
}

TEST(Discovery, HiddenDirectoriesAreNotBundles) {
  TempTree tree{{".hidden/fleet.yaml", "{}"}, {".hidden/x.yaml", configMap("x")}};
  EXPECT_TRUE(pathsOf(discoverBundles(tree.root(), {})).empty());
}

TEST(Discovery, JoinAndCleanRelativePaths) {
  struct Case {
    const char* base;
    const char* path;
    const char* joined;
  };
  for (const Case& c : {Case{".", "a", "a"}, Case{"a/b", "c", "a/b/c"}, Case{"a", "./x/../y", "a/y"},
                        Case{"a", ".", "a"}, Case{".", ".", "."}}) {
    EXPECT_EQ(joinRelative(c.base, c.path), c.joined) << c.base << " + " << c.path;
  }
  EXPECT_EQ(cleanRelative("../a"), "../a");
}

TEST(Discovery, NormalizePathPattern) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/", ""}, {".", ""}, {"./a/b/", "a/b"}, {" /./a ", "a"}};
  for (const auto& [pattern, normalized] : cases) {
    EXPECT_EQ(normalizePathPattern(pattern), normalized) << pattern;
  }
}

// Which files of a bundle are its manifests.
TEST(CollectManifestFiles, LeavesOutFleetYamlNestedBundlesChartsOverlaysHiddenAndOtherFiles) {
  TempTree tree{{"b/fleet.yaml", "{}"},
                {"b/a.yaml", configMap("a")},
                {"b/b.yml", configMap("b")},
                {"b/c.json", "{}"},
                {"b/notes.txt", "x"},
                {"b/.hidden.yaml", configMap("h")},
                {"b/.dir/x.yaml", configMap("hd")},
                {"b/sub/d.yaml", configMap("d")},
                {"b/nested/fleet.yaml", "{}"},
                {"b/nested/e.yaml", configMap("e")},
                {"b/chart/Chart.yaml", "name: c"},
                {"b/chart/values.yaml", "x: 1"},
                {"b/overlays/prod/a.yaml", configMap("a2")},
                {"b/sub/overlays/keep.yaml", configMap("k")}};
  auto files = collectManifestFiles(tree.root(), "b");
  ASSERT_TRUE(files.ok()) << files.error().describe();
  EXPECT_EQ(*files,
            (std::vector<std::string>{"b/a.yaml", "b/b.yml", "b/c.json", "b/sub/d.yaml", "b/sub/overlays/keep.yaml"}));
}

TEST(CollectManifestFiles, RootBundleUsesRelativePaths) {
  TempTree tree{{"a.yaml", configMap("a")}, {"x/b.yaml", configMap("b")}};
  auto files = collectManifestFiles(tree.root(), ".");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, (std::vector<std::string>{"a.yaml", "x/b.yaml"}));
}

TEST(CollectManifestFiles, FleetIgnoreExcludesFilesAndDirectoriesBelowIt) {
  TempTree tree{{"b/.fleetignore", "# comment\n\n*.secret.yaml\nskipped/*\nexact.yaml   \n"},
                {"b/keep.yaml", configMap("k")},
                {"b/x.secret.yaml", configMap("s")},
                {"b/exact.yaml", configMap("e")},
                {"b/skipped/y.yaml", configMap("y")},
                {"b/sub/z.secret.yaml", configMap("z")},
                {"b/sub/exact.yaml", configMap("e2")},
                {"b/sub/ok.yaml", configMap("ok")},
                {"b/other/.fleetignore", "ok.yaml\n"},
                {"b/other/ok.yaml", configMap("o")}};
  auto files = collectManifestFiles(tree.root(), "b");
  ASSERT_TRUE(files.ok()) << files.error().describe();
  EXPECT_EQ(*files, (std::vector<std::string>{"b/keep.yaml", "b/sub/ok.yaml"}));
}

TEST(CollectManifestFiles, SiblingFleetIgnoreDoesNotLeak) {
  TempTree tree{
      {"b/one/.fleetignore", "a.yaml\n"}, {"b/one/a.yaml", configMap("a")}, {"b/two/a.yaml", configMap("a2")}};
  auto files = collectManifestFiles(tree.root(), "b");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, (std::vector<std::string>{"b/two/a.yaml"}));
}

TEST(CollectManifestFiles, ExtraExcludesDropValuesFiles) {
  TempTree tree{{"b/a.yaml", configMap("a")}, {"b/values/prod.yaml", "replicas: 3"}};
  auto files = collectManifestFiles(tree.root(), "b", FileSelection{.extra_excludes = {"values/prod.yaml"}});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, (std::vector<std::string>{"b/a.yaml"}));
}

TEST(CollectManifestFiles, SymlinkInsideTheCheckoutIsRead) {
  TempTree tree{{"shared/cm.yaml", configMap("shared")}};
  tree.symlink("b/link.yaml", "../shared/cm.yaml");
  auto files = collectManifestFiles(tree.root(), "b");
  ASSERT_TRUE(files.ok()) << files.error().describe();
  EXPECT_EQ(*files, (std::vector<std::string>{"b/link.yaml"}));
}

TEST(CollectManifestFiles, SymlinkOutOfTheCheckoutIsAnError) {
  TempTree tree{{"b/a.yaml", configMap("a")}};
  tree.symlink("b/passwd.yaml", "/etc/passwd");
  auto files = collectManifestFiles(tree.root(), "b");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(files.error().where, "b/passwd.yaml");
  EXPECT_NE(files.error().message.find("outside"), std::string::npos);
}

TEST(FleetIgnore, Patterns) {
  std::vector<std::string> patterns = {"*.tmp", "build/*", "exact"};
  EXPECT_TRUE(fleetIgnoreMatches(patterns, "x.tmp", false));
  EXPECT_TRUE(fleetIgnoreMatches(patterns, "build", true));
  EXPECT_FALSE(fleetIgnoreMatches(patterns, "build", false));
  EXPECT_TRUE(fleetIgnoreMatches(patterns, "exact", true));
  EXPECT_FALSE(fleetIgnoreMatches(patterns, "other", false));
  // The .gitignore form "dir/" (and "tmp-*/") matches directories only.
  std::vector<std::string> dir_patterns = {"scratch/", "tmp-*/"};
  EXPECT_TRUE(fleetIgnoreMatches(dir_patterns, "scratch", true));
  EXPECT_FALSE(fleetIgnoreMatches(dir_patterns, "scratch", false));
  EXPECT_TRUE(fleetIgnoreMatches(dir_patterns, "tmp-1", true));
}

}  // namespace
}  // namespace flotilla::render
