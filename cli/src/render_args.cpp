#include "render_args.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"

namespace flotilla::cli {

namespace {

std::optional<std::pair<std::string, std::string>> splitKeyValue(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return std::nullopt;
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

//! Parses every KEY=VALUE of `flag` into `into` (later wins).
Status keyValues(const std::vector<std::string>& raw, std::string_view flag,
                 std::vector<std::pair<std::string, std::string>>& into) {
  for (const auto& text : raw) {
    auto kv = splitKeyValue(text);
    if (!kv) {
      return fail(ErrorKind::kInvalid, std::string(flag) + ": expected KEY=VALUE, got \"" + text + "\"");
    }
    into.push_back(std::move(*kv));
  }
  return {};
}

//! --group-label NAME:KEY=VALUE, each naming a group given with --group.
Result<std::map<std::string, model::Labels>> groupLabels(const RenderArgs& args) {
  std::map<std::string, model::Labels> labels;
  for (const auto& raw : args.group_labels) {
    auto colon = raw.find(':');
    auto label = colon == std::string::npos ? std::nullopt : splitKeyValue(std::string_view(raw).substr(colon + 1));
    if (colon == 0 || !label) {
      return fail(ErrorKind::kInvalid, "--group-label: expected NAME:KEY=VALUE, got \"" + raw + "\"");
    }
    std::string group = raw.substr(0, colon);
    if (std::find(args.groups.begin(), args.groups.end(), group) == args.groups.end()) {
      return fail(ErrorKind::kInvalid, "--group-label names group \"" + group + "\", which is not given with --group");
    }
    labels[group][label->first] = label->second;
  }
  return labels;
}

//! The resource in the YAML file `file`, decoded strictly by `decode`.
template <typename T>
Result<T> readResource(const std::string& file, Result<T> (*decode)(const Json&, std::string_view)) {
  auto text = readFile(file);
  if (!text.ok()) {
    return fail(text.error());
  }
  auto document = parseYaml(*text, file);
  if (!document.ok()) {
    return fail(document.error());
  }
  return decode(*document, file);
}

//! `base` with `overrides` on top.
model::Labels merged(model::Labels base, const model::Labels& overrides) {
  for (const auto& [k, v] : overrides) {
    base[k] = v;
  }
  return base;
}

//! A repeatable option: each occurrence takes one value, never the words after it.
template <typename T>
void addRepeatable(CLI::App& command, const std::string& flags, T& values, const std::string& help,
                   const std::string& type_name) {
  command.add_option(flags, values, help)->allow_extra_args(false)->type_name(type_name);
}

}  // namespace

void defineRenderFlags(CLI::App& command, RenderArgs& args) {
  command.add_option("dir", args.dir, "a repository checkout or a single bundle directory")
      ->required()
      ->type_name("DIR");
  command.add_option("--cluster-name", args.cluster.name, "cluster name (.ClusterName, clusterName matchers)")
      ->default_str("local")
      ->type_name("NAME");
  addRepeatable(command, "-l,--label,--selector", args.labels, "a cluster label KEY=VALUE (repeatable)", "KEY=VALUE");
  addRepeatable(command, "--annotation", args.annotations, "a cluster annotation KEY=VALUE (repeatable)", "KEY=VALUE");
  addRepeatable(command, "--template-value", args.template_values,
                "an entry of .ClusterValues KEY=VALUE; the value is read as YAML: 3, true, [a] (repeatable)",
                "KEY=VALUE");
  command
      .add_option("--cluster", args.cluster_file,
                  "a Cluster document (Fleet's or Flotilla's): name, labels, annotations and spec.templateValues; "
                  "the flags above add to it")
      ->type_name("FILE");
  addRepeatable(command, "-g,--group", args.groups,
                "a ClusterGroup the cluster is in (repeatable); the implicit group \"default\" is always included "
                "unless --no-default-group",
                "NAME");
  addRepeatable(command, "--group-label", args.group_labels, "a label of that group (repeatable)", "NAME:KEY=VALUE");
  command.add_flag("--no-default-group", args.no_default_group,
                   "the workspace defines its own \"default\" group and the cluster is not in it");
  command
      .add_option("--kube-version", args.cluster.kubernetes_version,
                  "the cluster's Kubernetes version for Helm (e.g. v1.30.2)")
      ->type_name("VERSION");
  command.add_option("--api-versions", args.api_versions, "extra API versions for Helm's .Capabilities (A,B)")
      ->type_name("LIST");
  command
      .add_option("--gitrepo", args.gitrepo_file,
                  "the GitRepo (name, paths, targets, targetNamespace, ...); without it the bundles are named "
                  "after <dir> and the targets are Fleet's default")
      ->type_name("FILE");
  command
      .add_option("--helm-binary", args.helm_binary,
                  "helm (default: $FLOTILLA_TOOLS_DIR, the source tree's .tools/bin, next to flotilla, $PATH)")
      ->type_name("FILE");
  command.add_option("--kustomize-binary", args.kustomize_binary, "kustomize (searched like helm)")->type_name("FILE");
}

Status applyClusterFlags(RenderArgs& args, const std::string& workspace) {
  args.cluster.workspace = workspace.empty() ? "fleet-default" : workspace;
  if (args.cluster.name.empty()) {
    args.cluster.name = "local";
  }
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::vector<std::pair<std::string, std::string>> values;
  FLOTILLA_TRY(keyValues(args.labels, "-l", labels));
  FLOTILLA_TRY(keyValues(args.annotations, "--annotation", annotations));
  FLOTILLA_TRY(keyValues(args.template_values, "--template-value", values));
  for (const auto& [k, v] : labels) {
    args.cluster.labels[k] = v;
  }
  for (const auto& [k, v] : annotations) {
    args.cluster.annotations[k] = v;
  }
  auto group_labels = groupLabels(args);
  if (!group_labels.ok()) {
    return fail(group_labels.error());
  }
  args.cluster.implicit_default_group = !args.no_default_group;
  for (auto& item : split(args.api_versions, ',')) {
    if (!trim(item).empty()) {
      args.cluster.api_versions.push_back(trim(item));
    }
  }
  for (const auto& group : args.groups) {
    model::GroupInfo facts{.name = group};
    if (auto found = group_labels->find(group); found != group_labels->end()) {
      facts.labels = found->second;
    }
    args.cluster.groups.push_back(std::move(facts));
  }
  return {};
}

Status completeCluster(RenderArgs& args, bool workspace_given) {
  if (!args.cluster_file.empty()) {
    auto decoded = readResource<model::Cluster>(args.cluster_file, &model::decodeCluster);
    if (!decoded.ok()) {
      return fail(decoded.error());
    }
    const model::Cluster& cluster = *decoded;
    args.cluster.labels = merged(cluster.metadata.labels, args.cluster.labels);
    args.cluster.annotations = merged(cluster.metadata.annotations, args.cluster.annotations);
    if (args.cluster.name == "local" && !cluster.metadata.name.empty()) {
      args.cluster.name = cluster.metadata.name;
    }
    if (!workspace_given && !cluster.metadata.ns.empty()) {
      args.cluster.workspace = cluster.metadata.ns;
    }
    if (cluster.spec.template_values && cluster.spec.template_values->isObject()) {
      args.cluster.template_values = *cluster.spec.template_values;
    }
  }
  for (const auto& raw : args.template_values) {
    auto [key, text] = *splitKeyValue(raw);  // checked by applyClusterFlags
    auto value = parseYaml(text, "--template-value " + key);
    args.cluster.template_values[key] = value.ok() && !value->isNull() ? *value : Json(text);
  }
  return {};
}

Result<render::RepoInput> loadRepo(const RenderArgs& args) {
  render::RepoInput repo;
  if (!args.gitrepo_file.empty()) {
    auto gitrepo = readResource<model::GitRepo>(args.gitrepo_file, &model::decodeGitRepo);
    if (!gitrepo.ok()) {
      return fail(gitrepo.error());
    }
    repo.gitrepo = std::move(*gitrepo);
  }
  if (repo.gitrepo.metadata.name.empty()) {
    auto absolute = std::filesystem::absolute(args.dir).lexically_normal();
    std::string base = absolute.filename().string();
    if (base.empty()) {
      base = absolute.parent_path().filename().string();
    }
    repo.gitrepo.metadata.name = base.empty() ? "local" : base;
  }
  return repo;
}

}  // namespace flotilla::cli
