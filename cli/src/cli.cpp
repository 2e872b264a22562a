#include "flotilla/cli/cli.h"

#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <variant>

#include "flotilla/cli/hub_reader.h"
#include "flotilla/cli/redrive.h"
#include "flotilla/cli/render_command.h"
#include "flotilla/cli/views.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/scheduler/keys.h"
#include "force_sync.h"

namespace flotilla::cli {

std::string usage() {
  return R"(usage: flotilla [--nats-url URL] <command> [arguments]

Read and write the Flotilla hub over NATS.

Commands:
  apply -f <file|->                    store GitRepo and ClusterGroup documents (Fleet's YAML is accepted)
  get <kind> [name] [-n ws] [-o fmt]   list objects; fmt is table (default), json or yaml
  describe <kind> <name> [-n ws]       spec, status, summary and per-cluster states of one object
  delete <gitrepo|clustergroup> <name> [-n ws]
                                       remove a spec (the pipeline then removes what it deployed)
  force-sync <gitrepo> [-n ws]         re-run the pipeline for the GitRepo's current commit
  redrive [all|<consumer>[/<seq>]]     list (no argument) or re-run messages a consumer terminated
  render <dir> [-l key=value]... [--cluster-name N] [--group G]...
                                       print what a cluster would get from a checkout, without a hub
                                       (see 'flotilla render --help')

Kinds: gitrepos, bundles, clusters, clustergroups, bundledeployments (bd). Without -n every workspace is shown.
A bundledeployment is named <cluster>/<bundle>.

Global flags:
  --nats-url URL        NATS server(s), comma-separated (default $FLOTILLA_NATS_URL or nats://127.0.0.1:4222)
  --nats-creds FILE     NATS credentials file
  --nats-user USER, --nats-password PASSWORD
  --nats-ca FILE, --nats-cert FILE, --nats-key FILE
  --timeout SECONDS     how long to wait for NATS (default 5)
  -h, --help

Exit codes: 0 ok, 1 error, 2 usage.
)";
}

namespace {

//! A usage problem: exit 2 with the usage hint.
struct UsageError {
  std::string message;
};

struct Args {
  ConnectSettings connect;
  std::vector<std::string> positional;
  std::string file;
  std::string workspace;
  std::string output = "table";
  bool help = false;
};

std::variant<Args, UsageError> parseArgs(const std::vector<std::string>& argv) {
  Args args;
  args.connect.url = envOr("FLOTILLA_NATS_URL", args.connect.url);
  std::map<std::string, std::string*> with_value = {
      {"--nats-url", &args.connect.url},
      {"--nats-creds", &args.connect.creds_file},
      {"--nats-user", &args.connect.user},
      {"--nats-password", &args.connect.password},
      {"--nats-ca", &args.connect.ca_file},
      {"--nats-cert", &args.connect.cert_file},
      {"--nats-key", &args.connect.key_file},
      {"-f", &args.file},
      {"--filename", &args.file},
      {"-n", &args.workspace},
      {"--namespace", &args.workspace},
      {"--workspace", &args.workspace},
      {"-o", &args.output},
      {"--output", &args.output},
  };
  std::string timeout;
  with_value["--timeout"] = &timeout;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      args.help = true;
      continue;
    }
    if (arg == "-A" || arg == "--all-namespaces") {
      args.workspace.clear();
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-' && arg != "-") {
      std::string name = arg;
      std::optional<std::string> value;
      if (auto eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      } else if (arg.size() > 2 && arg[1] != '-' && with_value.contains(arg.substr(0, 2))) {
        name = arg.substr(0, 2);  // -ojson, -nfleet-default
        value = arg.substr(2);
      }
      auto target = with_value.find(name);
      if (target == with_value.end()) {
        return UsageError{"unknown flag " + name};
      }
      if (!value) {
        if (i + 1 >= argv.size()) {
          return UsageError{"flag " + name + " needs a value"};
        }
        value = argv[++i];
      }
      *target->second = *value;
      continue;
    }
    args.positional.push_back(arg);
  }
  if (!timeout.empty()) {
    try {
      args.connect.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::stod(timeout) * 1000));
    } catch (...) {
      return UsageError{"--timeout: expected seconds, got \"" + timeout + "\""};
    }
  }
  if (args.output != "table" && args.output != "json" && args.output != "yaml" && args.output != "wide") {
    return UsageError{"-o: expected table, json or yaml, got \"" + args.output + "\""};
  }
  return args;
}

