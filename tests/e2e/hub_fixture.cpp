#include "hub_fixture.h"

#include <cstdlib>
#include <set>
#include <thread>

#include <signal.h>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/poll.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/kube/kubeconfig.h"

namespace flotilla::e2e {

namespace {

//! Signs a user for `role` with the account key of `auth_dir` and writes its .creds there; returns the path.
Result<std::string> issueCreds(const std::string& auth_dir, const Result<identity::Role>& role,
                               std::optional<std::chrono::seconds> ttl) {
  FLOTILLA_TRY(role);
  auto user = identity::issueFromAuthDir(auth_dir, *role, ttl);
  FLOTILLA_TRY(user);
  std::string path = auth_dir + "/" + identity::credsFileName(*role);
  FLOTILLA_TRY(identity::writeSecretFile(path, user->creds));
  return path;
}

}  // namespace

Binaries Binaries::fromBuild() {
  Binaries out{FLOTILLA_POLLER_BIN, FLOTILLA_BUNDLER_BIN, FLOTILLA_SCHEDULER_BIN,
               FLOTILLA_AGENT_BIN,  FLOTILLA_CLI_BIN,     FLOTILLA_GATEWAY_BIN};
  // bench_fleet_scale runs another build's scheduler beside this one's in one script (bench/README.md).
  if (const char* scheduler = std::getenv("FLOTILLA_BENCH_SCHEDULER_BINARY"); scheduler != nullptr && *scheduler != 0) {
    out.scheduler = scheduler;
  }
  return out;
}

Result<std::unique_ptr<Hub>> Hub::start(HubOptions options) {
  std::unique_ptr<Hub> hub(new Hub());
  hub->options_ = std::move(options);
  hub->binaries_ = Binaries::fromBuild();
  auto dir = makeTempDir("flotilla-e2e");
  if (!dir.ok()) {
    return fail(dir.error());
  }
  hub->dir_ = *dir;

  FLOTILLA_TRY(hub->startNats());
  auto git = harness::GitServer::start({.https = false, .git_daemon = false, .ssh = false});
  if (!git.ok()) {
    return fail(git.error());
  }
  hub->git_ = std::move(git).value();

  if (hub->options_.share_clusters) {
    auto shared = harness::sharedKubeClusters(hub->options_.clusters);
    if (!shared.ok()) {
      return fail(shared.error());
    }
    hub->clusters_ = *shared;
  } else {
    std::vector<harness::KubeClusterOptions> wanted;
    for (size_t i = 0; i < hub->options_.clusters; ++i) {
      wanted.push_back({.name = "e2e" + std::to_string(i)});
    }
    auto started = harness::KubeCluster::startMany(wanted);
    if (!started.ok()) {
      return fail(started.error());
    }
    hub->owned_clusters_ = std::move(started).value();
    for (auto& c : hub->owned_clusters_) {
      hub->clusters_.push_back(c.get());
    }
  }
  // Cluster names are unique per hub: clusters may be shared by several tests of one process.
  std::string suffix = randomHex(3);
  for (size_t i = 0; i < hub->clusters_.size(); ++i) {
    hub->cluster_names_.push_back("c" + std::to_string(i + 1) + "-" + suffix);
    if (hub->options_.secure && !hub->enrolled(i)) {
      auto creds = issueCreds(hub->auth_dir_, identity::agentRole(hub->cluster_names_.back()), std::nullopt);
      FLOTILLA_TRY(creds);
    }
    if (hub->options_.secure && hub->options_.mutual_tls) {  // enrolled agents need a certificate too
      FLOTILLA_TRY(identity::issueClientCertificate(hub->auth_dir_, "agent-" + hub->cluster_names_.back()));
    }
    auto config = kube::Kubeconfig::load(hub->clusters_[i]->kubeconfigPath());
    if (!config.ok()) {
      return fail(config.error());
    }
    auto client = kube::KubeClient::create(*config);
    if (!client.ok()) {
      return fail(client.error());
    }
    hub->kube_clients_.push_back(std::move(client).value());
  }

  for (const char* name : {"scheduler", "poller", "bundler"}) {
    FLOTILLA_TRY(hub->startService(name));
  }
  for (size_t i = 0; i < hub->clusters_.size(); ++i) {
    FLOTILLA_TRY(hub->startService("agent-" + std::to_string(i)));
  }
  // The CLI never provisions: wait until the services have created the hub's buckets before tests use it.
  bool provisioned =
      waitFor([&] { return hub->kv("gitrepos").ok() && hub->kv("clusters").ok() && hub->kv("status").ok(); },
              std::chrono::seconds(60));
  if (!provisioned) {
    return fail(ErrorKind::kTransient, "hub services did not provision the hub within 60s\n" + hub->allLogs());
  }
  return hub;
}

bool Hub::enrolled(size_t agent) const {
  return options_.secure && agent + options_.enrolled_agents >= options_.clusters;
}

Status Hub::startNats() {
  const bool clustered = options_.nats_nodes > 1;
  harness::NatsServerOptions nats_options;
  if (options_.secure) {
    auth_dir_ = dir_ + "/auth";
    // A cluster's nodes take their server_name from the cluster config, and each keeps the account JWTs in its
    // own resolver directory ($DIR: the node's temp dir).
    auto init = identity::initAuthDir({.dir = auth_dir_,
                                       .server_name = clustered ? "" : "flotilla-e2e",
                                       .tls = true,
                                       .mutual_tls = options_.mutual_tls,
                                       .resolver_dir = clustered ? "$DIR/resolver" : ""});
    FLOTILLA_TRY(init);  // with mutual TLS also the hub identities' client certificates; agents' come later
    auto config = readFile(auth_dir_ + "/nats-auth.conf");
    FLOTILLA_TRY(config);
    nats_options.config = *config;
    nats_options.scheme = "tls";
    if (options_.enrolled_agents > 0) {  // the token the enrolled agents share
      auto token = issueCreds(auth_dir_, identity::registrationRole("e2e-" + randomHex(3)), std::chrono::hours(1));
      FLOTILLA_TRY(token);
      registration_creds_ = *token;
    }
  }
  if (clustered) {
    auto cluster = harness::NatsCluster::start({.nodes = static_cast<int>(options_.nats_nodes),
                                                .extra_config = nats_options.config,
                                                .scheme = nats_options.scheme});
    FLOTILLA_TRY(cluster);
    nats_cluster_ = std::move(cluster).value();
    return {};
  }
  auto nats = harness::NatsServer::start(nats_options);
  FLOTILLA_TRY(nats);
  nats_ = std::move(nats).value();
  return {};
}

std::vector<std::string> Hub::natsFlags(const std::string& identity) const {
  if (auth_dir_.empty()) {
    return {};
  }
  std::vector<std::string> flags = {"--nats-creds", auth_dir_ + "/creds/" + identity + ".creds", "--nats-ca",
                                    auth_dir_ + "/tls/ca.pem"};
  for (auto& flag : clientCertFlags(identity)) {
    flags.push_back(std::move(flag));
  }
  return flags;
}

std::vector<std::string> Hub::clientCertFlags(const std::string& identity) const {
  if (auth_dir_.empty() || !options_.mutual_tls) {
    return {};
  }
  return {"--nats-cert", auth_dir_ + "/tls/" + identity + ".pem", "--nats-key",
          auth_dir_ + "/tls/" + identity + "-key.pem"};
}

Hub::~Hub() {
  // Agents first (they publish status), then the hub services; SIGTERM lets each exit cleanly.
  for (auto& [name, process] : services_) {
    if (startsWith(name, "agent")) {
      process.stop(std::chrono::seconds(5));
    }
  }
  for (auto& [name, process] : services_) {
    process.stop(std::chrono::seconds(5));
  }
  services_.clear();
  if (!dir_.empty() && envOr("FLOTILLA_E2E_KEEP", "").empty()) {
    removeAll(dir_);
  }
}

std::string Hub::serviceKind(const std::string& name) {
  for (const char* kind : {"poller", "bundler", "scheduler"}) {
    if (name == kind || startsWith(name, std::string(kind) + "-")) {
      return kind;
    }
  }
  return name;
}

std::vector<std::string> Hub::serviceArgs(const std::string& name) const {
  std::vector<std::string> common = {"--nats-url",  natsUrl(),     "--http-addr",
                                     "127.0.0.1:0", "--log-level", options_.log_level};
  if (nats_cluster_ && !startsWith(name, "agent-")) {
    common.insert(common.end(), {"--store-replicas", std::to_string(options_.nats_nodes)});
  }
  const std::string kind = serviceKind(name);
  const std::string identity =
      startsWith(name, "agent-") ? "agent-" + cluster_names_.at(std::stoul(name.substr(6))) : kind;
  const bool enrolled_agent = startsWith(name, "agent-") && enrolled(std::stoul(name.substr(6)));
  if (enrolled_agent) {  // the CA (and certificate) only: the credentials are the ones the registrar gives
    common.insert(common.end(), {"--nats-ca", auth_dir_ + "/tls/ca.pem"});
    for (auto& flag : clientCertFlags(identity)) {
      common.push_back(std::move(flag));
    }
  } else {
    for (auto& flag : natsFlags(identity)) {
      common.push_back(std::move(flag));
    }
  }
  std::vector<std::string> args;
  if (kind == "poller") {
    args = {binaries_.poller, "--data-dir", dir_ + "/" + name};
  } else if (kind == "bundler") {
    std::string tools = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
    std::string helm = options_.helm_binary.empty() ? tools + "/helm" : options_.helm_binary;
    args = {binaries_.bundler,    "--work-dir",        dir_ + "/" + name, "--helm-binary", helm,
            "--kustomize-binary", tools + "/kustomize"};
  } else if (kind == "scheduler") {
    // The admin allows the label keys this hub's agents report (--agent-labels allows none by default).
    std::set<std::string> keys{"env"};
    for (const auto& labels : options_.cluster_labels) {
      for (const auto& [key, value] : labels) {
        keys.insert(key);
      }
    }
    args = {binaries_.scheduler, "--agent-labels", join(std::vector<std::string>(keys.begin(), keys.end()), ",")};
    if (options_.secure) {  // the registrar, for agents holding a registration token
      args.insert(args.end(), {"--registration-signing-key", auth_dir_ + "/registrar-signing.nk",
                               "--registration-account", auth_dir_ + "/account.jwt"});
    }
  } else if (kind == "gateway") {
    args = {binaries_.gateway, "--kubeconfig", clusters_.at(0)->kubeconfigPath()};
  } else if (startsWith(name, "agent-")) {
    size_t i = std::stoul(name.substr(6));
    std::string labels = "env=cluster" + std::to_string(i + 1);
    if (i < options_.cluster_labels.size()) {
      labels.clear();
      for (const auto& [k, v] : options_.cluster_labels[i]) {
        labels += (labels.empty() ? "" : ",") + k + "=" + v;
      }
    }
    args = {binaries_.agent, "--kubeconfig", clusters_.at(i)->kubeconfigPath(), "--labels", labels};
    if (enrolled_agent) {
      args.insert(args.end(), {"--cluster-name", cluster_names_.at(i), "--registration-creds", registration_creds_,
                               "--creds-store", dir_ + "/" + name + "-store.creds"});
    } else if (!options_.secure) {  // secure: the cluster is the credentials'
      args.insert(args.end(), {"--cluster-name", cluster_names_.at(i)});
    }
  }
  args.insert(args.end(), common.begin(), common.end());
  ServiceSettings extra = settingsOf(name);
  args.insert(args.end(), extra.flags.begin(), extra.flags.end());
  return args;
}

ServiceSettings Hub::settingsOf(const std::string& name) const {
  ServiceSettings out;
  auto add = [&](const std::string& key) {
    auto it = options_.services.find(key);
    if (it == options_.services.end()) {
      return;
    }
    out.flags.insert(out.flags.end(), it->second.flags.begin(), it->second.flags.end());
    for (const auto& [variable, value] : it->second.env) {
      out.env[variable] = value;
    }
  };
  if (startsWith(name, "agent-")) {
    add("agent");
  }
  const std::string kind = serviceKind(name);
  if (kind != name) {  // a second replica: the service's settings, then its own
    add(kind);
  }
  add(name);
  return out;
}

void Hub::configure(const std::string& name, ServiceSettings settings) {
  options_.services[name] = std::move(settings);
}

Status Hub::startService(const std::string& name) {
  auto it = services_.find(name);
  if (it != services_.end() && it->second.running()) {
    return {};
  }
  auto process = Process::start(
      {.argv = serviceArgs(name), .env = settingsOf(name).env, .output_file = dir_ + "/" + name + ".log"});
  if (!process.ok()) {
    return fail(process.error());
  }
  services_[name] = std::move(process).value();
  return {};
}

void Hub::kill9(const std::string& name) {
  auto it = services_.find(name);
  if (it != services_.end()) {
    it->second.signal(SIGKILL);
    it->second.wait(std::chrono::seconds(10));
  }
}

Status Hub::stopService(const std::string& name) {
  auto it = services_.find(name);
  if (it == services_.end()) {
    return {};
  }
  int code = it->second.stop(std::chrono::seconds(10));
  if (code != 0) {
    return fail(ErrorKind::kInternal, name + " exited with code " + std::to_string(code) + "\n" + logTail(name));
  }
  return {};
}

Status Hub::restartService(const std::string& name) {
  // A service that already died (a fault point fired) is only started; a running one must exit cleanly.
  if (running(name)) {
    FLOTILLA_TRY(stopService(name));
  }
  return startService(name);
}

std::optional<int> Hub::waitExit(const std::string& name, std::chrono::milliseconds timeout) {
  auto it = services_.find(name);
  if (it == services_.end()) {
    return std::nullopt;
  }
  return it->second.wait(timeout);
}

bool Hub::running(const std::string& name) {
  auto it = services_.find(name);
  return it != services_.end() && it->second.running();
}

int Hub::pid(const std::string& name) {
  auto it = services_.find(name);
  return it != services_.end() && it->second.running() ? it->second.pid() : 0;
}

std::string Hub::logTail(const std::string& name, size_t lines) const {
  auto text = readFile(dir_ + "/" + name + ".log");
  if (!text.ok()) {
    return "(no log for " + name + ")";
  }
  auto all = split(*text, '\n');
  size_t begin = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = begin; i < all.size(); ++i) {
    out += all[i] + "\n";
  }
  return out;
}

