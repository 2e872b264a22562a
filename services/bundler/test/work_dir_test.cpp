// The bundler's work dir: checkouts left by a killed process are removed, released checkouts disappear.
#include <filesystem>

#include <gtest/gtest.h>

#include "flotilla/bundler/commit_handler.h"
#include "test_util.h"

namespace flotilla::bundler {
namespace {

TEST(WorkDir, PrepareRemovesLeftoverCheckoutsAndChecksWritability) {
  render::testing::TempTree tree{{"work/commit-abc123/src/a.yaml", "x"}, {"work/keep.txt", "x"}};
  ASSERT_TRUE(prepareWorkDir(tree.root() + "/work").ok());
  EXPECT_FALSE(std::filesystem::exists(tree.root() + "/work/commit-abc123"));
  EXPECT_TRUE(std::filesystem::exists(tree.root() + "/work/keep.txt"));
  ASSERT_TRUE(prepareWorkDir(tree.root() + "/new/nested").ok());
  tree.write("file", "not a dir");
  auto status = prepareWorkDir(tree.root() + "/file/sub");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().kind, ErrorKind::kPermanent);
}

TEST(WorkDir, CheckoutsAreRemovedWhenReleased) {
  render::testing::TempTree tree;
  source::Archive archive;
  archive.commit = std::string(40, 'c');
  archive.files.push_back(source::File{"a/b.yaml", "100644", "x: 1\n"});
  std::string root;
  {
    auto checkout = extractCheckout(archive, tree.root());
    ASSERT_TRUE(checkout.ok()) << checkout.error().describe();
    root = checkout->root();
    EXPECT_TRUE(std::filesystem::exists(root + "/src/a/b.yaml"));
  }
  EXPECT_FALSE(std::filesystem::exists(root));
}

}  // namespace
}  // namespace flotilla::bundler
