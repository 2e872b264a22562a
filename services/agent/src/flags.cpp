#include "flotilla/agent/flags.h"

#include "flotilla/core/util.h"
#include "flotilla/identity/jwt.h"
#include "flotilla/identity/permissions.h"

namespace flotilla::agent {

std::map<std::string, std::string> agentFlags() {
  return {
      {"cluster-name",
       "name of this downstream cluster on the hub: required without --nats-creds; with agent credentials the "
       "cluster is theirs and a different name is refused"},
      {"kubeconfig",
       "kubeconfig of the downstream cluster (default: in-cluster service account, then $KUBECONFIG, "
       "then ~/.kube/config)"},
      {"kube-context", "context in --kubeconfig (default: its current-context)"},
      {"labels",
       "cluster labels reported at registration, k=v,k2=v2 (they target only for the keys the hub allows: the "
       "scheduler's --agent-labels)"},
      {"heartbeat-interval", "how often to send a heartbeat (default 30s)"},
      {"resync-interval", "how often to re-check the health of bundles that are not Ready (default 30s)"},
      {"crd-timeout", "how long to wait for a bundle's CRDs to become Established (default 60s)"},
      {"agent-namespace", "namespace for the agent's inventories in the downstream cluster (default flotilla-system)"},
      {"namespaces",
       "the only namespaces bundles may deploy to, a,b (for RBAC with Roles in those namespaces only): a "
       "cluster-scoped object or one in another namespace is refused before any request, no namespace is created "
       "(the listed ones must exist), and the drift and health watches are per namespace (default: any)"},
      {"parallel-bundles",
       "how many different bundles are applied at once; one bundle's deploys always run in order (default 4, at "
       "most 64)"},
      {"fight-corrections",
       "drift corrections of one object within --fight-window after which another writer is taken to fight the "
       "agent: correcting it stops and DriftFight is reported (default 3)"},
      {"fight-window", "the window of --fight-corrections, and how long the other writer must stay quiet (default 1m)"},
      {"release-hold",
       "how long an object a bundle released and no bundle claims is kept before it is deleted, so a bundle that "
       "claims it later adopts it (default 60s; 0 deletes at once)"},
  };
}

Result<int> parseParallelBundles(std::string_view text) {
  const std::string value = trim(text);
  if (value.empty()) {
    return kDefaultParallelBundles;
  }
  const bool digits = value.size() <= 3 && value.find_first_not_of("0123456789") == std::string::npos;
  const int parsed = digits ? std::stoi(value) : 0;
  if (parsed < 1 || parsed > kMaxParallelBundles) {
    return fail(ErrorKind::kInvalid, "--parallel-bundles: expected a whole number from 1 to " +
                                         std::to_string(kMaxParallelBundles) + ", got \"" + value + "\"");
  }
  return parsed;
}

namespace {

//! The cluster and inbox prefix: from agent credentials when --nats-creds names them (a conflicting --cluster-name
//! or --nats-inbox-prefix is refused), else --cluster-name.
Status clusterFromCredentials(const service::Config& config, AgentOptions& options) {
  const std::string flag = config.get("cluster-name");
  const std::string creds_path = config.get("nats-creds");
  options.inbox_prefix = config.get("nats-inbox-prefix");
  if (creds_path.empty()) {
    if (flag.empty()) {
      return fail(ErrorKind::kInvalid, "--cluster-name is required (or agent credentials, --nats-creds)");
    }
    options.cluster_name = flag;
    return {};
  }
  auto text = readFile(creds_path);
  if (!text.ok()) {
    return fail(ErrorKind::kInvalid, "--nats-creds: " + text.error().message);
  }
  auto owner = identity::credsIdentity(*text);
  if (!owner.ok()) {
    return fail(ErrorKind::kInvalid, "--nats-creds " + creds_path + ": " + owner.error().message);
  }
  if (owner->role != "agent" || owner->subject.empty()) {
    return fail(ErrorKind::kInvalid, "--nats-creds " + creds_path + " are the credentials of role \"" + owner->role +
                                         "\", not of a cluster's agent (flotilla auth issue agent)");
  }
  if (!flag.empty() && flag != owner->subject) {
    return fail(ErrorKind::kInvalid, "--cluster-name " + flag + " conflicts with the credentials (--nats-creds " +
                                         creds_path + "), which are cluster " + owner->subject + "'s");
  }
  options.cluster_name = owner->subject;
  auto role = identity::agentRole(options.cluster_name);
  FLOTILLA_TRY(role);
  if (!options.inbox_prefix.empty() && options.inbox_prefix != role->inbox_prefix) {
    return fail(ErrorKind::kInvalid, "--nats-inbox-prefix " + options.inbox_prefix + ": agent credentials of cluster " +
                                         options.cluster_name + " may only use " + role->inbox_prefix);
  }
  options.inbox_prefix = role->inbox_prefix;
  return {};
}

}  // namespace

Result<AgentOptions> agentOptionsFrom(const service::Config& config) {
  AgentOptions options;
  FLOTILLA_TRY(clusterFromCredentials(config, options));
  options.workspace = config.get("workspace", "fleet-default");
  options.agent_namespace = config.get("agent-namespace", "flotilla-system");
  auto namespaces = NamespaceScope::parse(config.get("namespaces"));
  FLOTILLA_TRY(namespaces);
  options.namespaces = std::move(namespaces).value();
  auto labels = parseLabels(config.get("labels"));
  if (!labels.ok()) {
    return fail(labels.error());
  }
  options.labels = std::move(labels).value();
  auto parallel = parseParallelBundles(config.get("parallel-bundles"));
  FLOTILLA_TRY(parallel);
  options.parallel_bundles = *parallel;
  const int64_t fight_corrections = config.getInt("fight-corrections", static_cast<int64_t>(kDefaultFightCorrections));
  if (fight_corrections < 1) {
    return fail(ErrorKind::kInvalid, "--fight-corrections must be at least 1");
  }
  options.fight_corrections = static_cast<size_t>(fight_corrections);
  struct IntervalFlag {
    const char* name;
    std::chrono::milliseconds* target;
  };
  for (auto [name, target] :
       {IntervalFlag{"heartbeat-interval", &options.heartbeat_interval},
        IntervalFlag{"resync-interval", &options.resync_interval}, IntervalFlag{"crd-timeout", &options.crd_timeout},
        IntervalFlag{"fight-window", &options.fight_window}}) {
    std::string text = config.get(name);
    if (text.empty()) {
      continue;
    }
    auto interval = parseInterval(text);
    if (!interval.ok()) {
      return fail(ErrorKind::kInvalid, "--" + std::string(name) + ": " + interval.error().message);
    }
    *target = *interval;
  }
  if (std::string hold = config.get("release-hold"); !hold.empty()) {
    auto parsed = parseHold(hold);
    if (!parsed.ok()) {
      return fail(ErrorKind::kInvalid, "--release-hold: " + parsed.error().message);
    }
    options.retry.release_hold = *parsed;
  }
  return options;
}

}  // namespace flotilla::agent
