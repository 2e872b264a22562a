// The `flotilla` command line on CLI11: the command table, the global flags and runCli, which parses, checks the
// global flags against the chosen command and runs it. The commands live in their own files (command_line.h).
#include "flotilla/cli/cli.h"

#include <algorithm>
#include <iostream>
#include <variant>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::cli {

namespace {

constexpr std::string_view kDescription =
    "Read and write the Flotilla hub over NATS; `render` previews what a cluster gets, without a hub.";

constexpr std::string_view kFooter =
    R"(Kinds: gitrepos, bundles, clusters, clustergroups, bundledeployments (bd). Without -n every
workspace is shown. A bundledeployment is named <cluster>/<bundle>.
Global flags go before or after the command; a command rejects the ones it has no use for.
Run 'flotilla <command> --help' for a command's own flags; 'flotilla completion bash|zsh' prints a completion script.

Exit codes: 0 ok (also `events -f` ended by SIGINT or SIGTERM), 1 error (one 'error: ...' line on stderr), 2 usage
(a bad flag or flag value, named); wait: 3 timed out, 4 will not be ready without a change.)";

void defineCompletion(CLI::App& command, Invocation& invocation) {
  command.add_option("shell", invocation.shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
}

int runCompletion(Invocation& invocation, const Streams& io) {
  io.out << completionScript(*invocation.root, invocation.shell);
  return kExitOk;
}

const Command* findCommand(std::string_view name) {
  const auto& table = commandTable();
  auto found = std::find_if(table.begin(), table.end(), [&](const Command& c) { return c.name == name; });
  return found == table.end() ? nullptr : &*found;
}

//! Builds the app: global flags on the top level, a subcommand per command that hands unknown flags up to it.
void defineApp(CLI::App& app, Invocation& invocation) {
  app.name("flotilla");
  app.description(std::string(kDescription));
  app.footer(std::string(kFooter));
  defineGlobalFlags(app, invocation.global);
  for (const auto& command : commandTable()) {
    CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.summary));
    command.define(*sub, invocation);
    sub->fallthrough();
    sub->footer(globalFlagsHelp(command));
  }
  // Set after the subcommands exist, so it is not inherited: leftovers are collected here and reported by runCli
  // with a message that says what they are.
  app.allow_extras();
}

//! The problem with words nobody took, or "".
std::string leftoverProblem(const std::vector<std::string>& leftovers, const CLI::App* chosen) {
  if (leftovers.empty()) {
    return {};
  }
  const std::string& first = leftovers.front();
  if (first.size() > 1 && first[0] == '-') {
    return "unknown flag " + first.substr(0, first.find('=')) +
           (chosen != nullptr ? " for " + chosen->get_name() : std::string());
  }
  if (chosen == nullptr) {
    return "unknown command \"" + first + "\"";
  }
  return chosen->get_name() + ": unexpected argument \"" + first + "\"";
}

//! Parses `args`; returns the command to run, or the exit code when parsing already settled it (help, usage).
std::variant<const Command*, int> parse(CLI::App& app, std::vector<std::string> args, const Streams& io) {
  // `flotilla help [command]` is `flotilla [command] --help` (not a command of its own: CLI11 would take the
  // argument for the command itself).
  if (!args.empty() && args.front() == "help") {
    args.erase(args.begin());
    if (!args.empty() && !findCommand(args.front())) {
      return usageError(io.err, "unknown command \"" + args.front() + "\"");
    }
    args.emplace_back("--help");
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    io.out << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    auto chosen = app.get_subcommands();
    return usageError(io.err, e.what(), chosen.empty() ? std::string_view() : chosen.front()->get_name());
  }
  auto chosen = app.get_subcommands();
  const CLI::App* sub = chosen.empty() ? nullptr : chosen.front();
  if (auto problem = leftoverProblem(app.remaining(true), sub); !problem.empty()) {
    return usageError(io.err, problem, sub != nullptr ? sub->get_name() : std::string());
  }
  if (sub == nullptr) {
    io.err << app.help();
    return kExitUsage;
  }
  return findCommand(sub->get_name());
}

}  // namespace

