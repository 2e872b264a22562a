// `flotilla auth init`, `auth issue`, `auth secrets` and `auth revoke` (flotilla/cli/auth.h): thin over libs/identity's
// auth_dir.h (revoke: auth_revoke.cpp).
#include <ostream>

#include <CLI/CLI.hpp>

#include "auth_secrets.h"
#include "command_line.h"
#include "flotilla/cli/auth.h"
#include "flotilla/cli/cli.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/model/duration.h"

namespace flotilla::cli {

namespace {

constexpr std::string_view kTtlHelp = "expiry of the issued users, a duration such as 720h (default: never)";

Result<std::optional<std::chrono::seconds>> parseTtl(const std::string& text) {
  if (text.empty()) {
    return std::optional<std::chrono::seconds>();
  }
  auto duration = model::parseDuration(text);
  if (!duration.ok() || duration->count() < 1000) {
    return fail(ErrorKind::kInvalid, "--ttl \"" + text + "\": expected a duration of at least 1s such as 24h or 90m");
  }
  return std::optional(std::chrono::duration_cast<std::chrono::seconds>(*duration));
}

int runInit(const AuthArgs& args, const Streams& io) {
  if (!args.alt_names.empty() && !args.tls && !args.mutual_tls) {
    return usageError(io.err, "--san names the server certificate: it needs --tls or --mutual-tls", "auth init");
  }
  auto ttl = parseTtl(args.ttl);
  if (!ttl.ok()) {
    return usageError(io.err, ttl.error().message, "auth init");
  }
  auto result = identity::initAuthDir({.dir = args.dir,
                                       .server_name = args.server_name,
                                       .tls = args.tls,
                                       .mutual_tls = args.mutual_tls,
                                       .alt_names = args.alt_names,
                                       .hub_ttl = *ttl,
                                       .resolver_dir = args.resolver_dir});
  if (!result.ok()) {
    return failWith(io.err, "auth init: " + result.error().describe());
  }
  for (const auto& file : result->files) {
    io.out << "wrote " << args.dir << "/" << file << "\n";
  }
  io.out << "include " << args.dir << "/nats-auth.conf from the nats-server config; services take "
         << "--nats-creds " << args.dir << "/creds/<service>.creds; the CLI --nats-creds " << args.dir
         << "/creds/admin.creds (or readonly.creds)\n";
  return kExitOk;
}

Result<identity::Role> issuedRole(const AuthArgs& args) {
  if (!args.cluster.empty() && !args.token.empty()) {
    return fail(ErrorKind::kInvalid, "--cluster and --token do not go together");
  }
  if (!args.cluster.empty() && args.role != "agent") {
    return fail(ErrorKind::kInvalid, "--cluster is for --role agent, not " + args.role);
  }
  if (!args.token.empty() && args.role != "registration") {
    return fail(ErrorKind::kInvalid, "--token is for --role registration, not " + args.role);
  }
  return identity::roleFor(args.role, args.cluster.empty() ? args.token : args.cluster);
}

int runIssue(const AuthArgs& args, const Streams& io) {
  auto role = issuedRole(args);
  if (!role.ok()) {
    return usageError(io.err, role.error().message, "auth issue");
  }
  auto ttl = parseTtl(args.ttl);
  if (!ttl.ok()) {
    return usageError(io.err, ttl.error().message, "auth issue");
  }
  auto user = identity::issueFromAuthDir(args.dir, *role, *ttl);
  if (!user.ok()) {
    return failWith(io.err, "auth issue: " + user.error().describe());
  }
  std::string name = identity::identityName(*role);
  if (args.client_cert) {
    Status cert = identity::issueClientCertificate(args.dir, name);
    if (!cert.ok()) {
      return failWith(io.err, "auth issue: " + cert.error().describe());
    }
  }
  std::ostream& report = args.out == "-" ? io.err : io.out;
  if (args.out == "-") {
    io.out << user->creds;  // asked for explicitly: the seed goes to stdout
  } else {
    std::string path = args.out.empty() ? args.dir + "/" + identity::credsFileName(*role) : args.out;
    Status written = identity::writeSecretFile(path, user->creds);
    if (!written.ok()) {
      return failWith(io.err, "auth issue: " + written.error().describe());
    }
    report << "wrote " << path << "\n";
  }
  if (args.client_cert) {
    report << "wrote " << args.dir << "/tls/" << name << ".pem and " << name << "-key.pem\n";
  }
  report << "user " << name << " (" << user->public_key << "), inbox prefix " << role->inbox_prefix
         << (args.ttl.empty() ? ", never expires" : ", expires in " + args.ttl) << "\n";
  return kExitOk;
}

}  // namespace

void defineAuth(CLI::App& command, Invocation& invocation) {
  AuthArgs& args = invocation.auth;
  command.require_subcommand(1);
  CLI::App* init = command.add_subcommand("init", "create the operator, accounts, server config and hub creds");
  init->add_option("--dir", args.dir, "directory to create (must not hold keys yet)")->required();
  init->add_option("--server-name", args.server_name, "server_name, also a name of the server certificate");
  init->add_flag("--tls", args.tls, "make a CA and a server certificate; the server requires TLS");
  init->add_flag("--mutual-tls", args.mutual_tls, "as --tls, and clients need a certificate from the CA");
  init->add_option("--san", args.alt_names,
                   "DNS name or IP of the server certificate (repeatable; default "
                   "localhost and 127.0.0.1)");
  init->add_option("--ttl", args.ttl, std::string(kTtlHelp));
  init->add_option("--resolver-dir", args.resolver_dir,
                   "the server's directory for account JWTs (the full resolver; default D/resolver); it must be "
                   "writable by nats-server and survive restarts");
  init->fallthrough();
  CLI::App* issue = command.add_subcommand("issue", "sign creds for one more identity");
  issue->add_option("--dir", args.dir, "directory auth init created")->required();
  issue->add_option("--role", args.role, "poller, bundler, scheduler, gateway, admin, readonly, agent, registration")
      ->required();
  issue->add_option("--cluster", args.cluster, "the cluster of --role agent");
  issue->add_option("--token", args.token, "the token id of --role registration");
  issue->add_option("--ttl", args.ttl, std::string(kTtlHelp));
  issue->add_option("--out", args.out, "creds file to write (default D/creds/<identity>.creds; - = stdout)");
  issue->add_flag("--client-cert", args.client_cert, "also write a client certificate (mutual TLS)");
  issue->fallthrough();
  CLI::App* secrets = command.add_subcommand("secrets", "print Kubernetes Secrets for the charts from the directory");
  secrets->add_option("--dir", args.dir, "directory auth init created (with --tls or --mutual-tls)")->required();
  secrets->add_option("--kube-namespace", args.kube_namespace, "namespace of the release")->required();
  CLI::Option* agent =
      secrets->add_option("--agent", args.agent, "print the Secret of this cluster's agent (after auth issue) instead");
  CLI::Option* registration = secrets
                                  ->add_option("--registration", args.registration,
                                               "print the agent chart's Secret for this registration token (after "
                                               "auth issue --role registration) instead")
                                  ->excludes(agent);
  for (CLI::Option* hub_only :
       {secrets->add_option("--release", args.release, "the hub chart's release name (default flotilla)"),
        secrets->add_option("--san", args.alt_names,
                            "another DNS name or IP of the hub's server certificate "
                            "(repeatable)"),
        secrets->add_flag("--registrar", args.registrar,
                          "also the registrar's Secret: its signing key (scoped to agent users) and the account JWT, "
                          "for the hub chart's nats.auth.registrar")}) {
    hub_only->excludes(agent)->excludes(registration);
  }
  secrets->add_option("--name", args.secret_name, "the agent Secret's name (default flotilla-agent-nats)")
      ->check([&args](const std::string&) {
        return args.agent.empty() && args.registration.empty()
                   ? std::string("--name requires --agent or --registration")
                   : std::string();
      });
  secrets->fallthrough();
  CLI::App* revoke = command.add_subcommand(
      "revoke", "revoke a deregistered cluster's or a registration token's creds at the server, now");
  revoke->add_option("--dir", args.dir, "directory auth init created (its operator key signs the account JWT)")
      ->required();
  revoke->add_option("--cluster", args.cluster,
                     "the deregistered cluster (its agent creds from auth issue and from registration tokens)");
  revoke->add_option("--token", args.token, "the registration token (D/creds/registration-<token>.creds)");
  revoke->add_option("--wait", args.wait,
                     "wait up to this long (e.g. 10m) for the cluster's deregistration to finish (default: refuse "
                     "while it runs)");
  revoke->fallthrough();
  args.init = init;
  args.issue = issue;
  args.secrets = secrets;
  args.revoke = revoke;
}

bool authReachesServer(const CLI::App& app) {
  // both are defined on every command line (defineAuth)
  return app.get_subcommand("auth")->get_subcommand("revoke")->parsed();
}

int runAuth(Invocation& invocation, const Streams& io) {
  const AuthArgs& args = invocation.auth;
  if (args.init != nullptr && args.init->parsed()) {
    return runInit(args, io);
  }
  if (args.secrets != nullptr && args.secrets->parsed()) {
    return runAuthSecrets(args, io);
  }
  if (args.revoke != nullptr && args.revoke->parsed()) {
    return runAuthRevoke(args, invocation.global, io);
  }
  return runIssue(args, io);
}

}  // namespace flotilla::cli
