#include "flotilla/cli/render_command.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include "flotilla/cli/cli.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/cluster_render.h"

namespace flotilla::cli {

std::string renderUsage() {
  return R"(usage: flotilla render <dir> [flags]

Prints the objects a cluster would get from the repository checkout (or bundle directory) <dir>, without a hub:
the bundler's own discovery, fleet.yaml handling, targeting, customizations, ${ } templating, Helm and kustomize.
Objects are canonical YAML, sorted by kind, namespace and name, with namespaces filled in as the agent does.

The cluster:
  --cluster-name NAME          cluster name (.ClusterName, clusterName matchers; default "local")
  -n, --workspace WS           its workspace (.ClusterNamespace; default fleet-default)
  -l, --label KEY=VALUE        a cluster label (repeatable)
  --annotation KEY=VALUE       a cluster annotation (repeatable)
  --template-value KEY=VALUE   an entry of .ClusterValues (the value is read as YAML: 3, true, [a]; repeatable)
  --cluster FILE               a Cluster document (Fleet's or Flotilla's): name, labels, annotations and
                               spec.templateValues; the flags above add to it
  --group NAME                 a ClusterGroup the cluster is in (repeatable); the implicit group "default" is
                               always included unless --no-default-group
  --group-label NAME:KEY=VALUE a label of that group, for clusterGroupSelector (repeatable)
  --no-default-group           the workspace defines its own "default" group and the cluster is not in it
  --kube-version VERSION       the cluster's Kubernetes version for Helm (e.g. v1.30.2)
  --api-versions LIST          extra API versions for Helm's .Capabilities (comma-separated)

The repository:
  --gitrepo FILE               the GitRepo (name, paths, targets, targetNamespace, ...); without it the bundles
                               are named after <dir> and the GitRepo targets are Fleet's default
  --helm-binary PATH, --kustomize-binary PATH
                               the renderers (default: $FLOTILLA_TOOLS_DIR, then $PATH)
  -o, --output yaml|json       objects as YAML documents (default) or one JSON array per bundle

Exit codes: 0 every bundle rendered (or was not targeted), 1 a bundle failed (stderr names file and line), 2 usage.
)";
}

namespace {

struct RenderArgs {
  std::string dir;
  render::ClusterFacts cluster;
  std::string cluster_file;
  std::string gitrepo_file;
  std::vector<std::pair<std::string, std::string>> template_values;
  std::map<std::string, model::Labels> group_labels;
  std::vector<std::string> groups;
  std::string helm_binary;
  std::string kustomize_binary;
  std::string output = "yaml";
  bool workspace_given = false;
};

struct RenderUsageError {
  std::string message;
};

std::optional<std::pair<std::string, std::string>> splitKeyValue(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return std::nullopt;
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

//! Parses the words after "render". Returns the problem as a string on a usage error.
std::optional<std::string> parseRenderArgs(const std::vector<std::string>& argv, RenderArgs& args) {
  args.cluster.name = "local";
  args.cluster.workspace = "fleet-default";
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string flag = argv[i];
    std::optional<std::string> inline_value;
    if (flag.size() > 2 && flag.starts_with("--")) {
      if (auto eq = flag.find('='); eq != std::string::npos) {
        inline_value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
      }
    }
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) {
        return inline_value;
      }
      if (i + 1 >= argv.size()) {
        return std::nullopt;
      }
      return argv[++i];
    };
    auto need = [&](std::string& into) -> std::optional<std::string> {
      auto v = value();
      if (!v) {
        return "flag " + flag + " needs a value";
      }
      into = *v;
      return std::nullopt;
    };
    auto needKeyValue = [&](std::pair<std::string, std::string>& into) -> std::optional<std::string> {
      std::string raw;
      if (auto problem = need(raw)) {
        return problem;
      }
      auto kv = splitKeyValue(raw);
      if (!kv) {
        return flag + ": expected KEY=VALUE, got \"" + raw + "\"";
      }
      into = *kv;
      return std::nullopt;
    };
    std::optional<std::string> problem;
    std::pair<std::string, std::string> kv;
    if (flag == "-l" || flag == "--label" || flag == "--selector") {
      if (!(problem = needKeyValue(kv))) {
        args.cluster.labels[kv.first] = kv.second;
      }
    } else if (flag == "--annotation") {
      if (!(problem = needKeyValue(kv))) {
        args.cluster.annotations[kv.first] = kv.second;
      }
    } else if (flag == "--template-value") {
      if (!(problem = needKeyValue(kv))) {
        args.template_values.push_back(kv);
      }
    } else if (flag == "--cluster-name") {
      problem = need(args.cluster.name);
    } else if (flag == "-n" || flag == "--workspace" || flag == "--namespace") {
      problem = need(args.cluster.workspace);
      args.workspace_given = true;
    } else if (flag == "--cluster") {
      problem = need(args.cluster_file);
    } else if (flag == "--gitrepo") {
      problem = need(args.gitrepo_file);
    } else if (flag == "--group" || flag == "-g") {
      std::string group;
      if (!(problem = need(group))) {
        args.groups.push_back(group);
      }
    } else if (flag == "--group-label") {
      std::string raw;
      if (!(problem = need(raw))) {
        auto colon = raw.find(':');
        auto label = colon == std::string::npos ? std::nullopt : splitKeyValue(std::string_view(raw).substr(colon + 1));
        if (colon == 0 || !label) {
          problem = "--group-label: expected NAME:KEY=VALUE, got \"" + raw + "\"";
        } else {
          args.group_labels[raw.substr(0, colon)][label->first] = label->second;
        }
      }
    } else if (flag == "--no-default-group") {
      args.cluster.implicit_default_group = false;
    } else if (flag == "--kube-version") {
      problem = need(args.cluster.kubernetes_version);
    } else if (flag == "--api-versions") {
      std::string list;
      if (!(problem = need(list))) {
        for (auto& item : split(list, ',')) {
          if (!trim(item).empty()) {
            args.cluster.api_versions.push_back(trim(item));
          }
        }
      }
    } else if (flag == "--helm-binary") {
      problem = need(args.helm_binary);
    } else if (flag == "--kustomize-binary") {
      problem = need(args.kustomize_binary);
    } else if (flag == "-o" || flag == "--output") {
      problem = need(args.output);
    } else if (flag.size() > 1 && flag[0] == '-') {
      problem = "unknown flag " + flag;
    } else if (args.dir.empty()) {
      args.dir = flag;
    } else {
      problem = "render takes one directory, got \"" + args.dir + "\" and \"" + flag + "\"";
    }
    if (problem) {
      return problem;
    }
  }
  if (args.dir.empty()) {
    return std::string("render needs a directory");
  }
  if (args.output != "yaml" && args.output != "json") {
    return "-o: expected yaml or json, got \"" + args.output + "\"";
  }
  for (const auto& [group, labels] : args.group_labels) {
    if (std::find(args.groups.begin(), args.groups.end(), group) == args.groups.end()) {
      return "--group-label names group \"" + group + "\", which is not given with --group";
    }
  }
  return std::nullopt;
}

