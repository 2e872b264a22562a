// cli/src/command_line.h (private to the CLI)
//
// The command table of `flotilla`: one entry per subcommand with the flags and arguments it defines (CLI11) and
// the global flags that apply to it. Global flags (NATS connection, -n, -o) are defined once on the top-level app
// and accepted in any position; after parsing, checkGlobalFlags rejects the ones a command has no use for, so
// `flotilla describe -o json` or `flotilla apply -n ws` fail instead of being silently ignored.
//
// Adding a command: declare its define/run functions here, implement them in its own file, add a row to
// commandTable() (cli.cpp).
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/kv.h"
#include "flotilla/cli/auth.h"
#include "flotilla/cli/events.h"
#include "flotilla/cli/hub_reader.h"
#include "flotilla/cli/views.h"
#include "render_args.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace flotilla::cli {

//! The streams a command reads and writes.
struct Streams {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

//! The flags every command line may carry, wherever they appear.
struct GlobalFlags {
  ConnectSettings connect;
  double timeout_seconds = 5;
  std::string workspace;  //!< -n; "" = every workspace
  bool all_workspaces = false;
  std::string output;  //!< -o; "" until checkGlobalFlags fills in the command's default
};

//! Everything one command line parses into: the global flags and the arguments of whichever command runs.
struct Invocation {
  GlobalFlags global;
  std::string kind;             //!< get, describe, delete: the kind
  std::string name;             //!< get (optional), describe, delete, force-sync: the object's name
  std::string file;             //!< apply -f
  std::string kubeconfig;       //!< apply --kubeconfig: the hub cluster (Kubernetes mode)
  bool keep_resources = false;  //!< delete cluster --keep-resources
  bool watch = false;           //!< get -w
  std::string wait_for;         //!< wait --for: ready or delete
  std::string wait_timeout;     //!< wait --timeout (a duration)
  std::string shell;            //!< completion
  RenderArgs render;
  AuthArgs auth;                   //!< auth init / issue
  EventsArgs events;               //!< events --since, --type, -f
  const CLI::App* root = nullptr;  //!< the top-level app (help and completion describe it)
};

//! One subcommand.
struct Command {
  std::string_view name;
  std::string_view summary;
  //! The values -o accepts, the default first; empty = the command prints no selectable format and -o is rejected.
  std::vector<std::string_view> outputs;
  //! What -n means for this command ("" = -n does not apply).
  std::string_view workspace_help;
  bool uses_hub = false;  //!< the NATS flags (and -A) apply
  //! For a command that does not use the hub: whether this command line reaches the hub's server anyway (auth
  //! revoke), so that --nats-url, --nats-ca, --nats-cert, --nats-key and --timeout apply (the other NATS flags do
  //! not: it connects with the auth dir's credentials).
  bool (*reaches_server)(const CLI::App& app) = nullptr;
  //! What the first argument completes to in the shell: a word list, or "<dir>"/"<file>" for paths.
  std::vector<std::string_view> argument_words;
  //! Exit codes of this command besides 0, 1 and 2, for its help ("" = none).
  std::string_view exit_codes;
  void (*define)(CLI::App& command, Invocation& invocation) = nullptr;
  int (*run)(Invocation& invocation, const Streams& io) = nullptr;
};

//! Every command, in the order help lists them.
const std::vector<Command>& commandTable();

//! The kinds get/describe accept (plural names; aliases are accepted too, see views.h parseKind).
const std::vector<std::string_view>& kindWords();

//! Defines the global flags on the top-level app.
void defineGlobalFlags(CLI::App& app, GlobalFlags& flags);

//! After parsing: rejects global flags `command` has no use for (naming the flag and the command), checks the -o
//! value and fills in the default output and the timeout. Returns the problem, or "" when the flags are fine.
std::string checkGlobalFlags(const Command& command, const CLI::App& app, GlobalFlags& flags);

//! The footer of a command's help: the global flags that apply to it.
std::string globalFlagsHelp(const Command& command);

//! The shell completion script for `shell` ("bash" or "zsh"), generated from the app's commands and flags.
std::string completionScript(const CLI::App& app, std::string_view shell);

//! "error: <message>" on err; exit 1.
int failWith(std::ostream& err, const std::string& message);
//! "error: <message>" and the usage hint on err; exit 2.
int usageError(std::ostream& err, const std::string& message, std::string_view command = {});

//! Connects and reads every record the read commands show; warnings (unreadable records) go to err.
Result<Snapshot> readHub(const ConnectSettings& connect, std::ostream& err);

//! Blocks on `watcher` until it delivers a change (true) or `deadline` passes (false); the end-of-initial-values
//! marker is not a change. A watch that fails is an error.
Result<bool> waitForChange(bus::KvWatcher& watcher, std::chrono::steady_clock::time_point deadline);

//! get -w (get_watch.cpp): the table, then a row each time one of the objects it shows changes.
int runGetWatch(const Invocation& invocation, Kind kind, const Streams& io);

// The commands (each in its own file).
void defineApply(CLI::App& command, Invocation& invocation);
int runApply(Invocation& invocation, const Streams& io);
void defineGet(CLI::App& command, Invocation& invocation);
int runGet(Invocation& invocation, const Streams& io);
void defineDescribe(CLI::App& command, Invocation& invocation);
int runDescribe(Invocation& invocation, const Streams& io);
void defineDelete(CLI::App& command, Invocation& invocation);
int runDelete(Invocation& invocation, const Streams& io);
//! `delete cluster <name>`: the deregistration (cluster_delete.cpp); runDelete hands clusters to it.
int runDeleteCluster(Invocation& invocation, const Streams& io);
void defineForceSync(CLI::App& command, Invocation& invocation);
int runForceSync(Invocation& invocation, const Streams& io);
void defineRedrive(CLI::App& command, Invocation& invocation);
int runRedriveCommand(Invocation& invocation, const Streams& io);
void defineEvents(CLI::App& command, Invocation& invocation);
int runEventsCommand(Invocation& invocation, const Streams& io);
void defineExplain(CLI::App& command, Invocation& invocation);
int runExplain(Invocation& invocation, const Streams& io);
void defineWait(CLI::App& command, Invocation& invocation);
int runWait(Invocation& invocation, const Streams& io);
void defineRender(CLI::App& command, Invocation& invocation);
int runRenderCommand(Invocation& invocation, const Streams& io);
void defineAuth(CLI::App& command, Invocation& invocation);
int runAuth(Invocation& invocation, const Streams& io);
//! Whether the command line is `auth revoke` (it pushes to the hub's server).
bool authReachesServer(const CLI::App& app);
//! `auth revoke` (auth_revoke.cpp).
int runAuthRevoke(const AuthArgs& args, const GlobalFlags& global, const Streams& io);

}  // namespace flotilla::cli
