// flotilla/cli/auth.h
//
// `flotilla auth`: the hub's NATS identities (libs/identity), without a hub.
//
//   flotilla auth init --dir D [--server-name NAME] [--tls | --mutual-tls] [--san NAME]... [--ttl DURATION]
//                      [--resolver-dir DIR]
//   flotilla auth issue --dir D --role ROLE [--cluster NAME | --token ID] [--ttl DURATION] [--out FILE|-]
//                       [--client-cert]
//   flotilla auth secrets --dir D --kube-namespace NS [--release NAME] [--san NAME]... [--registrar]
//   flotilla auth secrets --dir D --kube-namespace NS --agent CLUSTER [--name SECRET]
//   flotilla auth secrets --dir D --kube-namespace NS --registration TOKEN [--name SECRET]
//   flotilla auth revoke --dir D (--cluster NAME [--wait DURATION] | --token ID)     (with --nats-url, TLS flags)
//
// init writes the operator, system account and account keys and JWTs, D/nats-auth.conf (include it from the
// nats-server config), the .creds of the hub services, admin and readonly under D/creds, and with --tls a CA and a
// server certificate under D/tls (--mutual-tls: the server also requires client certificates, and each issued
// identity gets one). issue signs one more user (agent for a cluster, registration for a token, or a hub role) with
// the account signing key in D. Seeds are written with mode 0600 and printed only with --out -. secrets prints
// Kubernetes Secret manifests for charts/flotilla-hub (the embedded server's accounts config, a server certificate
// for the release's NATS Service from D's CA, each hub service's creds and the CA; with --registrar also the
// registrar's key, scoped to signing agent users, for the scheduler; with --agent, one agent's creds and the CA;
// with --registration, a registration token's creds and the CA) to pipe into `kubectl apply -f -`: the account
// signing key and CA key never leave D. revoke adds a deregistered cluster's (or a token's) user keys to the
// account JWT's revocations, signs it again with D's operator key and pushes it to the running server, which then
// closes their connections and refuses them (cli/src/auth_revoke.cpp).
#pragma once

#include <string>
#include <vector>

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's namespace
class App;
}

namespace flotilla::cli {

struct AuthArgs {
  std::string dir;
  // init
  std::string server_name;
  bool tls = false;
  bool mutual_tls = false;
  std::vector<std::string> alt_names;
  std::string resolver_dir;  //!< "" = D/resolver
  // issue
  std::string role;
  std::string cluster;
  std::string token;
  std::string out;  //!< "" = D/creds/<identity>.creds, "-" = stdout
  bool client_cert = false;
  // secrets
  std::string kube_namespace;
  std::string release = "flotilla";
  std::string agent;
  std::string registration;  //!< a token id: print the agent chart's Secret for enrolling with it
  bool registrar = false;    //!< hub Secrets: also the registrar's scoped signing key and the account JWT
  std::string secret_name = "flotilla-agent-nats";
  // revoke (and --cluster / --token as for issue)
  std::string wait;  //!< a Go duration: how long to wait for the cluster's deregistration to finish ("" = not)
  // init and issue
  std::string ttl;  //!< a Go duration ("720h"); "" = never expires
  const CLI::App* init = nullptr;
  const CLI::App* issue = nullptr;
  const CLI::App* secrets = nullptr;
  const CLI::App* revoke = nullptr;
};

}  // namespace flotilla::cli
