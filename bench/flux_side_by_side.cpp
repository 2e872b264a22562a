// Benchmark (issue 15): Flotilla and Flux side by side, in one process, on one machine: the same git server, the
// same manifests, the same two harness API servers, the same definition of Ready (every object applied and healthy:
// the agent's health checks; Flux's `wait: true`). Each tool triggered as its docs recommend for speed: Flotilla by
// its webhook (disablePolling GitRepos, a signed push right after the commit), Flux by what its webhook Receiver
// does (reconcile.fluxcd.io/requestedAt on the GitRepository, set right after the commit). Flotilla runs first, its
// services are stopped, then Flux runs; neither shares the machine with the other's controllers.
//
//   1. commit -> Ready on 2 clusters, N commits (median, max); Flux's second cluster through spec.kubeConfig;
//   2. B bundles / Kustomizations from one repository on one cluster: from registering the repository to all Ready,
//      CPU seconds and peak RSS (VmHWM) of every process of each tool (Flotilla: poller, bundler, scheduler, both
//      agents, nats-server; Flux: source-controller, kustomize-controller), and the peak of their summed PSS
//      (sampled every 0.5 s: a shared library counts once, not once per process);
//   3. once each tool's CPU is flat (a 10 s window under 0.5 CPU s), its idle CPU over 30 s and RSS; then a commit
//      changing 1 of the B: time until that one is Ready, how many of the others each tool applied again, and the
//      CPU above idle until the tool settled.
//
//   build/bench/bench_flux [commits=10] [bundles=1000]
// Not a timed test: it prints figures and ratios and asserts nothing about them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "bench_util.h"
#include "e2e_util.h"
#include "flux.h"
#include "webhook_hub.h"
#include "webhook_post.h"

using namespace flotilla;
using namespace flotilla::e2e;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kHookSecret = "bench-webhook-secret";
constexpr auto kPoll1 = std::chrono::milliseconds(20);      // scenario 1: how often each tool's state is read
constexpr auto kPollMany = std::chrono::milliseconds(500);  // scenarios 2 and 3 (reading 1,000 states costs)
constexpr auto kIdleWindow = std::chrono::seconds(30);
constexpr auto kSettleTail = std::chrono::seconds(5);
constexpr auto kFlatWindow = std::chrono::seconds(10);  // the CPU is flat once one window costs under kFlatCpu
constexpr double kFlatCpu = 0.5;                        // CPU seconds per kFlatWindow: 5 % of one core
constexpr auto kFlatGiveUp = std::chrono::minutes(20);
constexpr auto kGiveUp = std::chrono::minutes(45);  // Flux took ~15 min for 1,000 here
constexpr const char* kFluxInterval = "10m";        // GitRepository and Kustomization; pushes trigger the GitRepository

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

//! The processes of one tool: CPU summed, peak and current RSS per process.
struct Processes {
  std::vector<std::pair<std::string, pid_t>> list;
  [[nodiscard]] double cpu() const {
    double total = 0;
    for (const auto& [name, pid] : list) {
      total += bench::procCpuSeconds(pid);
    }
    return total;
  }
  //! `read` (KiB, -1 when unreadable) summed over the processes.
  [[nodiscard]] long sum(const std::function<long(pid_t)>& read) const {
    long total = 0;
    for (const auto& [name, pid] : list) {
      total += std::max(0L, read(pid));
    }
    return total;
  }
  [[nodiscard]] long sumKiB(const std::string& field) const {
    return sum([&](pid_t pid) { return bench::procStatusKiB(pid, field); });
  }
  [[nodiscard]] long sumPssKiB() const {
    return sum([](pid_t pid) { return bench::procSmapsRollupKiB(pid, "Pss"); });
  }
  [[nodiscard]] std::string perProcess(const std::string& field) const {
    std::string out;
    for (const auto& [name, pid] : list) {
      out += (out.empty() ? "" : ", ") + name + " " + std::to_string(bench::procStatusKiB(pid, field) / 1024) + " MiB";
    }
    return out;
  }
};

