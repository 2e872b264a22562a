// Benchmark (issue 4): the poller at scale. 1,000 GitRepos over 50 repositories on the local git server
// (tests/harness/git, smart HTTP), pollingInterval 10s, measured for a window of steady-state polling (2 minutes
// by default), twice in the same run:
//   spread  — the poller's schedule (a stable phase per mirror inside the interval, plus jitter);
//   aligned — the baseline: `--align-phases` puts every GitRepo on the same grid (all due at the same instant),
//             as equal intervals behave without a phase spread (Fleet).
// For each, counted at the git server from its own request log (not from the poller's log): ls-remote requests
// (one poll of a repository URL serves its 20 GitRepos) per second and the most in any one second against the
// mean, fetches; the run fails when the server logged no poll. From the poller's log: the most syncs (git
// operation sequences) running at once. Poller CPU seconds and peak RSS
// (VmHWM, /proc of the flotilla-poller process, includes the initial clone). Then, on the spread poller, the time
// from sending a webhook to receiving the commit event, median and p90 over 50 pushes. Prints figures and ratios;
// asserts nothing about them.
//
//   build/bench/bench_poller_scale [window-seconds=120]      (or FLOTILLA_BENCH_DURATION=<seconds>)
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "bench_util.h"
#include "flotilla/core/json.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/git_server.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/service/hub.h"
#include "webhook_post.h"

using namespace flotilla;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr int kGitRepos = 1000;
constexpr int kRepos = 50;
constexpr int kPushes = 50;
constexpr const char* kWs = "fleet-default";
constexpr const char* kHookSecret = "bench-webhook-secret";

int64_t epochMillis(const std::string& rfc3339) {
  std::tm tm{};
  int millis = 0;
  if (std::sscanf(rfc3339.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &millis) != 7) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + millis;
}

int64_t nowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string gitRepoJson(const std::string& name, const std::string& url, const std::string& extra) {
  return R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo","metadata":{"name":")" + name +
         R"(","namespace":"fleet-default"},"spec":{"repo":")" + url + R"(","paths":["app"])" + extra + "}}";
}

struct ModeResult {
  std::string name;
  double warmup_s = 0;
  double window_s = 0;
  double ls_remotes = 0;  //!< info/refs requests the git server logged in the window
  double max_ls_remotes_in_a_second = 0;
  double fetches = 0;               //!< git-upload-pack POSTs the git server logged in the window
  double max_concurrent_syncs = 0;  //!< from the poller's own log (start/finish pairs)
  double cpu_s = 0;
  double peak_rss_mib = 0;
  std::vector<double> webhook_ms;
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const size_t index =
      std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5));
  return values[index];
}

//! Reads the poller's debug log for "sync started"/"sync finished" pairs: the most git operations at once. Poll
//! counts come from the git server's own request log (analyseServerLog), not from here.
void analyseConcurrency(const std::string& log_file, int64_t from_ms, int64_t to_ms, ModeResult& result) {
  std::ifstream in(log_file);
  std::string line;
  std::vector<std::pair<int64_t, int>> edges;  // time, +1 start / -1 finish
  while (std::getline(in, line)) {
    if (line.find("\"sync ") == std::string::npos) {
      continue;
    }
    auto json = Json::parse(line);
    if (!json.ok()) {
      continue;
    }
    const std::string msg = json->getString("msg");
    if (msg == "sync started" || msg == "sync finished") {
      edges.emplace_back(epochMillis(json->getString("time")), msg == "sync started" ? +1 : -1);
    }
  }
  std::stable_sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.first < b.first || (a.first == b.first && a.second < b.second);
  });
  int running = 0;
  for (const auto& [at, delta] : edges) {
    running += delta;
    if (at >= from_ms && at < to_ms) {
      result.max_concurrent_syncs = std::max(result.max_concurrent_syncs, static_cast<double>(running));
    }
  }
}

