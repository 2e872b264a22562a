// Unit tests of `flotilla render`'s own parts: usage errors, scope of built-in kinds, display order, and a raw
// bundle rendered end to end (no helm or kustomize needed). The conformance suite (tests/conformance) covers every
// fleet.yaml feature through the binary.
#include "flotilla/cli/render_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

struct Ran {
  int code;
  std::string out;
  std::string err;
};

Ran render(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  std::istringstream in;
  args.insert(args.begin(), "render");
  int code = runCli(args, in, out, err);
  return {code, out.str(), err.str()};
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
  EXPECT_NE(render({}).err.find("render needs a directory"), std::string::npos);
  auto bad_label = render({"dir", "-l", "novalue"});
  EXPECT_EQ(bad_label.code, kExitUsage);
  EXPECT_NE(bad_label.err.find("expected KEY=VALUE"), std::string::npos);
  EXPECT_EQ(render({"dir", "--bogus"}).code, kExitUsage);
  EXPECT_EQ(render({"dir", "-o", "table"}).code, kExitUsage);
  EXPECT_EQ(render({"dir", "--group-label", "g:k=v"}).code, kExitUsage);  // group not given
  EXPECT_EQ(render({"a", "b"}).code, kExitUsage);
  EXPECT_EQ(render({"--help"}).code, kExitOk);
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

TEST(RenderCommandTest, AMissingDirectoryIsAnError) {
  auto ran = render({(fs::path(::testing::TempDir()) / "does-not-exist").string()});
  EXPECT_EQ(ran.code, kExitError);
  EXPECT_NE(ran.err.find("does-not-exist"), std::string::npos) << ran.err;
}

}  // namespace
}  // namespace flotilla::cli
