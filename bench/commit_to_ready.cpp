// Benchmark (issue 3): commit-to-Ready latency on 2 clusters — from the git commit to both agents reporting
// Ready (GitRepo polling at 1s) — over N commits, printed beside a baseline measured in the same run: the same
// manifests applied with `kubectl apply --server-side` to both API servers (in parallel, as the two agents run).
// Not a timed test: it prints figures and asserts nothing about them.
//
//   build/bench/bench_commit_to_ready [commits=10]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "bench_util.h"
#include "e2e_util.h"
#include "flotilla/core/util.h"

using namespace flotilla;
using namespace flotilla::e2e;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Stats {
  double median = 0, max = 0, mean = 0;
};

Stats stats(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  Stats s;
  if (values.empty()) {
    return s;
  }
  s.median =
      values.size() % 2 ? values[values.size() / 2] : (values[values.size() / 2 - 1] + values[values.size() / 2]) / 2;
  s.max = values.back();
  for (double v : values) {
    s.mean += v / static_cast<double>(values.size());
  }
  return s;
}

std::string manifests(const std::string& ns, int round) {
  std::string out = namespaceYaml(ns);
  for (int i = 0; i < 5; ++i) {
    out += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-" + std::to_string(i) + "\n  namespace: " + ns +
           "\ndata:\n  value: round-" + std::to_string(round) + "\n";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int commits = argc > 1 ? std::atoi(argv[1]) : 10;
  auto started = Hub::start({.clusters = 2, .share_clusters = false, .log_level = "warn"});
  if (!started.ok()) {
    std::cerr << "bench: " << started.error().describe() << std::endl;
    return 1;
  }
  Hub& hub = **started;
  std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  std::string name = "bench";
  std::string ns = "bench";
  auto repo = hub.git().createRepo(name);
  if (!repo.ok()) {
    std::cerr << repo.error().describe() << std::endl;
    return 1;
  }
  // fleet.yaml-free bundle: the path itself is the bundle; objects carry their namespace.
  auto first = hub.git().commitFiles(name, "main", {{"app/objects.yaml", manifests(ns, 0)}}, "round 0");
  if (!first.ok() || !hub.apply(gitRepoYaml(name, repo->http, {"app"})).ok()) {
    std::cerr << "bench: setup failed\n" << hub.allLogs() << std::endl;
    return 1;
  }
  if (!Hub::waitFor([&] { return readyEverywhere(hub, name, *first, both); }, std::chrono::seconds(120))) {
    std::cerr << "bench: first commit never became Ready\n" << hub.allLogs() << std::endl;
    return 1;
  }

  std::vector<double> flotilla_ms;
  for (int round = 1; round <= commits; ++round) {
    auto t0 = Clock::now();
    auto commit = hub.git().commitFiles(name, "main", {{"app/objects.yaml", manifests(ns, round)}},
                                        "round " + std::to_string(round));
    if (!commit.ok()) {
      std::cerr << commit.error().describe() << std::endl;
      return 1;
    }
    // Poll the hub's records every 20 ms: the measurement's resolution.
    while (!readyEverywhere(hub, name, *commit, both)) {
      if (Clock::now() - t0 > std::chrono::seconds(120)) {
        std::cerr << "bench: round " << round << " never became Ready\n" << hub.allLogs() << std::endl;
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    flotilla_ms.push_back(ms(Clock::now() - t0));
  }

  // Baseline: the same manifests with kubectl's server-side apply to both API servers at once. Round 0 is the
  // warm-up, as the first commit is for Flotilla: it creates the objects and is not measured.
  std::string kubectl = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin") + "/kubectl";
  auto apply_both = [&](int round) {
    std::string yaml = manifests(ns + "-kubectl", round);
    std::vector<std::thread> appliers;
    std::atomic<bool> ok{true};
    for (size_t c = 0; c < 2; ++c) {
      appliers.emplace_back([&, c] {
        auto r = runCommand({.argv = {kubectl, "--kubeconfig", hub.cluster(c).kubeconfigPath(), "apply",
                                      "--server-side", "--field-manager", "bench", "-f", "-"},
                             .input = yaml});
        if (!r.ok() || r->exit_code != 0) {
          ok = false;
          std::cerr << (r.ok() ? r->err : r.error().describe()) << std::endl;
        }
      });
    }
    for (auto& t : appliers) {
      t.join();
    }
    return ok.load();
  };
  if (!apply_both(0)) {
    return 1;
  }
  std::vector<double> kubectl_ms;
  for (int round = 1; round <= commits; ++round) {
    auto t0 = Clock::now();
    if (!apply_both(round)) {
      return 1;
    }
    kubectl_ms.push_back(ms(Clock::now() - t0));
  }

  Stats f = stats(flotilla_ms);
  Stats k = stats(kubectl_ms);
  std::printf("commit-to-Ready on 2 clusters, %d commits, GitRepo pollingInterval 1s; %s\n", commits,
              bench::machineLoad().c_str());
  std::printf("  flotilla (git commit -> both agents Ready): median %.0f ms, mean %.0f ms, max %.0f ms\n", f.median,
              f.mean, f.max);
  std::printf("  baseline (kubectl apply --server-side x2):  median %.0f ms, mean %.0f ms, max %.0f ms\n", k.median,
              k.mean, k.max);
  std::printf("  ratio flotilla/baseline: median %.1fx, max %.1fx\n", f.median / k.median, f.max / k.max);
  return 0;
}