namespace {

//! The commands that talk to a hub, in the order `flotilla --help` lists them.
std::vector<Command> hubCommands() {
  return {
      {.name = "apply",
       .summary = "store GitRepo, ClusterGroup and Cluster documents (Fleet's YAML, a kind: List of them)",
       .uses_hub = true,
       .define = defineApply,
       .run = runApply},
      {.name = "get",
       .summary = "list objects, or show one",
       .outputs = {"table", "wide", "json", "yaml"},
       .workspace_help = "only this workspace (default: every workspace)",
       .uses_hub = true,
       .argument_words = kindWords(),
       .define = defineGet,
       .run = runGet},
      {.name = "describe",
       .summary = "spec, status, summary and per-cluster states of one object",
       .workspace_help = "the object's workspace (needed when the name exists in several)",
       .uses_hub = true,
       .argument_words = kindWords(),
       .define = defineDescribe,
       .run = runDescribe},
      {.name = "delete",
       .summary = "remove a GitRepo or ClusterGroup spec, or deregister a cluster (the hub then removes what "
                  "they deployed)",
       .workspace_help = "the object's workspace (needed when the name exists in several; not for clusters)",
       .uses_hub = true,
       .argument_words = {"gitrepos", "clustergroups", "clusters"},
       .define = defineDelete,
       .run = runDelete},
      {.name = "force-sync",
       .summary = "re-run the pipeline for a GitRepo's current commit",
       .workspace_help = "the GitRepo's workspace (needed when the name exists in several)",
       .uses_hub = true,
       .define = defineForceSync,
       .run = runForceSync},
      {.name = "explain",
       .summary = "why a GitRepo, bundle or commit is not Ready: each stage, where it blocks, the next action (JSON "
                  "within 1 KB)",
       .outputs = {"json", "human"},
       .workspace_help = "the GitRepo's or bundle's workspace (needed when the name exists in several)",
       .uses_hub = true,
       .define = defineExplain,
       .run = runExplain},
      {.name = "wait",
       .summary = "wait until a GitRepo, bundle or cluster is ready (or deleted), watching the hub",
       .workspace_help = "the GitRepo's or bundle's workspace (needed when the name exists in several)",
       .uses_hub = true,
       .argument_words = {"gitrepos", "bundles", "clusters"},
       .exit_codes = "3 timed out, 4 will not be ready without a change (explain's blocked.needsChange)",
       .define = defineWait,
       .run = runWait},
      {.name = "redrive",
       .summary = "list the messages consumers terminated (no argument), or re-run them",
       .uses_hub = true,
       .argument_words = {"all"},
       .define = defineRedrive,
       .run = runRedriveCommand},
      {.name = "events",
       .summary = "print the hub's public CloudEvents, one per line: replay (--since, --type) and follow (-f)",
       .outputs = {"json", "text"},
       .uses_hub = true,
       .define = defineEvents,
       .run = runEventsCommand},
  };
}

//! The commands that need no hub (render, auth, completion), listed after the hub's.
std::vector<Command> localCommands() {
  return {
      {.name = "render",
       .summary = "print what a cluster would get from a checkout, without a hub",
       .outputs = {"yaml", "json"},
       .workspace_help = "the cluster's workspace (.ClusterNamespace; default fleet-default)",
       .argument_words = {"<dir>"},
       .define = defineRender,
       .run = runRenderCommand},
      {.name = "auth",
       .summary = "create the hub's NATS identities (init), creds for one more (issue), Kubernetes Secrets (secrets), "
                  "revoke a deregistered cluster's or a token's creds at the server (revoke)",
       .reaches_server = authReachesServer,
       .argument_words = {"init", "issue", "secrets", "revoke"},
       .define = defineAuth,
       .run = runAuth},
      {.name = "completion",
       .summary = "print a shell completion script: source <(flotilla completion bash)",
       .argument_words = {"bash", "zsh"},
       .define = defineCompletion,
       .run = runCompletion},
  };
}

}  // namespace

const std::vector<Command>& commandTable() {
  static const std::vector<Command> kCommands = [] {
    std::vector<Command> all = hubCommands();
    for (auto& command : localCommands()) {
      all.push_back(std::move(command));
    }
    return all;
  }();
  return kCommands;
}

const std::vector<std::string_view>& kindWords() {
  static const std::vector<std::string_view> kKinds = {"gitrepos", "bundles", "clusters", "clustergroups",
                                                       "bundledeployments"};
  return kKinds;
}

std::string usage() {
  Invocation invocation;
  CLI::App app;
  defineApp(app, invocation);
  return app.help();
}

int runCli(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  Invocation invocation;
  invocation.global.connect.url = envOr("FLOTILLA_NATS_URL", invocation.global.connect.url);
  CLI::App app;
  defineApp(app, invocation);
  invocation.root = &app;
  const Streams io{in, out, err};
  auto parsed = parse(app, args, io);
  if (const int* code = std::get_if<int>(&parsed)) {
    return *code;
  }
  const Command& command = *std::get<const Command*>(parsed);
  if (auto problem = checkGlobalFlags(command, app, invocation.global); !problem.empty()) {
    return usageError(err, problem, command.name);
  }
  // Libraries log JSON lines; a CLI user wants only our messages.
  log::setLevel(log::Level::kError);
  try {
    return command.run(invocation, io);
  } catch (const std::exception& e) {
    return failWith(err, std::string("unexpected failure: ") + e.what());
  }
}

}  // namespace flotilla::cli
