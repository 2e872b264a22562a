// Benchmark (issues 3 and 14): commit-to-Ready latency on 2 clusters — from the git commit to both agents reporting
// Ready — over N commits, triggered two ways as in production: by polling (GitRepo pollingInterval 1s) and by a
// webhook (a disablePolling GitRepo; the push is sent right after the commit, as a git server does). Each round is
// broken down into the pipeline's stages from the events' own times (docs/pipeline.md "Stage latency"): the
// CommitEvent, BundleEvent, DeployEvents and the Ready StatusEvents read back from their streams, and the
// status/bd.* records' `updated`. Printed beside a baseline measured in the same run: the same manifests applied
// with `kubectl apply --server-side` to both API servers (in parallel, as the two agents run), after an unmeasured
// warm-up round like Flotilla's first commit. Not a timed test: it prints figures and asserts nothing about them.
//
//   build/bench/bench_commit_to_ready [commits=10]
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>

#include "bench_util.h"
#include "e2e_util.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "webhook_hub.h"
#include "webhook_post.h"

using namespace flotilla;
using namespace flotilla::e2e;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kWorkspace = "fleet-default";
constexpr const char* kHookSecret = "bench-webhook-secret";

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

//! The stages of one round, as the events' times tell them (docs/pipeline.md "Stage latency"); with two clusters,
//! a stage that ends per cluster ends at the later one.
enum StageIndex : size_t {
  kCommitToCommitEvent,  //!< git commit -> CommitEvent (the poll's wait, or the webhook; ls-remote, fetch, archive)
  kCommitEventToBundle,  //!< CommitEvent -> BundleEvent (the bundler: source, render, store)
  kBundleToDeploy,       //!< BundleEvent -> the later DeployEvent (the scheduler)
  kDeployToReady,        //!< the later DeployEvent -> the later Ready StatusEvent (the agents: manifest, apply, health)
  kReadyToRecorded,      //!< the later Ready StatusEvent -> its status/bd.* record written (the scheduler)
  kRecordedToSeen,       //!< the later record -> the benchmark saw both Ready (its 20 ms polling of the records)
  kStageCount
};
constexpr std::array<const char*, kStageCount> kStageNames = {
    "git commit -> CommitEvent",     "CommitEvent -> BundleEvent",      "BundleEvent -> DeployEvent",
    "DeployEvent -> Ready reported", "Ready reported -> status stored", "status stored -> seen by the bench"};

using Breakdown = std::array<double, kStageCount>;

//! An event's `time` field as milliseconds since the epoch; nullopt when absent or unparsable, or when its
//! `bundle` field is not `bundle` (the last message on a cluster's subject may be another GitRepo's).
std::optional<int64_t> eventMillis(std::string_view payload, const std::string& bundle = "") {
  auto json = Json::parse(payload);
  if (!json.ok() || (!bundle.empty() && json->getString("bundle") != bundle)) {
    return std::nullopt;
  }
  auto at = parseRfc3339(json->getString("time"));
  return at ? std::optional<int64_t>(epochMillis(*at)) : std::nullopt;
}

//! Reads the round's events back from their streams and records; nullopt (and why on stderr) when one is missing
//! or is not the round's (a later report replaced the Ready one, say).
std::optional<Breakdown> breakdown(Hub& hub, const std::string& gitrepo, const std::string& bundle,
                                   const std::vector<std::string>& clusters, int64_t committed_ms, int64_t seen_ms) {
  auto js = hub.js();
  if (!js.ok()) {
    std::cerr << "bench: " << js.error().describe() << std::endl;
    return std::nullopt;
  }
  auto last = [&](std::string_view stream, const std::string& subject,
                  const std::string& of_bundle = "") -> std::optional<int64_t> {
    auto message = (*js)->getLastMessage(stream, subject);
    if (!message.ok()) {
      std::cerr << "bench: no message on " << subject << ": " << message.error().describe() << std::endl;
      return std::nullopt;
    }
    return eventMillis(message->data(), of_bundle);
  };
  auto commit_event = last(events::kCommitStream, events::commitSubject(kWorkspace, gitrepo));
  auto bundle_event = last(events::kBundleStream, events::bundleSubject(kWorkspace, bundle));
  if (!commit_event || !bundle_event) {
    return std::nullopt;
  }
  int64_t deploy = 0, ready = 0, recorded = 0;
  for (const auto& cluster : clusters) {
    auto deployed = last(events::kDeployStream, events::deploySubject(cluster), bundle);
    auto reported = last(events::kStatusStream, events::statusSubject(cluster, bundle));
    auto record = hub.records("status", "bd." + cluster + "." + kWorkspace + "." + bundle);
    if (!deployed || !reported || !record.ok() || record->size() != 1) {
      return std::nullopt;
    }
    auto updated = parseRfc3339(record->front().getString("updated"));
    if (!updated) {
      return std::nullopt;
    }
    deploy = std::max(deploy, *deployed);
    ready = std::max(ready, *reported);
    recorded = std::max(recorded, epochMillis(*updated));
  }
  return Breakdown{static_cast<double>(*commit_event - committed_ms),
                   static_cast<double>(*bundle_event - *commit_event),
                   static_cast<double>(deploy - *bundle_event),
                   static_cast<double>(ready - deploy),
                   static_cast<double>(recorded - ready),
                   static_cast<double>(seen_ms - recorded)};
}

