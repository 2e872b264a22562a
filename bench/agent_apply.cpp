// Benchmark (issue 11): the agent's footprint and apply speed. One real kube-apiserver (tests/harness), a real
// nats-server and the real flotilla-agent binary (so the memory figures are its process's); the benchmark plays
// the scheduler (answers the registration, stores manifests and their deployment records, serves them with the
// scheduler's ManifestServer, publishes DeployEvents, reads StatusEvents).
//
//   100 bundles, each a Namespace + 10 ConfigMaps (every 10th also a ClusterIP Service): 1,000 ConfigMaps.
//   Printed: VmRSS idle after registration; VmRSS after the apply settled (idle, watching); VmHWM (peak) while
//   applying; time from publishing the 100 DeployEvents to the 100th Ready StatusEvent (a create round, then the
//   median of update rounds that change every ConfigMap, interleaved with the baselines); and in the same run the
//   same objects in a fresh namespace set with `kubectl apply --server-side`: one kubectl per bundle at the agent's
//   parallelism, and one kubectl with all the objects. Both get the same unmeasured warm-up round (10 bundles) first.
//   Last, drift detection: 20 hand edits by another field manager, edit request -> Modified StatusEvent.
// Not a timed test: it prints figures and ratios and asserts nothing about them.
//
//   build/bench/bench_agent [parallel-bundles=4] [bundles=100] [update-rounds=3]
// parallel-bundles 0 starts the agent without the flag (its default) and runs kubectl one bundle at a time;
// FLOTILLA_BENCH_AGENT_BINARY runs another agent binary (e.g. an older build, for before/after figures);
// FLOTILLA_BENCH_AGENT_HOLD=<seconds> pauses after the create settled, printing the agent's pid (to inspect it).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/kube/client.h"
#include "flotilla/model/identity.h"
#include "flotilla/scheduler/manifest_server.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/hub.h"

using namespace flotilla;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr int kConfigMapsPerBundle = 10;
constexpr int kWarmupBundles = 10;
constexpr char kCluster[] = "bench";

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

//! Where the resident set is: Rss of /proc/<pid>/smaps summed per mapped file (its base name; the copied-on-write
//! pages of a library count with it) and for the anonymous mappings (heap, thread stacks), largest first:
//! "libcrypto.so.3 4.1, anonymous 3.9, flotilla-agent 2.9, ..." in MiB, the rest summed as "other".
std::string residentByMapping(pid_t pid, size_t shown = 8) {
  auto text = readFile("/proc/" + std::to_string(pid) + "/smaps");
  if (!text.ok()) {
    return "?";
  }
  std::map<std::string, long> kib;
  std::string current;
  for (const auto& line : split(*text, '\n')) {
    if (line.rfind("Rss:", 0) == 0) {
      kib[current] += std::stol(trim(line.substr(4)));
      continue;
    }
    const auto dash = line.find('-');
    if (dash == std::string::npos || dash == 0 || line.find(':') < dash || line.find(' ') < dash) {
      continue;  // a field line of the current mapping
    }
    // "start-end perms offset dev inode [path]": the path starts after the fifth field.
    auto fields = split(line, ' ');
    fields.erase(std::remove(fields.begin(), fields.end(), std::string()), fields.end());
    const std::string path = fields.size() > 5 ? fields[5] : "";
    current = path.empty() || path[0] == '[' ? "anonymous" : path.substr(path.rfind('/') + 1);
  }
  std::vector<std::pair<long, std::string>> sorted;
  sorted.reserve(kib.size());
  for (const auto& [name, size] : kib) {
    sorted.emplace_back(size, name);
  }
  std::sort(sorted.rbegin(), sorted.rend());
  std::string out;
  long other = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i >= shown) {
      other += sorted[i].first;
      continue;
    }
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %.1f", out.empty() ? "" : ", ", sorted[i].second.c_str(),
                  static_cast<double>(sorted[i].first) / 1024);
    out += part;
  }
  char rest[48];
  std::snprintf(rest, sizeof rest, ", other %.1f", static_cast<double>(other) / 1024);
  return out + rest;
}

