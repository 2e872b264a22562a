// The render cache's key on its own (render_key.h): which changes of a commit change which bundle's key.
#include "flotilla/bundler/render_key.h"

#include <map>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

namespace flotilla::bundler {
namespace {

using Files = std::map<std::string, std::string>;

source::Archive archiveOf(const Files& files) {
  source::Archive archive;
  archive.commit = std::string(40, 'c');
  for (const auto& [path, content] : files) {
    archive.files.push_back(source::File{path, "100644", content});
  }
  return archive;
}

source::File& fileAt(source::Archive& archive, const std::string& path) {
  for (auto& file : archive.files) {
    if (file.path == path) {
      return file;
    }
  }
  throw std::runtime_error("no file " + path);
}

std::vector<render::BundleDir> dirsOf(std::initializer_list<std::string> paths) {
  std::vector<render::BundleDir> dirs;
  for (const auto& path : paths) {
    dirs.push_back(render::BundleDir{path, ""});
  }
  return dirs;
}

std::string inputs(const std::string& label = "web", int64_t force_sync = 0) {
  events::CommitEvent commit;
  commit.workspace = "ws";
  commit.gitrepo = "repo";
  commit.repo = "https://example.com/repo.git";
  commit.paths = {"apps/*"};
  commit.force_sync_generation = force_sync;
  model::GitRepo gitrepo;
  gitrepo.metadata.name = "repo";
  gitrepo.metadata.ns = "ws";
  gitrepo.metadata.labels = {{"team", label}};
  gitrepo.spec.repo = commit.repo;
  return commitRenderInputs("helm 1", commit, gitrepo);
}

//! The key of each directory, by path.
std::map<std::string, RenderKey> keysOf(const Files& files, const std::vector<render::BundleDir>& dirs,
                                        const std::string& commit_inputs = inputs()) {
  auto keys = renderKeys(archiveOf(files), dirs, commit_inputs);
  std::map<std::string, RenderKey> out;
  for (size_t i = 0; i < dirs.size(); ++i) {
    out[dirs[i].path] = keys[i];
  }
  return out;
}

const Files kThree = {{"apps/web/cm.yaml", "kind: ConfigMap"},
                      {"apps/api/cm.yaml", "kind: ConfigMap # api"},
                      {"apps/db/cm.yaml", "kind: ConfigMap # db"},
                      {"README.md", "docs"}};

//! The directories whose key differs between `before` and `after`.
std::set<std::string> changed(const std::map<std::string, RenderKey>& before,
                              const std::map<std::string, RenderKey>& after) {
  std::set<std::string> out;
  for (const auto& [path, key] : before) {
    if (!(after.at(path) == key)) {
      out.insert(path);
    }
  }
  return out;
}

TEST(RenderKey, AChangeInOneBundleChangesOnlyItsKey) {
  const auto dirs = dirsOf({"apps/web", "apps/api", "apps/db"});
  const auto before = keysOf(kThree, dirs);
  for (const auto& [path, key] : before) {
    EXPECT_EQ(key.key.size(), 64u) << path;
    EXPECT_TRUE(key.reason.empty()) << path;
  }
  EXPECT_EQ(before, keysOf(kThree, dirs)) << "the same commit gives the same keys";
  EXPECT_NE(before.at("apps/web").key, before.at("apps/api").key);

  Files edited = kThree;
  edited["apps/web/cm.yaml"] = "kind: ConfigMap\ndata: {}";
  EXPECT_EQ(changed(before, keysOf(edited, dirs)), std::set<std::string>{"apps/web"});
  Files added = kThree;
  added["apps/api/more.yaml"] = "kind: Secret";
  EXPECT_EQ(changed(before, keysOf(added, dirs)), std::set<std::string>{"apps/api"});
  // The mode is an input too.
  auto archive = archiveOf(kThree);
  fileAt(archive, "apps/api/cm.yaml").mode = "100755";
  auto keys = renderKeys(archive, dirs, inputs());
  EXPECT_NE(keys[1].key, before.at("apps/api").key);
  EXPECT_EQ(keys[0].key, before.at("apps/web").key);
}

TEST(RenderKey, AFileUnderNoBundleIsAnInputOfEveryBundle) {
  const auto dirs = dirsOf({"apps/web", "apps/api", "apps/db"});
  const auto before = keysOf(kThree, dirs);
  Files edited = kThree;
  edited["README.md"] = "docs, edited";
  edited["shared/values.yaml"] = "replicas: 2";
  EXPECT_EQ(changed(before, keysOf(edited, dirs)), (std::set<std::string>{"apps/api", "apps/db", "apps/web"}));
}

TEST(RenderKey, CommitAndGitRepoInputsChangeEveryKey) {
  const auto dirs = dirsOf({"apps/web", "apps/api"});
  const auto before = keysOf(kThree, dirs);
  EXPECT_EQ(changed(before, keysOf(kThree, dirs, inputs("mobile"))), (std::set<std::string>{"apps/api", "apps/web"}));
  EXPECT_EQ(changed(before, keysOf(kThree, dirs, inputs("web", 1))), (std::set<std::string>{"apps/api", "apps/web"}));
  // Another renderer binary (or limit) too.
  events::CommitEvent commit;
  model::GitRepo gitrepo;
  EXPECT_NE(commitRenderInputs("helm 1", commit, gitrepo), commitRenderInputs("helm 2", commit, gitrepo));
  render::RenderLimits limits;
  const std::string identity = rendererIdentity({"/bin/sh"}, limits);
  EXPECT_EQ(identity, rendererIdentity({"/bin/sh"}, limits));
  limits.max_file_bytes /= 2;
  EXPECT_NE(identity, rendererIdentity({"/bin/sh"}, limits));
  EXPECT_NE(rendererIdentity({"/bin/sh"}, {}), rendererIdentity({"/bin/true"}, {}));
}

TEST(RenderKey, PathsClimbingIntoAnotherBundleBringItsFilesIn) {
  // web's kustomization uses api/base (kustomize), web's fleet.yaml a values file of db: changing either changes
  // web's key, and only the referenced files of another bundle count.
  Files files = kThree;
  files["apps/web/kustomization.yaml"] = "resources:\n- ../api/base\n- cm.yaml\n";
  files["apps/web/fleet.yaml"] = "helm:\n  valuesFiles: [\"../db/values.yaml\"]\n";
  files["apps/api/base/kustomization.yaml"] = "resources: [svc.yaml]\n";
  files["apps/api/base/svc.yaml"] = "kind: Service";
  files["apps/db/values.yaml"] = "a: 1";
  const auto dirs = dirsOf({"apps/web", "apps/api", "apps/db"});
  const auto before = keysOf(files, dirs);

  Files base = files;
  base["apps/api/base/svc.yaml"] = "kind: Service # edited";
  EXPECT_EQ(changed(before, keysOf(base, dirs)), (std::set<std::string>{"apps/api", "apps/web"}));
  Files values = files;
  values["apps/db/values.yaml"] = "a: 2";
  EXPECT_EQ(changed(before, keysOf(values, dirs)), (std::set<std::string>{"apps/db", "apps/web"}));
  Files other = files;
  other["apps/api/cm.yaml"] = "kind: ConfigMap # api, edited";
  EXPECT_EQ(changed(before, keysOf(other, dirs)), std::set<std::string>{"apps/api"});
}

TEST(RenderKey, ReferencesAreFollowedTransitivelyAndThroughSymlinks) {
  // web -> ../api/overlay (key: value form), whose kustomization -> ../../db; a symlink in api points into db too.
  Files files = kThree;
  files["apps/web/kustomization.yaml"] = "resources:\n  - path:../api/overlay\n";
  files["apps/api/overlay/kustomization.yaml"] = "resources: ['../../db']\n";
  const auto dirs = dirsOf({"apps/web", "apps/api", "apps/db"});
  const auto before = keysOf(files, dirs);
  Files edited = files;
  edited["apps/db/cm.yaml"] = "kind: ConfigMap # db, edited";
  EXPECT_EQ(changed(before, keysOf(edited, dirs)), (std::set<std::string>{"apps/api", "apps/db", "apps/web"}));

  auto archive = archiveOf(kThree);
  archive.symlinks.push_back(source::Symlink{"apps/api/data", "../db"});
  auto with_link = renderKeys(archive, dirs, inputs());
  fileAt(archive, "apps/db/cm.yaml").content = "kind: ConfigMap # db, edited";
  auto edited_db = renderKeys(archive, dirs, inputs());
  EXPECT_NE(with_link[1].key, edited_db[1].key) << "api links to db";
  EXPECT_EQ(with_link[0].key, edited_db[0].key) << "web does not";
}

TEST(RenderKey, TheRootBundleReadsEverything) {
  Files files = {{"cm.yaml", "kind: ConfigMap"}, {"sub/fleet.yaml", ""}, {"sub/cm.yaml", "kind: ConfigMap # sub"}};
  std::vector<render::BundleDir> dirs = {{".", ""}, {"sub", "sub/fleet.yaml"}};
  const auto before = keysOf(files, dirs);
  Files edited = files;
  edited["sub/cm.yaml"] = "kind: ConfigMap # sub, edited";
  EXPECT_EQ(changed(before, keysOf(edited, dirs)), (std::set<std::string>{".", "sub"}));
  edited = files;
  edited["cm.yaml"] = "kind: ConfigMap # edited";
  EXPECT_EQ(changed(before, keysOf(edited, dirs)), std::set<std::string>{"."});
}

// Remote charts are resolved before the cache is asked (the key is partial); what nothing resolves has no key.
TEST(RenderKey, RemoteChartsAreResolvedAndRemoteBasesHaveNoKey) {
  const auto dirs = dirsOf({"apps/web", "apps/api", "apps/db"});
  auto keyOf = [&](const std::string& path, const std::string& content, const std::string& dir = "apps/web") {
    Files files = kThree;
    files[path] = content;
    return keysOf(files, dirs).at(dir);
  };
  for (const auto& fleet_yaml :
       {"helm:\n  repo: https://charts.example.com\n  chart: web\n", "helm:\n  chart: oci://registry.example.com/web\n",
        "targetCustomizations:\n- name: x\n  helm: {chart: \"https://example.com/x.tgz\"}\n"}) {
    const RenderKey key = keyOf("apps/web/fleet.yaml", fleet_yaml);
    EXPECT_EQ(key.key.size(), 64u) << fleet_yaml;
    EXPECT_TRUE(key.resolve) << fleet_yaml;
    EXPECT_EQ(key.reason, "") << fleet_yaml;
    EXPECT_EQ(key.file, "apps/web/fleet.yaml");
    EXPECT_FALSE(keyOf("apps/web/fleet.yaml", fleet_yaml, "apps/db").resolve) << "only the bundle naming it";
  }
  // A URL among helm values names nothing the render fetches.
  const RenderKey values = keyOf("apps/web/fleet.yaml", "helm:\n  values:\n    url: https://example.com\n");
  EXPECT_EQ(values.reason, "");
  EXPECT_FALSE(values.resolve);
  EXPECT_EQ(keyOf("apps/web/kustomization.yaml", "resources:\n- https://github.com/x/y//base?ref=v1\n").reason,
            "remote");
  // A chart's home page is not a dependency; a dependency from an http(s) repository is resolved, one from file://
  // is in the commit, one from oci:// cannot be resolved.
  EXPECT_FALSE(keyOf("apps/web/Chart.yaml", "name: web\nhome: https://example.com\n").resolve);
  const RenderKey dependency = keyOf(
      "apps/web/Chart.yaml", "name: web\ndependencies:\n- name: redis\n  repository: https://charts.example.com\n");
  EXPECT_TRUE(dependency.resolve);
  EXPECT_EQ(dependency.file, "apps/web/Chart.yaml");
  EXPECT_EQ(keyOf("apps/web/requirements.yaml", "dependencies:\n- {name: r, repository: \"oci://r.example\"}\n").reason,
            "remote");
  // A fleet.yaml naming a URL that does not decode: the render reports it; no key.
  EXPECT_EQ(keyOf("apps/web/fleet.yaml", "helm: [https://example.com\n").reason, "remote");
  // A remote base shared by every bundle (under none of them) makes every bundle uncacheable.
  EXPECT_EQ(keyOf("base/kustomization.yaml", "resources: [https://example.com/x.yaml]\n", "apps/db").reason, "remote");
}

TEST(RenderKey, AFileDependencyIsAReference) {
  Files files = kThree;
  files["apps/web/Chart.yaml"] =
      "name: web\ndependencies:\n- name: common\n  repository: file://../api/common\n  version: 1.0.0\n";
  files["apps/api/common/Chart.yaml"] = "name: common\n";
  const auto dirs = dirsOf({"apps/web", "apps/api", "apps/db"});
  const auto before = keysOf(files, dirs);
  EXPECT_EQ(before.at("apps/web").reason, "");
  Files edited = files;
  edited["apps/api/common/Chart.yaml"] = "name: common\nversion: 2.0.0\n";
  EXPECT_EQ(changed(before, keysOf(edited, dirs)), (std::set<std::string>{"apps/api", "apps/web"}));
}

}  // namespace
}  // namespace flotilla::bundler
