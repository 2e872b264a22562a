#include "node_services.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "flotilla/core/errno_text.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/log_tail.h"
#include "harness_tools.h"

namespace flotilla::harness {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// One kube-proxy per machine at a time: each owns the KUBE-* chains of the host's network namespace and rewrites
// them whole on every sync, so a second one would delete the first one's Services.
constexpr const char* kProxyLockFile = "/run/lock/flotilla-harness-kube-proxy.lock";
constexpr auto kProxyLockWait = std::chrono::minutes(10);
constexpr const char* kClusterDomain = "cluster.local";

// A DNS query (RFC 1035 §4.1) for the A record of `name`, id 0x4654.
std::string dnsQuery(const std::string& name) {
  std::string q("\x46\x54\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);  // id, RD, one question
  for (const auto& label : split(name, '.')) {
    q += static_cast<char>(label.size());
    q += label;
  }
  q += std::string("\x00\x00\x01\x00\x01", 5);  // root, QTYPE A, QCLASS IN
  return q;
}

// True when the DNS server on `server`:53 answers the A query for `name` with NOERROR and at least one answer.
bool resolves(const std::string& server, const std::string& name) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) {
    return false;
  }
  timeval timeout{.tv_sec = 1, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(53);
  ::inet_pton(AF_INET, server.c_str(), &addr.sin_addr);
  std::string query = dnsQuery(name);
  std::array<unsigned char, 512> reply{};
  ssize_t got = -1;
  if (::sendto(fd, query.data(), query.size(), 0, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) ==
      static_cast<ssize_t>(query.size())) {
    got = ::recv(fd, reply.data(), reply.size(), 0);
  }
  ::close(fd);
  // Header: id (2), flags (2: RCODE in the low 4 bits), QDCOUNT, ANCOUNT.
  return got >= 12 && reply[0] == 0x46 && reply[1] == 0x54 && (reply[3] & 0x0f) == 0 &&
         ((reply[6] << 8) | reply[7]) > 0;
}

// The CNI firewall plugin removes each pod's rules but never its own chains (CNI-FORWARD, CNI-ADMIN) and the
// FORWARD rule that jumps to them. Only nodes with a Service network use the plugin, and the lock makes this the only
// one, so once its pods are gone the chains are this node's leftovers.
void removeFirewallChains() {
  // A CNI DEL that containerd started before it stopped may still be running, and the plugin makes its chains
  // again before it deletes a pod's rules: wait for it (briefly) first.
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    auto running = runCommand({.argv = {"pgrep", "-f", "/usr/lib/cni/firewall"}, .timeout = std::chrono::seconds(5)});
    if (!running.ok() || running->exit_code != 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-D", "FORWARD", "-m", "comment", "--comment", "CNI firewall plugin rules", "-j",
                                 "CNI-FORWARD"},
        {"-F", "CNI-FORWARD"},
        {"-X", "CNI-FORWARD"},
        {"-F", "CNI-ADMIN"},
        {"-X", "CNI-ADMIN"}}) {
    std::vector<std::string> argv = {"iptables", "-w"};
    argv.insert(argv.end(), args.begin(), args.end());
    (void)runCommand({.argv = argv, .timeout = std::chrono::seconds(30)});
  }
}

}  // namespace

struct NodeServices::State {
  NodeServicesConfig config;
  int lock_fd = -1;
  std::string proxy_binary;
  Process coredns;
  Process proxy;
  int proxy_healthz_port = 0;
  bool stopped = false;

  [[nodiscard]] std::string path(const std::string& file) const { return config.dir + "/" + file; }

  [[nodiscard]] Failure failure(const std::string& what) const {
    return fail(ErrorKind::kTransient, "node " + config.node_name + " services: " + what + "\n" + tails(40),
                "NodeServices::start");
  }

  [[nodiscard]] std::string tails(size_t lines) const {
    std::string out;
    for (const char* file : {"coredns.log", "kube-proxy.log"}) {
      if (fs::exists(path(file))) {
        out += std::string("== node/services/") + file + " (last " + std::to_string(lines) + " lines) ==\n" +
               logFileTail(path(file), lines);
      }
    }
    return out;
  }

