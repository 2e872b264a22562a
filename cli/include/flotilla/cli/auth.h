// flotilla/cli/auth.h
//
// `flotilla auth`: the hub's NATS identities (libs/identity), without a hub.
//
//   flotilla auth init --dir D [--server-name NAME] [--tls | --mutual-tls] [--san NAME]... [--ttl DURATION]
//   flotilla auth issue --dir D --role ROLE [--cluster NAME | --token ID] [--ttl DURATION] [--out FILE|-]
//                       [--client-cert]
//
// init writes the operator, system account and account keys and JWTs, D/nats-auth.conf (include it from the
// nats-server config), the .creds of the hub services, admin and readonly under D/creds, and with --tls a CA and a
// server certificate under D/tls (--mutual-tls: the server also requires client certificates, and each issued
// identity gets one). issue signs one more user (agent for a cluster, registration for a token, or a hub role) with
// the account signing key in D. Seeds are written with mode 0600 and printed only with --out -.
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
  // issue
  std::string role;
  std::string cluster;
  std::string token;
  std::string out;  //!< "" = D/creds/<identity>.creds, "-" = stdout
  bool client_cert = false;
  // both
  std::string ttl;  //!< a Go duration ("720h"); "" = never expires
  const CLI::App* init = nullptr;
  const CLI::App* issue = nullptr;
};

}  // namespace flotilla::cli