//! One way of triggering a commit: a GitRepo of its own (and its own namespace on the clusters).
struct Mode {
  std::string name;      //!< "poll" or "webhook"
  std::string gitrepo;   //!< also the repository and the namespace
  int webhook_port = 0;  //!< 0: polled
  std::string repo_url;
  std::string bundle;  //!< found after the first commit is Ready
  std::vector<double> total_ms;
  std::vector<Breakdown> stages;
};

std::string gitRepoFor(const Mode& mode) {
  if (mode.webhook_port == 0) {
    return gitRepoYaml(mode.gitrepo, mode.repo_url, {"app"});
  }
  return "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: " + mode.gitrepo +
         "\n  namespace: " + kWorkspace + "\nspec:\n  repo: " + mode.repo_url +
         "\n  branch: main\n  disablePolling: true\n  webhookSecret: hooks\n  paths:\n  - app\n"
         "  targets:\n  - clusterSelector: {}\n";
}

//! Creates the repository and the GitRepo, and waits for the first commit to be Ready (the warm-up round).
Status setUp(Hub& hub, Mode& mode, const std::vector<std::string>& clusters) {
  auto repo = hub.git().createRepo(mode.gitrepo);
  FLOTILLA_TRY(repo);
  mode.repo_url = repo->http;
  auto first =
      hub.git().commitFiles(mode.gitrepo, "main", {{"app/objects.yaml", manifests(mode.gitrepo, 0)}}, "round 0");
  FLOTILLA_TRY(first);
  FLOTILLA_TRY(hub.apply(gitRepoFor(mode)));
  if (!Hub::waitFor([&] { return readyEverywhere(hub, mode.gitrepo, *first, clusters); }, std::chrono::seconds(120))) {
    return fail(ErrorKind::kTransient, mode.name + ": the first commit never became Ready");
  }
  auto items = bundlesOn(hub, clusters.front(), mode.gitrepo);
  if (items.size() != 1) {
    return fail(ErrorKind::kInternal, mode.name + ": expected one bundle");
  }
  mode.bundle = items.front().bundle;
  return {};
}