std::string Hub::allLogs(size_t lines) const {
  std::string out;
  for (const auto& [name, process] : services_) {
    out += "----- " + name + " -----\n" + logTail(name, lines);
  }
  return out;
}

Result<CommandResult> Hub::cli(const std::vector<std::string>& args, const std::string& input) {
  std::vector<std::string> argv = {binaries_.cli, "--nats-url", natsUrl()};
  for (auto& flag : natsFlags("admin")) {
    argv.push_back(std::move(flag));
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand({.argv = argv, .input = input, .timeout = std::chrono::seconds(60)});
}

Status Hub::apply(const std::string& yaml) {
  std::string path = dir_ + "/apply-" + randomHex(4) + ".yaml";
  FLOTILLA_TRY(writeFile(path, yaml));
  auto result = cli({"apply", "-f", path});
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->exit_code != 0) {
    return fail(ErrorKind::kInvalid, "flotilla apply failed: " + result->err + result->out);
  }
  return {};
}

Result<std::shared_ptr<bus::JetStream>> Hub::js() {
  if (!js_) {
    bus::ConnectOptions options;
    options.servers = split(natsUrl(), ',');
    options.name = "e2e-reader";
    if (options_.secure) {
      options.creds_file = auth_dir_ + "/creds/admin.creds";
      options.ca_file = auth_dir_ + "/tls/ca.pem";
      if (options_.mutual_tls) {
        options.cert_file = auth_dir_ + "/tls/admin.pem";
        options.key_file = auth_dir_ + "/tls/admin-key.pem";
      }
    }
    auto connection = bus::Connection::connect(options);
    if (!connection.ok()) {
      return fail(connection.error());
    }
    auto js = bus::JetStream::create(std::move(connection).value());
    if (!js.ok()) {
      return fail(js.error());
    }
    js_ = std::move(js).value();
  }
  return js_;
}

