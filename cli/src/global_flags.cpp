// The global flags of `flotilla` (NATS connection, -n, -A, -o): defined once on the top-level app, accepted in any
// position, and checked against the command that runs.
#include <algorithm>
#include <ostream>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/cli/cli.h"

namespace flotilla::cli {

namespace {

//! The flags that only matter to commands that talk to the hub.
constexpr std::string_view kHubFlags[] = {
    "--nats-url",  "--nats-creds", "--nats-user",         "--nats-password", "--nats-ca",
    "--nats-cert", "--nats-key",   "--nats-inbox-prefix", "--timeout",       "-A"};

//! The hub flags that only say where the server is and how to reach it (auth revoke takes them).
bool isServerFlag(std::string_view flag) {
  return flag == "--nats-url" || flag == "--nats-ca" || flag == "--nats-cert" || flag == "--nats-key" ||
         flag == "--timeout";
}

bool given(const CLI::App& app, std::string_view flag) {
  return app.get_option(std::string(flag))->count() > 0;
}

std::string joinWords(const std::vector<std::string_view>& words, std::string_view last_separator) {
  std::string joined;
  for (size_t i = 0; i < words.size(); ++i) {
    joined += i == 0 ? "" : (i + 1 == words.size() ? std::string(last_separator) : std::string(", "));
    joined += words[i];
  }
  return joined;
}

}  // namespace

void defineGlobalFlags(CLI::App& app, GlobalFlags& flags) {
  ConnectSettings& connect = flags.connect;
  app.add_option("--nats-url", connect.url,
                 "NATS server(s), comma-separated (default $FLOTILLA_NATS_URL or nats://127.0.0.1:4222)")
      ->type_name("URL");
  app.add_option("--nats-creds", connect.creds_file, "NATS credentials file")->type_name("FILE");
  app.add_option("--nats-user", connect.user, "NATS user")->type_name("USER");
  app.add_option("--nats-password", connect.password, "NATS password")->type_name("PASSWORD");
  app.add_option("--nats-ca", connect.ca_file, "CA certificate for TLS to NATS")->type_name("FILE");
  app.add_option("--nats-cert", connect.cert_file, "client certificate for TLS to NATS")->type_name("FILE");
  app.add_option("--nats-key", connect.key_file, "client key for TLS to NATS")->type_name("FILE");
  app.add_option("--nats-inbox-prefix", connect.inbox_prefix,
                 "reply subject prefix (default: the credentials' own, _INBOX.readonly for readonly; else _INBOX)")
      ->type_name("PREFIX");
  app.add_option("--timeout", flags.timeout_seconds, "how long to wait for NATS, in seconds (default 5)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("SECONDS");
  app.add_option("-n,--namespace,--workspace", flags.workspace,
                 "the workspace (what it selects depends on the command)")
      ->type_name("WS");
  app.add_flag("-A,--all-namespaces", flags.all_workspaces, "every workspace (the default of get)");
  app.add_option("-o,--output", flags.output, "output format (which ones depends on the command)")->type_name("FMT");
}

std::string checkGlobalFlags(const Command& command, const CLI::App& app, GlobalFlags& flags) {
  const std::string name(command.name);
  if (given(app, "-o") && command.outputs.empty()) {
    return "-o: " + name + " has no output format";
  }
  if (given(app, "-o") &&
      std::find(command.outputs.begin(), command.outputs.end(), flags.output) == command.outputs.end()) {
    return "-o: " + name + " prints " + joinWords(command.outputs, " or ") + ", got \"" + flags.output + "\"";
  }
  if (!given(app, "-o") && !command.outputs.empty()) {
    flags.output = std::string(command.outputs.front());
  }
  if ((given(app, "-n") || given(app, "-A")) && command.workspace_help.empty()) {
    return std::string(given(app, "-n") ? "-n" : "-A") + " does not apply to " + name +
           (name == "apply" ? " (each document names its workspace in metadata.namespace)" : "");
  }
  if (!command.uses_hub) {
    const bool reaches = command.reaches_server != nullptr && command.reaches_server(app);
    for (auto flag : kHubFlags) {
      if (given(app, flag) && !(reaches && isServerFlag(flag))) {
        return std::string(flag) + " does not apply to " + name +
               (reaches ? " revoke (it connects with the credentials in --dir)" : " (it does not use the hub)");
      }
    }
  }
  if (flags.all_workspaces) {
    flags.workspace.clear();
  }
  flags.connect.timeout = std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_seconds * 1000));
  return {};
}

std::string globalFlagsHelp(const Command& command) {
  std::string help = "Global flags that apply (before or after the command):\n";
  if (!command.workspace_help.empty()) {
    help += "  -n, --namespace, --workspace WS\n                              " + std::string(command.workspace_help) +
            "\n";
  }
  if (!command.outputs.empty()) {
    help += "  -o, --output FMT            " + joinWords(command.outputs, " or ") + " (default " +
            std::string(command.outputs.front()) + ")\n";
  }
  if (command.uses_hub) {
    help +=
        "  --nats-url URL, --nats-creds FILE, --nats-user, --nats-password, --nats-ca, --nats-cert, --nats-key,\n"
        "  --nats-inbox-prefix PREFIX, --timeout SECONDS\n"
        "                              how to reach the hub (see 'flotilla --help')\n";
  }
  if (command.reaches_server != nullptr) {
    help +=
        "  --nats-url URL, --nats-ca FILE, --nats-cert FILE, --nats-key FILE, --timeout SECONDS\n"
        "                              auth revoke only: the server to push to (default CA and client certificate:\n"
        "                              D/tls/ca.pem, D/tls/admin.pem when there)\n";
  }
  if (command.workspace_help.empty() && command.outputs.empty() && !command.uses_hub &&
      command.reaches_server == nullptr) {
    help = "No global flags apply.\n";
  }
  return help + "Exit codes: 0 ok, 1 error, 2 usage" +
         (command.exit_codes.empty() ? std::string() : ", " + std::string(command.exit_codes)) + ".";
}

int failWith(std::ostream& err, const std::string& message) {
  err << "error: " << message << "\n";
  return kExitError;
}

int usageError(std::ostream& err, const std::string& message, std::string_view command) {
  err << "error: " << message << "\nRun 'flotilla " << (command.empty() ? "" : std::string(command) + " ")
      << "--help' for usage.\n";
  return kExitUsage;
}

}  // namespace flotilla::cli
