// Unit tests of `flotilla render`'s own parts: usage errors, scope of built-in kinds, display order, and a raw
// bundle rendered end to end (no helm or kustomize needed). The conformance suite (tests/conformance) covers every
// fleet.yaml feature through the binary.
#include "flotilla/cli/render_command.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"
#include "run_captured.h"
#include "tool_lookup.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

Ran render(std::vector<std::string> args) {
  args.insert(args.begin(), "render");
  return runCaptured(args);
}

fs::path makeRepo(const std::string& name) {
  fs::path root = fs::path(::testing::TempDir()) / ("render-" + name);
  fs::remove_all(root);
  fs::create_directories(root / "app");
  std::ofstream(root / "app" / "fleet.yaml") << "defaultNamespace: shop\n";
  std::ofstream(root / "app" / "objects.yaml") << "apiVersion: v1\nkind: Service\nmetadata: {name: b}\n---\n"
                                                  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z}\n---\n"
                                                  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n"
                                                  "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n";
  return root;
}

TEST(RenderCommandTest, UsageErrorsExitTwo) {
  EXPECT_EQ(render({}).code, kExitUsage);
  EXPECT_NE(render({}).err.find("dir is required"), std::string::npos) << render({}).err;
  auto bad_label = render({"dir", "-l", "novalue"});
  EXPECT_EQ(bad_label.code, kExitUsage);
  EXPECT_NE(bad_label.err.find("expected KEY=VALUE"), std::string::npos);
  EXPECT_EQ(render({"dir", "--bogus"}).code, kExitUsage);
  EXPECT_EQ(render({"dir", "-o", "table"}).code, kExitUsage);
  EXPECT_EQ(render({"dir", "--group-label", "g:k=v"}).code, kExitUsage);  // group not given
  EXPECT_EQ(render({"a", "b"}).code, kExitUsage);
  EXPECT_EQ(render({"--help"}).code, kExitOk);
  EXPECT_NE(render({"--help"}).out.find("--cluster-name"), std::string::npos);
  EXPECT_EQ(render({"dir", "--nats-url", "nats://x:4222"}).code, kExitUsage);  // render uses no hub
  EXPECT_EQ(render({"dir", "-A"}).code, kExitUsage);
}

TEST(RenderCommandTest, KnowsClusterScopedBuiltInKinds) {
  EXPECT_TRUE(isClusterScopedKind("v1", "Namespace"));
  EXPECT_TRUE(isClusterScopedKind("rbac.authorization.k8s.io/v1", "ClusterRole"));
  EXPECT_TRUE(isClusterScopedKind("apiextensions.k8s.io/v1", "CustomResourceDefinition"));
  EXPECT_FALSE(isClusterScopedKind("v1", "ConfigMap"));
  EXPECT_FALSE(isClusterScopedKind("example.com/v1", "ClusterRole"));  // same kind, other group
}

TEST(RenderCommandTest, SortsByKindNamespaceName) {
  std::vector<Json> objects = {
      Json::obj({{"kind", "Service"}, {"metadata", Json::obj({{"name", "a"}})}}),
      Json::obj({{"kind", "ConfigMap"}, {"metadata", Json::obj({{"name", "b"}, {"namespace", "y"}})}}),
      Json::obj({{"kind", "ConfigMap"}, {"metadata", Json::obj({{"name", "c"}, {"namespace", "x"}})}}),
  };
  sortForDisplay(objects);
  EXPECT_EQ(objects[0].at({"metadata", "name"})->asString(), "c");
  EXPECT_EQ(objects[1].at({"metadata", "name"})->asString(), "b");
  EXPECT_EQ(objects[2].at({"metadata", "name"})->asString(), "a");
}

