#include "kube_node.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/log_tail.h"
#include "harness_tools.h"
#include "node_services.h"
#include "pki.h"

namespace flotilla::harness {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// The CNI plugins: Debian's containernetworking-plugins (scripts/setup installs it).
constexpr const char* kCniBinDir = "/usr/lib/cni";

// The cgroup v1 hierarchies (one directory per mounted controller set) or, on cgroup v2, the unified root.
std::vector<std::string> cgroupRoots() {
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers")) {
    return {"/sys/fs/cgroup"};
  }
  std::vector<std::string> roots;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    if (entry.is_directory() && !entry.is_symlink() && fs::exists(entry.path() / "cgroup.procs")) {
      roots.push_back(entry.path().string());
    }
  }
  return roots;
}

// rmdir of every directory under `dir` (deepest first), then `dir`: cgroups cannot be removed recursively.
void removeCgroupTree(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory()) {
      dirs.push_back(it->path());
    }
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string() > b.string(); });
  for (const auto& d : dirs) {
    ::rmdir(d.c_str());
  }
  ::rmdir(dir.c_str());
}

// Mount points at or below `dir` from /proc/self/mountinfo (field 5), deepest first.
std::vector<std::string> mountsUnder(const std::string& dir) {
  std::vector<std::string> mounts;
  auto info = readFile("/proc/self/mountinfo");
  if (!info.ok()) {
    return mounts;
  }
  for (const auto& line : split(*info, '\n')) {
    auto fields = split(line, ' ');
    if (fields.size() > 4 && startsWith(fields[4], dir)) {
      mounts.push_back(fields[4]);
    }
  }
  std::sort(mounts.begin(), mounts.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return mounts;
}

}  // namespace

NodeNetwork pickNodeNetwork() {
  static std::atomic<unsigned> counter{0};
  unsigned index = (static_cast<unsigned>(::getpid()) * 8u + counter++) % 16384u;
  std::string prefix = "10." + std::to_string(128 + (index >> 8)) + "." + std::to_string(index & 255u) + ".";
  return {.bridge = "flb" + std::to_string(index), .subnet = prefix + "0/24", .gateway = prefix + "1"};
}

struct KubeNode::State {
  KubeNodeConfig config;
  std::string dir;
  std::string name;
  NodeNetwork network;
  std::string cgroup_root;
  std::string ctr_binary;
  std::string kubectl_binary;
  Process containerd;
  Process kubelet;
  Process scheduler;
  std::unique_ptr<NodeServices> services;
  Clock::time_point started_at;
  double start_seconds = 0;
  bool stopped = false;

  [[nodiscard]] std::string path(const std::string& file) const { return dir + "/" + file; }
  [[nodiscard]] std::string socket() const { return path("containerd.sock"); }

