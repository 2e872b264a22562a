// `flotilla auth revoke --dir D (--cluster C [--wait DURATION] | --token T)`: revokes credentials at the hub's
// nats-server, now (docs/pipeline.md "Revocation"). The user keys go into the revocations of D's account JWT, which
// is signed again with D's operator key (libs/identity revocation.h), written to D/account.jwt and D/nats-auth.conf,
// and pushed to the server through its system account ($SYS.REQ.CLAIMS.UPDATE, answered by the full resolver) with
// a short-lived system user made from D/system-account.nk. The server closes the revoked users' connections and
// refuses them from then on.
//
// A cluster's keys: D/creds/agent-C.creds (from auth issue) and the credentialKeys the scheduler kept in the
// cluster's tombstone (those its registrar gave the agent), read with D/creds/admin.creds. Only once the
// deregistration has finished: tombstone there, and neither a registration nor an enrollment record left (the agent
// needs its credentials to delete the cluster's objects first); --wait waits for that. A token's key: D/creds/
// registration-T.creds.
#include <chrono>
#include <optional>
#include <ostream>
#include <thread>

#include <unistd.h>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/identity/revocation.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/model/duration.h"

namespace flotilla::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPollEvery = std::chrono::seconds(1);
constexpr auto kUpdaterTtl = std::chrono::minutes(5);

bool readable(const std::string& path) {
  return ::access(path.c_str(), R_OK) == 0;
}

//! The global flags' connection, with D's CA and the admin's client certificate (mutual TLS) unless given.
ConnectSettings settingsFor(const AuthArgs& args, const ConnectSettings& global, const std::string& creds) {
  ConnectSettings settings = global;
  settings.creds_file = creds;
  if (settings.ca_file.empty() && readable(args.dir + "/tls/ca.pem")) {
    settings.ca_file = args.dir + "/tls/ca.pem";
  }
  if (settings.cert_file.empty() && readable(args.dir + "/tls/admin.pem")) {
    settings.cert_file = args.dir + "/tls/admin.pem";
    settings.key_file = args.dir + "/tls/admin-key.pem";
  }
  return settings;
}

//! The user key of the creds file at `path`; nullopt when there is none.
Result<std::optional<std::string>> keyOfCredsFile(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) {
    return std::optional<std::string>();
  }
  auto text = readFile(path);
  FLOTILLA_TRY(text);
  auto key = identity::credsUserKey(*text);
  if (!key.ok()) {
    return fail(ErrorKind::kInvalid, path + ": " + key.error().message);
  }
  return std::optional(*key);
}

//! Where a cluster's deregistration stands: the tombstone, or why revoking must wait ("" when it may go on).
struct Deregistration {
  std::optional<events::ClusterDeregistration> tombstone;
  std::string running;
};

Result<Deregistration> readDeregistration(bus::KeyValue& kv, const std::string& cluster) {
  Deregistration out;
  auto entry = kv.find(events::clusterDeregisteredKey(cluster));
  FLOTILLA_TRY(entry);
  if (!*entry) {
    return out;
  }
  auto tombstone = events::parseRecord<events::ClusterDeregistration>((*entry)->value);
  if (!tombstone.ok()) {
    return fail(ErrorKind::kInvalid,
                "clusters/" + events::clusterDeregisteredKey(cluster) + ": " + tombstone.error().describe());
  }
  out.tombstone = *tombstone;
  auto registered = kv.find(events::clusterKey(cluster));
  FLOTILLA_TRY(registered);
  auto enrolled = kv.find(events::clusterEnrollmentKey(cluster));
  FLOTILLA_TRY(enrolled);
  if (*registered || *enrolled) {
    out.running = "the deregistration of cluster \"" + cluster + "\" has not finished (its " +
                  (*registered ? "registration" : "enrollment") +
                  " record is still there: the agent is deleting the cluster's objects with these credentials)";
  }
  return out;
}