int failWith(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n";
  return kExitError;
}

int usageError(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\nRun 'flotilla --help' for usage.\n";
  return kExitUsage;
}

// ---- apply ----

//! Stores one spec: create when absent, else update on the revision read (retried on a race), keeping the stored
//! creationTimestamp and uid and bumping metadata.generation when spec, labels or annotations changed. Returns
//! "created", "configured" or "unchanged".
template <typename T>
Result<std::string> storeSpec(bus::KeyValue& kv, const std::string& key, T resource,
                              const std::function<Result<T>(const Json&)>& decode) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto entry = kv.get(key);
    std::optional<T> stored;
    uint64_t revision = 0;
    if (entry.ok()) {
      revision = entry->revision;
      auto json = Json::parse(entry->value);
      if (json.ok()) {
        auto decoded = decode(*json);
        if (decoded.ok()) {
          stored = std::move(decoded).value();
        }
      }
    } else if (entry.error().kind != ErrorKind::kNotFound) {
      return fail(entry.error());
    }
    T next = resource;
    if (stored) {
      next.metadata.generation = stored->metadata.generation;
      next.metadata.creation_timestamp = stored->metadata.creation_timestamp;
      next.metadata.uid = stored->metadata.uid;
      if (next.spec == stored->spec && next.metadata.labels == stored->metadata.labels &&
          next.metadata.annotations == stored->metadata.annotations) {
        return std::string("unchanged");
      }
      next.metadata.generation = stored->metadata.generation + 1;
    } else {
      next.metadata.generation = 1;
      next.metadata.creation_timestamp = log::nowRfc3339();
      next.metadata.uid = randomHex(16);
    }
    if (next.metadata.creation_timestamp.empty()) {
      next.metadata.creation_timestamp = log::nowRfc3339();
    }
    next.metadata.resource_version.clear();
    std::string value = model::encode(next).dump();
    auto written = entry.ok() ? kv.update(key, value, revision) : kv.create(key, value);
    if (written.ok()) {
      return std::string(stored || entry.ok() ? "configured" : "created");
    }
    if (written.error().kind != ErrorKind::kConflict) {
      return fail(written.error());
    }
    // Someone else wrote the key between our read and write: read again.
  }
  return fail(ErrorKind::kConflict, "the record " + key + " kept changing while it was being written; try again");
}

int apply(const Args& args, std::istream& in, std::ostream& out, std::ostream& err) {
  if (args.file.empty()) {
    return usageError(err, "apply needs -f <file> (or -f - for stdin)");
  }
  if (args.positional.size() > 1) {
    return usageError(err, "apply takes no arguments besides -f");
  }
  std::string text;
  std::string source = args.file;
  if (args.file == "-") {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    source = "<stdin>";
  } else {
    auto content = readFile(args.file);
    if (!content.ok()) {
      return failWith(err, "cannot read " + args.file + ": " + content.error().message);
    }
    text = std::move(content).value();
  }
  // Everything is checked before anything is written: one bad document leaves the hub unchanged.
  auto resources = model::decodeResources(text, source);
  if (!resources.ok()) {
    return failWith(err, resources.error().describe());
  }
  if (resources->empty()) {
    return failWith(err, "no objects found in " + source);
  }
  for (const auto& resource : *resources) {
    std::string_view kind = model::kindOf(resource);
    if (kind != "GitRepo" && kind != "ClusterGroup") {
      return failWith(err, source + ": " + std::string(kind) + " " + model::metaOf(resource).name +
                               ": only GitRepo and ClusterGroup can be applied (clusters register through their "
                               "agent; bundles and bundle deployments are made by the hub)");
    }
  }
  auto hub = openHub(args.connect, {std::string(events::kGitReposBucket), std::string(events::kClustersBucket)});
  if (!hub.ok()) {
    return failWith(err, hub.error().describe());
  }
  for (auto& resource : *resources) {
    Result<std::string> stored = std::string();
    std::string label;
    if (auto* gitrepo = std::get_if<model::GitRepo>(&resource)) {
      gitrepo->status = {};
      label = qualifiedKind(Kind::kGitRepo) + "/" + gitrepo->metadata.name;
      stored = storeSpec<model::GitRepo>(hub->bucket(events::kGitReposBucket),
                                         scheduler::gitRepoRecordKey(gitrepo->metadata.ns, gitrepo->metadata.name),
                                         *gitrepo, [](const Json& j) { return model::decodeGitRepo(j); });
    } else if (auto* group = std::get_if<model::ClusterGroup>(&resource)) {
      group->status = {};
      label = qualifiedKind(Kind::kClusterGroup) + "/" + group->metadata.name;
      stored =
          storeSpec<model::ClusterGroup>(hub->bucket(events::kClustersBucket),
                                         scheduler::clusterGroupRecordKey(group->metadata.ns, group->metadata.name),
                                         *group, [](const Json& j) { return model::decodeClusterGroup(j); });
    }
    if (!stored.ok()) {
      return failWith(err, label + ": " + stored.error().describe());
    }
    out << label << " " << *stored << "\n";
  }
  return kExitOk;
}

