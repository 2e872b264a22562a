#include "flotilla/source/archive.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "flotilla/core/util.h"

namespace flotilla::source {
namespace {

TEST(ArchiveTest, EncodeIsCanonicalAndRoundTrips) {
  Archive a;
  a.commit = "abc";
  a.paths = {"apps"};
  a.files = {{"apps/b.yaml", "100644", "b: 1\n"}, {"apps/a.yaml", "100755", std::string("\0bin", 4)}};
  a.symlinks = {{"apps/link", "../x"}};
  Archive b = a;
  std::swap(b.files[0], b.files[1]);
  EXPECT_EQ(encode(a), encode(b));
  EXPECT_EQ(objectName(encode(a)), objectName(encode(b)));
  auto back = decode(encode(a));
  ASSERT_TRUE(back.ok()) << back.error().describe();
  ASSERT_EQ(back->files.size(), 2u);
  EXPECT_EQ(back->files[0].path, "apps/a.yaml");
  EXPECT_EQ(back->files[0].content, std::string("\0bin", 4));
  EXPECT_EQ(back->files[0].mode, "100755");
  EXPECT_EQ(back->symlinks[0].target, "../x");
}

TEST(ArchiveTest, DecodeRejectsUnsafePaths) {
  for (const char* path : {"../etc/passwd", "/abs", "a/../../b", "a//b", "./a"}) {
    std::string json =
        R"({"apiVersion":"sources.flotilla.io/v1","files":[{"path":")" + std::string(path) + R"(","content":""}]})";
    auto decoded = decode(json);
    ASSERT_FALSE(decoded.ok()) << path;
    EXPECT_EQ(decoded.error().kind, ErrorKind::kInvalid);
    EXPECT_NE(decoded.error().message.find("unsafe path"), std::string::npos);
  }
}

// Found by fuzz/archive_fuzzer: two entries for one path made the encoding depend on their order (the archive's
// name is the hash of its encoding), and any mode string was accepted while extract wrote it as 0644.
TEST(ArchiveTest, DecodeRejectsDuplicatePathsAndUnknownModes) {
  const std::string head = R"({"apiVersion":"sources.flotilla.io/v1","files":[)";
  auto twice = decode(head + R"({"path":"a.yaml","content":"eA=="},{"path":"a.yaml","content":"eQ=="}]})");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().message, "source archive: a.yaml: more than one entry for this path");
  auto file_and_link = decode(head + R"({"path":"a","content":""}],"symlinks":[{"path":"a","target":"b"}]})");
  ASSERT_FALSE(file_and_link.ok());
  EXPECT_EQ(file_and_link.error().message, "source archive: a: more than one entry for this path");
  auto mode = decode(head + R"({"path":"a","mode":"10ap0644","content":""}]})");
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.error().message, "source archive: a: mode \"10ap0644\" is neither 100644 nor 100755");
  EXPECT_TRUE(decode(head + R"({"path":"a","content":""},{"path":"b","mode":"100755","content":""}]})").ok());
}

TEST(ArchiveTest, ExtractAndResolveInsideRefuseEscapingSymlinks) {
  auto dir = makeTempDir("archive-test");
  ASSERT_TRUE(dir.ok());
  Archive a;
  a.files = {{"app/values.yaml", "100644", "x: 1\n"}};
  a.symlinks = {{"app/inside", "values.yaml"}, {"app/escape", "../../../etc/passwd"}};
  ASSERT_TRUE(extract(a, *dir).ok());
  EXPECT_EQ(*readFile(*dir + "/app/values.yaml"), "x: 1\n");
  EXPECT_TRUE(resolveInside(*dir, "app/inside").ok());
  auto escape = resolveInside(*dir, "app/escape");
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.error().message.find("outside the repository"), std::string::npos);
  EXPECT_FALSE(resolveInside(*dir, "../x").ok());
  EXPECT_FALSE(resolveInside(*dir, "/etc/passwd").ok());
  removeAll(*dir);
}

}  // namespace
}  // namespace flotilla::source