  Status lockMachine();
  Status makeBridge();
  Status startCoreDns();
  Status startKubeProxy();
  Status waitDnsReady();
};

Status NodeServices::State::lockMachine() {
  lock_fd = ::open(kProxyLockFile, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return fail(ErrorKind::kPermanent, std::string("cannot open ") + kProxyLockFile + ": " + errnoText(errno));
  }
  auto deadline = Clock::now() + kProxyLockWait;
  bool said = false;
  while (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (Clock::now() > deadline) {
      return failure(std::string("another harness kube-proxy held ") + kProxyLockFile + " for 10 minutes");
    }
    if (!said) {
      log::info("node services: waiting for the machine's other harness kube-proxy to stop",
                {{"node", config.node_name}});
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return okStatus();
}

// The bridge the CNI plugin would make at the first pod, made now with its gateway address: CoreDNS binds that
// address before any pod exists. The bridge plugin takes an existing bridge that already has the address.
Status NodeServices::State::makeBridge() {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"ip", "link", "add", config.bridge, "type", "bridge"},
        {"ip", "addr", "add", config.gateway + "/" + split(config.subnet, '/').back(), "dev", config.bridge},
        {"ip", "link", "set", config.bridge, "up"}}) {
    auto r = runCommand({.argv = argv, .timeout = std::chrono::seconds(10)});
    FLOTILLA_TRY(r);
    if (r->exit_code != 0) {
      return failure(join(argv, " ") + " failed: " + r->err);
    }
  }
  return okStatus();
}

Status NodeServices::State::startCoreDns() {
  std::string binary = findTool("coredns", false);
  if (binary.empty()) {
    return fail(ErrorKind::kPermanent, "coredns not found in " + toolsDir() + " (run scripts/setup)");
  }
  // Only the cluster's names: the harness has no upstream to forward to, so other names fail fast (REFUSED).
  std::ostringstream corefile;
  corefile << ".:53 {\n  bind " << config.gateway << "\n  errors\n  kubernetes " << kClusterDomain
           << " in-addr.arpa ip6.arpa {\n    kubeconfig " << config.admin_kubeconfig
           << "\n    pods insecure\n    fallthrough in-addr.arpa ip6.arpa\n    ttl 5\n  }\n  cache 5\n}\n";
  FLOTILLA_TRY(writeFile(path("Corefile"), corefile.str()));
  auto process = Process::start(ProcessOptions{
      .argv = {binary, "-conf", path("Corefile")}, .output_file = path("coredns.log"), .kill_with_parent = true});
  if (!process.ok()) {
    return failure("cannot start coredns: " + process.error().message);
  }
  coredns = std::move(*process);
  return okStatus();
}

// iptables mode, the node's pod CIDR as the cluster CIDR (traffic from elsewhere to a ClusterIP is masqueraded).
// Conntrack limits and timeouts at 0 leave the host's sysctls alone (this sandbox's /proc/sys/net/netfilter is not
// ours to tune); NodePorts only on the bridge address, and never on 127.0.0.1 (route_localnet stays off).
Status NodeServices::State::startKubeProxy() {
  proxy_binary = findTool("kube-proxy", false);
  if (proxy_binary.empty()) {
    return fail(ErrorKind::kPermanent, "kube-proxy not found in " + toolsDir() + " (run scripts/setup)");
  }
  proxy_healthz_port = freePort();
  std::ostringstream yaml;
  yaml << "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n"
       << "clientConnection: {kubeconfig: " << config.admin_kubeconfig << "}\n"
       << "hostnameOverride: " << config.node_name << "\nclusterCIDR: " << config.subnet << "\n"
       << "healthzBindAddress: 127.0.0.1:" << proxy_healthz_port << "\nmetricsBindAddress: 127.0.0.1:" << freePort()
       << "\nconntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}\n"
       << "iptables: {localhostNodePorts: false}\nnodePortAddresses: [\"" << config.gateway << "/32\"]\n";
  FLOTILLA_TRY(writeFile(path("kube-proxy.yaml"), yaml.str()));
  auto process = Process::start(ProcessOptions{.argv = {proxy_binary, "--config=" + path("kube-proxy.yaml"), "--v=2"},
                                               .output_file = path("kube-proxy.log"),
                                               .kill_with_parent = true});
  if (!process.ok()) {
    return failure("cannot start kube-proxy: " + process.error().message);
  }
  proxy = std::move(*process);
  return okStatus();
}

