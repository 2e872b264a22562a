// cli/src/render_args.h (private to the CLI)
//
// The arguments of `flotilla render`: the cluster (name, labels, annotations, template values, groups, Kubernetes
// version), the repository (directory, GitRepo file) and the renderer binaries, as parsed from the command line
// and completed from the --cluster and --gitrepo files.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/model/labels.h"
#include "flotilla/render/cluster_render.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace flotilla::cli {

struct RenderArgs {
  std::string dir;
  render::ClusterFacts cluster;
  std::string cluster_file;
  std::string gitrepo_file;
  std::vector<std::string> labels;           //!< -l KEY=VALUE, as given
  std::vector<std::string> annotations;      //!< --annotation KEY=VALUE
  std::vector<std::string> template_values;  //!< --template-value KEY=VALUE (the value is YAML)
  std::vector<std::string> groups;           //!< --group NAME
  std::vector<std::string> group_labels;     //!< --group-label NAME:KEY=VALUE
  bool no_default_group = false;
  std::string api_versions;  //!< comma-separated
  std::string helm_binary;
  std::string kustomize_binary;
};

//! Defines render's own flags and its directory argument on `command`.
void defineRenderFlags(CLI::App& command, RenderArgs& args);

//! Checks the KEY=VALUE flags and fills `args.cluster` from them; `workspace` is -n ("" = fleet-default). A usage
//! problem is kInvalid with a message naming the flag.
Status applyClusterFlags(RenderArgs& args, const std::string& workspace);

//! Fills the cluster from --cluster FILE (flags given on the command line win) and --template-value.
Status completeCluster(RenderArgs& args, bool workspace_given);

//! The GitRepo of --gitrepo FILE, named after the directory when it has no name.
Result<render::RepoInput> loadRepo(const RenderArgs& args);

}  // namespace flotilla::cli