  [[nodiscard]] ProcessOptions serverProcess(std::vector<std::string> argv, const std::string& log) const {
    // containerd finds its shim (containerd-shim-runc-v2) in PATH: the tools dir's, not Debian's 1.6 one.
    return ProcessOptions{
        .argv = std::move(argv),
        .env = {{"PATH", toolsDir() + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
        .output_file = path(log),
        .kill_with_parent = true};
  }

  [[nodiscard]] std::string tails(size_t lines) const {
    std::string out;
    for (const char* file : {"containerd.log", "kubelet.log", "kube-scheduler.log"}) {
      if (fs::exists(path(file))) {
        out += std::string("== node/") + file + " (last " + std::to_string(lines) + " lines) ==\n" +
               logFileTail(path(file), lines);
      }
    }
    return out;
  }

  [[nodiscard]] Failure failure(const std::string& what) const {
    return fail(ErrorKind::kTransient, "node " + name + ": " + what + "\n" + tails(40), "KubeNode::start");
  }

  Result<CommandResult> ctr(std::vector<std::string> args, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::vector<std::string> argv = {ctr_binary, "--address", socket(), "--namespace", "k8s.io"};
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand({.argv = std::move(argv), .timeout = timeout});
  }

  Result<CommandResult> kubectl(std::vector<std::string> args,
                                std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::vector<std::string> argv = {kubectl_binary, "--kubeconfig", config.admin_kubeconfig};
    argv.insert(argv.end(), args.begin(), args.end());
    return runCommand({.argv = std::move(argv), .timeout = timeout});
  }

  Status writeFiles();
  Status writeKubeletFiles(int port, int healthz_port);
  Status makeCgroupRoot();
  Status startContainerd();
  Status importImages();
  Status startKubelet();
  Status startScheduler();
  Status waitReady();
  void drainPods();
  void removeContainers();
  void killShims();
  void cleanUpHost();
};

// The kubelet's identity (system:node:<name> in system:nodes: the Node authorizer's), containerd's config and the
// CNI network list.
Status KubeNode::State::writeFiles() {
  auto ca_cert = readFile(config.ca_cert_file);
  FLOTILLA_TRY(ca_cert);
  auto ca_key = readFile(config.ca_key_file);
  FLOTILLA_TRY(ca_key);
  auto cert = pki::issue({.cert_pem = *ca_cert, .key_pem = *ca_key},
                         {.common_name = "system:node:" + name, .organizations = {"system:nodes"}});
  FLOTILLA_TRY(cert);
  FLOTILLA_TRY(writeFile(path("kubelet.crt"), cert->cert_pem));
  FLOTILLA_TRY(writeFile(path("kubelet.key"), cert->key_pem, 0600));
  std::ostringstream kubeconfig;
  kubeconfig << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " << config.server
             << "\n    certificate-authority: " << config.ca_cert_file << "\nusers:\n- name: u\n  user:\n"
             << "    client-certificate: " << path("kubelet.crt") << "\n    client-key: " << path("kubelet.key")
             << "\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
  FLOTILLA_TRY(writeFile(path("kubeconfig"), kubeconfig.str(), 0600));

  std::string r = "plugins.\"io.containerd.";
  std::ostringstream toml;
  toml << "version = 3\nroot = \"" << path("containerd/root") << "\"\nstate = \"" << path("containerd/state")
       << "\"\n"
       // Plugins that would touch host-wide paths or need kernel features this harness does not use.
       << "disabled_plugins = [\"io.containerd.nri.v1.nri\", \"io.containerd.snapshotter.v1.btrfs\", "
          "\"io.containerd.snapshotter.v1.zfs\", \"io.containerd.snapshotter.v1.devmapper\", "
          "\"io.containerd.snapshotter.v1.blockfile\", \"io.containerd.snapshotter.v1.erofs\"]\n"
       << "[grpc]\n  address = \"" << socket() << "\"\n[ttrpc]\n  address = \"" << socket() << ".ttrpc\"\n"
       << "[" << r << "internal.v1.opt\"]\n  path = \"" << path("containerd/opt")
       << "\"\n"
       // native: plain copies, no overlay mounts (this machine's Docker itself runs on fuse-overlayfs).
       << "[" << r
       << "cri.v1.images\"]\n  snapshotter = \"native\"\n"
       // Images imported with ctr are unpacked into the same snapshotter (the transfer service needs the pair).
       << "[" << r << "transfer.v1.local\"]\n[[" << r << "transfer.v1.local\".unpack_config]]\n"
       << "  platform = \"linux/amd64\"\n  snapshotter = \"native\"\n"
       << "[" << r << "cri.v1.images\".pinned_images]\n  sandbox = \"" << kPauseImage
       << "\"\n"
       // This sandbox refuses a lower oom_score_adj than the process has (runc init: "failed to update
       // /proc/self/oom_score_adj: Permission denied" for the kubelet's -998 on the sandbox): clamp it to ours.
       << "[" << r << "cri.v1.runtime\"]\n  restrict_oom_score_adj = true\n"
       << "[" << r << "cri.v1.runtime\".cni]\n  bin_dirs = [\"" << kCniBinDir << "\"]\n  conf_dir = \""
       << path("cni/net.d") << "\"\n"
       << "[" << r << "cri.v1.runtime\".containerd]\n  default_runtime_name = \"runc\"\n"
       << "[" << r << "cri.v1.runtime\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"
       << "  snapshotter = \"native\"\n"
       << "[" << r
       << "cri.v1.runtime\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n"
       // FLOTILLA_NODE_RUNC: another runc (a newer build, or a wrapper that logs its calls).
       << "  BinaryName = \"" << envOr("FLOTILLA_NODE_RUNC", "runc") << "\"\n"
       << "[" << r << "grpc.v1.cri\"]\n  stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"0\"\n";
  FLOTILLA_TRY(writeFile(path("containerd.toml"), toml.str()));

  // isGateway: the host has the bridge's first address, so the kubelet's probes reach pod IPs. No ipMasq: pods
  // need no way out, and no iptables rules are left behind. With the Service network, the firewall plugin accepts
  // the pods' forwarded traffic (pod to pod through a ClusterIP crosses the host's FORWARD chain, whose policy
  // Docker sets to DROP); its rules go with each pod.
  std::ostringstream cni;
  cni << R"({"cniVersion": "1.0.0", "name": "flotilla-)" << network.bridge << R"(", "plugins": [)"
      << R"({"type": "bridge", "bridge": ")" << network.bridge
      << R"(", "isGateway": true, "ipMasq": false, "hairpinMode": true, "ipam": {"type": "host-local", )"
      << R"("ranges": [[{"subnet": ")" << network.subnet << R"("}]], "routes": [{"dst": "0.0.0.0/0"}], )"
      << R"("dataDir": ")" << path("cni/ipam") << R"("}}, )"
      << (config.with_service_network ? R"({"type": "firewall"}, )" : "") << R"({"type": "loopback"}]})"
      << "\n";
  return writeFile(path("cni/net.d/10-flotilla.conflist"), cni.str());
}

Status KubeNode::State::writeKubeletFiles(int port, int healthz_port) {
  std::ostringstream yaml;
  yaml << "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
       << "address: 127.0.0.1\nport: " << port
       << "\nreadOnlyPort: 0\nhealthzBindAddress: 127.0.0.1\nhealthzPort: " << healthz_port << "\n"
       << "authentication:\n  anonymous: {enabled: false}\n  webhook: {enabled: false}\n  x509: {clientCAFile: "
       << config.ca_cert_file << "}\nauthorization: {mode: AlwaysAllow}\n"
       << "containerRuntimeEndpoint: unix://" << socket() << "\n"
       << "cgroupDriver: cgroupfs\ncgroupRoot: " << cgroup_root
       << "\n"
       // This machine has cgroup v1, which kubelet 1.35+ refuses unless told; and maybe swap.
       << "failCgroupV1: false\nfailSwapOn: false\n"
       << "podLogsDir: " << path("pod-logs") << "\n"
       << "clusterDomain: cluster.local\nresolvConf: /etc/resolv.conf\n"
       << (config.with_service_network ? "clusterDNS: [" + network.gateway + "]\n" : std::string())
       // A test machine's disk can be fuller than the defaults allow; evicting test pods would only confuse.
       << "evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, "
          "nodefs.inodesFree: 1%}\n"
       << "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n"
       << "serializeImagePulls: false\nregisterNode: true\n";
  return writeFile(path("kubelet.yaml"), yaml.str());
}

// The kubelet's cgroup root, /flotilla-<bridge>, in every hierarchy: two nodes on one machine must not share
// /kubepods (each kubelet removes pod cgroups it does not know). A new cpuset cgroup starts with no CPUs.
Status KubeNode::State::makeCgroupRoot() {
  cgroup_root = "/flotilla-" + network.bridge;
  for (const auto& root : cgroupRoots()) {
    std::string dir_path = root + cgroup_root;
    std::error_code ec;
    fs::create_directories(dir_path, ec);
    if (ec) {
      return fail(ErrorKind::kPermanent, "node " + name + ": cannot create cgroup " + dir_path + ": " + ec.message());
    }
    for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
      if (fs::exists(root + "/" + file)) {
        auto value = readFile(root + "/" + file);
        FLOTILLA_TRY(value);
        std::ofstream out(dir_path + "/" + file);  // in place: cgroupfs has no temp file to rename
        out << *value;
        out.close();
        if (!out) {
          return fail(ErrorKind::kPermanent, "node " + name + ": cannot write " + dir_path + "/" + file);
        }
      }
    }
  }
  return okStatus();
}