// CoreDNS answers for the `kubernetes` Service once its informers have the Services.
Status NodeServices::State::waitDnsReady() {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  const std::string api_name = std::string("kubernetes.default.svc.") + kClusterDomain;
  while (!resolves(config.gateway, api_name)) {
    if (!coredns.running()) {
      return failure("coredns exited during start");
    }
    if (Clock::now() > deadline) {
      return failure("CoreDNS did not resolve " + api_name + " within 60s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return okStatus();
}

NodeServices::NodeServices(std::unique_ptr<State> state) : state_(std::move(state)) {}

NodeServices::~NodeServices() {
  stop();
}

Result<std::unique_ptr<NodeServices>> NodeServices::start(const NodeServicesConfig& config) {
  auto state = std::make_unique<State>();
  state->config = config;
  std::error_code ec;
  fs::create_directories(config.dir, ec);
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot create " + config.dir + ": " + ec.message());
  }
  std::unique_ptr<NodeServices> services(new NodeServices(std::move(state)));  // stop() undoes a partial start
  State& s = *services->state_;
  FLOTILLA_TRY(s.lockMachine());
  FLOTILLA_TRY(s.makeBridge());
  FLOTILLA_TRY(s.startCoreDns());
  FLOTILLA_TRY(s.startKubeProxy());
  FLOTILLA_TRY(s.waitDnsReady());
  return services;
}

// kube-proxy's /healthz is 200 once it has its Node (the kubelet registers it) and its first sync wrote the rules.
Status NodeServices::waitProxyReady() {
  State& s = *state_;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (true) {
    auto r = runCommand({.argv = {"curl", "-sf", "--max-time", "2",
                                  "http://127.0.0.1:" + std::to_string(s.proxy_healthz_port) + "/healthz"},
                         .timeout = std::chrono::seconds(5)});
    if (r.ok() && r->exit_code == 0) {
      return okStatus();
    }
    if (!s.proxy.running()) {
      return s.failure("kube-proxy exited during start");
    }
    if (Clock::now() > deadline) {
      return s.failure("kube-proxy's /healthz not 200 within 60s of the Node being Ready");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status NodeServices::healthy() {
  if (!state_->coredns.running() || !state_->proxy.running()) {
    return fail(ErrorKind::kTransient,
                "node " + state_->config.node_name + ": CoreDNS or kube-proxy exited\n" + state_->tails(40));
  }
  return okStatus();
}

// The bridge itself goes with the node (KubeNode::stop deletes it after the pods are gone).
void NodeServices::stop() {
  State& s = *state_;
  if (s.stopped) {
    return;
  }
  s.stopped = true;
  s.proxy.stop(std::chrono::seconds(5));
  s.coredns.stop(std::chrono::seconds(5));
  if (!s.proxy_binary.empty()) {
    auto cleanup = runCommand({.argv = {s.proxy_binary, "--cleanup"}, .timeout = std::chrono::seconds(60)});
    if (!cleanup.ok() || cleanup->exit_code != 0) {
      log::warn("node services: kube-proxy --cleanup failed; KUBE-* iptables chains may be left",
                {{"node", s.config.node_name}, {"output", cleanup.ok() ? cleanup->err : cleanup.error().message}});
    }
  }
  removeFirewallChains();
  if (s.lock_fd >= 0) {
    ::close(s.lock_fd);  // releases the flock
    s.lock_fd = -1;
  }
}

std::string NodeServices::logTail(size_t lines) const {
  return state_->tails(lines);
}

}  // namespace flotilla::harness
