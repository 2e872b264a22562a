#include "flotilla/harness/kube_cluster.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/harness/log_tail.h"
#include "harness_tools.h"
#include "kube_node.h"
#include "pki.h"

namespace flotilla::harness {

std::string toolsDir() {
  std::string source = envOr("FLOTILLA_SOURCE_DIR", FLOTILLA_SOURCE_DIR);
  return envOr("FLOTILLA_TOOLS_DIR", source + "/.tools/bin");
}

bool executable(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

// The tool from the tools dir, else (when allowed) from PATH; empty when neither has it.
std::string findTool(const std::string& name, bool search_path) {
  std::string in_tools = toolsDir() + "/" + name;
  if (executable(in_tools)) {
    return in_tools;
  }
  if (search_path) {
    for (const auto& dir : split(envOr("PATH", "/usr/local/bin:/usr/bin:/bin"), ':')) {
      if (!dir.empty() && executable(dir + "/" + name)) {
        return dir + "/" + name;
      }
    }
  }
  return {};
}

// A port nobody listens on right now. Ports handed out earlier in this process are never reused, so clusters
// started together cannot pick the same one; a race with another process is caught by the retry on
// "address already in use".
int freePort() {
  static std::mutex mutex;
  static std::set<int> handed_out;
  std::lock_guard lock(mutex);
  for (int attempt = 0; attempt < 50; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
      continue;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    if (port > 0 && handed_out.insert(port).second) {
      return port;
    }
  }
  return 0;
}

std::string logFileTail(const std::string& path, size_t lines) {
  auto text = readFile(path);
  if (!text.ok()) {
    return "(no log: " + text.error().message + ")\n";
  }
  return lastLines(*text, lines, 500);  // klog lines can be very long (whole objects); a tail is for reading
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxPortAttempts = 3;
constexpr const char* kServiceClusterIpRange = "10.96.0.0/16";

std::string kubeconfigYaml(const std::string& name, const std::string& server, const std::string& cluster_fields,
                           const std::string& user_fields) {
  std::ostringstream out;
  out << "apiVersion: v1\nkind: Config\n"
      << "clusters:\n- name: " << name << "\n  cluster:\n    server: " << server << "\n"
      << cluster_fields << "users:\n- name: " << name << "-user\n  user:\n"
      << user_fields << "contexts:\n- name: " << name << "\n  context:\n    cluster: " << name << "\n    user: " << name
      << "-user\n    namespace: default\n"
      << "current-context: " << name << "\n";
  return out.str();
}

// etcd's "major.minor" from `etcd --version`; {0, 0} when it cannot be told.
std::pair<int, int> etcdVersion(const std::string& binary) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<int, int>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(binary); it != cache.end()) {
    return it->second;
  }
  std::pair<int, int> version{0, 0};
  auto out = runCommand({.argv = {binary, "--version"}, .timeout = std::chrono::seconds(10)});
  constexpr std::string_view kPrefix = "etcd Version: ";
  if (out.ok()) {
    auto pos = out->out.find(kPrefix);
    if (pos != std::string::npos) {
      std::sscanf(out->out.c_str() + pos + kPrefix.size(), "%d.%d", &version.first, &version.second);
    }
  }
  cache[binary] = version;
  return version;
}

}  // namespace

struct KubeCluster::State {
  KubeClusterOptions options;
  std::string dir;
  std::string etcd_binary;
  std::string apiserver_binary;
  int etcd_client_port = 0;
  int etcd_peer_port = 0;
  int api_port = 0;
  Process etcd;
  Process apiserver;
  Process controller_manager;
  bool has_controller_manager = false;
  std::unique_ptr<KubeNode> node;
  NodeNetwork
      node_network;  //!< chosen before the API server starts: with the Service network it advertises the gateway
  TokenUser token_user;
  Clock::time_point started_at;
  double start_seconds = 0;
  bool stopped = false;
  int etcd_attempts = 0;
  int api_attempts = 0;

  [[nodiscard]] std::string path(const std::string& file) const { return dir + "/" + file; }

  // A server child that dies with us even if this process is killed (ctest timeout, crash): PR_SET_PDEATHSIG
  // follows the thread that forked, which is why clusters are started from the caller's thread.
  [[nodiscard]] ProcessOptions serverProcess(std::vector<std::string> argv, const std::string& log) const {
    return ProcessOptions{.argv = std::move(argv), .output_file = path(log), .kill_with_parent = true};
  }

