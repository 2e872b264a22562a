// Benchmark (issue 13): one commit fanned out to many clusters by the real hub services (poller, bundler and
// scheduler as processes, nats-server with authentication and TLS, as deployed), with simulated agents
// (bench/sim_agents.h: one NATS connection and identity each, consuming their deploy events as the agent does and
// reporting Ready; no API server). For each scenario "<clusters>x<bundles>" it prints the time from the commit event
// to the last Ready recorded by the scheduler, the scheduler's CPU seconds and RSS, nats-server's RSS, messages per
// second through nats-server, and the agents' applies per deploymentID (none may be applied twice).
//
//   build/bench/bench_fleet_scale [--nats-nodes 1|3] [--event-loops N] [--agent-ping-s N] [--pull-expires-ms N]
//                                 [scenario...]
//   (default scenarios: 50x51 100x100 10000x1)
//
// The anchor is Fleet's published scale test (rancher/fleet#4599): 50 clusters x 51 bundles = 2,550
// BundleDeployments, all Ready about 50 s after the GitRepo was created. Not a timed test: it prints figures and
// asserts nothing about them; it fails only when the fan-out does not finish or a deployment is applied twice.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.h"
#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/scheduler/partition.h"
#include "sim_agents.h"

using namespace flotilla;
using namespace flotilla::e2e;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

struct Scenario {
  size_t clusters = 0;
  size_t bundles = 0;
};

struct Settings {
  size_t nats_nodes = 1;
  int event_loops = 1;                  //!< the simulated agents' epoll threads (0: libnats' own two threads per agent)
  std::chrono::seconds agent_ping{30};  //!< the simulated agents' own PING interval (the agent's: 30 s)
  milliseconds pull_expires{30000};     // the agent's fetch timeout (AgentOptions::fetch_timeout)
  size_t scheduler_replicas = 1;        //!< above 1: that many replicas splitting that many partitions
  size_t gitrepos = 1;                  //!< the bundles spread over this many GitRepos (partitions cut by GitRepo)
  std::vector<Scenario> scenarios;
};

