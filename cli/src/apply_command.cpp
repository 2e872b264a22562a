// `flotilla apply -f <file|->`: decodes every document (a `kind: List` contributes its items, in order), checks
// them all, then stores each spec in KV: GitRepos in gitrepos/<ws>.<name>, ClusterGroups in clusters/group.<ws>.<name>,
// Cluster documents in clusters/spec.<name> (which also withdraws a deregistration of that name). A hub in Kubernetes
// mode (clusters/hub.mode, its gateway mirrors the CRs) refuses that; `--kubeconfig` server-side applies the
// documents as fleet.cattle.io CRs to the hub cluster instead, after the same checks.
#include <iterator>
#include <variant>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/cli/views.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/events/subjects.h"
#include "flotilla/kube/client.h"
#include "flotilla/kube/kubeconfig.h"
#include "flotilla/model/cluster_document.h"
#include "flotilla/model/codec.h"
#include "flotilla/specs/store.h"

namespace flotilla::cli {

namespace {

//! One object to apply and where it came from: "" for a whole document, "items[2]" for an item of a List.
struct SourcedResource {
  model::Resource resource;
  std::string origin;
};

//! Item `index` of the List `list` as a document of its own: its value and the lines of its fields, re-keyed from
//! "items[i].spec..." to "spec..." so that decode errors name the right line.
YamlDocument listItem(const YamlDocument& list, size_t index) {
  const std::string prefix = yamlIndexPath("items", index);
  YamlDocument item{.value = list.value.find("items")->asArray()[index], .line = list.lineOf(prefix)};
  for (const auto& [path, line] : list.lines) {
    if (path.size() > prefix.size() && path.starts_with(prefix) && (path[prefix.size()] == '.')) {
      item.lines.emplace(path.substr(prefix.size() + 1), line);
    } else if (path.size() > prefix.size() && path.starts_with(prefix) && path[prefix.size()] == '[') {
      item.lines.emplace(path.substr(prefix.size()), line);
    }
  }
  return item;
}

//! One document as `apply` reads it: a Cluster is a hub admin's document (model::decodeClusterDocument rejects the
//! Cluster fields the hub does not implement); every other kind is decoded by its strict codec.
Result<model::Resource> decodeApplied(const YamlDocument& document, std::string_view source) {
  if (document.value.isObject() && document.value.getString("kind") == "Cluster") {
    auto cluster = model::decodeClusterDocument(document, source);
    if (!cluster.ok()) {
      return fail(cluster.error());
    }
    return model::Resource(std::move(cluster).value());
  }
  return model::decodeResource(document, source);
}

//! The items of a `kind: List` document (apiVersion v1, as kubectl writes it), each decoded strictly.
Status decodeList(const YamlDocument& list, std::string_view source, std::vector<SourcedResource>& out) {
  const std::string where = std::string(source) + ":" + std::to_string(list.line);
  if (list.value.getString("apiVersion") != "v1") {
    return fail(ErrorKind::kInvalid,
                where + ": kind List needs apiVersion v1, got \"" + list.value.getString("apiVersion") + "\"");
  }
  const Json* items = list.value.find("items");
  if (items == nullptr || !items->isArray()) {
    return fail(ErrorKind::kInvalid, where + ": items: a List needs an items sequence");
  }
  for (size_t index = 0; index < items->asArray().size(); ++index) {
    const std::string origin = yamlIndexPath("items", index);
    auto decoded = decodeApplied(listItem(list, index), source);
    if (!decoded.ok()) {
      return fail(ErrorKind::kInvalid, origin + ": " + decoded.error().describe());
    }
    out.push_back({std::move(decoded).value(), origin});
  }
  return {};
}

//! Every object of `text`: plain documents and the items of List documents, in the order written.
Result<std::vector<SourcedResource>> decodeInput(std::string_view text, std::string_view source) {
  auto documents = parseYamlDocuments(text, source, YamlLimits{.record_lines = true});
  if (!documents.ok()) {
    return fail(documents.error());
  }
  std::vector<SourcedResource> out;
  for (const auto& document : *documents) {
    if (document.value.isObject() && document.value.getString("kind") == "List") {
      FLOTILLA_TRY(decodeList(document, source, out));
      continue;
    }
    auto decoded = decodeApplied(document, source);
    if (!decoded.ok()) {
      return fail(decoded.error());
    }
    out.push_back({std::move(decoded).value(), ""});
  }
  return out;
}

//! The name an object has in messages: "items[1] GitRepo demo" or "GitRepo demo".
std::string describeObject(const SourcedResource& object) {
  std::string kind(model::kindOf(object.resource));
  return (object.origin.empty() ? "" : object.origin + " ") + kind + " " + model::metaOf(object.resource).name;
}

//! Only specs the user owns can be applied; the first other kind is the error.
Status checkKinds(const std::vector<SourcedResource>& objects, const std::string& source) {
  for (const auto& object : objects) {
    std::string_view kind = model::kindOf(object.resource);
    if (kind != "GitRepo" && kind != "ClusterGroup" && kind != "Cluster") {
      return fail(ErrorKind::kInvalid, source + ": " + describeObject(object) +
                                           ": only GitRepo, ClusterGroup and Cluster can be applied (bundles and "
                                           "bundle deployments are made by the hub)");
    }
  }
  return {};
}

//! The object as kubectl names it: "gitrepo.fleet.cattle.io/demo" (checkKinds let only these three kinds through).
std::string labelOf(const model::Resource& resource) {
  const Kind kind = std::holds_alternative<model::GitRepo>(resource)        ? Kind::kGitRepo
                    : std::holds_alternative<model::ClusterGroup>(resource) ? Kind::kClusterGroup
                                                                            : Kind::kCluster;
  return qualifiedKind(kind) + "/" + model::metaOf(resource).name;
}

//! Why an object was not stored or applied: "items[1] gitrepo.fleet.cattle.io/demo: <why>".
std::string failedObject(const SourcedResource& object, const std::string& why) {
  return (object.origin.empty() ? "" : object.origin + " ") + labelOf(object.resource) + ": " + why;
}

//! Stores one object; returns its kubectl-style line ("gitrepo.fleet.cattle.io/demo created").
Result<std::string> storeObject(const HubConnection& hub, SourcedResource& object) {
  Result<std::string> stored = std::string();
  if (auto* gitrepo = std::get_if<model::GitRepo>(&object.resource)) {
    stored = specs::storeGitRepo(hub.bucket(events::kGitReposBucket), *gitrepo);
  } else if (auto* group = std::get_if<model::ClusterGroup>(&object.resource)) {
    stored = specs::storeClusterGroup(hub.bucket(events::kClustersBucket), *group);
  } else if (auto* cluster = std::get_if<model::Cluster>(&object.resource)) {
    stored = specs::storeClusterDocument(hub.bucket(events::kClustersBucket), *cluster);
  }
  if (!stored.ok()) {
    return fail(stored.error().kind, failedObject(object, stored.error().describe()));
  }
  return labelOf(object.resource) + " " + *stored;
}

//! Kubernetes mode: each object server-side applied to the hub cluster as a fleet.cattle.io CR (the gateway mirrors
//! it into KV). Stops at the first refusal, which names the object and the API server's reason.
int applyToKubernetes(const std::string& kubeconfig_path, const std::vector<SourcedResource>& objects,
                      const Streams& io) {
  auto kubeconfig = kube::Kubeconfig::load(kubeconfig_path, "");
  if (!kubeconfig.ok()) {
    return failWith(io.err, "--kubeconfig: " + kubeconfig.error().describe());
  }
  auto client = kube::KubeClient::create(*kubeconfig);
  if (!client.ok()) {
    return failWith(io.err, client.error().describe());
  }
  for (const auto& object : objects) {
    Json document = model::encodeResource(object.resource, model::kFleetApiVersion);
    document.erase("status");
    auto applied = (*client)->apply(document, {.field_manager = "flotilla"});
    if (!applied.ok()) {
      return failWith(io.err, failedObject(object, applied.error().describe()));
    }
    io.out << labelOf(object.resource) << " applied to the hub cluster\n";
  }
  return kExitOk;
}

Result<std::string> readInput(const std::string& file, std::istream& in) {
  if (file == "-") {
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto content = readFile(file);
  if (!content.ok()) {
    return fail(content.error().kind, "cannot read " + file + ": " + content.error().message);
  }
  return content;
}

}  // namespace

void defineApply(CLI::App& command, Invocation& invocation) {
  command
      .add_option("-f,--filename", invocation.file,
                  "a YAML file of GitRepo, ClusterGroup and Cluster documents, or - "
                  "for stdin; a kind: List contributes its items")
      ->required()
      ->type_name("FILE");
  command
      .add_option("--kubeconfig", invocation.kubeconfig,
                  "Kubernetes mode: apply the documents as CRs to the hub cluster of this kubeconfig (its gateway "
                  "mirrors them) instead of writing the hub's KV")
      ->type_name("FILE");
}

int runApply(Invocation& invocation, const Streams& io) {
  const std::string source = invocation.file == "-" ? "<stdin>" : invocation.file;
  auto text = readInput(invocation.file, io.in);
  if (!text.ok()) {
    return failWith(io.err, text.error().message);
  }
  // Everything is checked before anything is written: one bad document leaves the hub unchanged.
  auto objects = decodeInput(*text, source);
  if (!objects.ok()) {
    return failWith(io.err, objects.error().describe());
  }
  if (objects->empty()) {
    return failWith(io.err, "no objects found in " + source);
  }
  if (auto kinds = checkKinds(*objects, source); !kinds.ok()) {
    return failWith(io.err, kinds.error().message);
  }
  if (!invocation.kubeconfig.empty()) {
    return applyToKubernetes(invocation.kubeconfig, *objects, io);
  }
  auto hub =
      openHub(invocation.global.connect, {std::string(events::kGitReposBucket), std::string(events::kClustersBucket)});
  if (!hub.ok()) {
    return failWith(io.err, hub.error().describe());
  }
  if (auto mode = specs::requireKvMode(hub->bucket(events::kClustersBucket), "apply"); !mode.ok()) {
    return failWith(io.err, mode.error().message);
  }
  for (auto& object : *objects) {
    auto line = storeObject(*hub, object);
    if (!line.ok()) {
      return failWith(io.err, line.error().message);
    }
    io.out << *line << "\n";
  }
  return kExitOk;
}

}  // namespace flotilla::cli