//! Reads the deregistration, waiting up to `wait` for it to finish; kConflict / kNotFound say why not.
Result<events::ClusterDeregistration> finishedDeregistration(bus::KeyValue& kv, const AuthArgs& args,
                                                             std::chrono::seconds wait) {
  const auto deadline = Clock::now() + wait;
  while (true) {
    auto state = readDeregistration(kv, args.cluster);
    FLOTILLA_TRY(state);
    if (!state->tombstone) {
      return fail(ErrorKind::kNotFound, "cluster \"" + args.cluster +
                                            "\" is not deregistered: run flotilla delete cluster " + args.cluster +
                                            " first, then revoke once its deregistration has finished");
    }
    if (state->running.empty()) {
      return *state->tombstone;
    }
    if (Clock::now() >= deadline) {
      return fail(ErrorKind::kConflict,
                  state->running + (args.wait.empty() ? "; run again later, or pass --wait DURATION"
                                                      : "; still so after --wait " + args.wait));
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

//! The keys of cluster C's credentials: D/creds/agent-C.creds and those its tombstone lists.
Result<std::vector<std::string>> clusterKeys(const AuthArgs& args, const GlobalFlags& global,
                                             std::chrono::seconds wait) {
  auto hub = openHub(settingsFor(args, global.connect, args.dir + "/creds/admin.creds"),
                     {std::string(events::kClustersBucket)});
  FLOTILLA_TRY(hub);
  auto tombstone = finishedDeregistration(hub->bucket(events::kClustersBucket), args, wait);
  FLOTILLA_TRY(tombstone);
  std::vector<std::string> keys = tombstone->credential_keys;
  auto issued = keyOfCredsFile(args.dir + "/creds/agent-" + args.cluster + ".creds");
  FLOTILLA_TRY(issued);
  if (*issued) {
    keys.push_back(**issued);
  }
  if (keys.empty()) {
    return fail(ErrorKind::kNotFound, "no credentials of cluster \"" + args.cluster + "\" are known: " + args.dir +
                                          "/creds/agent-" + args.cluster +
                                          ".creds does not exist and its tombstone lists no keys the registrar gave");
  }
  return keys;
}

//! Pushes the account JWT to the server with a system account user made for it (written to D, removed after).
Status pushAccountJwt(const AuthArgs& args, const GlobalFlags& global, const std::string& jwt) {
  auto updater = identity::issueClaimsUpdater(args.dir, kUpdaterTtl);
  FLOTILLA_TRY(updater);
  const std::string creds = args.dir + "/creds/.claims-updater-" + randomHex(4) + ".creds";
  FLOTILLA_TRY(identity::writeSecretFile(creds, updater->creds));
  ConnectSettings settings = settingsFor(args, global.connect, creds);
  settings.inbox_prefix = "_INBOX";
  auto hub = openHub(settings, {});
  ::unlink(creds.c_str());  // libnats read it at connect; it reconnects never (max_reconnect 0)
  FLOTILLA_TRY(hub);
  auto reply = hub->connection->request(identity::kClaimsUpdateSubject, jwt, global.connect.timeout);
  if (!reply.ok()) {
    return fail(reply.error().kind, "no answer on " + std::string(identity::kClaimsUpdateSubject) + " (" +
                                        reply.error().message +
                                        "): the server must run the full resolver (resolver { type: full }, "
                                        "auth init's nats-auth.conf)");
  }
  return identity::checkClaimsUpdateReply(reply->data());
}

//! The key of token T's credentials, D/creds/registration-T.creds.
Result<std::vector<std::string>> tokenKeys(const AuthArgs& args, const identity::Role& role) {
  const std::string path = args.dir + "/" + identity::credsFileName(role);
  auto key = keyOfCredsFile(path);
  FLOTILLA_TRY(key);
  if (!*key) {
    return fail(ErrorKind::kNotFound,
                path + " does not exist: a token's key is known only from the credentials auth issue wrote");
  }
  return std::vector<std::string>{**key};
}

Result<std::chrono::seconds> parseWait(const AuthArgs& args) {
  if (args.wait.empty()) {
    return std::chrono::seconds(0);
  }
  auto duration = model::parseDuration(args.wait);
  if (!duration.ok() || duration->count() < 1000) {
    return fail(ErrorKind::kInvalid,
                "--wait \"" + args.wait + "\": expected a duration of at least 1s such as 10m or 90s");
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*duration);
}

}  // namespace

int runAuthRevoke(const AuthArgs& args, const GlobalFlags& global, const Streams& io) {
  if (args.cluster.empty() == args.token.empty()) {
    return usageError(io.err, "auth revoke needs --cluster C or --token T (one of them)", "auth revoke");
  }
  auto role = args.cluster.empty() ? identity::registrationRole(args.token) : identity::agentRole(args.cluster);
  if (!role.ok()) {
    return usageError(io.err, (args.cluster.empty() ? "--token: " : "--cluster: ") + role.error().message,
                      "auth revoke");
  }
  auto wait = parseWait(args);
  if (!wait.ok() || (!args.wait.empty() && args.cluster.empty())) {
    return usageError(
        io.err,
        wait.ok() ? "--wait is for --cluster (a token has no deregistration to wait for)" : wait.error().message,
        "auth revoke");
  }
  auto keys = args.cluster.empty() ? tokenKeys(args, *role) : clusterKeys(args, global, *wait);
  if (!keys.ok()) {
    return failWith(io.err, "auth revoke: " + keys.error().message);
  }
  auto revoked = identity::revokeInAuthDir(args.dir, *keys);
  if (!revoked.ok()) {
    return failWith(io.err, "auth revoke: " + revoked.error().describe());
  }
  const std::string name = identity::identityName(*role);
  io.out << "revoked " << keys->size() << " user key(s) of " << name << ": " << join(*keys, ", ") << "\nwrote "
         << args.dir << "/account.jwt and " << args.dir << "/nats-auth.conf\n";
  if (auto pushed = pushAccountJwt(args, global, revoked->jwt); !pushed.ok()) {
    return failWith(io.err, "auth revoke: the revocation is written to " + args.dir +
                                "/account.jwt, but the server at " + global.connect.url +
                                " did not take it: " + pushed.error().message +
                                " (run the command again to push it, or restart the server with the new "
                                "nats-auth.conf)");
  }
  io.out << "the server at " << global.connect.url
         << " took the new account JWT: it closed their connections and refuses them from now on\n";
  return kExitOk;
}

}  // namespace flotilla::cli