//! The agent's API requests so far by verb (WATCH left out: one per watched kind, not per bundle), from its
//! /metrics (kube_requests_total{verb,code}).
std::map<std::string, double> agentRequests(int http_port) {
  std::map<std::string, double> by_verb;
  auto scraped = runCommand(
      {.argv = {"curl", "-sf", "http://127.0.0.1:" + std::to_string(http_port) + "/metrics"}, .timeout = seconds(10)});
  if (!scraped.ok() || scraped->exit_code != 0) {
    return by_verb;
  }
  for (const auto& line : split(scraped->out, '\n')) {
    if (line.rfind("flotilla_agent_kube_requests_total{", 0) != 0) {
      continue;
    }
    const auto verb_at = line.find("verb=\"");
    const auto value_at = line.rfind(' ');
    if (verb_at == std::string::npos || value_at == std::string::npos) {
      continue;
    }
    const std::string verb = line.substr(verb_at + 6, line.find('"', verb_at + 6) - verb_at - 6);
    if (verb != "WATCH") {
      by_verb[verb] += std::stod(line.substr(value_at + 1));
    }
  }
  return by_verb;
}

//! "27.0 (GET 12.0, PATCH 15.0)": requests per bundle between two scrapes.
std::string requestsPerBundle(const std::map<std::string, double>& before, const std::map<std::string, double>& after,
                              double bundles) {
  double total = 0;
  std::string verbs;
  for (const auto& [verb, count] : after) {
    auto it = before.find(verb);
    const double delta = (count - (it == before.end() ? 0.0 : it->second)) / bundles;
    if (delta <= 0) {
      continue;
    }
    total += delta;
    char text[64];
    std::snprintf(text, sizeof text, "%s%s %.1f", verbs.empty() ? "" : ", ", verb.c_str(), delta);
    verbs += text;
  }
  char head[32];
  std::snprintf(head, sizeof head, "%.1f", total);
  return std::string(head) + " (" + verbs + ")";
}

double mib(long kib) {
  return static_cast<double>(kib) / 1024.0;
}

//! One bundle's objects: its Namespace, kConfigMapsPerBundle ConfigMaps (data changes with `round`), every 10th
//! bundle a ClusterIP Service.
std::vector<Json> bundleObjects(const std::string& ns, int index, int round) {
  std::vector<Json> objects;
  objects.push_back(Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", ns}})}}));
  for (int i = 0; i < kConfigMapsPerBundle; ++i) {
    objects.push_back(Json::obj({{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"metadata", Json::obj({{"name", "cm-" + std::to_string(i)}, {"namespace", ns}})},
                                 {"data", Json::obj({{"round", std::to_string(round)},
                                                     {"value", std::string(200, static_cast<char>('a' + i))}})}}));
  }
  if (index % 10 == 0) {
    Json port = Json::obj({{"port", 80}, {"targetPort", 8080}});
    objects.push_back(Json::obj(
        {{"apiVersion", "v1"},
         {"kind", "Service"},
         {"metadata", Json::obj({{"name", "svc"}, {"namespace", ns}})},
         {"spec", Json::obj({{"selector", Json::obj({{"app", "bench"}})}, {"ports", Json(Json::Array{port})}})}}));
  }
  return objects;
}

std::string yamlStream(const std::vector<Json>& objects) {
  std::string out;
  for (const auto& object : objects) {
    out += "---\n" + object.dump() + "\n";  // JSON is YAML
  }
  return out;
}

//! Counts Ready StatusEvents of the expected deployments (a core subscription on the cluster's status subjects).
class ReadyCounter {
 public:
  Status open(bus::Connection& conn) {
    auto sub = conn.subscribe(events::statusFilter(kCluster), "", [this](bus::Message message) { onStatus(message); });
    FLOTILLA_TRY(sub);
    sub_ = std::move(sub).value();
    return conn.flush();
  }
  //! Expects `deployments` (bundle -> deploymentID) to become Ready from now on.
  void expect(std::map<std::string, std::string> deployments) {
    std::lock_guard lock(mutex_);
    expected_ = std::move(deployments);
    ready_.clear();
  }
  //! Waits until every expected bundle reported Ready; false on timeout.
  bool waitAll(milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [this] { return ready_.size() == expected_.size(); });
  }
  size_t ready() {
    std::lock_guard lock(mutex_);
    return ready_.size();
  }
  //! When `bundle` first reported Modified since it was last expected; waits up to `timeout`.
  std::optional<Clock::time_point> waitModified(const std::string& bundle, milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return modified_.contains(bundle); })) {
      return std::nullopt;
    }
    return modified_[bundle];
  }

 private:
  void onStatus(const bus::Message& message) {
    const auto received = Clock::now();
    auto status = events::parsePayload<events::StatusEvent>(message.data());
    if (status.ok() && status->state == "Modified") {
      std::lock_guard lock(mutex_);
      modified_.try_emplace(status->bundle, received);
      cv_.notify_all();
      return;
    }
    if (!status.ok() || status->state != "Ready") {
      return;
    }
    std::lock_guard lock(mutex_);
    auto it = expected_.find(status->bundle);
    if (it != expected_.end() && it->second == status->deployment_id) {
      ready_.insert(status->bundle);
      cv_.notify_all();
    }
  }

  bus::Subscription sub_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> expected_;
  std::set<std::string> ready_;
  std::map<std::string, Clock::time_point> modified_;
};

