#include "flotilla/cli/render_command.h"

#include <algorithm>
#include <ostream>
#include <set>
#include <tuple>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/core/log.h"
#include "flotilla/core/yaml.h"
#include "flotilla/render/cluster_render.h"
#include "tool_lookup.h"

namespace flotilla::cli {

namespace {

std::string joinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) {
    joined += (joined.empty() ? "" : "+") + name;
  }
  return joined;
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

//! The renderer binaries, found as tool_lookup.h says.
struct Renderers {
  ToolLocation helm;
  ToolLocation kustomize;

  //! Why a bundle error may be a missing binary: the lookup of each tool the message names that was not found.
  [[nodiscard]] std::string notFoundNotes(const std::string& message) const {
    std::string notes;
    for (const auto& [name, location] : {std::pair{"helm", &helm}, std::pair{"kustomize", &kustomize}}) {
      if (!location->found && message.find(name) != std::string::npos) {
        notes += "\n  " + notFoundMessage(name, *location);
      }
    }
    return notes;
  }
};

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

namespace {

//! Prints one deployed bundle's objects as the agent would place them.
void printObjects(std::vector<Json> objects, const model::BundleDeploymentOptions& options, bool json,
                  std::ostream& out) {
  placeNamespaces(objects, options);
  sortForDisplay(objects);
  if (json) {
    Json array = Json::array();
    for (auto& object : objects) {
      array.push(std::move(object));
    }
    out << array.pretty() << "\n";
    return;
  }
  for (const auto& object : objects) {
    out << "---\n" << toYaml(object);
  }
}

//! Prints every bundle (sorted by path): the decision line, then the objects or, on stderr, the error.
int printBundles(std::vector<render::ClusterBundle> bundles, const Invocation& invocation, const Renderers& renderers,
                 const Streams& io) {
  std::sort(bundles.begin(), bundles.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  int exit_code = kExitOk;
  for (const auto& bundle : bundles) {
    io.out << describeDecision(bundle, invocation.render.cluster.name) << "\n";
    if (bundle.decision == render::ClusterBundle::Decision::kError) {
      std::string message = describeError(bundle);
      io.err << message << renderers.notFoundNotes(message) << "\n";
      exit_code = kExitError;
      continue;
    }
    if (bundle.decision != render::ClusterBundle::Decision::kDeploy || !bundle.manifest) {
      continue;
    }
    auto parsed = Json::parse(bundle.manifest->text);
    if (!parsed.ok() || !parsed->isArray()) {
      io.err << "error: bundle " << bundle.bundle << ": the rendered manifest is not a JSON array (a bug)\n";
      exit_code = kExitError;
      continue;
    }
    printObjects(parsed->asArray(), bundle.options, invocation.global.output == "json", io.out);
  }
  return exit_code;
}

}  // namespace

void defineRender(CLI::App& command, Invocation& invocation) {
  defineRenderFlags(command, invocation.render);
}

int runRenderCommand(Invocation& invocation, const Streams& io) {
  RenderArgs& args = invocation.render;
  if (auto flags = applyClusterFlags(args, invocation.global.workspace); !flags.ok()) {
    return usageError(io.err, flags.error().message, "render");
  }
  if (auto completed = completeCluster(args, !invocation.global.workspace.empty()); !completed.ok()) {
    return failWith(io.err, completed.error().describe());
  }
  auto repo = loadRepo(args);
  if (!repo.ok()) {
    return failWith(io.err, repo.error().describe());
  }
  Renderers renderers{.helm = findTool("helm", args.helm_binary),
                      .kustomize = findTool("kustomize", args.kustomize_binary)};
  render::RenderTools tools{.helm_binary = renderers.helm.path, .kustomize_binary = renderers.kustomize.path};
  auto rendered = render::renderForCluster(args.dir, args.cluster, tools, *repo);
  if (!rendered.ok()) {
    std::string message = "cannot render " + args.dir + ": " + rendered.error().describe();
    return failWith(io.err, message + renderers.notFoundNotes(message));
  }
  return printBundles(std::move(*rendered), invocation, renderers, io);
}

}  // namespace flotilla::cli
