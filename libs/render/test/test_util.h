// Test helpers: a temporary checkout built from (path, content) pairs.
#pragma once

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/render/render_bundle.h"

namespace flotilla::render::testing {

class TempTree {
 public:
  TempTree() {
    auto dir = makeTempDir("bundler-test");
    EXPECT_TRUE(dir.ok());
    root_ = dir.ok() ? *dir : std::string("/tmp/bundler-test-failed");
  }
  TempTree(std::initializer_list<std::pair<std::string, std::string>> files) : TempTree() {
    for (const auto& [path, content] : files) {
      write(path, content);
    }
  }
  ~TempTree() { removeAll(root_); }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  void write(const std::string& path, const std::string& content) const {
    std::filesystem::path full = std::filesystem::path(root_) / path;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream out(full, std::ios::binary | std::ios::trunc);
    out << content;
  }
  void symlink(const std::string& path, const std::string& target) const {
    std::filesystem::path full = std::filesystem::path(root_) / path;
    std::filesystem::create_directories(full.parent_path());
    std::filesystem::create_symlink(target, full);
  }
  void mkdir(const std::string& path) const { std::filesystem::create_directories(root_ + "/" + path); }

  [[nodiscard]] const std::string& root() const { return root_; }

 private:
  std::string root_;
};

inline std::string configMap(const std::string& name, const std::string& ns = "") {
  std::string out = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n";
  if (!ns.empty()) {
    out += "  namespace: " + ns + "\n";
  }
  out += "data:\n  key: value\n";
  return out;
}

//! `text` decoded as a fleet.yaml; a decode error fails the test and gives an empty FleetYaml.
inline model::FleetYaml fleetYaml(const std::string& text) {
  auto decoded = model::decodeFleetYaml(text, "fleet.yaml");
  EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
  return decoded.ok() ? *decoded : model::FleetYaml{};
}

//! What renderBundle reads besides the checkout: a commit of GitRepo `gitrepo_name` in fleet-default, the
//! renderers (Helm when `helm` names its executable), limits and the previous manifest IDs.
struct BundleRenderInputs {
  explicit BundleRenderInputs(const std::string& gitrepo_name, const std::string& helm = "") {
    if (!helm.empty()) {
      renderers.setHelm(std::make_shared<HelmRenderer>(helm));
    }
    commit.workspace = "fleet-default";
    commit.gitrepo = gitrepo_name;
    commit.commit = std::string(40, '1');
    gitrepo.metadata.name = gitrepo_name;
    gitrepo.metadata.ns = "fleet-default";
  }

  //! renderBundle of `dir` in the checkout at `root`.
  Result<RenderedBundle> renderIn(const std::string& root, const BundleDir& dir) {
    RenderContext context{root, commit, gitrepo, renderers, limits, previous_ids};
    return renderBundle(context, dir);
  }

  events::CommitEvent commit;
  model::GitRepo gitrepo;
  RendererSet renderers;
  RenderLimits limits;
  std::map<std::string, std::string> previous_ids;
};

//! A tool pinned by scripts/setup (.tools/bin/<name>), or "" when it has not been built.
inline std::string pinnedTool(std::string_view name) {
  return findExecutable(std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin/" + std::string(name));
}

}  // namespace flotilla::render::testing

//! Declares `var` as the pinned tool `name`; skips the test when it is missing.
#define REQUIRE_TOOL(var, name)                                          \
  const std::string var = ::flotilla::render::testing::pinnedTool(name); \
  if (var.empty()) {                                                     \
    GTEST_SKIP() << name << " is not in .tools/bin (run scripts/setup)"; \
  }