//! What one tool did, filled scenario by scenario and printed side by side at the end.
struct Figures {
  std::vector<double> commit_ms;  // scenario 1
  double many_s = 0, many_cpu = 0;
  long many_hwm_kib = 0;
  std::string many_hwm_detail;
  long many_peak_pss_kib = 0;  // the highest summed PSS sampled during scenario 2
  double flat_after_s = 0;     // how long after scenario 2 the CPU became flat
  bool flat = false;           // false: still busy after kFlatGiveUp (the idle figures are then not idle)
  double idle_cpu = 0;         // CPU seconds over kIdleWindow
  long idle_rss_kib = 0;
  double one_ready_s = 0, settled_s = 0, one_cpu_over_idle = 0;
  size_t others_applied_again = 0;
};

std::string manifests(const std::string& ns, int round) {
  std::string out = namespaceYaml(ns);
  for (int i = 0; i < 5; ++i) {
    out += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-" + std::to_string(i) + "\n  namespace: " + ns +
           "\ndata:\n  value: round-" + std::to_string(round) + "\n";
  }
  return out;
}

std::string bundleDir(size_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "b-%04zu", i);
  return name;
}

std::string bundleConfigMap(const std::string& ns, size_t i, const std::string& value) {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + bundleDir(i) + "\n  namespace: " + ns +
         "\ndata:\n  value: " + value + "\n";
}

//! B bundle directories, each one ConfigMap in `ns`; Flotilla's also have a fleet.yaml (what makes a directory a
//! bundle; Flux's Kustomizations name their paths instead).
std::map<std::string, std::string> manyBundles(const std::string& ns, size_t count, bool fleet_yaml) {
  std::map<std::string, std::string> files;
  for (size_t i = 0; i < count; ++i) {
    files["bundles/" + bundleDir(i) + "/cm.yaml"] = bundleConfigMap(ns, i, "v1");
    if (fleet_yaml) {
      files["bundles/" + bundleDir(i) + "/fleet.yaml"] = "defaultNamespace: " + ns + "\n";
    }
  }
  return files;
}

template <typename Check>
Status waitUntil(const std::string& what, std::chrono::milliseconds every, Check check) {
  const auto deadline = Clock::now() + kGiveUp;
  while (!check()) {
    if (Clock::now() > deadline) {
      return fail(ErrorKind::kTransient, what + ": not done after 45 minutes");
    }
    std::this_thread::sleep_for(every);
  }
  return {};
}

//! When a measured step started, and the tool's CPU seconds at that moment.
struct Window {
  Clock::time_point start = Clock::now();
  double cpu_start;
  explicit Window(const Processes& p) : cpu_start(p.cpu()) {}
};