// ---- get / describe / delete ----

int get(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.positional.size() < 2 || args.positional.size() > 3) {
    return usageError(err, "usage: flotilla get <kind> [name] [-n workspace] [-o table|json|yaml]");
  }
  auto kind = parseKind(args.positional[1]);
  if (!kind.ok()) {
    return usageError(err, kind.error().message);
  }
  auto hub = openHub(args.connect, {std::string(events::kGitReposBucket), std::string(events::kClustersBucket),
                                    std::string(events::kBundlesBucket), std::string(events::kDeploymentsBucket),
                                    std::string(events::kStatusBucket)});
  if (!hub.ok()) {
    return failWith(err, hub.error().describe());
  }
  auto snapshot = loadSnapshot(*hub);
  if (!snapshot.ok()) {
    return failWith(err, "cannot read the hub: " + snapshot.error().describe());
  }
  for (const auto& warning : snapshot->warnings) {
    err << "warning: " << warning << "\n";
  }
  Filter filter{.workspace = args.workspace, .name = args.positional.size() == 3 ? args.positional[2] : ""};
  auto views = listViews(*snapshot, *kind, filter);
  if (!filter.name.empty() && views.empty()) {
    return failWith(err, std::string(kindName(*kind)) + " \"" + filter.name + "\" not found" +
                             (filter.workspace.empty() ? "" : " in workspace " + filter.workspace));
  }
  if (args.output == "json" || args.output == "yaml") {
    Json list = Json::array();
    for (auto& view : views) {
      list.push(std::move(view));
    }
    out << (args.output == "json" ? list.pretty() + "\n" : toYaml(list));
    return kExitOk;
  }
  if (views.empty()) {
    err << "No " << kindName(*kind) << " objects found" << (args.workspace.empty() ? "" : " in " + args.workspace)
        << ".\n";
    return kExitOk;
  }
  out << renderTable(*kind, views, args.workspace.empty(), std::chrono::system_clock::now());
  return kExitOk;
}

int describe(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.positional.size() != 3) {
    return usageError(err, "usage: flotilla describe <kind> <name> [-n workspace]");
  }
  auto kind = parseKind(args.positional[1]);
  if (!kind.ok()) {
    return usageError(err, kind.error().message);
  }
  auto hub = openHub(args.connect, {std::string(events::kGitReposBucket), std::string(events::kClustersBucket),
                                    std::string(events::kBundlesBucket), std::string(events::kDeploymentsBucket),
                                    std::string(events::kStatusBucket)});
  if (!hub.ok()) {
    return failWith(err, hub.error().describe());
  }
  auto snapshot = loadSnapshot(*hub);
  if (!snapshot.ok()) {
    return failWith(err, "cannot read the hub: " + snapshot.error().describe());
  }
  const std::string& name = args.positional[2];
  std::vector<Json> views = listViews(*snapshot, *kind, {.workspace = args.workspace, .name = name});
  if (*kind == Kind::kBundleDeployment && name.find('/') == std::string::npos && views.size() != 1) {
    return failWith(err, "name a bundle deployment as <cluster>/<bundle>");
  }
  if (views.empty()) {
    return failWith(err, std::string(kindName(*kind)) + " \"" + name + "\" not found" +
                             (args.workspace.empty() ? "" : " in workspace " + args.workspace));
  }
  if (views.size() > 1) {
    std::string where;
    for (const auto& view : views) {
      const Json* ns = view.at({"metadata", "namespace"});
      where += (where.empty() ? "" : ", ") + (ns != nullptr && ns->isString() ? ns->asString() : std::string());
    }
    return failWith(err, std::string(kindName(*kind)) + " \"" + name + "\" exists in several workspaces (" + where +
                             "); choose one with -n");
  }
  out << describeView(*snapshot, *kind, views.front(), std::chrono::system_clock::now());
  return kExitOk;
}

