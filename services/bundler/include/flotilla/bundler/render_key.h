// flotilla/bundler/render_key.h
//
// The render cache's key (services/bundler/README.md "Render cache"): a bundle directory whose inputs are the same
// as those of its last good render is not rendered again; the commit reuses that render (BundleRecord.lastGood,
// which keeps its key in `renderKey`). The key of a directory is computed from the commit's source archive before
// anything renders: sha256 over a length-prefixed encoding of
//   1. kRenderKeyVersion and the renderers' identity (each executable's path, size and mtime; the render limits);
//   2. what the commit and its GitRepo pass to every render (commitRenderInputs);
//   3. the directory, and every entry (file: path, mode, content; symlink: path, target) of its input set:
//      - its subtree (nested bundle directories included);
//      - every entry under no bundle directory of the commit (shared bases, values files, charts outside bundles);
//      - what the set refers to, transitively: path tokens containing "../" in fleet.yaml, kustomization and
//        Chart.yaml / requirements.yaml files, and symlink targets, each resolved against its file's directory;
//        everything under the resolved path joins the set.
//      Over-inclusion only costs a render; an input left out would publish a stale render.
// What the set names outside the commit can change without one:
//   - a fleet.yaml naming a remote chart (helm.repo, a chart URL, oci://) or a Chart.yaml / requirements.yaml
//     dependency from an http(s) repository: the key is partial (`resolve`); before the cache is asked, the handler
//     folds in render::resolveRemoteInputs (the repository's version and index digest, or the pulled archive's
//     sha256), so a chart published again under the same version is a miss (withRemoteInputs);
//   - a kustomization containing "://" or "oci:" (a remote base), an oci:// chart dependency, a fleet.yaml naming a
//     URL that does not decode: no key (reason "remote"), rendered on every commit.
// Per-cluster renders and failed renders keep no key either; the handler decides those after rendering.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/events/payloads.h"
#include "flotilla/model/resources.h"
#include "flotilla/render/discovery.h"
#include "flotilla/render/render.h"
#include "flotilla/source/archive.h"

namespace flotilla::bundler {

//! Part of every key: bumping it when what a key covers changes makes every recorded key a miss once.
inline constexpr int kRenderKeyVersion = 1;

//! The key of one bundle directory, or why it has none.
struct RenderKey {
  std::string key;       //!< 64 hex chars; "" when not cacheable
  std::string reason;    //!< when not cacheable: "remote", or "unresolved" (withRemoteInputs could not resolve)
  std::string file;      //!< the file that makes it so, or that names the remote inputs to resolve (for the log)
  bool resolve = false;  //!< `key` still lacks the remote inputs (render::resolveRemoteInputs) `file` names

  bool operator==(const RenderKey&) const = default;
};

//! The renderers' identity: each executable's path, size and mtime (another build of helm may render differently),
//! and the render limits (a smaller limit can fail what a larger one rendered). Reads the file system.
std::string rendererIdentity(const std::vector<std::string>& executables, const render::RenderLimits& limits);

//! What reaches every bundle's render of one commit besides its files: the renderer identity, the CommitEvent's
//! workspace, gitrepo, repo, branch, paths and forceSyncGeneration, and the GitRepo's name, namespace, labels and
//! whole spec (targets, overrides, credentials settings: conservative).
std::string commitRenderInputs(std::string_view renderer_identity, const events::CommitEvent& commit,
                               const model::GitRepo& gitrepo);

//! The key of each of `dirs` (same order) for a commit whose files are `archive`. Pure.
std::vector<RenderKey> renderKeys(const source::Archive& archive, const std::vector<render::BundleDir>& dirs,
                                  std::string_view commit_inputs);

}  // namespace flotilla::bundler