//! Samples the summed PSS of a tool's processes every 0.5 s from construction to stop(), keeping the highest.
class PeakPss {
 public:
  explicit PeakPss(const Processes& processes)
      : thread_([this, &processes] {
          while (!stop_) {
            peak_ = std::max(peak_.load(), processes.sumPssKiB());
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
          }
        }) {}
  PeakPss(const PeakPss&) = delete;
  PeakPss& operator=(const PeakPss&) = delete;
  ~PeakPss() { stop(); }
  long stop() {
    stop_ = true;
    if (thread_.joinable()) {
      thread_.join();
    }
    return peak_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_{0};
  std::thread thread_;
};

//! Scenario 2's figures, from `many` (started when the repository was registered) to now.
void recordMany(Figures& figures, const Processes& processes, const Window& many, PeakPss& pss) {
  figures.many_s = seconds(Clock::now() - many.start);
  figures.many_cpu = processes.cpu() - many.cpu_start;
  figures.many_hwm_kib = processes.sumKiB("VmHWM");
  figures.many_hwm_detail = processes.perProcess("VmHWM");
  figures.many_peak_pss_kib = pss.stop();
}

//! Waits until the tool's CPU is flat (one kFlatWindow under kFlatCpu; a tool may go on working after what it
//! reports as Ready), then measures its CPU over kIdleWindow and its RSS at the end.
void measureIdle(Figures& figures, const Processes& processes) {
  const auto started = Clock::now();
  while (Clock::now() - started < kFlatGiveUp) {
    Window window(processes);
    std::this_thread::sleep_for(kFlatWindow);
    if (processes.cpu() - window.cpu_start < kFlatCpu) {
      figures.flat = true;
      break;
    }
  }
  figures.flat_after_s = seconds(Clock::now() - started);
  Window idle(processes);
  std::this_thread::sleep_for(kIdleWindow);
  figures.idle_cpu = processes.cpu() - idle.cpu_start;
  figures.idle_rss_kib = processes.sumKiB("VmRSS");
}

//! After kSettleTail more, the CPU since `commit` less what idling for as long costs.
void recordAboveIdle(Figures& figures, const Processes& processes, const Window& commit) {
  std::this_thread::sleep_for(kSettleTail);
  const double window = seconds(Clock::now() - commit.start);
  figures.one_cpu_over_idle = processes.cpu() - commit.cpu_start - figures.idle_cpu * window / seconds(kIdleWindow);
}

// ---- Flotilla ---------------------------------------------------------------------------------------------------

struct FlotillaRun {
  Hub& hub;
  int webhook_port;
  Processes processes;
  std::string gitRepo(const std::string& name, const std::string& url, const std::string& path,
                      const std::string& targets) const {
    return "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: " + name +
           "\n  namespace: fleet-default\nspec:\n  repo: " + url +
           "\n  branch: main\n  disablePolling: true\n  webhookSecret: hooks\n  paths:\n  - " + path + "\n" + targets;
  }
  Status push(const std::string& url, const std::string& sha) const {
    const int status = bench::postWebhook(webhook_port, bench::pushBody(url, sha), kHookSecret);
    return status == 202 ? Status{} : fail(ErrorKind::kInternal, "the webhook answered " + std::to_string(status));
  }
};

Status flotillaCommits(FlotillaRun& run, int commits, Figures& figures) {
  Hub& hub = run.hub;
  auto repo = hub.git().createRepo("s1-flotilla");
  FLOTILLA_TRY(repo);
  auto sha = hub.git().commitFiles("s1-flotilla", "main", {{"app/objects.yaml", manifests("flo-s1", 0)}}, "round 0");
  FLOTILLA_TRY(sha);
  FLOTILLA_TRY(hub.apply(run.gitRepo("s1", repo->http, "app", "  targets:\n  - clusterSelector: {}\n")));
  const std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  FLOTILLA_TRY(waitUntil("flotilla warm-up", kPoll1, [&] { return readyEverywhere(hub, "s1", *sha, both); }));
  for (int round = 1; round <= commits; ++round) {
    const auto t0 = Clock::now();
    sha = hub.git().commitFiles("s1-flotilla", "main", {{"app/objects.yaml", manifests("flo-s1", round)}}, "round");
    FLOTILLA_TRY(sha);
    FLOTILLA_TRY(run.push(repo->http, *sha));
    FLOTILLA_TRY(waitUntil("flotilla commit", kPoll1, [&] { return readyEverywhere(hub, "s1", *sha, both); }));
    figures.commit_ms.push_back(seconds(Clock::now() - t0) * 1000);
  }
  return {};
}

std::map<std::string, std::string> wantedDeployments(Hub& hub, const std::string& cluster) {
  std::map<std::string, std::string> out;
  for (const auto& item : bundlesOn(hub, cluster, "s2")) {
    out[item.bundle] = item.wanted_deployment;
  }
  return out;
}

Status flotillaMany(FlotillaRun& run, size_t count, Figures& figures) {
  Hub& hub = run.hub;
  const std::vector<std::string> one = {hub.clusterName(0)};
  auto repo = hub.git().createRepo("s2-flotilla");
  FLOTILLA_TRY(repo);
  auto sha = hub.git().commitFiles("s2-flotilla", "main", manyBundles("flo-s2", count, true), "many bundles");
  FLOTILLA_TRY(sha);
  FLOTILLA_TRY(bench::kubectlApply(hub.cluster(0).kubeconfigPath(), namespaceYaml("flo-s2")));

  // 2. register the repository -> all Ready.
  Window many(run.processes);
  PeakPss pss(run.processes);
  FLOTILLA_TRY(hub.apply(run.gitRepo("s2", repo->http, "bundles",
                                     "  targets:\n  - clusterSelector:\n      matchLabels:\n        env: cluster1\n")));
  FLOTILLA_TRY(waitUntil("flotilla many", kPollMany, [&] { return readyEverywhere(hub, "s2", *sha, one, count); }));
  recordMany(figures, run.processes, many, pss);

  // 3. idle, then one bundle changed.
  measureIdle(figures, run.processes);
  const auto before = wantedDeployments(hub, one.front());
  // The bundle of bundles/b-<count/2> (Fleet's name: the GitRepo's and the path's).
  std::string changed;
  for (const auto& [bundle, deployment] : before) {
    if (bundle.size() > bundleDir(count / 2).size() && bundle.ends_with("-" + bundleDir(count / 2))) {
      changed = bundle;
    }
  }
  if (changed.empty()) {
    return fail(ErrorKind::kInternal, "no bundle of bundles/" + bundleDir(count / 2));
  }
  Window commit(run.processes);
  sha = hub.git().commitFiles(
      "s2-flotilla", "main",
      {{"bundles/" + bundleDir(count / 2) + "/cm.yaml", bundleConfigMap("flo-s2", count / 2, "v2")}}, "one bundle");
  FLOTILLA_TRY(sha);
  FLOTILLA_TRY(run.push(repo->http, *sha));
  FLOTILLA_TRY(waitUntil("flotilla one changed", kPollMany,
                         [&] { return bundleState(hub, one.front(), "s2", changed, "Ready", *sha); }));
  figures.one_ready_s = seconds(Clock::now() - commit.start);
  figures.settled_s = figures.one_ready_s;  // nothing else is deployed again (counted below)
  recordAboveIdle(figures, run.processes, commit);
  for (const auto& [bundle, deployment] : wantedDeployments(hub, one.front())) {
    if (bundle != changed && before.count(bundle) && before.at(bundle) != deployment) {
      ++figures.others_applied_again;
    }
  }
  return {};
}

// ---- Flux -------------------------------------------------------------------------------------------------------

struct FluxRun {
  Hub& hub;  // the git server and the API servers
  kube::KubeClient& home;
  Processes processes;
  std::map<std::string, std::set<std::string>> applied, ready;  //!< per commit: the Kustomizations seen so
  [[nodiscard]] std::string kubeconfig() { return hub.cluster(0).kubeconfigPath(); }
};

//! True once each Kustomization named `names` has been seen Ready at `sha` (a Kustomization is Ready=Unknown while
//! it reconciles again, e.g. on its interval, so "all Ready at one instant" may never come on a busy controller:
//! what counts is when each first became Ready). `at_sha`: how many have applied `sha` so far.
bool fluxReady(FluxRun& run, const std::set<std::string>& names, const std::string& sha, size_t* at_sha = nullptr) {
  auto states = bench::kustomizations(run.home);
  if (!states.ok()) {
    std::cerr << "bench: " << states.error().describe() << std::endl;
    return false;
  }
  for (const auto& state : *states) {
    if (names.count(state.name) && state.applied_commit == sha) {
      run.applied[sha].insert(state.name);
      if (state.ready) {
        run.ready[sha].insert(state.name);
      }
    }
  }
  if (at_sha != nullptr) {
    *at_sha = run.applied[sha].size();
  }
  return std::all_of(names.begin(), names.end(), [&](const std::string& name) { return run.ready[sha].count(name); });
}

Status fluxCommits(FluxRun& run, int commits, Figures& figures) {
  Hub& hub = run.hub;
  auto repo = hub.git().createRepo("s1-flux");
  FLOTILLA_TRY(repo);
  auto sha = hub.git().commitFiles("s1-flux", "main", {{"app/objects.yaml", manifests("flux-s1", 0)}}, "round 0");
  FLOTILLA_TRY(sha);
  auto remote = bench::inlineKubeconfig(hub.cluster(1));
  FLOTILLA_TRY(remote);
  Json secret = Json::object();
  secret["apiVersion"] = Json("v1");
  secret["kind"] = Json("Secret");
  secret["metadata"]["name"] = Json("cluster-2-kubeconfig");
  secret["metadata"]["namespace"] = Json(bench::kFluxNamespace);
  secret["stringData"]["value"] = Json(*remote);
  FLOTILLA_TRY(bench::kubectlApply(run.kubeconfig(), secret.dump()));
  FLOTILLA_TRY(bench::kubectlApply(
      run.kubeconfig(), bench::gitRepositoryYaml("s1", repo->http, kFluxInterval) + "---\n" +
                            bench::kustomizationYaml("s1-c1", "s1", "app", kFluxInterval) + "---\n" +
                            bench::kustomizationYaml("s1-c2", "s1", "app", kFluxInterval, "cluster-2-kubeconfig")));
  const std::set<std::string> both = {"s1-c1", "s1-c2"};
  FLOTILLA_TRY(waitUntil("flux warm-up", kPoll1, [&] { return fluxReady(run, both, *sha); }));
  for (int round = 1; round <= commits; ++round) {
    const auto t0 = Clock::now();
    sha = hub.git().commitFiles("s1-flux", "main", {{"app/objects.yaml", manifests("flux-s1", round)}}, "round");
    FLOTILLA_TRY(sha);
    FLOTILLA_TRY(bench::requestReconcile(run.home, "s1"));
    FLOTILLA_TRY(waitUntil("flux commit", kPoll1, [&] { return fluxReady(run, both, *sha); }));
    figures.commit_ms.push_back(seconds(Clock::now() - t0) * 1000);
  }
  return {};
}

Status fluxMany(FluxRun& run, size_t count, Figures& figures) {
  Hub& hub = run.hub;
  auto repo = hub.git().createRepo("s2-flux");
  FLOTILLA_TRY(repo);
  auto sha = hub.git().commitFiles("s2-flux", "main", manyBundles("flux-s2", count, false), "many bundles");
  FLOTILLA_TRY(sha);
  FLOTILLA_TRY(bench::kubectlApply(run.kubeconfig(), namespaceYaml("flux-s2")));
  // The GitRepository first, with its artifact ready; then registering the B Kustomizations (one kubectl apply)
  // starts the clock, as registering the GitRepo does for Flotilla. (The other way round, Kustomizations waiting for
  // a source back off for up to 30 s, which would count against Flux.)
  FLOTILLA_TRY(bench::kubectlApply(run.kubeconfig(), bench::gitRepositoryYaml("s2", repo->http, kFluxInterval)));
  FLOTILLA_TRY(waitUntil("flux source", kPoll1, [&] { return bench::sourceRevision(run.home, "s2") == *sha; }));
  std::string yaml;
  std::set<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    names.insert("s2-" + bundleDir(i));
    yaml += bench::kustomizationYaml("s2-" + bundleDir(i), "s2", "bundles/" + bundleDir(i), kFluxInterval) + "---\n";
  }
  Window many(run.processes);
  PeakPss pss(run.processes);
  FLOTILLA_TRY(bench::kubectlApply(run.kubeconfig(), yaml));
  FLOTILLA_TRY(waitUntil("flux many", kPollMany, [&] { return fluxReady(run, names, *sha); }));
  recordMany(figures, run.processes, many, pss);

