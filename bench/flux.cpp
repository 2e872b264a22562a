#include "flux.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/harness/local_port.h"

namespace flotilla::bench {

namespace {

constexpr const char* kControllers[] = {"source-controller", "kustomize-controller"};

std::string kubectl() {
  return toolsDir() + "/kubectl";
}

Status runKubectl(const std::string& kubeconfig, std::vector<std::string> args, const std::string& input = "") {
  args.insert(args.begin(), {kubectl(), "--kubeconfig", kubeconfig});
  auto ran = runCommand({.argv = args, .input = input, .timeout = std::chrono::minutes(5)});
  FLOTILLA_TRY(ran);
  if (ran->exit_code != 0) {
    return fail(ErrorKind::kInternal, "kubectl " + args[3] + ": " + ran->err);
  }
  return {};
}

//! GET http://127.0.0.1:<port>/readyz until it answers 200 (curl: the harness has no plain-HTTP client).
bool waitReady(int port, Process& process, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && process.running()) {
    auto probe =
        runCommand({.argv = {"curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:" + std::to_string(port) + "/readyz"},
                    .timeout = std::chrono::seconds(5)});
    if (probe.ok() && probe->exit_code == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

}  // namespace

std::string toolsDir() {
  return envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
}

bool fluxBuilt() {
  for (const char* name : kControllers) {
    const std::string base = toolsDir() + "/flux-" + name;
    if (!std::filesystem::exists(base) || !std::filesystem::exists(base + "-crds.yaml")) {
      return false;
    }
  }
  return true;
}

Result<std::unique_ptr<FluxControllers>> FluxControllers::start(harness::KubeCluster& home, const std::string& dir,
                                                                const FluxTuning& tuning) {
  std::unique_ptr<FluxControllers> flux(new FluxControllers());
  flux->dir_ = dir;
  flux->kubeconfig_ = home.kubeconfigPath();
  flux->tuning_ = tuning;
  for (const char* name : kControllers) {
    FLOTILLA_TRY(runKubectl(flux->kubeconfig_, {"apply", "--server-side", "--force-conflicts", "-f",
                                                toolsDir() + "/flux-" + name + "-crds.yaml"}));
  }
  FLOTILLA_TRY(
      runKubectl(flux->kubeconfig_, {"wait", "--for", "condition=Established", "--timeout", "60s", "crd", "--all"}));
  FLOTILLA_TRY(runKubectl(flux->kubeconfig_, {"create", "namespace", kFluxNamespace}));

  auto storage_port = harness::freeTcpPort();
  FLOTILLA_TRY(storage_port);
  const std::string storage = "127.0.0.1:" + std::to_string(*storage_port);
  std::filesystem::create_directories(dir + "/storage");
  FLOTILLA_TRY(flux->startController(
      "source-controller", {"--storage-path=" + dir + "/storage", "--storage-addr=" + storage,
                            "--storage-adv-addr=" + storage, "--concurrent=" + std::to_string(tuning.concurrent)}));
  FLOTILLA_TRY(flux->startController(
      "kustomize-controller",
      {"--concurrent=" + std::to_string(tuning.concurrent), "--kube-api-qps=" + std::to_string(tuning.kube_api_qps),
       "--kube-api-burst=" + std::to_string(tuning.kube_api_burst), "--no-remote-bases=true"}));
  return flux;
}

Status FluxControllers::startController(const std::string& name, const std::vector<std::string>& flags) {
  auto metrics_port = harness::freeTcpPort();
  auto health_port = harness::freeTcpPort();
  FLOTILLA_TRY(metrics_port);
  FLOTILLA_TRY(health_port);
  std::vector<std::string> argv = {toolsDir() + "/flux-" + name,
                                   "--enable-leader-election=false",
                                   "--watch-all-namespaces=true",
                                   "--log-level=info",
                                   "--metrics-addr=127.0.0.1:" + std::to_string(*metrics_port),
                                   "--health-addr=127.0.0.1:" + std::to_string(*health_port)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  // RUNTIME_NAMESPACE is where a controller in a pod finds itself (events, leader election); the controllers have
  // no --kubeconfig flag: controller-runtime reads KUBECONFIG outside a pod.
  auto process = Process::start({.argv = argv,
                                 .env = {{"RUNTIME_NAMESPACE", kFluxNamespace}, {"KUBECONFIG", kubeconfig_}},
                                 .output_file = dir_ + "/" + name + ".log",
                                 .kill_with_parent = true});
  FLOTILLA_TRY(process);
  processes_[name] = std::move(*process);
  health_ports_[name] = *health_port;
  if (!waitReady(*health_port, processes_[name], std::chrono::seconds(60))) {
    return fail(ErrorKind::kTransient, name + " never answered /readyz:\n" + logTail());
  }
  return {};
}

FluxControllers::~FluxControllers() {
  stop();
}

void FluxControllers::stop() {
  for (auto& [name, process] : processes_) {
    if (process.running()) {
      process.stop(std::chrono::seconds(10));
    }
  }
}

std::vector<std::pair<std::string, pid_t>> FluxControllers::pids() const {
  std::vector<std::pair<std::string, pid_t>> out;
  for (const auto& [name, process] : processes_) {
    out.emplace_back(name, process.pid());
  }
  return out;
}

std::string FluxControllers::describe() const {
  return std::string("Flux ") + FLOTILLA_FLUX_VERSION +
         " (source-controller, kustomize-controller; --concurrent=" + std::to_string(tuning_.concurrent) +
         ", --kube-api-qps=" + std::to_string(tuning_.kube_api_qps) +
         ", --kube-api-burst=" + std::to_string(tuning_.kube_api_burst) + ")";
}

std::string FluxControllers::logTail(size_t lines) const {
  std::string out;
  for (const char* name : kControllers) {
    auto text = readFile(dir_ + "/" + name + ".log");
    if (!text.ok()) {
      continue;
    }
    auto all = split(*text, '\n');
    out += std::string("== ") + name + " ==\n";
    for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
      out += all[i] + "\n";
    }
  }
  return out;
}

Result<std::string> inlineKubeconfig(const harness::KubeCluster& cluster) {
  auto ca = readFile(cluster.caFile());
  auto cert = readFile(cluster.adminCertFile());
  auto key = readFile(cluster.adminKeyFile());
  FLOTILLA_TRY(ca);
  FLOTILLA_TRY(cert);
  FLOTILLA_TRY(key);
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + cluster.serverUrl() +
         "\n    certificate-authority-data: " + base64Encode(*ca) +
         "\nusers:\n- name: admin\n  user:\n    client-certificate-data: " + base64Encode(*cert) +
         "\n    client-key-data: " + base64Encode(*key) +
         "\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: admin\ncurrent-context: c\n";
}

Status kubectlApply(const std::string& kubeconfig, const std::string& yaml) {
  return runKubectl(kubeconfig, {"apply", "--server-side", "--field-manager", "bench", "-f", "-"}, yaml);
}

std::string gitRepositoryYaml(const std::string& name, const std::string& url, const std::string& interval) {
  return "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: " + name +
         "\n  namespace: " + kFluxNamespace + "\nspec:\n  interval: " + interval + "\n  url: " + url +
         "\n  ref:\n    branch: main\n";
}

std::string kustomizationYaml(const std::string& name, const std::string& source, const std::string& path,
                              const std::string& interval, const std::string& kubeconfig_secret) {
  std::string yaml = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name +
                     "\n  namespace: " + kFluxNamespace + "\nspec:\n  interval: " + interval + "\n  path: ./" + path +
                     "\n  prune: true\n  wait: true\n  timeout: 2m\n" +
                     "  sourceRef:\n    kind: GitRepository\n    name: " + source + "\n";
  if (!kubeconfig_secret.empty()) {
    yaml += "  kubeConfig:\n    secretRef:\n      name: " + kubeconfig_secret + "\n";
  }
  return yaml;
}

Status requestReconcile(kube::KubeClient& home, const std::string& gitrepository) {
  Json patch = Json::object();
  patch["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"] = formatRfc3339(std::chrono::system_clock::now());
  auto patched = home.requestJson("PATCH",
                                  std::string("/apis/source.toolkit.fluxcd.io/v1/namespaces/") + kFluxNamespace +
                                      "/gitrepositories/" + gitrepository,
                                  patch.dump(), "application/merge-patch+json");
  FLOTILLA_TRY(patched);
  return {};
}

std::string sourceRevision(kube::KubeClient& home, const std::string& gitrepository) {
  auto object = home.get("source.toolkit.fluxcd.io/v1", "GitRepository", kFluxNamespace, gitrepository);
  const Json* revision = object.ok() ? object->at({"status", "artifact", "revision"}) : nullptr;
  if (revision == nullptr || !revision->isString()) {
    return "";
  }
  const std::string text = revision->asString();
  return text.substr(text.rfind(':') + 1);
}

Result<std::vector<KustomizationState>> kustomizations(kube::KubeClient& home) {
  auto list = home.list("kustomize.toolkit.fluxcd.io/v1", "Kustomization", kFluxNamespace);
  FLOTILLA_TRY(list);
  std::vector<KustomizationState> out;
  out.reserve(list->items.size());
  for (const auto& item : list->items) {
    KustomizationState state{.name = item.at({"metadata", "name"}) ? item.at({"metadata", "name"})->asString() : ""};
    const Json* status = item.find("status");
    if (status != nullptr) {
      const std::string revision = status->getString("lastAppliedRevision");
      const auto colon = revision.rfind(':');
      state.applied_commit = colon == std::string::npos ? revision : revision.substr(colon + 1);
      if (const Json* conditions = status->find("conditions"); conditions != nullptr && conditions->isArray()) {
        for (const auto& condition : conditions->asArray()) {
          if (condition.getString("type") == "Ready") {
            state.ready = condition.getString("status") == "True" && !state.applied_commit.empty() &&
                          condition.getString("message").find(state.applied_commit) != std::string::npos;
          }
        }
      }
    }
    out.push_back(std::move(state));
  }
  return out;
}

}  // namespace flotilla::bench