//! Counts what the git server itself logged between two offsets of its request log (one line per request,
//! `HH:MM:SS <client> "GET /<repo>/info/refs?service=git-upload-pack HTTP/1.0" 200 -`): every ls-remote the poller
//! made (a poll, per repository URL) and every fetch, bucketed by the second the server stamped.
Status analyseServerLog(const std::string& log_file, std::uintmax_t from, std::uintmax_t to, ModeResult& result) {
  std::ifstream in(log_file);
  in.seekg(static_cast<std::streamoff>(from));
  std::string line;
  std::map<std::string, double> per_second;
  std::uintmax_t offset = from;
  while (offset < to && std::getline(in, line)) {
    offset += line.size() + 1;
    if (line.find("\"GET /") != std::string::npos &&
        line.find("/info/refs?service=git-upload-pack") != std::string::npos) {
      result.ls_remotes += 1;
      per_second[line.substr(0, 8)] += 1;
    } else if (line.find("\"POST /") != std::string::npos && line.find("/git-upload-pack") != std::string::npos) {
      result.fetches += 1;
    }
  }
  for (const auto& [second, count] : per_second) {
    result.max_ls_remotes_in_a_second = std::max(result.max_ls_remotes_in_a_second, count);
  }
  if (result.ls_remotes == 0) {
    return fail(ErrorKind::kInternal,
                "the git server logged no ls-remote in the window (" + log_file + "): nothing was measured");
  }
  return okStatus();
}

//! Size of the git server's HTTP request log now (0 while it does not exist).
std::uintmax_t logSize(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : size;
}