//! Everything the phases share.
struct Bench {
  std::unique_ptr<harness::NatsServer> nats;
  std::unique_ptr<harness::KubeCluster> kube;
  //! The hub's streams and stores, provisioned as the hub services provision them.
  service::Hub hub;
  Metrics hub_metrics{"scheduler"};
  //! The hub's side of manifest delivery: the agent asks it for each manifest of the deployments recorded here.
  std::unique_ptr<scheduler::ManifestServer> manifest_server;
  bus::Subscription responder;
  ReadyCounter ready;
  Process agent;
  std::string dir;
  std::string kubectl;
  int http_port = 0;  //!< the agent's /metrics
  int parallel = 4;
  int bundles = 100;
  int rounds = 3;  //!< update rounds
  std::map<std::string, int64_t> generations;
};

Status startServers(Bench& bench) {
  auto nats = harness::NatsServer::start();
  FLOTILLA_TRY(nats);
  bench.nats = std::move(nats).value();
  auto kube = harness::KubeCluster::start(harness::KubeClusterOptions{.name = "bench"});
  FLOTILLA_TRY(kube);
  bench.kube = std::move(kube).value();
  auto hub = service::connectHub({.servers = {bench.nats->url()}, .name = "bench-agent"},
                                 service::HubAccess::kProvision, nullptr, seconds(10));
  FLOTILLA_TRY(hub);
  bench.hub = std::move(hub).value();
  bench.manifest_server = std::make_unique<scheduler::ManifestServer>(
      bench.hub.connection, bench.hub.deployments, bench.hub.status, bench.hub.manifests, bench.hub_metrics);
  FLOTILLA_TRY(bench.manifest_server->start());
  // The scheduler's side of registration: the cluster's deploy durable, and accept the cluster under its own name
  // (on flotilla.register.<cluster>, where agents register since the cluster comes from their credentials).
  FLOTILLA_TRY(bench.hub.js->ensureConsumer(service::kDeployStream, service::agentDeployConsumer(kCluster)));
  auto sub =
      bench.hub.connection->subscribe(std::string(events::kRegisterSubject) + ".>", "", [&bench](bus::Message message) {
        events::RegisterReply reply{
            .id = events::newEventId(), .time = log::nowRfc3339(), .accepted = true, .cluster_id = kCluster};
        (void)bench.hub.connection->publish(message.reply(), events::encode(reply).dump());
      });
  FLOTILLA_TRY(sub);
  bench.responder = std::move(sub).value();
  FLOTILLA_TRY(bench.ready.open(*bench.hub.connection));
  return bench.hub.connection->flush();
}