Result<Json> readYamlDocument(const std::string& file) {
  auto text = readFile(file);
  if (!text.ok()) {
    return fail(text.error());
  }
  return parseYaml(*text, file);
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) {
    joined += (joined.empty() ? "" : "+") + name;
  }
  return joined;
}

//! Fills the cluster from --cluster FILE (flags given on the command line win) and --template-value.
Status completeCluster(RenderArgs& args) {
  if (!args.cluster_file.empty()) {
    auto document = readYamlDocument(args.cluster_file);
    if (!document.ok()) {
      return fail(document.error());
    }
    auto decoded = model::decodeCluster(*document, args.cluster_file);
    if (!decoded.ok()) {
      return fail(decoded.error());
    }
    const model::Cluster& cluster = *decoded;
    auto merged_labels = cluster.metadata.labels;
    for (const auto& [k, v] : args.cluster.labels) {
      merged_labels[k] = v;
    }
    args.cluster.labels = merged_labels;
    auto merged_annotations = cluster.metadata.annotations;
    for (const auto& [k, v] : args.cluster.annotations) {
      merged_annotations[k] = v;
    }
    args.cluster.annotations = merged_annotations;
    if (args.cluster.name == "local" && !cluster.metadata.name.empty()) {
      args.cluster.name = cluster.metadata.name;
    }
    if (!args.workspace_given && !cluster.metadata.ns.empty()) {
      args.cluster.workspace = cluster.metadata.ns;
    }
    if (cluster.spec.template_values && cluster.spec.template_values->isObject()) {
      args.cluster.template_values = *cluster.spec.template_values;
    }
  }
  for (const auto& [key, raw] : args.template_values) {
    auto value = parseYaml(raw, "--template-value " + key);
    args.cluster.template_values[key] = value.ok() && !value->isNull() ? *value : Json(raw);
  }
  for (const auto& group : args.groups) {
    model::GroupInfo facts{.name = group};
    if (auto labels = args.group_labels.find(group); labels != args.group_labels.end()) {
      facts.labels = labels->second;
    }
    args.cluster.groups.push_back(std::move(facts));
  }
  return {};
}