  measureIdle(figures, run.processes);
  const std::string changed = "s2-" + bundleDir(count / 2);
  Window commit(run.processes);
  sha = hub.git().commitFiles(
      "s2-flux", "main",
      {{"bundles/" + bundleDir(count / 2) + "/cm.yaml", bundleConfigMap("flux-s2", count / 2, "v2")}}, "one bundle");
  FLOTILLA_TRY(sha);
  FLOTILLA_TRY(bench::requestReconcile(run.home, "s2"));
  FLOTILLA_TRY(waitUntil("flux one changed", kPollMany, [&] { return fluxReady(run, {changed}, *sha); }));
  figures.one_ready_s = seconds(Clock::now() - commit.start);
  // Every Kustomization of the GitRepository reconciles the new revision (each builds and applies its path again).
  size_t at_sha = 0;
  FLOTILLA_TRY(waitUntil("flux settled", kPollMany, [&] { return fluxReady(run, names, *sha, &at_sha); }));
  figures.settled_s = seconds(Clock::now() - commit.start);
  figures.others_applied_again = at_sha - 1;
  recordAboveIdle(figures, run.processes, commit);
  return {};
}

// ---- the report -------------------------------------------------------------------------------------------------

void print(const Figures& flo, const Figures& flux, const std::string& flux_setup, int commits, size_t count) {
  const auto max = [](const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); };
  const double mib = 1024.0;
  std::printf("Flotilla vs %s; %s\n", flux_setup.c_str(), bench::machineLoad().c_str());
  std::printf(
      "1. commit -> Ready on 2 clusters, %d commits: Flotilla median %.0f ms, max %.0f ms; Flux median %.0f ms, "
      "max %.0f ms; ratio Flotilla/Flux median %.2fx, max %.2fx (goal <= 0.5x)\n",
      commits, median(flo.commit_ms), max(flo.commit_ms), median(flux.commit_ms), max(flux.commit_ms),
      median(flo.commit_ms) / median(flux.commit_ms), max(flo.commit_ms) / max(flux.commit_ms));
  std::printf(
      "2. %zu bundles / Kustomizations, one repository, one cluster, registered -> all Ready: Flotilla %.1f s, "
      "Flux %.1f s (ratio %.2fx, goal <= 0.5x); CPU s Flotilla %.1f, Flux %.1f (%.2fx); peak RSS summed "
      "Flotilla %.0f MiB, Flux %.0f MiB (ratio %.2fx, goal <= 0.25x)\n",
      count, flo.many_s, flux.many_s, flo.many_s / flux.many_s, flo.many_cpu, flux.many_cpu,
      flo.many_cpu / flux.many_cpu, flo.many_hwm_kib / mib, flux.many_hwm_kib / mib,
      static_cast<double>(flo.many_hwm_kib) / static_cast<double>(flux.many_hwm_kib));
  std::printf("   peak RSS per process: Flotilla: %s\n                         Flux: %s\n", flo.many_hwm_detail.c_str(),
              flux.many_hwm_detail.c_str());
  std::printf("   peak PSS summed (sampled every 0.5 s): Flotilla %.0f MiB, Flux %.0f MiB (ratio %.2fx)\n",
              flo.many_peak_pss_kib / mib, flux.many_peak_pss_kib / mib,
              static_cast<double>(flo.many_peak_pss_kib) / static_cast<double>(flux.many_peak_pss_kib));
  const auto flat = [](const Figures& f) {
    char text[96];
    std::snprintf(text, sizeof text, f.flat ? "flat after %.0f s" : "NOT flat after %.0f s (not idle)", f.flat_after_s);
    return std::string(text);
  };
  std::printf(
      "   idle %llds with %zu deployed, once the CPU was flat (Flotilla %s, Flux %s): CPU s Flotilla %.2f, "
      "Flux %.2f; RSS Flotilla %.0f MiB, Flux %.0f MiB\n",
      static_cast<long long>(kIdleWindow.count()), count, flat(flo).c_str(), flat(flux).c_str(), flo.idle_cpu,
      flux.idle_cpu, flo.idle_rss_kib / mib, flux.idle_rss_kib / mib);
  std::printf(
      "3. a commit changing 1 of %zu: Ready after Flotilla %.2f s, Flux %.2f s (%.2fx); the other %zu applied "
      "again: Flotilla %zu, Flux %zu; settled after Flotilla %.2f s, Flux %.2f s; CPU s above idle until "
      "settled + %llds: Flotilla %.2f, Flux %.2f\n",
      count, flo.one_ready_s, flux.one_ready_s, flo.one_ready_s / flux.one_ready_s, count - 1, flo.others_applied_again,
      flux.others_applied_again, flo.settled_s, flux.settled_s, static_cast<long long>(kSettleTail.count()),
      flo.one_cpu_over_idle, flux.one_cpu_over_idle);
}

}  // namespace