Status startAgent(Bench& bench) {
  auto port = harness::freeTcpPort();
  FLOTILLA_TRY(port);
  bench.http_port = *port;
  std::vector<std::string> argv = {envOr("FLOTILLA_BENCH_AGENT_BINARY", std::string(FLOTILLA_AGENT_BINARY)),
                                   "--cluster-name",
                                   kCluster,
                                   "--kubeconfig",
                                   bench.kube->kubeconfigPath(),
                                   "--nats-url",
                                   bench.nats->url(),
                                   "--http-addr",
                                   "127.0.0.1:" + std::to_string(bench.http_port),
                                   "--log-level",
                                   "info"};
  if (bench.parallel > 0) {  // 0: the binary's default (also a binary from before the flag existed)
    argv.insert(argv.end(), {"--parallel-bundles", std::to_string(bench.parallel)});
  }
  auto agent = Process::start({.argv = argv, .output_file = bench.dir + "/agent.log"});
  FLOTILLA_TRY(agent);
  bench.agent = std::move(agent).value();
  // Bound once its durable exists (created after the registration).
  auto deadline = Clock::now() + seconds(60);
  while (!bench.hub.js->consumerInfo(service::kDeployStream, std::string("agent-") + kCluster).ok()) {
    if (Clock::now() > deadline || !bench.agent.running()) {
      return fail(ErrorKind::kTransient,
                  "the agent did not bind its consumer:\n" + readFile(bench.dir + "/agent.log").valueOr(""));
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return {};
}

//! Publishes one DeployEvent per bundle ("<prefix>-<i>", objects in namespace "<prefix>-<i>") and waits until all
//! are Ready. Returns the seconds from the first publish to the last Ready (manifests are stored before).
Result<double> deployRound(Bench& bench, const std::string& prefix, int count, int round) {
  std::vector<events::DeployEvent> deploys;
  std::map<std::string, std::string> expected;
  for (int i = 0; i < count; ++i) {
    const std::string name = prefix + "-" + std::to_string(i);
    Json array = Json::array();
    for (auto& object : bundleObjects(name, i, round)) {
      array.push(std::move(object));
    }
    const std::string data = array.dump();
    const std::string manifest_id = model::manifestID(data);
    auto stored = bench.hub.manifests->put(events::manifestObjectName(manifest_id), data);
    FLOTILLA_TRY(stored);
    events::DeployEvent event{.time = log::nowRfc3339(),
                              .cluster = kCluster,
                              .workspace = "fleet-default",
                              .bundle = name,
                              .deployment_id = model::deploymentID(manifest_id, Json::object()),
                              .manifest_id = manifest_id,
                              .options = Json::object(),
                              .generation = ++bench.generations[name]};
    event.id = events::deployMsgId(kCluster, name, event.deployment_id, event.generation);
    // The scheduler's record of the deployment: what lets the agent get the manifest from the hub.
    events::DeploymentRecord record{.cluster = kCluster,
                                    .workspace = event.workspace,
                                    .bundle = name,
                                    .deployment_id = event.deployment_id,
                                    .manifest_id = manifest_id,
                                    .generation = event.generation};
    FLOTILLA_TRY(bench.hub.deployments->put(events::deploymentKey(kCluster, event.workspace, name),
                                            events::encode(record).dump()));
    expected[name] = event.deployment_id;
    deploys.push_back(std::move(event));
  }
  bench.ready.expect(expected);
  auto start = Clock::now();
  for (const auto& event : deploys) {
    FLOTILLA_TRY(bench.hub.js->publish(events::deploySubject(kCluster), events::encode(event).dump(), event.id));
  }
  if (!bench.ready.waitAll(seconds(600))) {
    return fail(ErrorKind::kTransient, "only " + std::to_string(bench.ready.ready()) + " of " + std::to_string(count) +
                                           " bundles became Ready");
  }
  return secondsSince(start);
}

Status kubectlApply(const Bench& bench, const std::string& yaml) {
  auto result = runCommand({.argv = {bench.kubectl, "--kubeconfig", bench.kube->kubeconfigPath(), "apply",
                                     "--server-side", "--field-manager", "bench", "-f", "-"},
                            .input = yaml,
                            .timeout = std::chrono::minutes(10)});
  FLOTILLA_TRY(result);
  if (result->exit_code != 0) {
    return fail(ErrorKind::kPermanent, "kubectl: " + result->err);
  }
  return {};
}

//! One kubectl per bundle, `parallel` at a time; seconds for all.
Result<double> kubectlPerBundle(const Bench& bench, const std::string& prefix, int count, int round) {
  std::atomic<int> next{0};
  std::mutex mutex;
  Status failed;
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, bench.parallel); ++w) {
    workers.emplace_back([&] {
      for (int i = next++; i < count; i = next++) {
        const std::string name = prefix + "-" + std::to_string(i);
        if (auto applied = kubectlApply(bench, yamlStream(bundleObjects(name, i, round))); !applied.ok()) {
          std::lock_guard lock(mutex);
          failed = applied;
        }
      }
    });
  }
  for (auto& worker : workers) {
    worker.join();
  }
  FLOTILLA_TRY(failed);
  return secondsSince(start);
}