Result<render::RepoInput> loadRepo(const RenderArgs& args) {
  render::RepoInput repo;
  if (!args.gitrepo_file.empty()) {
    auto document = readYamlDocument(args.gitrepo_file);
    if (!document.ok()) {
      return fail(document.error());
    }
    auto gitrepo = model::decodeGitRepo(*document, args.gitrepo_file);
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

//! A renderer binary: the flag, else $FLOTILLA_TOOLS_DIR/<name> when present, else <name> from $PATH.
std::string toolPath(const std::string& flag, const std::string& name) {
  if (!flag.empty()) {
    return flag;
  }
  if (const char* dir = std::getenv("FLOTILLA_TOOLS_DIR"); dir != nullptr && *dir != '\0') {
    auto candidate = std::filesystem::path(dir) / name;
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) {
      return candidate.string();
    }
  }
  return name;
}

std::string apiGroup(std::string_view api_version) {
  auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string() : std::string(api_version.substr(0, slash));
}

//! "group/Kind" of every CRD in `objects` whose scope is Cluster.
std::set<std::string> clusterScopedCustomKinds(const std::vector<Json>& objects) {
  std::set<std::string> kinds;
  for (const auto& object : objects) {
    if (object.getString("kind") != "CustomResourceDefinition") {
      continue;
    }
    const Json* spec = object.find("spec");
    if (spec == nullptr || spec->getString("scope") != "Cluster") {
      continue;
    }
    const Json* names = spec->find("names");
    if (names != nullptr) {
      kinds.insert(spec->getString("group") + "/" + names->getString("kind"));
    }
  }
  return kinds;
}

//! What the agent does to namespaces (services/agent objects.h placeObject), without the bookkeeping annotation:
//! namespaced objects get `namespace` when set, else their own, else defaultNamespace ("default"); cluster-scoped
//! objects lose any namespace.
void placeNamespaces(std::vector<Json>& objects, const model::BundleDeploymentOptions& options) {
  auto custom_cluster_kinds = clusterScopedCustomKinds(objects);
  std::string fallback = options.default_namespace.empty() ? "default" : options.default_namespace;
  for (auto& object : objects) {
    std::string api_version = object.getString("apiVersion");
    std::string kind = object.getString("kind");
    bool cluster_scoped =
        isClusterScopedKind(api_version, kind) || custom_cluster_kinds.contains(apiGroup(api_version) + "/" + kind);
    Json& metadata = object["metadata"];
    if (cluster_scoped) {
      metadata.erase("namespace");
    } else if (!options.target_namespace.empty()) {
      metadata["namespace"] = options.target_namespace;
    } else if (metadata.getString("namespace").empty()) {
      metadata["namespace"] = fallback;
    }
  }
}

std::string describeDecision(const render::ClusterBundle& bundle, const std::string& cluster) {
  std::string head = "# Bundle " + bundle.bundle + " (path " + bundle.path + ")";
  switch (bundle.decision) {
    case render::ClusterBundle::Decision::kDeploy: {
      std::string line = head + ": deployed by " + bundle.renderer;
      if (!bundle.target.empty()) {
        line += ", target " + bundle.target;
      }
      line +=
          bundle.customizations.empty() ? ", no customization" : ", customization " + joinNames(bundle.customizations);
      return line;
    }
    case render::ClusterBundle::Decision::kNotTargeted:
      return head + ": not deployed, no target matches cluster " + cluster;
    case render::ClusterBundle::Decision::kDoNotDeploy:
      return head + ": not deployed, doNotDeploy in customization " + joinNames(bundle.customizations);
    case render::ClusterBundle::Decision::kError:
      return head + ": error (see stderr)";
  }
  return head;
}

std::string describeError(const render::ClusterBundle& bundle) {
  std::string where = bundle.error ? bundle.error->file : std::string();
  if (bundle.error && bundle.error->line > 0) {
    where += ":" + std::to_string(bundle.error->line);
  }
  std::string message = bundle.error ? bundle.error->message : std::string("unknown error");
  // Most messages already start with their file (and line); do not say it twice.
  if (where.empty() || message.starts_with(where) || (bundle.error && message.starts_with(bundle.error->file + ":"))) {
    return "error: bundle " + bundle.bundle + ": " + message;
  }
  return "error: bundle " + bundle.bundle + ": " + where + ": " + message;
}

}  // namespace