  [[nodiscard]] std::string tails(size_t lines) const {
    std::string out;
    for (const char* file : {"etcd.log", "kube-apiserver.log", "kube-controller-manager.log"}) {
      if (std::filesystem::exists(path(file))) {
        out += std::string("== ") + file + " (last " + std::to_string(lines) + " lines) ==\n" +
               logFileTail(path(file), lines);
      }
    }
    return out;
  }

  Failure failure(const std::string& what) const {
    return fail(ErrorKind::kTransient, "kube cluster " + options.name + ": " + what + "\n" + tails(40),
                "KubeCluster::start");
  }

  // With the Service network, pods reach the API server on the bridge's address (the `kubernetes` Service's
  // endpoint) as well as on the Service's ClusterIP.
  [[nodiscard]] std::vector<std::string> servingIps() const {
    std::vector<std::string> ips = {"127.0.0.1", "10.96.0.1"};
    if (options.with_service_network) {
      ips.push_back(node_network.gateway);
    }
    return ips;
  }

  Status writePki() {
    auto ca = pki::makeCa(options.name + "-ca");
    FLOTILLA_TRY(ca);
    auto serving = pki::issue(*ca, {.common_name = "kube-apiserver",
                                    .dns_names = {"localhost", "kubernetes", "kubernetes.default",
                                                  "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
                                    .ip_addresses = servingIps(),
                                    .server = true});
    FLOTILLA_TRY(serving);
    auto admin = pki::issue(*ca, {.common_name = "admin", .organizations = {"system:masters"}});
    FLOTILLA_TRY(admin);
    auto signing = pki::makeSigningKey();
    FLOTILLA_TRY(signing);
    for (const auto& [file, content, mode] :
         std::vector<std::tuple<std::string, std::string, int>>{{"pki/ca.crt", ca->cert_pem, 0644},
                                                                {"pki/ca.key", ca->key_pem, 0600},
                                                                {"pki/apiserver.crt", serving->cert_pem, 0644},
                                                                {"pki/apiserver.key", serving->key_pem, 0600},
                                                                {"pki/admin.crt", admin->cert_pem, 0644},
                                                                {"pki/admin.key", admin->key_pem, 0600},
                                                                {"pki/sa.pub", signing->public_pem, 0644},
                                                                {"pki/sa.key", signing->private_pem, 0600}}) {
      FLOTILLA_TRY(writeFile(path(file), content, mode));
    }
    return okStatus();
  }

  Status writeAuthFiles() {
    if (token_user.token.empty()) {
      token_user = TokenUser{.name = "flotilla-agent", .token = randomHex(24), .group = "flotilla:agents"};
    }
    // token,user,uid,"group1,group2"
    FLOTILLA_TRY(writeFile(
        path("tokens.csv"),
        token_user.token + "," + token_user.name + ",uid-" + token_user.name + ",\"" + token_user.group + "\"\n",
        0600));
    std::string server = "https://127.0.0.1:" + std::to_string(api_port);
    // The admin kubeconfig points at files; the token one embeds the CA, so both kubeconfig forms are in use.
    FLOTILLA_TRY(writeFile(
        path("kubeconfig"),
        kubeconfigYaml(
            options.name, server, "    certificate-authority: " + path("pki/ca.crt") + "\n",
            "    client-certificate: " + path("pki/admin.crt") + "\n    client-key: " + path("pki/admin.key") + "\n")));
    auto ca = readFile(path("pki/ca.crt"));
    FLOTILLA_TRY(ca);
    FLOTILLA_TRY(
        writeFile(path("kubeconfig-token"),
                  kubeconfigYaml(options.name, server, "    certificate-authority-data: " + base64Encode(*ca) + "\n",
                                 "    token: " + token_user.token + "\n"),
                  0600));
    return okStatus();
  }

  Status startEtcd() {
    etcd_client_port = freePort();
    etcd_peer_port = freePort();
    if (etcd_client_port == 0 || etcd_peer_port == 0) {
      return failure("no free port for etcd");
    }
    ++etcd_attempts;
    removeAll(path("etcd-data"));
    std::string client = "http://127.0.0.1:" + std::to_string(etcd_client_port);
    std::string peer = "http://127.0.0.1:" + std::to_string(etcd_peer_port);
    std::vector<std::string> argv = {etcd_binary, "--name", options.name, "--data-dir", path("etcd-data"),
                                     "--listen-client-urls", client, "--advertise-client-urls", client,
                                     "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                     "--initial-cluster", options.name + "=" + peer, "--initial-cluster-state", "new",
                                     "--logger", "zap", "--log-level", "warn",
                                     // Throwaway test data: no fsync makes kube-apiserver's bootstrap writes
                                     // (RBAC roles, priority classes) fast on slow disks.
                                     "--unsafe-no-fsync"};
    auto process = Process::start(serverProcess(std::move(argv), "etcd.log"));
    if (!process.ok()) {
      return failure("cannot start etcd: " + process.error().message);
    }
    etcd = std::move(*process);
    return okStatus();
  }

  Status startApiserver(bool new_port = true) {
    if (new_port) {
      api_port = freePort();
      if (api_port == 0) {
        return failure("no free port for kube-apiserver");
      }
      ++api_attempts;
      FLOTILLA_TRY(writeAuthFiles());
    }
    std::vector<std::string> argv = {
        apiserver_binary,
        // With the Service network, pods reach it through the `kubernetes` Service, whose endpoint is the advertised
        // address: the node's bridge address, on which it must then listen too.
        options.with_service_network ? "--bind-address=0.0.0.0" : "--bind-address=127.0.0.1",
        "--advertise-address=" + (options.with_service_network ? node_network.gateway : std::string("127.0.0.1")),
        "--secure-port=" + std::to_string(api_port),
        "--etcd-servers=http://127.0.0.1:" + std::to_string(etcd_client_port),
        "--storage-backend=etcd3",
        "--client-ca-file=" + path("pki/ca.crt"),
        "--tls-cert-file=" + path("pki/apiserver.crt"),
        "--tls-private-key-file=" + path("pki/apiserver.key"),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file=" + path("pki/sa.pub"),
        "--service-account-signing-key-file=" + path("pki/sa.key"),
        std::string("--service-cluster-ip-range=") + kServiceClusterIpRange,
        // Node: the kubelet of with_node (system:node:<name>) gets what a node needs and no more.
        options.with_node ? "--authorization-mode=Node,RBAC" : "--authorization-mode=RBAC",
        "--token-auth-file=" + path("tokens.csv"),
        "--cert-dir=" + path("apiserver-certs"),
        "--profiling=false",
    };
    argv.insert(argv.end(), options.extra_apiserver_args.begin(), options.extra_apiserver_args.end());
    auto process = Process::start(serverProcess(std::move(argv), "kube-apiserver.log"));
    if (!process.ok()) {
      return failure("cannot start kube-apiserver: " + process.error().message);
    }
    apiserver = std::move(*process);
    return okStatus();
  }

  Status startControllerManager() {
    std::string binary = findTool("kube-controller-manager", false);
    if (binary.empty()) {
      return failure("kube-controller-manager not found in " + toolsDir() + " (run scripts/setup)");
    }
    auto process = Process::start(serverProcess(
        {
            binary,
            "--kubeconfig=" + path("kubeconfig"),
            // Only what API-level tests need: foreground/orphan deletion, namespace cleanup and the aggregation of
            // ClusterRoles into view/edit/admin. With a node, all of them: Deployments, ReplicaSets, service
            // accounts, the node lifecycle (it lifts the not-ready taint), kube-root-ca.crt.
            options.with_node ? "--controllers=*" : "--controllers=garbagecollector,namespace,clusterrole-aggregation",
            "--root-ca-file=" + path("pki/ca.crt"),
            "--service-account-private-key-file=" + path("pki/sa.key"),
            "--leader-elect=false",
            "--secure-port=0",
            "--use-service-account-credentials=false",
        },
        "kube-controller-manager.log"));
    if (!process.ok()) {
      return failure("cannot start kube-controller-manager: " + process.error().message);
    }
    controller_manager = std::move(*process);
    has_controller_manager = true;
    return okStatus();
  }

  Status startNode() {
    auto started = KubeNode::start({.cluster_name = options.name,
                                    .cluster_dir = dir,
                                    .server = "https://127.0.0.1:" + std::to_string(api_port),
                                    .admin_kubeconfig = path("kubeconfig"),
                                    .ca_cert_file = path("pki/ca.crt"),
                                    .ca_key_file = path("pki/ca.key"),
                                    .ready_timeout = options.node_timeout,
                                    .network = node_network,
                                    .with_service_network = options.with_service_network});
    FLOTILLA_TRY(started);
    node = std::move(*started);
    return okStatus();
  }

  // True once `url_path` answers 200 with the admin identity. curl (not our own client) keeps the harness
  // independent of libs/kube, which it is used to test.
  bool answers(const std::string& url_path, const std::string& expect_body) {
    auto result = runCommand({.argv = {"curl", "-s", "--max-time", "2", "--cacert", path("pki/ca.crt"), "--cert",
                                       path("pki/admin.crt"), "--key", path("pki/admin.key"), "-w", "\n%{http_code}",
                                       "https://127.0.0.1:" + std::to_string(api_port) + url_path},
                              .timeout = std::chrono::seconds(5)});
    if (!result.ok() || result->exit_code != 0) {
      return false;
    }
    auto nl = result->out.rfind('\n');
    if (nl == std::string::npos || result->out.substr(nl + 1) != "200") {
      return false;
    }
    return expect_body.empty() || result->out.substr(0, nl) == expect_body;
  }

  void stopAll() {
    if (stopped) {
      return;
    }
    stopped = true;
    // Clients first, storage last: an apiserver whose etcd is gone hangs in shutdown.
    controller_manager.stop(std::chrono::seconds(2));
    if (node) {
      node->stop();  // needs kube-apiserver to delete its pods; the controllers are gone, so none come back
    }
    apiserver.stop(std::chrono::seconds(5));
    etcd.stop(std::chrono::seconds(5));
  }
};

namespace {

bool logSays(const std::string& path, std::string_view needle) {
  auto text = readFile(path);
  return text.ok() && text->find(needle) != std::string::npos;
}

// `server` of cluster `c` exited during start: restarted when its log says its port was taken and it has not
// used up its attempts, a failure otherwise.
template <class Cluster, class Restart>
Status restartIfPortTaken(Cluster* c, const std::string& server, int attempts, const std::string& warning,
                          Restart restart) {
  if (logSays(c->path(server + ".log"), "address already in use") && attempts < kMaxPortAttempts) {
    log::warn(warning, {{"cluster", c->options.name}});
    return restart();
  }
  return c->failure(server + " exited during start");
}

}  // namespace

// Drives several clusters through etcd -> kube-apiserver -> readiness at once. Everything is forked from this
// thread (see serverProcess); only the waiting is interleaved.
Status KubeCluster::bringUp(const std::vector<State*>& clusters) {
  for (auto* c : clusters) {
    auto dir = makeTempDir("flotilla-kube-" + c->options.name);
    FLOTILLA_TRY(dir);
    c->dir = *dir;
    std::error_code ec;
    std::filesystem::create_directories(c->path("pki"), ec);
    if (ec) {
      return fail(ErrorKind::kPermanent, "cannot create " + c->path("pki") + ": " + ec.message());
    }
    c->etcd_binary = findTool("etcd", true);
    c->apiserver_binary = findTool("kube-apiserver", false);
    if (c->etcd_binary.empty()) {
      return fail(ErrorKind::kPermanent, "etcd not found in " + toolsDir() + " or PATH (run scripts/setup)");
    }
    if (c->apiserver_binary.empty()) {
      return fail(ErrorKind::kPermanent, "kube-apiserver not found in " + toolsDir() + " (run scripts/setup)");
    }
    // kube-apiserver 1.36 serves a watch without a resourceVersion only with etcd's RequestWatchProgress
    // (etcd >= 3.5); with Debian's etcd 3.4 such watches fail with HTTP 500. Refuse clearly instead.
    auto [major, minor] = etcdVersion(c->etcd_binary);
    if (major < 3 || (major == 3 && minor < 5)) {
      return fail(ErrorKind::kPermanent,
                  c->etcd_binary + " is etcd " + std::to_string(major) + "." + std::to_string(minor) +
                      "; kube-apiserver 1.36 needs etcd >= 3.5 (watches need RequestWatchProgress). Run "
                      "scripts/setup, which builds etcd v3.6 into " +
                      toolsDir());
    }
    FLOTILLA_TRY(c->writePki());
    c->started_at = Clock::now();
    FLOTILLA_TRY(c->startEtcd());
  }

  // etcd is up when its client port accepts connections; kube-apiserver would retry, but a clear error
  // about etcd beats an apiserver timeout.
  for (auto* c : clusters) {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!acceptsLocalConnections(c->etcd_client_port)) {
      if (!c->etcd.running()) {
        FLOTILLA_TRY(restartIfPortTaken(c, "etcd", c->etcd_attempts, "etcd port taken; retrying with new ports",
                                        [c] { return c->startEtcd(); }));
        continue;
      }
      if (Clock::now() > deadline) {
        return c->failure("etcd did not listen on its client port within 30s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (auto* c : clusters) {
    FLOTILLA_TRY(c->startApiserver());
  }

  // /readyz covers etcd, RBAC bootstrap and CRD informers; the default namespace is made by a controller
  // that readyz does not wait for, and tests put objects there straight away.
  std::vector<bool> ready(clusters.size(), false);
  size_t remaining = clusters.size();
  while (remaining > 0) {
    for (size_t i = 0; i < clusters.size(); ++i) {
      auto* c = clusters[i];
      if (ready[i]) {
        continue;
      }
      if (!c->apiserver.running()) {
        FLOTILLA_TRY(restartIfPortTaken(c, "kube-apiserver", c->api_attempts,
                                        "kube-apiserver port taken; retrying with a new port",
                                        [c] { return c->startApiserver(); }));
        continue;
      }
      if (!c->etcd.running()) {
        return c->failure("etcd exited during start");
      }
      if (c->answers("/readyz", "ok") && c->answers("/api/v1/namespaces/default", "")) {
        ready[i] = true;
        --remaining;
        c->start_seconds = std::chrono::duration<double>(Clock::now() - c->started_at).count();
        std::fprintf(stderr, "kube-apiserver %s ready in %.1fs (https://127.0.0.1:%d, dir %s)\n",
                     c->options.name.c_str(), c->start_seconds, c->api_port, c->dir.c_str());
        continue;
      }
      if (Clock::now() - c->started_at > c->options.start_timeout) {
        return c->failure("kube-apiserver not ready within " + std::to_string(c->options.start_timeout.count()) + "s");
      }
    }
    if (remaining > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (auto* c : clusters) {
    if (c->options.with_controller_manager || c->options.with_node) {
      FLOTILLA_TRY(c->startControllerManager());
    }
  }
  for (auto* c : clusters) {
    if (c->options.with_node) {
      FLOTILLA_TRY(c->startNode());
    }
  }
  return okStatus();
}

KubeCluster::KubeCluster(std::unique_ptr<State> state) : state_(std::move(state)) {}

KubeCluster::~KubeCluster() {
  stop();
  if (!state_->dir.empty() && std::getenv("FLOTILLA_KEEP_TEST_DIRS") == nullptr) {
    removeAll(state_->dir);
  }
}

Result<std::unique_ptr<KubeCluster>> KubeCluster::start(const KubeClusterOptions& options) {
  auto many = startMany({options});
  FLOTILLA_TRY(many);
  return std::move(many->front());
}

Result<std::vector<std::unique_ptr<KubeCluster>>> KubeCluster::startMany(
    const std::vector<KubeClusterOptions>& options) {
  std::vector<std::unique_ptr<KubeCluster>> clusters;
  std::vector<State*> states;
  for (const auto& o : options) {
    auto state = std::make_unique<State>();
    state->options = o;
    state->options.with_node = o.with_node || o.with_service_network;
    if (state->options.with_node) {
      state->node_network = pickNodeNetwork();
    }
    states.push_back(state.get());
    // Owned by a KubeCluster from the start, so a failure part-way stops whatever was started.
    clusters.push_back(std::unique_ptr<KubeCluster>(new KubeCluster(std::move(state))));
  }
  FLOTILLA_TRY(bringUp(states));
  return clusters;
}

bool KubeCluster::controllerManagerAvailable() {
  return !findTool("kube-controller-manager", false).empty();
}

const std::string& KubeCluster::name() const {
  return state_->options.name;
}
std::string KubeCluster::serverUrl() const {
  return "https://127.0.0.1:" + std::to_string(state_->api_port);
}
int KubeCluster::port() const {
  return state_->api_port;
}
std::string KubeCluster::kubeconfigPath() const {
  return state_->path("kubeconfig");
}
std::string KubeCluster::tokenKubeconfigPath() const {
  return state_->path("kubeconfig-token");
}
std::string KubeCluster::caFile() const {
  return state_->path("pki/ca.crt");
}
std::string KubeCluster::adminCertFile() const {
  return state_->path("pki/admin.crt");
}
std::string KubeCluster::adminKeyFile() const {
  return state_->path("pki/admin.key");
}
const std::string& KubeCluster::token() const {
  return state_->token_user.token;
}
const TokenUser& KubeCluster::tokenUser() const {
  return state_->token_user;
}
const std::string& KubeCluster::dir() const {
  return state_->dir;
}
double KubeCluster::startSeconds() const {
  return state_->start_seconds;
}
bool KubeCluster::hasControllerManager() const {
  return state_->has_controller_manager;
}

Status KubeCluster::healthy() {
  if (state_->stopped) {
    return fail(ErrorKind::kPermanent, "kube cluster " + name() + " was stopped");
  }
  if (!state_->etcd.running()) {
    return state_->failure("etcd is not running");
  }
  if (!state_->apiserver.running()) {
    return state_->failure("kube-apiserver is not running");
  }
  if (state_->has_controller_manager && !state_->controller_manager.running()) {
    return state_->failure("kube-controller-manager is not running");
  }
  if (state_->node) {
    return state_->node->healthy();
  }
  return okStatus();
}

Status KubeCluster::restartApiserver() {
  if (state_->stopped) {
    return fail(ErrorKind::kPermanent, "kube cluster " + name() + " was stopped");
  }
  state_->apiserver.stop(std::chrono::seconds(5));
  auto begin = Clock::now();
  FLOTILLA_TRY(state_->startApiserver(false));
  while (!state_->answers("/readyz", "ok")) {
    if (!state_->apiserver.running()) {
      return state_->failure("kube-apiserver exited during restart");
    }
    if (Clock::now() - begin > state_->options.start_timeout) {
      return state_->failure("kube-apiserver not ready within the start timeout after a restart");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "kube-apiserver %s restarted in %.1fs\n", name().c_str(),
               std::chrono::duration<double>(Clock::now() - begin).count());
  return okStatus();
}

void KubeCluster::stop() {
  state_->stopAll();
}

std::string KubeCluster::logTail(size_t lines) const {
  return state_->tails(lines) + (state_->node ? state_->node->logTail(lines) : "");
}

std::string KubeCluster::nodeName() const {
  return state_->node ? state_->node->name() : "";
}

std::string KubeCluster::podReachableHost() const {
  return state_->node ? state_->node_network.gateway : "";
}

double KubeCluster::nodeStartSeconds() const {
  return state_->node ? state_->node->startSeconds() : 0;
}

Status KubeCluster::importImage(const std::string& docker_image) {
  if (!state_->node) {
    return fail(ErrorKind::kPermanent, "kube cluster " + name() + " has no node (KubeClusterOptions::with_node)");
  }
  return state_->node->importDockerImage(docker_image);
}

const char* KubeCluster::testAppImage() {
  return kTestAppImage;
}

Result<std::vector<KubeCluster*>> sharedKubeClusters(size_t n) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<KubeCluster>> clusters;  // destroyed (stopped) at exit
  static std::optional<Error> failed;
  std::lock_guard lock(mutex);
  if (failed) {
    return fail(*failed);
  }
  if (clusters.size() < n) {
    std::vector<KubeClusterOptions> wanted;
    for (size_t i = clusters.size(); i < n; ++i) {
      wanted.push_back({.name = "kube-" + std::to_string(i)});
    }
    auto started = KubeCluster::startMany(wanted);
    if (!started.ok()) {
      failed = started.error();
      return fail(*failed);
    }
    for (auto& c : *started) {
      clusters.push_back(std::move(c));
    }
  }
  std::vector<KubeCluster*> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(clusters[i].get());
  }
  return out;
}

}  // namespace flotilla::harness