int remove(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.positional.size() != 3) {
    return usageError(err, "usage: flotilla delete <gitrepo|clustergroup> <name> [-n workspace]");
  }
  auto kind = parseKind(args.positional[1]);
  if (!kind.ok()) {
    return usageError(err, kind.error().message);
  }
  if (*kind != Kind::kGitRepo && *kind != Kind::kClusterGroup) {
    return usageError(err, "only gitrepos and clustergroups can be deleted");
  }
  const std::string& name = args.positional[2];
  std::string_view bucket = *kind == Kind::kGitRepo ? events::kGitReposBucket : events::kClustersBucket;
  auto hub = openHub(args.connect, {std::string(bucket)});
  if (!hub.ok()) {
    return failWith(err, hub.error().describe());
  }
  auto& kv = hub->bucket(bucket);
  // Find the workspace when none was given: the name must exist in exactly one.
  std::string pattern =
      *kind == Kind::kGitRepo ? std::string("*.") + events::escapeToken(name) : "group.*." + events::escapeToken(name);
  if (!args.workspace.empty()) {
    pattern = *kind == Kind::kGitRepo ? scheduler::gitRepoRecordKey(args.workspace, name)
                                      : scheduler::clusterGroupRecordKey(args.workspace, name);
  }
  auto keys = kv.keys(pattern);
  if (!keys.ok()) {
    return failWith(err, "cannot read the hub: " + keys.error().describe());
  }
  if (keys->empty()) {
    return failWith(err, std::string(kindName(*kind)) + " \"" + name + "\" not found" +
                             (args.workspace.empty() ? "" : " in workspace " + args.workspace));
  }
  if (keys->size() > 1) {
    return failWith(
        err, std::string(kindName(*kind)) + " \"" + name + "\" exists in several workspaces; choose one with -n");
  }
  auto removed = kv.remove(keys->front());
  if (!removed.ok()) {
    return failWith(err, "cannot delete " + name + ": " + removed.error().describe());
  }
  out << qualifiedKind(*kind) << "/" << name << " deleted\n";
  return kExitOk;
}

}  // namespace

int runCli(const std::vector<std::string>& argv, std::istream& in, std::ostream& out, std::ostream& err) {
  // `render` works without a hub and has its own flags (cluster labels, groups, ...).
  if (!argv.empty() && argv[0] == "render") {
    try {
      return runRender(std::vector<std::string>(argv.begin() + 1, argv.end()), out, err);
    } catch (const std::exception& e) {
      return failWith(err, std::string("unexpected failure: ") + e.what());
    }
  }
  auto parsed = parseArgs(argv);
  if (auto* problem = std::get_if<UsageError>(&parsed)) {
    return usageError(err, problem->message);
  }
  Args& args = std::get<Args>(parsed);
  if (args.help || (!args.positional.empty() && args.positional[0] == "help")) {
    out << usage();
    return kExitOk;
  }
  if (args.positional.empty()) {
    err << usage();
    return kExitUsage;
  }
  // Libraries log JSON lines; a CLI user wants only our messages.
  log::setLevel(log::Level::kError);
  const std::string& command = args.positional[0];
  try {
    if (command == "apply") {
      return apply(args, in, out, err);
    }
    if (command == "get") {
      return get(args, out, err);
    }
    if (command == "describe") {
      return describe(args, out, err);
    }
    if (command == "delete") {
      return remove(args, out, err);
    }
    if (command == "force-sync") {
      return forceSync(args.positional, args.workspace, args.connect, out, err);
    }
    if (command == "redrive") {
      if (args.positional.size() > 2) {
        return usageError(err, "usage: flotilla redrive [all | <consumer> | <consumer>/<sequence>]");
      }
      return runRedrive({.connect = args.connect, .selector = args.positional.size() == 2 ? args.positional[1] : ""},
                        out, err);
    }
  } catch (const std::exception& e) {
    return failWith(err, std::string("unexpected failure: ") + e.what());
  }
  return usageError(err, "unknown command \"" + command + "\"");
}

}  // namespace flotilla::cli