Result<ModeResult> runMode(const std::string& name, bool aligned, harness::GitServer& git, const std::string& creds,
                           std::chrono::seconds window) {
  ModeResult result;
  result.name = name;
  auto nats = harness::NatsServer::start();
  if (!nats.ok()) {
    return fail(nats.error());
  }
  auto hub = service::connectHub(bus::ConnectOptions{.servers = {(*nats)->url()}, .name = "bench"},
                                 service::HubAccess::kProvision, nullptr, std::chrono::seconds(30));
  if (!hub.ok()) {
    return fail(hub.error());
  }
  for (int i = 0; i < kGitRepos; ++i) {
    const std::string gitrepo = "gr-" + std::to_string(i);
    FLOTILLA_TRY(hub->gitrepos->put(
        events::gitRepoKey(kWs, gitrepo),
        gitRepoJson(gitrepo, git.httpUrl("repo-" + std::to_string(i % kRepos)), R"(,"pollingInterval":"10s")")));
  }
  FLOTILLA_TRY(hub->gitrepos->put(
      events::gitRepoKey(kWs, "hooked"),
      gitRepoJson("hooked", git.httpUrl("hooked"), R"(,"disablePolling":true,"webhookSecret":"hooks")")));
  auto dir = makeTempDir("bench-poller-" + name);
  if (!dir.ok()) {
    return fail(dir.error());
  }
  auto webhook_port = harness::freeTcpPort();
  if (!webhook_port.ok()) {
    return fail(webhook_port.error());
  }
  const std::string log_file = *dir + "/poller.log";
  std::vector<std::string> argv = {FLOTILLA_POLLER_BINARY,
                                   "--nats-url",
                                   (*nats)->url(),
                                   "--data-dir",
                                   *dir + "/data",
                                   "--credentials-dir",
                                   creds,
                                   "--workers",
                                   "4",
                                   "--log-level",
                                   "debug",
                                   "--webhook-addr",
                                   "127.0.0.1:" + std::to_string(*webhook_port),
                                   "--webhook-rate",
                                   "0"};  // the benchmark's pushes come from one address, as fast as they go
  if (aligned) {
    argv.push_back("--align-phases");
  }
  auto poller = Process::start(ProcessOptions{.argv = argv, .output_file = log_file, .kill_with_parent = true});
  if (!poller.ok()) {
    return fail(poller.error());
  }
  const auto started = Clock::now();
  while (true) {
    auto info = hub->js->streamInfo(service::kCommitsStream);
    if (info.ok() && info->messages >= static_cast<uint64_t>(kGitRepos + 1)) {
      break;
    }
    if (Clock::now() - started > std::chrono::minutes(10) || !poller->running()) {
      poller->stop();
      return fail(ErrorKind::kTransient, name + ": the initial commits were not all published; see " + log_file);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  result.warmup_s = std::chrono::duration<double>(Clock::now() - started).count();
  // Let the post-warm-up schedule settle for one interval, then measure.
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const std::string server_log = git.root() + "/logs/http.log";
  const int64_t from_ms = nowMillis();
  const std::uintmax_t from_offset = logSize(server_log);
  const double cpu_before = bench::procCpuSeconds(poller->pid());
  std::this_thread::sleep_for(window);
  const int64_t to_ms = nowMillis();
  const std::uintmax_t to_offset = logSize(server_log);
  result.cpu_s = bench::procCpuSeconds(poller->pid()) - cpu_before;
  result.window_s = static_cast<double>(to_ms - from_ms) / 1000.0;
  result.peak_rss_mib = std::max(0L, bench::procStatusKiB(poller->pid(), "VmHWM")) /
                        1024.0;  // before the webhook round, so both modes ran the same load

  if (!aligned) {
    // Webhook receipt -> commit event, on a webhook-only GitRepo, while the 1,000 others keep polling.
    std::mutex mutex;
    std::condition_variable arrived;
    std::set<std::string> seen;
    auto subscription = hub->connection->subscribe(events::commitSubject(kWs, "hooked"), "", [&](bus::Message message) {
      auto event = events::parsePayload<events::CommitEvent>(message.data());
      if (event.ok()) {
        std::lock_guard lock(mutex);
        seen.insert(event->commit);
        arrived.notify_all();
      }
    });
    if (!subscription.ok()) {
      return fail(subscription.error());
    }
    for (int i = 0; i < kPushes; ++i) {
      auto head = git.commitFiles("hooked", "main", {{"app/cm.yaml", "round: " + std::to_string(i) + "\n"}},
                                  "push " + std::to_string(i));
      if (!head.ok()) {
        return fail(head.error());
      }
      const auto sent = Clock::now();
      const int status = bench::postWebhook(*webhook_port, bench::pushBody(git.httpUrl("hooked"), *head), kHookSecret);
      if (status != 202) {
        return fail(ErrorKind::kInternal, "webhook answered " + std::to_string(status));
      }
      std::unique_lock lock(mutex);
      if (!arrived.wait_for(lock, std::chrono::seconds(30), [&] { return seen.contains(*head); })) {
        return fail(ErrorKind::kTransient, "no commit event for webhook push " + std::to_string(i));
      }
      result.webhook_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
    }
  }
  poller->stop();
  analyseConcurrency(log_file, from_ms, to_ms, result);
  FLOTILLA_TRY(analyseServerLog(server_log, from_offset, to_offset, result));
  removeAll(*dir);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int window_seconds = 120;
  if (argc > 1) {
    window_seconds = std::atoi(argv[1]);
  } else if (const char* env = std::getenv("FLOTILLA_BENCH_DURATION"); env != nullptr) {
    window_seconds = std::atoi(env);
  }
  window_seconds = std::max(window_seconds, 5);
  auto git = harness::GitServer::start({.http = true, .https = false, .git_daemon = false, .ssh = false});
  if (!git.ok()) {
    std::cerr << "bench: " << git.error().describe() << std::endl;
    return 1;
  }
  for (int i = 0; i < kRepos; ++i) {
    const std::string repo = "repo-" + std::to_string(i);
    if (!(*git)->createRepo(repo).ok() ||
        !(*git)->commitFiles(repo, "main", {{"app/cm.yaml", "repo: " + repo + "\n"}}, "initial").ok()) {
      std::cerr << "bench: cannot create " << repo << std::endl;
      return 1;
    }
  }
  if (!(*git)->createRepo("hooked").ok() ||
      !(*git)->commitFiles("hooked", "main", {{"app/cm.yaml", "round: start\n"}}, "initial").ok()) {
    std::cerr << "bench: cannot create the webhook repository" << std::endl;
    return 1;
  }
  auto creds = makeTempDir("bench-creds");
  // Credentials are per workspace: the hooked GitRepo's webhookSecret lives in its workspace's directory.
  if (!creds.ok() || !fs::create_directories(*creds + "/" + kWs) ||
      !writeFile(*creds + "/" + kWs + "/hooks.yaml", std::string("generic: ") + kHookSecret + "\n").ok()) {
    std::cerr << "bench: cannot write the webhook secret" << std::endl;
    return 1;
  }
  std::cout << "poller scale: " << kGitRepos << " GitRepos over " << kRepos
            << " repositories (local git http-backend), pollingInterval 10s, 4 workers, measured window "
            << window_seconds << "s per mode" << std::endl;
  std::vector<ModeResult> results;
  for (const auto& [name, aligned] : {std::pair{"spread", false}, {"aligned", true}}) {
    auto result = runMode(name, aligned, **git, *creds, std::chrono::seconds(window_seconds));
    if (!result.ok()) {
      std::cerr << "bench: " << name << ": " << result.error().describe() << std::endl;
      return 1;
    }
    results.push_back(std::move(result).value());
  }
  removeAll(*creds);
  std::printf("measured on %s\n", bench::machineLoad().c_str());
  const ModeResult& spread = results[0];
  const ModeResult& aligned = results[1];
  auto row = [](const char* label, double a, double b, int precision = 1) {
    std::printf("%-44s %12.*f %12.*f %10.2f\n", label, precision, a, precision, b, a > 0 ? b / a : 0.0);
  };
  std::printf("\n%-44s %12s %12s %10s\n", "", "spread", "aligned", "aligned/spread");
  row("warm-up: all 1,001 first commits published (s)", spread.warmup_s, aligned.warmup_s);
  row("ls-remote per second at the git server (mean)", spread.ls_remotes / spread.window_s,
      aligned.ls_remotes / aligned.window_s, 2);
  row("most ls-remote in one second (git server)", spread.max_ls_remotes_in_a_second,
      aligned.max_ls_remotes_in_a_second, 0);
  row("  ... divided by the mean", spread.max_ls_remotes_in_a_second / (spread.ls_remotes / spread.window_s),
      aligned.max_ls_remotes_in_a_second / (aligned.ls_remotes / aligned.window_s), 2);
  row("GitRepos served per second (ls-remote x 20)", kGitRepos / kRepos * spread.ls_remotes / spread.window_s,
      kGitRepos / kRepos * aligned.ls_remotes / aligned.window_s);
  row("fetches at the git server in the window", spread.fetches, aligned.fetches, 0);
  row("most syncs at once (poller log)", spread.max_concurrent_syncs, aligned.max_concurrent_syncs, 0);
  row("poller CPU seconds in the window", spread.cpu_s, aligned.cpu_s, 2);
  row("poller peak RSS (MiB, VmHWM)", spread.peak_rss_mib, aligned.peak_rss_mib);
  std::printf(
      "\nwebhook -> commit event over %d pushes (spread poller under the same load, coalesce 100ms): "
      "median %.1f ms, p90 %.1f ms, max %.1f ms\n",
      kPushes, percentile(spread.webhook_ms, 0.5), percentile(spread.webhook_ms, 0.9),
      percentile(spread.webhook_ms, 1.0));
  std::printf("(polling alone would find such a commit after interval/2 = 5000 ms on average: %.0fx slower)\n",
              5000.0 / std::max(percentile(spread.webhook_ms, 0.5), 1.0));
  return 0;
}
