// flotilla/cli/render_command.h
//
// `flotilla render <dir> [-l key=value]... [--cluster-name N] [--group G]...`: what a cluster would get from a
// repository checkout, printed without any hub — like Fleet's `fleet test`, but through the bundler's own code
// (render::renderForCluster in libs/render: discovery, fleet.yaml, targeting, customizations, `${ }` templating, Helm
// and kustomize), so the preview and the real pipeline cannot disagree.
//
// Output: for every bundle (sorted by path) a comment line saying what happens to it on this cluster, then its
// objects as canonical YAML documents sorted by kind, namespace, name, with namespaces filled in as the agent fills
// them (defaultNamespace / namespace). Bad bundles are reported on stderr with file and line; the other bundles
// still print; the exit code is then 1. The command itself runs through runCli (cli.h); its flags are in
// cli/src/render_args.cpp, the renderer lookup in cli/src/tool_lookup.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"

namespace flotilla::cli {

//! True for the built-in kinds that are cluster-scoped (Namespace, ClusterRole, CustomResourceDefinition, ...).
//! Without a cluster to ask, `render` treats every other kind as namespaced, except custom resources whose
//! CustomResourceDefinition (with `scope: Cluster`) is in the same bundle.
bool isClusterScopedKind(std::string_view api_version, std::string_view kind);

//! Sorts objects by kind, namespace, name (then apiVersion) — the order `render` prints them in.
void sortForDisplay(std::vector<Json>& objects);

}  // namespace flotilla::cli