//! One measured round: commit (and push, for the webhook mode), then poll the records every 20 ms until both
//! clusters report the commit Ready.
Status runRound(Hub& hub, Mode& mode, const std::vector<std::string>& clusters, int round) {
  const auto committed_at = std::chrono::system_clock::now();
  const auto t0 = Clock::now();
  auto commit = hub.git().commitFiles(mode.gitrepo, "main", {{"app/objects.yaml", manifests(mode.gitrepo, round)}},
                                      "round " + std::to_string(round));
  FLOTILLA_TRY(commit);
  if (mode.webhook_port != 0) {
    const int status = bench::postWebhook(mode.webhook_port, bench::pushBody(mode.repo_url, *commit), kHookSecret);
    if (status != 202) {
      return fail(ErrorKind::kInternal, "the webhook answered " + std::to_string(status));
    }
  }
  while (!readyEverywhere(hub, mode.gitrepo, *commit, clusters)) {
    if (Clock::now() - t0 > std::chrono::seconds(120)) {
      return fail(ErrorKind::kTransient, mode.name + " round " + std::to_string(round) + " never became Ready");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto seen_at = std::chrono::system_clock::now();
  mode.total_ms.push_back(ms(Clock::now() - t0));
  if (auto stages =
          breakdown(hub, mode.gitrepo, mode.bundle, clusters, epochMillis(committed_at), epochMillis(seen_at))) {
    mode.stages.push_back(*stages);
  }
  return {};
}

//! The baseline: the same manifests with kubectl's server-side apply to both API servers at once.
bool applyBoth(Hub& hub, const std::string& ns, int round) {
  std::string kubectl = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin") + "/kubectl";
  std::string yaml = manifests(ns, round);
  std::vector<std::thread> appliers;
  std::atomic<bool> ok{true};
  for (size_t c = 0; c < 2; ++c) {
    appliers.emplace_back([&, c] {
      auto r = runCommand({.argv = {kubectl, "--kubeconfig", hub.cluster(c).kubeconfigPath(), "apply", "--server-side",
                                    "--field-manager", "bench", "-f", "-"},
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
}

void printMode(const Mode& mode, const Stats& kubectl) {
  const Stats total = stats(mode.total_ms);
  std::printf(
      "  flotilla by %s (git commit -> both agents Ready): median %.0f ms, mean %.0f ms, max %.0f ms; "
      "ratio to kubectl: median %.2fx, max %.2fx\n",
      mode.name.c_str(), total.median, total.mean, total.max, total.median / kubectl.median, total.max / kubectl.max);
  std::printf("    stages from the events' times (%zu of %zu rounds readable), median / max ms:\n", mode.stages.size(),
              mode.total_ms.size());
  for (size_t s = 0; s < kStageCount; ++s) {
    std::vector<double> values;
    for (const auto& round : mode.stages) {
      values.push_back(round[s]);
    }
    const Stats stage = stats(values);
    std::printf("      %-36s %6.0f / %6.0f\n", kStageNames[s], stage.median, stage.max);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int commits = argc > 1 ? std::atoi(argv[1]) : 10;
  auto started = bench::startWebhookHub({.clusters = 2, .share_clusters = false, .log_level = "warn"}, kWorkspace,
                                        "hooks", kHookSecret);
  if (!started.ok()) {
    std::cerr << "bench: " << started.error().describe() << std::endl;
    return 1;
  }
  Hub& hub = *started->hub;
  const int webhook_port = started->port;
  std::vector<std::string> both = {hub.clusterName(0), hub.clusterName(1)};
  std::vector<Mode> modes = {Mode{.name = "poll", .gitrepo = "bench-poll"},
                             Mode{.name = "webhook", .gitrepo = "bench-hook", .webhook_port = webhook_port}};
  for (auto& mode : modes) {
    if (auto ready = setUp(hub, mode, both); !ready.ok()) {
      std::cerr << "bench: " << ready.error().describe() << "\n" << hub.allLogs() << std::endl;
      return 1;
    }
  }
  // The rounds of the two modes alternate, so both see the same machine.
  for (int round = 1; round <= commits; ++round) {
    for (auto& mode : modes) {
      if (auto measured = runRound(hub, mode, both, round); !measured.ok()) {
        std::cerr << "bench: " << measured.error().describe() << "\n" << hub.allLogs() << std::endl;
        return 1;
      }
    }
  }

  // Round 0 is the warm-up, as the first commit is for Flotilla: it creates the objects and is not measured.
  const std::string kubectl_ns = "bench-kubectl";
  if (!applyBoth(hub, kubectl_ns, 0)) {
    return 1;
  }
  std::vector<double> kubectl_ms;
  for (int round = 1; round <= commits; ++round) {
    auto t0 = Clock::now();
    if (!applyBoth(hub, kubectl_ns, round)) {
      return 1;
    }
    kubectl_ms.push_back(ms(Clock::now() - t0));
  }

  const Stats k = stats(kubectl_ms);
  std::printf(
      "commit-to-Ready on 2 clusters, %d commits per mode (poll: pollingInterval 1s; webhook: disablePolling, "
      "pushed right after the commit); %s\n",
      commits, bench::machineLoad().c_str());
  for (const auto& mode : modes) {
    printMode(mode, k);
  }
  std::printf(
      "  baseline (kubectl apply --server-side x2, after a warm-up round): median %.0f ms, mean %.0f ms, "
      "max %.0f ms\n",
      k.median, k.mean, k.max);
  return 0;
}