int main(int argc, char** argv) {
  const int commits = argc > 1 ? std::atoi(argv[1]) : 10;
  const size_t count = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1000;
  if (!bench::fluxBuilt()) {
    std::cerr << "bench_flux: Flux is not built in " << bench::toolsDir()
              << "; run scripts/bench (or scripts/setup --no-run --with-flux) first" << std::endl;
    return 1;
  }
  auto started = bench::startWebhookHub({.clusters = 2, .share_clusters = false, .log_level = "warn", .secure = true},
                                        "fleet-default", "hooks", kHookSecret);
  if (!started.ok()) {
    std::cerr << "bench_flux: " << started.error().describe() << std::endl;
    return 1;
  }
  Hub& hub = *started->hub;
  const std::vector<std::string> services = {"poller", "bundler", "scheduler", "agent-0", "agent-1"};

  Figures flo, flux;
  FlotillaRun flotilla{.hub = hub, .webhook_port = started->port};
  for (const auto& name : services) {
    flotilla.processes.list.emplace_back(name, hub.pid(name));
  }
  flotilla.processes.list.emplace_back("nats-server", hub.nats().pid());
  // The logs are read only once a step failed (an argument would be read before the step ran).
  auto report = [&](const Status& status, const std::function<std::string()>& logs) {
    if (!status.ok()) {
      std::cerr << "bench_flux: " << status.error().describe() << "\n" << logs() << std::endl;
    }
    return status.ok();
  };
  auto hub_logs = [&] { return hub.allLogs(); };
  if (!report(flotillaCommits(flotilla, commits, flo), hub_logs) ||
      !report(flotillaMany(flotilla, count, flo), hub_logs)) {
    return 1;
  }
  for (const auto& name : services) {
    (void)hub.stopService(name);
  }

  auto flux_dir = makeTempDir("bench-flux");
  if (!flux_dir.ok()) {
    return 1;
  }
  auto controllers = bench::FluxControllers::start(hub.cluster(0), *flux_dir, bench::FluxTuning{});
  if (!controllers.ok()) {
    std::cerr << "bench_flux: " << controllers.error().describe() << std::endl;
    return 1;
  }
  auto flux_logs = [&] { return (*controllers)->logTail() + "(logs in " + *flux_dir + ")\n"; };
  FluxRun flux_run{.hub = hub, .home = hub.kube(0), .processes = {(*controllers)->pids()}};
  if (!report(fluxCommits(flux_run, commits, flux), flux_logs) || !report(fluxMany(flux_run, count, flux), flux_logs)) {
    return 1;
  }
  print(flo, flux, (*controllers)->describe(), commits, count);
  (*controllers)->stop();
  if (!envOr("FLOTILLA_KEEP_TEST_DIRS", "").empty()) {
    std::cerr << "bench_flux: Flux logs kept in " << *flux_dir << std::endl;
  } else {
    std::filesystem::remove_all(*flux_dir);
  }
  return 0;
}