Status KubeNode::State::startContainerd() {
  std::string binary = findTool("containerd", false);
  if (binary.empty() || ctr_binary.empty()) {
    return fail(ErrorKind::kPermanent, "containerd or ctr not found in " + toolsDir() + " (run scripts/setup)");
  }
  auto process = Process::start(serverProcess({binary, "--config", path("containerd.toml")}, "containerd.log"));
  if (!process.ok()) {
    return failure("cannot start containerd: " + process.error().message);
  }
  containerd = std::move(*process);
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (true) {
    auto version = ctr({"version"}, std::chrono::seconds(5));
    if (version.ok() && version->exit_code == 0) {
      return okStatus();
    }
    if (!containerd.running()) {
      return failure("containerd exited during start");
    }
    if (Clock::now() > deadline) {
      return failure("containerd did not answer on " + socket() + " within 60s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

namespace {

// A one-file image made locally: the static binary as /<name>, its entrypoint; `docker import` makes it and
// `docker save` writes the archive containerd imports. Nothing is pulled.
Status saveBinaryImage(const std::string& binary, const std::string& image, const std::string& work) {
  std::string rootfs = work + "/rootfs";
  std::string entry = fs::path(binary).filename().string();
  std::error_code ec;
  fs::create_directories(rootfs, ec);
  fs::copy_file(binary, rootfs + "/" + entry, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot copy " + binary + ": " + ec.message());
  }
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"tar", "-C", rootfs, "-cf", work + "/rootfs.tar", "."},
        {"docker", "import", "--change", "ENTRYPOINT [\"/" + entry + "\"]", work + "/rootfs.tar", image},
        {"docker", "save", "-o", work + "/image.tar", image}}) {
    auto r = runCommand({.argv = argv, .timeout = std::chrono::seconds(120)});
    FLOTILLA_TRY(r);
    if (r->exit_code != 0) {
      return fail(ErrorKind::kPermanent, join(argv, " ") + " failed: " + r->err + r->out);
    }
  }
  return okStatus();
}

}  // namespace

Status KubeNode::State::importImages() {
  for (const auto& [binary, image] : std::vector<std::pair<std::string, std::string>>{
           {FLOTILLA_PAUSE_BINARY, kPauseImage}, {FLOTILLA_TESTAPP_BINARY, kTestAppImage}}) {
    std::string work = path("images/" + fs::path(binary).filename().string());
    FLOTILLA_TRY(saveBinaryImage(binary, image, work));
    auto r = ctr({"images", "import", "--snapshotter", "native", work + "/image.tar"});
    FLOTILLA_TRY(r);
    if (r->exit_code != 0) {
      return failure("ctr images import " + image + " failed: " + r->err);
    }
  }
  return okStatus();
}

Status KubeNode::State::startKubelet() {
  std::string binary = findTool("kubelet", false);
  if (binary.empty()) {
    return fail(ErrorKind::kPermanent, "kubelet not found in " + toolsDir() + " (run scripts/setup)");
  }
  FLOTILLA_TRY(writeKubeletFiles(freePort(), freePort()));
  auto process = Process::start(serverProcess(
      {binary, "--config=" + path("kubelet.yaml"), "--kubeconfig=" + path("kubeconfig"),
       "--root-dir=" + path("kubelet"), "--cert-dir=" + path("kubelet-certs"), "--hostname-override=" + name, "--v=2"},
      "kubelet.log"));
  if (!process.ok()) {
    return failure("cannot start kubelet: " + process.error().message);
  }
  kubelet = std::move(*process);
  return okStatus();
}

Status KubeNode::State::startScheduler() {
  std::string binary = findTool("kube-scheduler", false);
  if (binary.empty()) {
    return fail(ErrorKind::kPermanent, "kube-scheduler not found in " + toolsDir() + " (run scripts/setup)");
  }
  auto process = Process::start(serverProcess(
      {binary, "--kubeconfig=" + config.admin_kubeconfig, "--authentication-kubeconfig=" + config.admin_kubeconfig,
       "--authorization-kubeconfig=" + config.admin_kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1",
       "--secure-port=" + std::to_string(freePort())},
      "kube-scheduler.log"));
  if (!process.ok()) {
    return failure("cannot start kube-scheduler: " + process.error().message);
  }
  scheduler = std::move(*process);
  return okStatus();
}

Status KubeNode::State::waitReady() {
  auto deadline = Clock::now() + config.ready_timeout;
  while (true) {
    auto r = kubectl({"get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"});
    if (r.ok() && r->exit_code == 0 && trim(r->out) == "True") {
      return okStatus();
    }
    for (auto& server : std::vector<std::pair<Process*, const char*>>{
             {&containerd, "containerd"}, {&kubelet, "kubelet"}, {&scheduler, "kube-scheduler"}}) {
      if (!server.first->running()) {
        return failure(std::string(server.second) + " exited while waiting for the node to be Ready");
      }
    }
    if (Clock::now() > deadline) {
      return failure("Node not Ready within " + std::to_string(config.ready_timeout.count()) + "s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// With the controllers stopped (nothing makes new pods), every pod is deleted and the kubelet kills it, stops its
// sandbox (the CNI plugins take the veth and the address back) and unmounts its volumes before the API
// forgets it.
void KubeNode::State::drainPods() {
  if (!kubelet.running()) {
    return;
  }
  (void)kubectl({"delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false"});
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline && kubelet.running()) {
    auto r = kubectl({"get", "pods", "--all-namespaces", "-o", "name"});
    if (r.ok() && r->exit_code == 0 && trim(r->out).empty()) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  log::warn("node: pods still there after 60s; removing their containers directly", {{"node", name}});
}

// Whatever the kubelet left (a sandbox of a pod it never finished): killed and removed through containerd.
void KubeNode::State::removeContainers() {
  auto tasks = ctr({"tasks", "ls", "-q"}, std::chrono::seconds(10));
  if (tasks.ok() && tasks->exit_code == 0) {
    for (const auto& id : split(trim(tasks->out), '\n')) {
      if (!id.empty()) {
        (void)ctr({"tasks", "kill", "-s", "SIGKILL", id}, std::chrono::seconds(10));
        (void)ctr({"tasks", "rm", "-f", id}, std::chrono::seconds(10));
      }
    }
  }
  auto containers = ctr({"containers", "ls", "-q"}, std::chrono::seconds(10));
  if (containers.ok() && containers->exit_code == 0) {
    for (const auto& id : split(trim(containers->out), '\n')) {
      if (!id.empty()) {
        (void)ctr({"containers", "rm", id}, std::chrono::seconds(10));
      }
    }
  }
}

// The runc shims outlive containerd by design; ours are the ones started with our socket's address.
void KubeNode::State::killShims() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string pid = entry.path().filename().string();
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) {
      continue;
    }
    auto cmdline = readFile(entry.path().string() + "/cmdline");
    if (cmdline.ok() && cmdline->find("containerd-shim") != std::string::npos &&
        cmdline->find(socket()) != std::string::npos) {
      ::kill(std::stoi(pid), SIGKILL);
    }
  }
}

// Mounts under the node dir (pod volumes, sandbox /dev/shm, container rootfs), the bridge, the cgroup root.
void KubeNode::State::cleanUpHost() {
  for (const auto& mount : mountsUnder(dir)) {
    ::umount2(mount.c_str(), MNT_DETACH);
  }
  (void)runCommand({.argv = {"ip", "link", "del", network.bridge}, .timeout = std::chrono::seconds(10)});
  if (!cgroup_root.empty()) {
    for (const auto& root : cgroupRoots()) {
      removeCgroupTree(root + cgroup_root);
    }
  }
}

KubeNode::KubeNode(std::unique_ptr<State> state) : state_(std::move(state)) {}

KubeNode::~KubeNode() {
  stop();
}

Result<std::unique_ptr<KubeNode>> KubeNode::start(const KubeNodeConfig& config) {
  auto state = std::make_unique<State>();
  state->config = config;
  state->dir = config.cluster_dir + "/node";
  state->name = "node-" + config.cluster_name;
  state->network = config.network.bridge.empty() ? pickNodeNetwork() : config.network;
  state->ctr_binary = findTool("ctr", false);
  state->kubectl_binary = findTool("kubectl", false);
  state->started_at = Clock::now();
  std::unique_ptr<KubeNode> node(new KubeNode(std::move(state)));  // stops whatever started if a step fails
  State& s = *node->state_;
  std::error_code ec;
  fs::create_directories(s.path("cni/net.d"), ec);
  if (ec || s.kubectl_binary.empty()) {
    return fail(ErrorKind::kPermanent,
                "node " + s.name + ": cannot create " + s.dir + " or no kubectl in " + toolsDir());
  }
  FLOTILLA_TRY(s.writeFiles());
  FLOTILLA_TRY(s.makeCgroupRoot());
  if (config.with_service_network) {
    auto services = NodeServices::start({.node_name = s.name,
                                         .dir = s.path("services"),
                                         .admin_kubeconfig = config.admin_kubeconfig,
                                         .bridge = s.network.bridge,
                                         .subnet = s.network.subnet,
                                         .gateway = s.network.gateway});
    FLOTILLA_TRY(services);
    s.services = std::move(*services);
  }
  FLOTILLA_TRY(s.startContainerd());
  FLOTILLA_TRY(s.importImages());
  FLOTILLA_TRY(s.startKubelet());
  FLOTILLA_TRY(s.startScheduler());
  FLOTILLA_TRY(s.waitReady());
  if (s.services) {
    FLOTILLA_TRY(s.services->waitProxyReady());
  }
  s.start_seconds = std::chrono::duration<double>(Clock::now() - s.started_at).count();
  std::fprintf(stderr, "node %s Ready in %.1fs (bridge %s, pods %s, dir %s)\n", s.name.c_str(), s.start_seconds,
               s.network.bridge.c_str(), s.network.subnet.c_str(), s.dir.c_str());
  return node;
}

const std::string& KubeNode::name() const {
  return state_->name;
}

double KubeNode::startSeconds() const {
  return state_->start_seconds;
}

Status KubeNode::importDockerImage(const std::string& image) {
  std::string archive = state_->path("images/" + sha256Hex(image).substr(0, 12) + ".tar");
  std::error_code ec;
  fs::create_directories(state_->path("images"), ec);
  auto saved = runCommand({.argv = {"docker", "save", "-o", archive, image}, .timeout = std::chrono::minutes(5)});
  FLOTILLA_TRY(saved);
  if (saved->exit_code != 0) {
    return fail(ErrorKind::kPermanent, "docker save " + image + " failed: " + saved->err);
  }
  // Unpacked now, into the snapshotter the CRI uses: otherwise the first CreateContainer of each pod unpacks it,
  // concurrently, and a large image can take longer than the kubelet's 2 min runtime request timeout.
  auto imported = state_->ctr({"images", "import", "--snapshotter", "native", archive}, std::chrono::seconds(300));
  FLOTILLA_TRY(imported);
  removeAll(archive);
  if (imported->exit_code != 0) {
    return fail(ErrorKind::kPermanent, "ctr images import " + image + " failed: " + imported->err);
  }
  return okStatus();
}

Status KubeNode::healthy() {
  if (state_->stopped) {
    return fail(ErrorKind::kPermanent, "node " + name() + " was stopped");
  }
  if (!state_->containerd.running() || !state_->kubelet.running() || !state_->scheduler.running()) {
    return fail(ErrorKind::kTransient, "node " + name() + ": a node process exited\n" + state_->tails(40));
  }
  return state_->services ? state_->services->healthy() : okStatus();
}

void KubeNode::stop() {
  State& s = *state_;
  if (s.stopped) {
    return;
  }
  s.stopped = true;
  s.scheduler.stop(std::chrono::seconds(2));
  s.drainPods();
  s.kubelet.stop(std::chrono::seconds(5));
  if (s.containerd.running()) {
    s.removeContainers();
  }
  s.containerd.stop(std::chrono::seconds(5));
  s.killShims();
  if (s.services) {
    s.services->stop();  // after the pods: kube-proxy's cleanup must not cut a pod that is still stopping
  }
  s.cleanUpHost();
}

std::string KubeNode::logTail(size_t lines) const {
  return state_->tails(lines) + (state_->services ? state_->services->logTail(lines) : std::string());
}

}  // namespace flotilla::harness