TEST(RenderCommandTest, RendersARawBundleWithNamespacesFilledIn) {
  fs::path root = makeRepo("raw");
  auto ran = render({root.string(), "--cluster-name", "c1", "-l", "env=dev"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  EXPECT_NE(ran.out.find("# Bundle render-raw-app (path app): deployed by raw"), std::string::npos) << ran.out;
  // Sorted by kind, then namespace, then name; defaultNamespace fills in, an own namespace stays, Namespace has none.
  auto a = ran.out.find("name: a\n  namespace: x");
  auto z = ran.out.find("name: z\n  namespace: shop");
  auto ns = ran.out.find("kind: Namespace\nmetadata:\n  name: shop\n---");
  auto svc = ran.out.find("kind: Service");
  ASSERT_NE(a, std::string::npos) << ran.out;
  ASSERT_NE(z, std::string::npos) << ran.out;
  ASSERT_NE(ns, std::string::npos) << ran.out;
  EXPECT_LT(z, a);  // namespace "shop" sorts before "x"
  EXPECT_LT(a, ns);
  EXPECT_LT(ns, svc);
}

TEST(RenderCommandTest, ABadBundleIsReportedWithItsFileAndTheOthersStillPrint) {
  fs::path root = makeRepo("bad");
  fs::create_directories(root / "broken");
  std::ofstream(root / "broken" / "fleet.yaml") << "defaultNamespace: x\nhelmm: {}\n";
  auto ran = render({root.string()});
  EXPECT_EQ(ran.code, kExitError);
  EXPECT_NE(ran.err.find("broken/fleet.yaml:2"), std::string::npos) << ran.err;
  EXPECT_NE(ran.out.find("kind: Service"), std::string::npos) << ran.out;
}

// The flags and the global -n/-o may come in any order around the directory.
TEST(RenderCommandTest, FlagsInAnyOrder) {
  fs::path root = makeRepo("order");
  auto ran = render({"-ojson", "-n", "fleet-prod", root.string(), "-l", "env=dev", "--cluster-name=c1"});
  ASSERT_EQ(ran.code, kExitOk) << ran.err;
  EXPECT_NE(ran.out.find("\"namespace\": \"shop\""), std::string::npos) << ran.out;
}

TEST(RenderCommandTest, AMissingDirectoryIsAnError) {
  auto ran = render({(fs::path(::testing::TempDir()) / "does-not-exist").string()});
  EXPECT_EQ(ran.code, kExitError);
  EXPECT_NE(ran.err.find("does-not-exist"), std::string::npos) << ran.err;
}

//! Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// $FLOTILLA_TOOLS_DIR comes first; a tool found nowhere names every place searched.
TEST(ToolLookupTest, ToolsDirFirstAndEveryPlaceNamedWhenMissing) {
  fs::path dir = fs::path(::testing::TempDir()) / "tools-first";
  fs::create_directories(dir);
  std::ofstream(dir / "helm") << "#!/bin/sh\n";
  fs::permissions(dir / "helm", fs::perms::owner_all);
  ScopedEnv tools("FLOTILLA_TOOLS_DIR", dir.string());
  EXPECT_EQ(findTool("helm", "").path, (dir / "helm").string());
  EXPECT_EQ(findTool("helm", (dir / "helm").string()).path, (dir / "helm").string());  // the flag is used as given
  EXPECT_FALSE(findTool("helm", "/opt/no/helm").found);

  ScopedEnv path("PATH", "/nonexistent-bin");
  auto missing = findTool("no-such-renderer", "");
  EXPECT_FALSE(missing.found);
  EXPECT_EQ(missing.path, "no-such-renderer");
  std::string message = notFoundMessage("no-such-renderer", missing);
  EXPECT_NE(message.find("$FLOTILLA_TOOLS_DIR (" + dir.string() + ")"), std::string::npos) << message;
  EXPECT_NE(message.find("/.tools/bin (the source tree's pinned tools)"), std::string::npos) << message;
  EXPECT_NE(message.find("(next to flotilla)"), std::string::npos) << message;
  EXPECT_NE(message.find("$PATH (/nonexistent-bin)"), std::string::npos) << message;
}

// A Helm bundle whose helm cannot be found says where it was looked for.
TEST(ToolLookupTest, AMissingHelmIsNamedInTheBundleError) {
  const char* source = std::getenv("FLOTILLA_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest";
  auto ran = render(
      {(fs::path(source) / "tests/conformance/cases/helm-local/repo").string(), "--helm-binary", "/nonexistent/helm"});
  EXPECT_EQ(ran.code, kExitError);
  EXPECT_NE(ran.err.find("helm was not found; searched: --helm-binary /nonexistent/helm (not an executable file)"),
            std::string::npos)
      << ran.err;
}

// Right after scripts/setup, with no environment and helm not on $PATH, `render` uses the source tree's pinned helm.
TEST(ToolLookupTest, RenderFindsThePinnedHelmWithoutEnvironment) {
  const char* source = std::getenv("FLOTILLA_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "run through ctest";
  fs::path pinned = fs::path(source) / ".tools" / "bin" / "helm";
  if (!fs::exists(pinned)) {
    const char* require = std::getenv("FLOTILLA_REQUIRE_TOOLS");
    ASSERT_FALSE(require != nullptr && std::string(require) == "1") << pinned << " is missing (run scripts/setup)";
    GTEST_SKIP() << pinned << " is not built (run scripts/setup)";
  }
  ScopedEnv tools("FLOTILLA_TOOLS_DIR", "");
  ScopedEnv path("PATH", "/nonexistent-bin");
  EXPECT_EQ(findTool("helm", "").path, pinned.string());
  auto ran = render({(fs::path(source) / "tests/conformance/cases/helm-local/repo").string(), "-l", "size=small"});
  EXPECT_EQ(ran.code, kExitOk) << ran.err;
  EXPECT_NE(ran.out.find("deployed by helm"), std::string::npos) << ran.out;
}

}  // namespace
}  // namespace flotilla::cli
