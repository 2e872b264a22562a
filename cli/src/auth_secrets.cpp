// `flotilla auth secrets` (flotilla/cli/auth.h): Kubernetes Secret manifests from an `auth init` directory, in the
// names and keys charts/flotilla-hub and charts/flotilla-agent expect (charts/README.md "NATS identities and TLS").
#include "auth_secrets.h"

#include <filesystem>
#include <ostream>

#include "flotilla/cli/cli.h"
#include "flotilla/core/util.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/model/labels.h"

namespace flotilla::cli {

namespace {

//! One Secret: its name, a comment saying what it is for, and its keys in order.
struct SecretManifest {
  std::string name;
  std::string comment;
  std::vector<std::pair<std::string, std::string>> data;
};

//! Helm's `trunc n | trimSuffix "-"`.
std::string truncName(std::string name, size_t length) {
  if (name.size() > length) {
    name.resize(length);
  }
  if (name.ends_with('-')) {
    name.pop_back();
  }
  return name;
}

//! The hub chart's "flotilla-hub.fullname" without overrides: the release name when it contains the chart's.
std::string hubFullname(const std::string& release) {
  return truncName(release.find("flotilla-hub") != std::string::npos ? release : release + "-flotilla-hub", 63);
}

std::string secretYaml(const std::string& kube_namespace, const SecretManifest& secret) {
  std::string text = "---\n# " + secret.comment + "\n";
  text += "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + secret.name + "\n  namespace: " + kube_namespace +
          "\n  labels:\n    app.kubernetes.io/part-of: flotilla\n    app.kubernetes.io/managed-by: flotilla-auth\n";
  text += "type: Opaque\ndata:\n";
  for (const auto& [key, value] : secret.data) {
    text += "  " + key + ": " + base64Encode(value) + "\n";
  }
  return text;
}

Result<std::string> readIn(const std::string& dir, const std::string& relative, const std::string& hint) {
  auto text = readFile(dir + "/" + relative);
  if (!text.ok()) {
    return fail(ErrorKind::kNotFound, dir + "/" + relative + " is missing: " + hint);
  }
  return text;
}

constexpr std::string_view kNoCa = "the charts need TLS: run auth init with --tls or --mutual-tls";

//! Adds tls.crt/tls.key of identity `name` when the directory has its client certificate (mutual TLS).
Result<bool> addClientCertificate(const std::string& dir, const std::string& name, SecretManifest& secret) {
  if (!std::filesystem::exists(dir + "/tls/" + name + ".pem")) {
    return false;
  }
  auto cert = readIn(dir, "tls/" + name + ".pem", "");
  auto key = readIn(dir, "tls/" + name + "-key.pem", "the client key of tls/" + name + ".pem");
  FLOTILLA_TRY(cert);
  FLOTILLA_TRY(key);
  secret.data.emplace_back("tls.crt", *cert);
  secret.data.emplace_back("tls.key", *key);
  return true;
}

//! The embedded server's names: the chart's NATS Service in every form a pod may use, and localhost for
//! `kubectl port-forward`, plus --san.
std::vector<std::string> serverNames(const AuthArgs& args, const std::string& fullname) {
  std::string service = truncName(fullname, 52) + "-nats";
  std::vector<std::string> names = {service,
                                    service + "." + args.kube_namespace,
                                    service + "." + args.kube_namespace + ".svc",
                                    service + "." + args.kube_namespace + ".svc.cluster.local",
                                    "localhost",
                                    "127.0.0.1"};
  names.insert(names.end(), args.alt_names.begin(), args.alt_names.end());
  return names;
}

Result<std::vector<SecretManifest>> hubSecrets(const AuthArgs& args, bool& mutual) {
  const std::string fullname = hubFullname(args.release);
  const std::string prefix = truncName(fullname, 40) + "-nats-";
  auto ca = readIn(args.dir, "tls/ca.pem", std::string(kNoCa));
  FLOTILLA_TRY(ca);
  auto accounts = identity::renderAuthDirAccounts(args.dir);
  FLOTILLA_TRY(accounts);
  auto server = identity::issueServerCertificate(args.dir, serverNames(args, fullname));
  FLOTILLA_TRY(server);
  std::vector<SecretManifest> secrets;
  secrets.push_back({.name = prefix + "server",
                     .comment = "the embedded nats-server: operator and accounts (nats-auth.conf), certificate, CA",
                     .data = {{"nats-auth.conf", *accounts},
                              {"ca.crt", *ca},
                              {"tls.crt", server->certificate},
                              {"tls.key", server->private_key}}});
  if (args.registrar) {
    auto key = readIn(args.dir, "registrar-signing.nk", "auth init writes it (since registration tokens)");
    auto account = readIn(args.dir, "account.jwt", "auth init writes it; was " + args.dir + " made by it?");
    FLOTILLA_TRY(key);
    FLOTILLA_TRY(account);
    secrets.push_back({.name = prefix + "registrar",
                       .comment = "the scheduler's registrar: a signing key that can sign only agent users, and the "
                                  "account JWT listing it",
                       .data = {{"registrar-signing.nk", *key}, {"account.jwt", *account}}});
  }
  for (const std::string service : {"poller", "bundler", "scheduler", "gateway"}) {
    auto creds =
        readIn(args.dir, "creds/" + service + ".creds", "auth init writes it; was " + args.dir + " made by it?");
    FLOTILLA_TRY(creds);
    SecretManifest secret{.name = prefix + service,
                          .comment = "the " + service + "'s NATS identity and the CA",
                          .data = {{"nats.creds", *creds}, {"ca.crt", *ca}}};
    auto cert = addClientCertificate(args.dir, service, secret);
    FLOTILLA_TRY(cert);
    mutual = *cert;
    secrets.push_back(std::move(secret));
  }
  return secrets;
}

//! The agent chart's one Secret (--name): the creds of `role` under `creds_key` (`issue` says how to make them when
//! they are missing), the CA and, when issued, the identity's client certificate (mutual TLS).
Result<std::vector<SecretManifest>> agentChartSecret(const AuthArgs& args, const Result<identity::Role>& role,
                                                     const std::string& creds_key, const std::string& issue,
                                                     const std::string& comment, bool& mutual) {
  FLOTILLA_TRY(role);
  auto creds = readIn(
      args.dir, identity::credsFileName(*role),
      "issue it with flotilla auth issue --dir " + args.dir + " " + issue + " (and --client-cert for mutual TLS)");
  FLOTILLA_TRY(creds);
  auto ca = readIn(args.dir, "tls/ca.pem", std::string(kNoCa));
  FLOTILLA_TRY(ca);
  SecretManifest secret{.name = args.secret_name, .comment = comment, .data = {{creds_key, *creds}, {"ca.crt", *ca}}};
  auto cert = addClientCertificate(args.dir, identity::identityName(*role), secret);
  FLOTILLA_TRY(cert);
  mutual = *cert;
  return std::vector<SecretManifest>{std::move(secret)};
}

Result<std::vector<SecretManifest>> agentSecrets(const AuthArgs& args, bool& mutual) {
  return agentChartSecret(args, identity::roleFor("agent", args.agent), "nats.creds",
                          "--role agent --cluster " + args.agent,
                          "the agent of cluster " + args.agent + ": its NATS identity and the hub's CA", mutual);
}

//! For enrolling with a registration token: its creds (registration.creds) and the CA.
Result<std::vector<SecretManifest>> registrationSecrets(const AuthArgs& args, bool& mutual) {
  return agentChartSecret(args, identity::registrationRole(args.registration), "registration.creds",
                          "--role registration --token " + args.registration + " --ttl 24h",
                          "registration token " + args.registration +
                              ": it lets an agent ask the hub's registrar for credentials of its own; the CA",
                          mutual);
}

std::string checkNames(const AuthArgs& args) {
  if (!model::isDns1123Label(args.kube_namespace)) {
    return "--kube-namespace \"" + args.kube_namespace + "\": expected a Kubernetes namespace name";
  }
  const bool hub = args.agent.empty() && args.registration.empty();
  if (hub && (args.release.size() > 53 || !model::isDns1123Label(args.release))) {
    return "--release \"" + args.release + "\": expected a Helm release name (lower case, digits, '-', up to 53)";
  }
  if (auto role = identity::roleFor("agent", args.agent); !args.agent.empty() && !role.ok()) {
    return "--agent: " + role.error().message;
  }
  if (auto role = identity::registrationRole(args.registration); !args.registration.empty() && !role.ok()) {
    return "--registration: " + role.error().message;
  }
  if (!hub && !model::isDns1123Subdomain(args.secret_name)) {
    return "--name \"" + args.secret_name + "\": expected a Kubernetes Secret name";
  }
  return {};
}

//! How to install with what was printed.
std::string installHint(const AuthArgs& args, bool mutual) {
  const std::string client_cert = mutual ? " --set nats.tls.clientCert=true" : "";
  if (!args.registration.empty()) {
    return "helm install flotilla-agent charts/flotilla-agent -n " + args.kube_namespace +
           " --set clusterName=<name> --set nats.url=tls://<hub>:4222 --set nats.registration.secretName=" +
           args.secret_name + " --set nats.tls.secretName=" + args.secret_name + client_cert;
  }
  if (args.agent.empty()) {
    return "helm install " + args.release + " charts/flotilla-hub -n " + args.kube_namespace +
           (mutual ? " --set nats.auth.mutualTls=true" : "") +
           (args.registrar ? " --set nats.auth.registrar.enabled=true" : "");
  }
  return "helm install flotilla-agent charts/flotilla-agent -n " + args.kube_namespace +
         " --set clusterName=" + args.agent +
         " --set nats.url=tls://<hub>:4222 --set nats.credentials.secretName=" + args.secret_name +
         " --set nats.tls.secretName=" + args.secret_name + client_cert;
}

}  // namespace

int runAuthSecrets(const AuthArgs& args, const Streams& io) {
  if (std::string problem = checkNames(args); !problem.empty()) {
    return usageError(io.err, problem, "auth secrets");
  }
  bool mutual = false;
  auto secrets = !args.registration.empty() ? registrationSecrets(args, mutual)
                 : args.agent.empty()       ? hubSecrets(args, mutual)
                                            : agentSecrets(args, mutual);
  if (!secrets.ok()) {
    return failWith(io.err, "auth secrets: " + secrets.error().describe());
  }
  io.out << "# Generated by `flotilla auth secrets` from " << args.dir << " (seeds and keys: keep it off disk and\n"
         << "# out of version control; pipe it to `kubectl apply -f -`). Then: " << installHint(args, mutual) << "\n";
  for (const auto& secret : *secrets) {
    io.out << secretYaml(args.kube_namespace, secret);
    io.err << "Secret " << args.kube_namespace << "/" << secret.name << "\n";
  }
  io.err << (mutual ? "mutual TLS: the client certificates are included\n" : "");
  io.err << "next: " << installHint(args, mutual) << "\n";
  return kExitOk;
}

}  // namespace flotilla::cli