bool isClusterScopedKind(std::string_view api_version, std::string_view kind) {
  // Built-in cluster-scoped resources of Kubernetes 1.36 (kubectl api-resources --namespaced=false), by group.
  static const std::set<std::pair<std::string, std::string>> kClusterScoped = {
      {"", "Namespace"},
      {"", "Node"},
      {"", "PersistentVolume"},
      {"", "ComponentStatus"},
      {"admissionregistration.k8s.io", "MutatingWebhookConfiguration"},
      {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"},
      {"admissionregistration.k8s.io", "ValidatingAdmissionPolicy"},
      {"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"},
      {"admissionregistration.k8s.io", "MutatingAdmissionPolicy"},
      {"admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"},
      {"apiextensions.k8s.io", "CustomResourceDefinition"},
      {"apiregistration.k8s.io", "APIService"},
      {"certificates.k8s.io", "CertificateSigningRequest"},
      {"certificates.k8s.io", "ClusterTrustBundle"},
      {"flowcontrol.apiserver.k8s.io", "FlowSchema"},
      {"flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"},
      {"networking.k8s.io", "IngressClass"},
      {"networking.k8s.io", "IPAddress"},
      {"networking.k8s.io", "ServiceCIDR"},
      {"node.k8s.io", "RuntimeClass"},
      {"rbac.authorization.k8s.io", "ClusterRole"},
      {"rbac.authorization.k8s.io", "ClusterRoleBinding"},
      {"resource.k8s.io", "DeviceClass"},
      {"resource.k8s.io", "ResourceSlice"},
      {"scheduling.k8s.io", "PriorityClass"},
      {"storage.k8s.io", "CSIDriver"},
      {"storage.k8s.io", "CSINode"},
      {"storage.k8s.io", "StorageClass"},
      {"storage.k8s.io", "VolumeAttachment"},
      {"storage.k8s.io", "VolumeAttributesClass"},
      {"storagemigration.k8s.io", "StorageVersionMigration"},
  };
  return kClusterScoped.contains({apiGroup(api_version), std::string(kind)});
}

void sortForDisplay(std::vector<Json>& objects) {
  auto key = [](const Json& object) {
    const Json* metadata = object.find("metadata");
    std::string ns = metadata != nullptr ? metadata->getString("namespace") : std::string();
    std::string name = metadata != nullptr ? metadata->getString("name") : std::string();
    return std::make_tuple(object.getString("kind"), ns, name, object.getString("apiVersion"));
  };
  std::stable_sort(objects.begin(), objects.end(), [&](const Json& a, const Json& b) { return key(a) < key(b); });
}

int runRender(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  RenderArgs args;
  if (std::find(argv.begin(), argv.end(), "-h") != argv.end() ||
      std::find(argv.begin(), argv.end(), "--help") != argv.end()) {
    out << renderUsage();
    return kExitOk;
  }
  if (auto problem = parseRenderArgs(argv, args)) {
    err << "error: " << *problem << "\nRun 'flotilla render --help' for usage.\n";
    return kExitUsage;
  }
  log::setLevel(log::Level::kError);
  if (auto completed = completeCluster(args); !completed.ok()) {
    err << "error: " << completed.error().describe() << "\n";
    return kExitError;
  }
  auto repo = loadRepo(args);
  if (!repo.ok()) {
    err << "error: " << repo.error().describe() << "\n";
    return kExitError;
  }
  render::RenderTools tools{.helm_binary = toolPath(args.helm_binary, "helm"),
                            .kustomize_binary = toolPath(args.kustomize_binary, "kustomize")};
  auto rendered = render::renderForCluster(args.dir, args.cluster, tools, *repo);
  if (!rendered.ok()) {
    err << "error: cannot render " << args.dir << ": " << rendered.error().describe() << "\n";
    return kExitError;
  }
  auto bundles = std::move(*rendered);
  std::sort(bundles.begin(), bundles.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  int exit_code = kExitOk;
  for (const auto& bundle : bundles) {
    out << describeDecision(bundle, args.cluster.name) << "\n";
    if (bundle.decision == render::ClusterBundle::Decision::kError) {
      err << describeError(bundle) << "\n";
      exit_code = kExitError;
      continue;
    }
    if (bundle.decision != render::ClusterBundle::Decision::kDeploy || !bundle.manifest) {
      continue;
    }
    auto parsed = Json::parse(bundle.manifest->text);
    if (!parsed.ok() || !parsed->isArray()) {
      err << "error: bundle " << bundle.bundle << ": the rendered manifest is not a JSON array (a bug)\n";
      exit_code = kExitError;
      continue;
    }
    std::vector<Json> objects = parsed->asArray();
    placeNamespaces(objects, bundle.options);
    sortForDisplay(objects);
    if (args.output == "json") {
      Json array = Json::array();
      for (auto& object : objects) {
        array.push(std::move(object));
      }
      out << array.pretty() << "\n";
      continue;
    }
    for (const auto& object : objects) {
      out << "---\n" << toYaml(object);
    }
  }
  return exit_code;
}

}  // namespace flotilla::cli
