#include "flotilla/render/cluster_render.h"

#include <filesystem>
#include <set>
#include <system_error>

#include <stdlib.h>

#include "flotilla/core/util.h"
#include "flotilla/render/discovery.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/render/render_bundle.h"

namespace flotilla::render {
namespace fs = std::filesystem;

namespace {

//! Copies the checkout (without .git) into `into`: renderers write scratch files next to the checkout and
//! `helm dependency build` into charts/, neither of which may touch the user's directory.
Status copyCheckout(const fs::path& from, const fs::path& into) {
  std::error_code ec;
  fs::create_directories(into, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot create " + into.string() + ": " + ec.message(), "create_directories");
  }
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == ".git") {
      continue;
    }
    fs::copy(it->path(), into / it->path().filename(), fs::copy_options::recursive | fs::copy_options::copy_symlinks,
             ec);
    if (ec) {
      return fail(ErrorKind::kInternal, "cannot copy " + it->path().string() + ": " + ec.message(), "copy");
    }
  }
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot list " + from.string() + ": " + ec.message(), "directory_iterator");
  }
  return {};
}

}  // namespace

namespace {

//! The GitRepo to render as: named after the directory and placed in the cluster's workspace unless set.
model::GitRepo gitRepoFor(const RepoInput& repo, const fs::path& source, const ClusterFacts& cluster) {
  model::GitRepo gitrepo = repo.gitrepo;
  if (gitrepo.metadata.name.empty()) {
    std::string name = source.filename().string();
    gitrepo.metadata.name = name.empty() ? std::string("local") : name;
  }
  if (gitrepo.metadata.ns.empty()) {
    gitrepo.metadata.ns = cluster.workspace;
  }
  return gitrepo;
}

//! What one rendered bundle gives the cluster: the decision, and the manifest of its variant when it deploys.
ClusterBundle clusterBundleOf(const RenderedBundle& rendered, const ClusterFacts& cluster) {
  ClusterBundle bundle;
  bundle.bundle = rendered.bundle;
  bundle.path = rendered.path;
  bundle.renderer = rendered.renderer;
  if (rendered.error) {
    bundle.decision = ClusterBundle::Decision::kError;
    bundle.error = rendered.error;
    return bundle;
  }
  auto placement = rendered.placements.find(cluster.name);
  if (placement != rendered.placements.end()) {
    bundle.decision = placement->second.decision;
    bundle.target = placement->second.target;
    bundle.customizations = placement->second.customizations;
    bundle.options = placement->second.options;
  }
  if (bundle.decision != ClusterBundle::Decision::kDeploy || !rendered.variants) {
    return bundle;
  }
  auto index = rendered.variants->clusters.find(cluster.name);
  if (index != rendered.variants->clusters.end()) {
    const auto& variant = rendered.variants->variants[static_cast<size_t>(index->second)];
    auto manifest = rendered.manifests.find(variant.manifest_id);
    if (manifest != rendered.manifests.end()) {
      bundle.manifest = manifest->second;
    }
  }
  return bundle;
}

}  // namespace

Result<std::vector<ClusterBundle>> renderForCluster(const fs::path& checkout, const ClusterFacts& cluster,
                                                    const RenderTools& tools, const RepoInput& repo) {
  std::error_code ec;
  const fs::path source = fs::absolute(checkout, ec).lexically_normal();
  if (ec || !fs::is_directory(source, ec)) {
    return fail(ErrorKind::kNotFound, checkout.string() + ": not a directory", checkout.string());
  }
  std::string temp = (fs::temp_directory_path(ec) / "flotilla-render-XXXXXX").string();
  if (::mkdtemp(temp.data()) == nullptr) {
    return fail(ErrorKind::kInternal, "cannot create a temporary directory", "mkdtemp");
  }
  Checkout work(temp);  // removed on return
  const std::string root = temp + "/src";
  FLOTILLA_TRY(copyCheckout(source, root));
  const model::GitRepo gitrepo = gitRepoFor(repo, source, cluster);
  auto renderers = makeRenderers(
      RendererBinaries{.helm = tools.helm_binary == "none" ? std::string() : tools.helm_binary,
                       .kustomize = tools.kustomize_binary == "none" ? std::string() : tools.kustomize_binary});
  events::CommitEvent commit;
  commit.workspace = cluster.workspace;
  commit.gitrepo = gitrepo.metadata.name;
  commit.commit = "local";
  commit.paths = gitrepo.spec.paths;
  commit.force_sync_generation = gitrepo.spec.force_sync_generation;
  auto dirs = discoverBundles(root, gitrepo.spec.paths);
  FLOTILLA_TRY(dirs);
  const std::map<std::string, std::string> no_previous_ids;
  const std::vector<ClusterFacts> clusters = {cluster};
  RenderContext context{root, commit, gitrepo, *renderers, tools.limits, no_previous_ids};
  context.clusters = &clusters;
  context.force_variants = true;
  std::vector<ClusterBundle> out;
  for (const auto& dir : *dirs) {
    auto rendered = renderBundle(context, dir);
    FLOTILLA_TRY(rendered);
    out.push_back(clusterBundleOf(*rendered, cluster));
  }
  return out;
}

}  // namespace flotilla::render