double secondsOf(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

//! nats-server's /varz (memory, messages in and out), summed over the cluster's nodes.
struct ServerFigures {
  double rss_mib = 0;
  double msgs = 0;
  double cpu_s = 0;  //!< CPU seconds of every node
};
ServerFigures serverFigures(Hub& hub) {
  ServerFigures out;
  const size_t nodes = hub.natsCluster() ? hub.natsCluster()->size() : 1;
  for (size_t i = 0; i < nodes; ++i) {
    harness::NatsServer& node = hub.natsCluster() ? hub.natsCluster()->node(i) : hub.nats();
    out.cpu_s += bench::procCpuSeconds(node.pid());
    auto varz =
        runCommand({.argv = {"curl", "-sf", "http://127.0.0.1:" + std::to_string(node.monitorPort()) + "/varz"}});
    if (!varz.ok() || varz->exit_code != 0) {
      continue;
    }
    auto json = Json::parse(varz->out);
    if (!json.ok()) {
      continue;
    }
    auto number = [&](const char* key) {
      const Json* v = json->find(key);
      return v != nullptr && v->isInt() ? static_cast<double>(v->asInt()) : 0.0;
    };
    out.rss_mib += number("mem") / (1024.0 * 1024.0);
    out.msgs += number("in_msgs") + number("out_msgs");
  }
  return out;
}

//! `bundles` bundles under apps/, each a fleet.yaml and one ConfigMap.
std::map<std::string, std::string> bundleFiles(size_t bundles) {
  std::map<std::string, std::string> files;
  for (size_t b = 0; b < bundles; ++b) {
    const std::string dir = "apps/b" + std::to_string(b) + "/";
    files[dir + "fleet.yaml"] = "defaultNamespace: bench\n";
    files[dir + "cm.yaml"] = configMap("cm-" + std::to_string(b), "1");
  }
  return files;
}

struct Figures {
  double connect_s = 0;
  double commit_to_first_s = 0;
  double commit_to_last_s = 0;
  double scheduler_cpu_s = 0;
  double bundler_cpu_s = 0;
  double nats_cpu_s = 0;
  double bench_cpu_s = 0;  //!< this process: the simulated agents and the watcher
  double scheduler_rss_mib = 0;
  double scheduler_hwm_mib = 0;
  double nats_rss_mib = 0;
  double msgs_per_s = 0;
  size_t ready = 0;
  uint64_t deploy_messages = 0;  //!< DeployEvents the deploy stream stored over the fan-out (one per deployment)
  bench::SimulatedCounts counts;
};

//! When the scheduler recorded the first and the last of `wanted` deployments Ready (status/bd.* puts).
struct ReadyTimes {
  size_t count = 0;
  std::pair<Clock::time_point, Clock::time_point> first_and_last;
};
Result<ReadyTimes> waitForReady(Hub& hub, bus::KvWatcher& watcher, size_t wanted) {
  std::set<std::string> ready;
  ReadyTimes out;
  const auto deadline = Clock::now() + seconds(900);
  while (ready.size() < wanted) {
    if (Clock::now() > deadline) {
      return fail(ErrorKind::kTransient, std::to_string(ready.size()) + " of " + std::to_string(wanted) +
                                             " deployments Ready after 900 s\n" + hub.allLogs());
    }
    auto entry = watcher.next(seconds(1));
    FLOTILLA_TRY(entry);
    if (!*entry || (*entry)->operation != bus::KvOperation::kPut) {
      continue;
    }
    auto record = Json::parse((*entry)->value);
    const Json* state = record.ok() ? record->find("state") : nullptr;
    if (state != nullptr && state->isString() && state->asString() == "Ready" && ready.insert((*entry)->key).second) {
      out.first_and_last.second = Clock::now();
      if (ready.size() == 1) {
        out.first_and_last.first = out.first_and_last.second;
      }
    }
  }
  out.count = ready.size();
  return out;
}

//! The scheduler processes: "scheduler", and "scheduler-<r>" for more replicas.
std::vector<std::string> schedulerNames(const Settings& settings) {
  std::vector<std::string> names{"scheduler"};
  for (size_t r = 1; r < settings.scheduler_replicas; ++r) {
    names.push_back("scheduler-" + std::to_string(r));
  }
  return names;
}

//! With more than one scheduler replica: starts the others and waits until partition p is held by replica p mod N
//! (ids r0, r1, ... sort like their ranks).
Status startSchedulerReplicas(Hub& hub, const Settings& settings) {
  const size_t replicas = settings.scheduler_replicas;
  for (size_t r = 1; r < replicas; ++r) {
    hub.configure("scheduler-" + std::to_string(r),
                  ServiceSettings{.flags = {"--replica-id", "r" + std::to_string(r)}});
    FLOTILLA_TRY(hub.startService("scheduler-" + std::to_string(r)));
  }
  auto clusters = hub.kv(std::string(events::kClustersBucket));
  FLOTILLA_TRY(clusters);
  const bool shared = Hub::waitFor(
      [&] {
        for (size_t p = 0; p < replicas; ++p) {
          auto entry = (*clusters)->get(scheduler::partitionLeaseKey(static_cast<uint32_t>(p)));
          auto value = entry.ok() ? Json::parse(entry->value) : Result<Json>(fail(entry.error()));
          if (!value.ok() || value->getString("holder") != "r" + std::to_string(p % replicas)) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(90));
  if (!shared) {
    return fail(ErrorKind::kTransient, "the scheduler replicas did not share the partitions within 90 s");
  }
  return {};
}

//! The bundles' paths, spread over `gitrepos` GitRepos round robin.
std::vector<std::vector<std::string>> gitRepoPaths(size_t bundles, size_t gitrepos) {
  std::vector<std::vector<std::string>> paths(gitrepos);
  for (size_t b = 0; b < bundles; ++b) {
    paths[b % gitrepos].push_back("apps/b" + std::to_string(b));
  }
  return paths;
}

Result<Figures> run(const Scenario& scenario, const Settings& settings) {
  Figures figures;
  std::map<std::string, ServiceSettings> services;
  if (settings.scheduler_replicas > 1) {
    services["scheduler"] = ServiceSettings{.flags = {"--partitions", std::to_string(settings.scheduler_replicas),
                                                      "--lease-ttl", "10", "--replica-id", "r0"}};
  }
  auto started = Hub::start({.clusters = 0,
                             .share_clusters = false,
                             .log_level = "warn",
                             .services = services,
                             .secure = true,
                             .nats_nodes = settings.nats_nodes});
  FLOTILLA_TRY(started);
  Hub& hub = **started;
  if (settings.scheduler_replicas > 1) {
    FLOTILLA_TRY(startSchedulerReplicas(hub, settings));
  }
  std::vector<std::string> names;
  for (size_t c = 0; c < scenario.clusters; ++c) {
    names.push_back("s" + std::to_string(c));
  }
  std::error_code dir_error;
  std::filesystem::create_directories(hub.dir() + "/sim", dir_error);
  if (dir_error) {
    return fail(ErrorKind::kInternal, hub.dir() + "/sim: " + dir_error.message());
  }
  const auto connect_start = Clock::now();
  auto agents = bench::SimulatedAgents::start(names, {.servers = split(hub.natsUrl(), ','),
                                                      .auth_dir = hub.authDir(),
                                                      .ca_file = hub.authDir() + "/tls/ca.pem",
                                                      .work_dir = hub.dir() + "/sim",
                                                      .labels = {{"bench", "yes"}},
                                                      .pull_expires = settings.pull_expires,
                                                      .event_loops = settings.event_loops,
                                                      .ping_interval = settings.agent_ping});
  FLOTILLA_TRY(agents);
  figures.connect_s = secondsOf(Clock::now() - connect_start);

  const std::string name = "scale";
  auto repo = hub.git().createRepo(name);
  FLOTILLA_TRY(repo);
  auto commit = hub.git().commitFiles(name, "main", bundleFiles(scenario.bundles), "bundles");
  FLOTILLA_TRY(commit);

  // The commit event's arrival (a core subscription beside the stream) and every Ready the scheduler records.
  auto js = hub.js();
  FLOTILLA_TRY(js);
  std::atomic<int64_t> commit_at_ns{0};
  auto commits = (*js)->connection()->subscribe(events::kCommitFilter, "", [&](bus::Message) {
    int64_t expected = 0;
    commit_at_ns.compare_exchange_strong(expected, Clock::now().time_since_epoch().count());
  });
  FLOTILLA_TRY(commits);
  auto status = hub.kv(std::string(events::kStatusBucket));
  FLOTILLA_TRY(status);
  auto watcher = (*status)->watch("bd.>", {.updates_only = true});
  FLOTILLA_TRY(watcher);

  std::vector<int> schedulers;
  for (const auto& process : schedulerNames(settings)) {
    schedulers.push_back(hub.pid(process));
  }
  auto schedulersCpu = [&] {
    double total = 0;
    for (int pid : schedulers) {
      total += bench::procCpuSeconds(pid);
    }
    return total;
  };
  auto schedulersKiB = [&](const char* field) {
    long total = 0;
    for (int pid : schedulers) {
      total += std::max(0L, bench::procStatusKiB(pid, field));
    }
    return static_cast<double>(total) / 1024.0;
  };
  const int bundler = hub.pid("bundler");
  const double cpu_before = schedulersCpu();
  const double bundler_before = bench::procCpuSeconds(bundler);
  const double bench_before = bench::procCpuSeconds(getpid());
  const ServerFigures server_before = serverFigures(hub);
  auto deploys_before = (*js)->streamInfo(std::string(events::kDeployStream));
  FLOTILLA_TRY(deploys_before);
  if (settings.gitrepos <= 1) {
    FLOTILLA_TRY(hub.apply(gitRepoYaml(name, repo->http, {"apps"})));
  } else {
    const auto paths = gitRepoPaths(scenario.bundles, settings.gitrepos);
    for (size_t g = 0; g < paths.size(); ++g) {
      FLOTILLA_TRY(hub.apply(gitRepoYaml(name + "-g" + std::to_string(g), repo->http, paths[g])));
    }
  }

  auto ready = waitForReady(hub, *watcher, scenario.clusters * scenario.bundles);
  FLOTILLA_TRY(ready);
  const auto [first, last] = ready->first_and_last;
  const ServerFigures server_after = serverFigures(hub);
  auto deploys_after = (*js)->streamInfo(std::string(events::kDeployStream));
  FLOTILLA_TRY(deploys_after);
  figures.deploy_messages = deploys_after->last_sequence - deploys_before->last_sequence;
  const Clock::time_point commit_at{Clock::duration(commit_at_ns.load())};
  figures.ready = ready->count;
  figures.commit_to_first_s = secondsOf(first - commit_at);
  figures.commit_to_last_s = secondsOf(last - commit_at);
  figures.scheduler_cpu_s = schedulersCpu() - cpu_before;
  figures.bundler_cpu_s = bench::procCpuSeconds(bundler) - bundler_before;
  figures.nats_cpu_s = server_after.cpu_s - server_before.cpu_s;
  figures.bench_cpu_s = bench::procCpuSeconds(getpid()) - bench_before;
  figures.scheduler_rss_mib = schedulersKiB("VmRSS");
  figures.scheduler_hwm_mib = schedulersKiB("VmHWM");
  figures.nats_rss_mib = server_after.rss_mib;
  figures.msgs_per_s = (server_after.msgs - server_before.msgs) / std::max(1e-3, secondsOf(last - commit_at));
  // A deploy applied twice shows as a deploymentID a cluster applied before (counted per cluster by the agents).
  figures.counts = (*agents)->counts();
  return figures;
}

std::optional<Settings> parseArgs(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--nats-nodes" && i + 1 < argc) {
      settings.nats_nodes = std::stoul(argv[++i]);
    } else if (arg == "--agent-ping-s" && i + 1 < argc) {
      settings.agent_ping = seconds(std::stol(argv[++i]));
    } else if (arg == "--event-loops" && i + 1 < argc) {
      settings.event_loops = std::stoi(argv[++i]);
    } else if (arg == "--pull-expires-ms" && i + 1 < argc) {
      settings.pull_expires = milliseconds(std::stol(argv[++i]));
    } else if (arg == "--scheduler-replicas" && i + 1 < argc) {
      settings.scheduler_replicas = std::max<size_t>(1, std::stoul(argv[++i]));
    } else if (arg == "--gitrepos" && i + 1 < argc) {
      settings.gitrepos = std::max<size_t>(1, std::stoul(argv[++i]));
    } else if (size_t x = arg.find('x'); x != std::string::npos) {
      settings.scenarios.push_back({std::stoul(arg.substr(0, x)), std::stoul(arg.substr(x + 1))});
    } else {
      std::cerr
          << "usage: bench_fleet_scale [--nats-nodes 1|3] [--event-loops N] [--agent-ping-s N] [--pull-expires-ms N] "
             "[--scheduler-replicas N] [--gitrepos N] [<clusters>x<bundles>...]\n";
      return std::nullopt;
    }
  }
  if (settings.scenarios.empty()) {
    settings.scenarios = {{50, 51}, {100, 100}, {10000, 1}};
  }
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Settings> parsed = parseArgs(argc, argv);
  if (!parsed) {
    return 2;
  }
  const Settings& settings = *parsed;
  // Every simulated agent holds a connection (a socket here and one in nats-server).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  int failed = 0;
  for (const Scenario& scenario : settings.scenarios) {
    auto figures = run(scenario, settings);
    if (!figures.ok()) {
      std::cerr << "bench: " << scenario.clusters << "x" << scenario.bundles << ": " << figures.error().describe()
                << std::endl;
      ++failed;
      continue;
    }
    const auto& f = *figures;
    std::printf(
        "%zu clusters x %zu bundles = %zu deployments in %zu GitRepos, nats-server nodes %zu, scheduler replicas "
        "%zu%s, auth+TLS, pull expires %lld ms\n"
        "  agents connected and registered in %.1f s\n"
        "  commit event -> first Ready recorded %.2f s, -> last Ready recorded %.2f s (%zu)\n"
        "  scheduler: %.1f CPU s, VmRSS %.0f MiB, VmHWM %.0f MiB; nats-server RSS %.0f MiB (all nodes)\n"
        "  nats-server messages in+out: %.0f/s over the fan-out\n"
        "  CPU s over the fan-out: scheduler %.1f, nats-server %.1f, bundler %.1f, simulated agents %.1f\n"
        "  deploy stream: %llu DeployEvents stored over the fan-out\n"
        "  agents: %llu deploys received (%llu redelivered, %llu a deploymentID's second stream message), %llu "
        "applies, %llu applied twice, %llu manifest requests (%llu refused), %llu pulls (%llu expired empty, "
        "%llu other answers), %llu heartbeats, %llu failed publishes; %d event loop threads, agents ping every "
        "%lld s\n",
        scenario.clusters, scenario.bundles, scenario.clusters * scenario.bundles, settings.gitrepos,
        settings.nats_nodes, settings.scheduler_replicas,
        settings.scheduler_replicas > 1 ? " (as many partitions; figures summed over them)" : "",
        static_cast<long long>(settings.pull_expires.count()), f.connect_s, f.commit_to_first_s, f.commit_to_last_s,
        f.ready, f.scheduler_cpu_s, f.scheduler_rss_mib, f.scheduler_hwm_mib, f.nats_rss_mib, f.msgs_per_s,
        f.scheduler_cpu_s, f.nats_cpu_s, f.bundler_cpu_s, f.bench_cpu_s,
        static_cast<unsigned long long>(f.deploy_messages), static_cast<unsigned long long>(f.counts.deploys),
        static_cast<unsigned long long>(f.counts.redeliveries), static_cast<unsigned long long>(f.counts.republished),
        static_cast<unsigned long long>(f.counts.applies), static_cast<unsigned long long>(f.counts.duplicate_applies),
        static_cast<unsigned long long>(f.counts.manifest_requests),
        static_cast<unsigned long long>(f.counts.manifest_refusals), static_cast<unsigned long long>(f.counts.pulls),
        static_cast<unsigned long long>(f.counts.pull_timeouts),
        static_cast<unsigned long long>(f.counts.pull_other_status),
        static_cast<unsigned long long>(f.counts.heartbeats),
        static_cast<unsigned long long>(f.counts.publish_failures), settings.event_loops,
        static_cast<long long>(settings.agent_ping.count()));
    std::fflush(stdout);
    if (f.counts.duplicate_applies != 0) {
      ++failed;
    }
  }
  std::printf(
      "anchor: Fleet, 50 clusters x 51 bundles = 2,550 BundleDeployments Ready ~50 s after the GitRepo "
      "(rancher/fleet#4599); %s\n",
      bench::machineLoad().c_str());
  return failed == 0 ? 0 : 1;
}