//! One kubectl with every object of the round; seconds.
Result<double> kubectlAll(const Bench& bench, const std::string& prefix, int count, int round) {
  std::string yaml;
  for (int i = 0; i < count; ++i) {
    yaml += yamlStream(bundleObjects(prefix + "-" + std::to_string(i), i, round));
  }
  auto start = Clock::now();
  FLOTILLA_TRY(kubectlApply(bench, yaml));
  return secondsSince(start);
}

struct Figures {
  long idle_rss = 0, settled_rss = 0, peak_before = 0, peak = 0, updated_rss = 0;
  long idle_anon = 0, settled_anon = 0, updated_anon = 0;  //!< RssAnon: the heap and stacks, not mapped code
  double create_s = 0, kubectl_bundles_create_s = 0, kubectl_all_create_s = 0;
  //! Medians over the update rounds (each round: flotilla, kubectl per bundle, one kubectl, interleaved).
  double update_s = 0, kubectl_bundles_update_s = 0, kubectl_all_update_s = 0;
  std::string create_requests, update_requests;  //!< the agent's API requests per bundle, by verb
  std::string settled_mappings;                  //!< residentByMapping after the create settled
  long settled_threads = 0;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0 : n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

//! The agent: idle, warm-up, then the measured create round, with its memory before and after.
Status measureAgentCreate(Bench& bench, Figures& figures) {
  std::this_thread::sleep_for(seconds(3));  // registered, bound, heartbeating: idle
  const pid_t pid = bench.agent.pid();
  figures.idle_rss = flotilla::bench::procStatusKiB(pid, "VmRSS");
  figures.idle_anon = flotilla::bench::procStatusKiB(pid, "RssAnon");
  auto warm = deployRound(bench, "warm-f", kWarmupBundles, 0);
  FLOTILLA_TRY(warm);
  figures.peak_before = flotilla::bench::procStatusKiB(pid, "VmHWM");
  const auto requests_before = agentRequests(bench.http_port);
  auto created = deployRound(bench, "bench-f", bench.bundles, 1);
  FLOTILLA_TRY(created);
  figures.create_s = *created;
  figures.create_requests = requestsPerBundle(requests_before, agentRequests(bench.http_port), bench.bundles);
  figures.peak = flotilla::bench::procStatusKiB(pid, "VmHWM");
  std::this_thread::sleep_for(seconds(5));  // settled: idle, watching
  figures.settled_rss = flotilla::bench::procStatusKiB(pid, "VmRSS");
  figures.settled_anon = flotilla::bench::procStatusKiB(pid, "RssAnon");
  figures.settled_mappings = residentByMapping(pid);
  figures.settled_threads = flotilla::bench::procStatusKiB(pid, "Threads");
  if (const int hold = std::atoi(envOr("FLOTILLA_BENCH_AGENT_HOLD", std::string("0")).c_str()); hold > 0) {
    // Time to look inside the settled agent (gdb, /proc/<pid>/smaps) before the benchmark goes on.
    std::printf("agent pid %d settled at %.1f MiB; holding %d s\n", pid, mib(figures.settled_rss), hold);
    std::fflush(stdout);
    std::this_thread::sleep_for(seconds(hold));
  }
  return {};
}

//! kubectl creating the same objects in fresh namespace sets (per bundle, and all at once), after a warm-up round.
Status measureKubectlCreate(Bench& bench, Figures& figures) {
  FLOTILLA_TRY(kubectlPerBundle(bench, "warm-k", kWarmupBundles, 0));
  auto per_bundle = kubectlPerBundle(bench, "bench-k", bench.bundles, 1);
  FLOTILLA_TRY(per_bundle);
  figures.kubectl_bundles_create_s = *per_bundle;
  auto all = kubectlAll(bench, "bench-a", bench.bundles, 1);
  FLOTILLA_TRY(all);
  figures.kubectl_all_create_s = *all;
  return {};
}

//! `rounds` update rounds (every ConfigMap changes), the three contenders interleaved in each round, so a change
//! of the machine's load hits all of them; medians.
Status measureUpdates(Bench& bench, Figures& figures) {
  std::vector<double> flotilla, per_bundle, all;
  std::map<std::string, double> requests_before, requests_after;
  for (int r = 0; r < bench.rounds; ++r) {
    const int round = 2 + r;
    const auto before = agentRequests(bench.http_port);
    auto updated = deployRound(bench, "bench-f", bench.bundles, round);
    FLOTILLA_TRY(updated);
    flotilla.push_back(*updated);
    if (r == 0) {  // every round changes the same objects: the first one's requests stand for all
      requests_before = before;
      requests_after = agentRequests(bench.http_port);
    }
    auto kubectl_bundles = kubectlPerBundle(bench, "bench-k", bench.bundles, round);
    FLOTILLA_TRY(kubectl_bundles);
    per_bundle.push_back(*kubectl_bundles);
    auto kubectl_all = kubectlAll(bench, "bench-a", bench.bundles, round);
    FLOTILLA_TRY(kubectl_all);
    all.push_back(*kubectl_all);
  }
  figures.update_s = median(flotilla);
  figures.kubectl_bundles_update_s = median(per_bundle);
  figures.kubectl_all_update_s = median(all);
  figures.update_requests = requestsPerBundle(requests_before, requests_after, bench.bundles);
  figures.peak = flotilla::bench::procStatusKiB(bench.agent.pid(), "VmHWM");
  std::this_thread::sleep_for(seconds(5));
  figures.updated_rss = flotilla::bench::procStatusKiB(bench.agent.pid(), "VmRSS");
  figures.updated_anon = flotilla::bench::procStatusKiB(bench.agent.pid(), "RssAnon");
  return {};
}

//! Drift-detection latency: another field manager edits a field the agent applied (one ConfigMap in each of
//! kDriftSamples settled bundles, one at a time), timed from just before the edit request to the Modified
//! StatusEvent's arrival; median and max. The edit's own round trip to the API server is included.
constexpr int kDriftSamples = 20;
Status measureDrift(Bench& bench) {
  auto config = kube::Kubeconfig::load(bench.kube->kubeconfigPath());
  FLOTILLA_TRY(config);
  auto client = kube::KubeClient::create(*config);
  FLOTILLA_TRY(client);
  std::vector<double> latencies_ms;
  for (int i = 0; i < std::min(kDriftSamples, bench.bundles); ++i) {
    const std::string bundle = "bench-f-" + std::to_string(i);
    Json edit = Json::obj({{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata", Json::obj({{"name", "cm-0"}, {"namespace", bundle}})},
                           {"data", Json::obj({{"value", "edited by hand"}})}});
    const auto start = Clock::now();
    FLOTILLA_TRY((*client)->apply(edit, kube::ApplyOptions{.field_manager = "bench-editor", .force = true}));
    auto seen = bench.ready.waitModified(bundle, seconds(30));
    if (!seen) {
      return fail(ErrorKind::kTransient, bundle + " never reported Modified after a hand edit");
    }
    latencies_ms.push_back(std::chrono::duration<double, std::milli>(*seen - start).count());
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::printf("  drift detection (edit -> Modified), %zu samples: median %.1f ms, max %.1f ms\n", latencies_ms.size(),
              latencies_ms[latencies_ms.size() / 2], latencies_ms.back());
  return {};
}

void printFigures(const Bench& bench, const Figures& f) {
  const int objects = bench.bundles * (kConfigMapsPerBundle + 1) + bench.bundles / 10;
  std::printf("agent: %d bundles, %d objects (%d ConfigMaps), --parallel-bundles %d; %s\n", bench.bundles, objects,
              bench.bundles * kConfigMapsPerBundle, bench.parallel, bench::machineLoad().c_str());
  // VmRSS = RssAnon (heap, stacks) + RssFile (the mapped pages of the binary and its shared libraries).
  std::printf("  VmRSS idle after registration:          %6.1f MiB (goal <= 15; RssAnon %.1f MiB)\n", mib(f.idle_rss),
              mib(f.idle_anon));
  std::printf("  VmRSS after the create settled (idle):  %6.1f MiB (goal <= 15; RssAnon %.1f MiB)\n",
              mib(f.settled_rss), mib(f.settled_anon));
  std::printf("    settled, by mapping (MiB): %s; %ld threads\n", f.settled_mappings.c_str(), f.settled_threads);
  std::printf("  VmRSS after the updates settled (idle): %6.1f MiB (RssAnon %.1f MiB)\n", mib(f.updated_rss),
              mib(f.updated_anon));
  std::printf("  VmHWM peak while applying:              %6.1f MiB (goal <= 40; %.1f MiB after the warm-up)\n",
              mib(f.peak), mib(f.peak_before));
  std::printf(
      "  create: publish -> %d Ready   flotilla %6.2f s | kubectl per bundle (x%d) %6.2f s (ratio %.2fx) | "
      "one kubectl %6.2f s (ratio %.2fx)\n",
      bench.bundles, f.create_s, std::max(1, bench.parallel), f.kubectl_bundles_create_s,
      f.create_s / f.kubectl_bundles_create_s, f.kubectl_all_create_s, f.create_s / f.kubectl_all_create_s);
  std::printf(
      "  update (median of %d): %d Ready flotilla %6.2f s | kubectl per bundle (x%d) %6.2f s (ratio %.2fx) | "
      "one kubectl %6.2f s (ratio %.2fx)\n",
      bench.rounds, bench.bundles, f.update_s, std::max(1, bench.parallel), f.kubectl_bundles_update_s,
      f.update_s / f.kubectl_bundles_update_s, f.kubectl_all_update_s, f.update_s / f.kubectl_all_update_s);
  std::printf("  agent API requests per bundle (watches not counted): create %s; update %s\n",
              f.create_requests.c_str(), f.update_requests.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Bench bench;
  bench.parallel = argc > 1 ? std::atoi(argv[1]) : 4;
  bench.bundles = argc > 2 ? std::atoi(argv[2]) : 100;
  bench.rounds = std::max(1, argc > 3 ? std::atoi(argv[3]) : 3);
  bench.kubectl = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin") + "/kubectl";
  auto dir = makeTempDir("bench-agent");
  if (!dir.ok()) {
    std::cerr << "bench: " << dir.error().describe() << std::endl;
    return 1;
  }
  bench.dir = *dir;
  Figures figures;
  Status done = startServers(bench);
  for (const auto& step : std::vector<std::function<Status()>>{
           [&] { return startAgent(bench); }, [&] { return measureAgentCreate(bench, figures); },
           [&] { return measureKubectlCreate(bench, figures); }, [&] { return measureUpdates(bench, figures); }}) {
    if (done.ok()) {
      done = step();
    }
  }
  if (!done.ok()) {
    std::cerr << "bench: " << done.error().describe() << "\n"
              << readFile(bench.dir + "/agent.log").valueOr("") << std::endl;
    return 1;
  }
  printFigures(bench, figures);
  if (auto drift = measureDrift(bench); !drift.ok()) {
    std::cerr << "bench: drift: " << drift.error().describe() << std::endl;
    return 1;
  }
  bench.agent.stop(seconds(10));
  removeAll(bench.dir);
  return 0;
}