Result<std::shared_ptr<bus::KeyValue>> Hub::kv(const std::string& bucket) {
  auto it = buckets_.find(bucket);
  if (it != buckets_.end()) {
    return it->second;
  }
  auto jetstream = js();
  if (!jetstream.ok()) {
    return fail(jetstream.error());
  }
  auto opened = bus::KeyValue::open(*jetstream, bucket);
  if (!opened.ok()) {
    return fail(opened.error());
  }
  buckets_[bucket] = *opened;
  return *opened;
}

Result<std::vector<Json>> Hub::records(const std::string& bucket, const std::string& prefix) {
  auto store = kv(bucket);
  FLOTILLA_TRY(store);
  auto keys = (*store)->keys();
  FLOTILLA_TRY(keys);
  std::vector<Json> out;
  for (const auto& key : *keys) {
    if (!startsWith(key, prefix)) {
      continue;
    }
    auto entry = (*store)->get(key);
    if (!entry.ok() && entry.error().kind == ErrorKind::kNotFound) {
      continue;  // deleted since it was listed
    }
    FLOTILLA_TRY(entry);
    auto parsed = Json::parse(entry->value);
    if (!parsed.ok()) {
      return fail(ErrorKind::kInvalid, bucket + "/" + key + " is not JSON: " + parsed.error().describe());
    }
    out.push_back(std::move(parsed).value());
  }
  return out;
}

bool Hub::waitFor(const std::function<bool()>& check, std::chrono::milliseconds timeout) {
  return harness::waitUntil(check, timeout, std::chrono::milliseconds(200));
}

}  // namespace flotilla::e2e
