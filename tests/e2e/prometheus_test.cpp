// Issue 17: a real Prometheus (Debian's `prometheus`, installed by scripts/setup) scrapes a running hub while a
// commit flows. Every expression of the shipped alert rules (charts/flotilla-hub/files/flotilla-rules.yaml) returns
// data through /api/v1/query, so a metric renamed in code fails here; and faults make their alerts fire in
// seconds, with the shipped expressions and a test copy of the file whose `for:` is 0s, evaluated every second:
// a GitRepo whose host does not answer -> FlotillaPollErrors; a commit that does not render -> FlotillaRenderErrors;
// one the API servers refuse -> FlotillaApplyErrors and FlotillaGitRepoNotReady; an agent killed with kill -9 ->
// FlotillaClusterOffline (--cluster-offline-after 3); the bundler stopped while 1,100 commit events arrive, then held
// inside a Helm render -> FlotillaConsumerLag; a repository that fills the `sources` store (capped at 256 KiB with
// --store-limits) past 80 % -> FlotillaStoreFilling, and its next commit, which does not fit -> FlotillaStoreFull.
// The thresholds are the shipped ones (1,000 messages, 80 %): the faults are made for real, not with smaller ones.
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/local_port.h"

namespace flotilla::e2e {
namespace {

using namespace std::chrono_literals;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string rulesPath() {
  return std::string(FLOTILLA_SOURCE_DIR) + "/charts/flotilla-hub/files/flotilla-rules.yaml";
}

//! Every panel query of the dashboards (charts/flotilla-hub/files/dashboards, also docs/dashboards) as
//! "<dashboard>: <title>" -> expr, with the dashboards' variables ($gitrepo, $cluster) matching everything.
std::map<std::string, std::string> dashboardQueries() {
  std::map<std::string, std::string> out;
  const std::string dir = std::string(FLOTILLA_SOURCE_DIR) + "/charts/flotilla-hub/files/dashboards";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    auto dashboard = Json::parse(readFile(entry.path().string()));
    if (!dashboard.ok()) {
      ADD_FAILURE() << entry.path() << ": " << dashboard.error().describe();
      continue;
    }
    for (const auto& panel : dashboard->find("panels")->asArray()) {
      for (const auto& target : panel.find("targets")->asArray()) {
        const std::string expr =
            std::regex_replace(target.getString("expr"), std::regex(R"(\$(gitrepo|cluster)\b)"), ".+");
        out[entry.path().filename().string() + ": " + panel.getString("title")] = expr;
      }
    }
  }
  return out;
}

//! One rule of the shipped file: its alert name and expression.
struct Rule {
  std::string alert;
  std::string expr;
};

std::vector<Rule> shippedRules() {
  std::vector<Rule> out;
  auto rules = parseYaml(readFile(rulesPath()), rulesPath());
  if (!rules.ok()) {
    ADD_FAILURE() << rules.error().describe();
    return out;
  }
  for (const auto& group : rules->find("groups")->asArray()) {
    for (const auto& rule : group.find("rules")->asArray()) {
      out.push_back({rule.getString("alert"), rule.getString("expr")});
    }
  }
  return out;
}

//! The expression without its last top-level comparison ("sum(x) > 0" -> "sum(x)"): what must return data while
//! nothing is wrong.
std::string withoutThreshold(const std::string& expr) {
  static const std::regex kComparison(R"(\s(>|==|<|>=|<=|!=)\s[-0-9.e]+\s*$)");
  return std::regex_replace(expr, kComparison, "");
}

//! Prometheus on a free port with its own data directory, scraping `targets` (job -> host:port) every second and
//! evaluating `rules_file` every second.
class Prometheus {
 public:
  static Result<std::unique_ptr<Prometheus>> start(const std::string& dir,
                                                   const std::map<std::string, std::vector<std::string>>& targets,
                                                   const std::string& rules_file) {
    auto port = harness::freeTcpPort();
    FLOTILLA_TRY(port);
    std::string config = "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - " + rules_file +
                         "\nscrape_configs:\n";
    for (const auto& [job, addresses] : targets) {
      config += "  - job_name: " + job + "\n    static_configs:\n      - targets: [" + join(addresses, ", ") + "]\n";
    }
    {
      std::ofstream out(dir + "/prometheus.yml");
      out << config;
    }
    std::unique_ptr<Prometheus> prometheus(new Prometheus());
    prometheus->base_ = "http://127.0.0.1:" + std::to_string(*port);
    auto process = Process::start(
        {.argv = {"prometheus", "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
                  "--web.listen-address=127.0.0.1:" + std::to_string(*port)},
         .output_file = dir + "/prometheus.log",
         .kill_with_parent = true});
    FLOTILLA_TRY(process);
    prometheus->process_ = std::move(process).value();
    const bool ready = Hub::waitFor(
        [&] {
          auto r = runCommand({.argv = {"curl", "-sf", prometheus->base_ + "/-/ready"}});
          return r.ok() && r->exit_code == 0;
        },
        30s);
    if (!ready) {
      return fail(ErrorKind::kTransient, "prometheus not ready: " + readFile(dir + "/prometheus.log"));
    }
    return prometheus;
  }

  //! The `data` of GET /api/v1/query?query=<expr> (null Json when the request or the answer failed).
  Json query(const std::string& expr) const {
    return get({"-G", base_ + "/api/v1/query", "--data-urlencode", "query=" + expr});
  }

  //! The alerts Prometheus holds (GET /api/v1/alerts), each {labels, state, ...}.
  std::vector<Json> alerts() const {
    Json data = get({base_ + "/api/v1/alerts"});
    const Json* list = data.find("alerts");
    return list != nullptr && list->isArray() ? list->asArray() : std::vector<Json>{};
  }

  //! Whether `alert` fires with every label of `labels`.
  bool firing(const std::string& alert, const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& entry : alerts()) {
      if (entry.getString("state") != "firing" || entry.at({"labels", "alertname"}) == nullptr ||
          entry.at({"labels", "alertname"})->asString() != alert) {
        continue;
      }
      bool all = true;
      for (const auto& label : labels) {
        const Json* value = entry.at({"labels", label.first});
        all = all && value != nullptr && value->isString() && value->asString() == label.second;
      }
      if (all) {
        return true;
      }
    }
    return false;
  }

 private:
  Prometheus() = default;

  Json get(std::vector<std::string> args) const {
    args.insert(args.begin(), {"curl", "-sf"});
    auto r = runCommand({.argv = args});
    if (!r.ok() || r->exit_code != 0) {
      return {};
    }
    auto json = Json::parse(r->out);
    if (!json.ok() || json->getString("status") != "success" || json->find("data") == nullptr) {
      return {};
    }
    return *json->find("data");
  }

  std::string base_;
  Process process_;
};

//! The number of series a query returned as an instant vector (-1: not a vector, or the query failed).
int vectorSize(const Json& data) {
  if (data.getString("resultType") != "vector" || data.find("result") == nullptr) {
    return -1;
  }
  return static_cast<int>(data.find("result")->asArray().size());
}

//! The cap of the `sources` store in this test (--store-limits sources=256KiB on the poller, bundler and scheduler).
constexpr int64_t kSourcesCap = int64_t{256} << 10;
//! Commit events published while the bundler is stopped: more than FlotillaConsumerLag's 1,000.
constexpr size_t kBurst = 1100;

//! `size` characters of hex that do not repeat, so a commit's archive is as large as its content (base64 of it).
std::string noise(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(size, '0');
  for (char& c : out) {
    c = kHex[rng() % 16];
  }
  return out;
}

//! A helm for the bundler that holds `helm template` while <dir>/gate exists (touching <dir>/inside when it starts
//! to wait) and passes everything else through: a render the test keeps open. Removing <dir> lets it go.
Result<std::string> gatedHelm(const std::string& dir) {
  const std::string real = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin") + "/helm";
  const std::string wrapper = dir + "/helm";
  FLOTILLA_TRY(writeFile(wrapper, "#!/bin/sh\nif [ \"$1\" = template ] && [ -e '" + dir + "/gate' ]; then\n  touch '" +
                                      dir + "/inside'\n  while [ -e '" + dir +
                                      "/gate' ]; do sleep 0.05; done\nfi\nexec '" + real + "' \"$@\"\n"));
  if (::chmod(wrapper.c_str(), 0755) != 0) {
    return fail(ErrorKind::kInternal, "chmod " + wrapper);
  }
  return wrapper;
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every service on a known port (the last --http-addr wins), heartbeats every second, Offline after 3 s.
    std::map<std::string, ServiceSettings> services;
    std::map<std::string, std::vector<std::string>> targets;
    for (const std::string name : {"poller", "bundler", "scheduler", "agent-0", "agent-1"}) {
      auto port = harness::freeTcpPort();
      ASSERT_TRUE(port.ok());
      const std::string address = "127.0.0.1:" + std::to_string(*port);
      services[name].flags = {"--http-addr", address};
      targets[startsWith(name, "agent-") ? "agent" : name].push_back(address);
    }
    services["scheduler"].flags.insert(
        services["scheduler"].flags.end(),
        {"--agent-heartbeat-interval", "1", "--cluster-offline-after", "3", "--per-cluster-metrics", "true"});
    for (const char* agent : {"agent-0", "agent-1"}) {
      services[agent].flags.insert(services[agent].flags.end(), {"--heartbeat-interval", "1s"});
    }
    // The sources store small enough for one repository to fill (every service that provisions the hub gets the
    // same caps, as the chart does).
    for (const char* service : {"poller", "bundler", "scheduler"}) {
      services[service].flags.insert(services[service].flags.end(), {"--store-limits", "sources=256KiB"});
    }
    auto gate = makeTempDir("e2e-prom-gate");
    ASSERT_TRUE(gate.ok()) << gate.error().describe();
    gate_dir_ = *gate;
    auto helm = gatedHelm(gate_dir_);
    ASSERT_TRUE(helm.ok()) << helm.error().describe();
    auto started = Hub::start({.helm_binary = *helm, .services = services});
    ASSERT_TRUE(started.ok()) << started.error().describe();
    hub_ = std::move(started).value();
    // The shipped rules with `for: 0s`, so an alert fires at the first evaluation that finds its condition.
    const std::string rules = hub_->dir() + "/flotilla-rules.yaml";
    {
      std::ofstream out(rules);
      out << std::regex_replace(readFile(rulesPath()), std::regex(R"(\bfor: \S+)"), "for: 0s");
    }
    auto prometheus = Prometheus::start(hub_->dir(), targets, rules);
    ASSERT_TRUE(prometheus.ok()) << prometheus.error().describe();
    prometheus_ = std::move(prometheus).value();
  }

  void TearDown() override {
    removeAll(gate_dir_);  // a render held at the gate goes on (and its wrapper ends)
  }

  //! The bytes the `sources` object store holds (-1 when it cannot be read).
  int64_t sourcesBytes() {
    auto js = hub_->js();
    if (!js.ok()) {
      return -1;
    }
    auto info = (*js)->streamInfo("OBJ_" + std::string(events::kSourcesBucket));
    return info.ok() ? static_cast<int64_t>(info->bytes) : -1;
  }

  std::string alertsText() { return "alerts: " + Json(prometheus_->alerts()).dump(); }

  void consumerLagFault();
  void storeFaults();

  //! Waits until `expr` returns at least one series.
  bool returnsData(const std::string& expr, std::chrono::seconds timeout = 30s) {
    return Hub::waitFor([&] { return vectorSize(prometheus_->query(expr)) > 0; }, timeout);
  }

  std::string gate_dir_;
  std::unique_ptr<Hub> hub_;
  std::unique_ptr<Prometheus> prometheus_;
};

// A durable far behind: the bundler is stopped while a Helm bundle's new commit and 1,100 more commit events for it
// arrive (copies with their own Nats-Msg-Ids, as a burst of commits would come), then started with its `helm
// template` held at the gate. It fetches a few, the rest stay in the stream: its consumer_pending_messages is the
// backlog, and FlotillaConsumerLag fires for the bundler's durable.
void PrometheusTest::consumerLagFault() {
  const std::string lag = "lag-" + randomHex(3);
  ASSERT_TRUE(hub_->git().createRepo(lag).ok());
  const std::string chart_cm =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-chart\ndata:\n  value: "
      "{{ .Values.value | quote }}\n";
  auto first = hub_->git().commitFiles(lag, "main",
                                       {{"chart/fleet.yaml", "defaultNamespace: ns-" + lag + "\n"},
                                        {"chart/Chart.yaml", "apiVersion: v2\nname: lag-chart\nversion: 0.1.0\n"},
                                        {"chart/values.yaml", "value: v1\n"},
                                        {"chart/templates/cm.yaml", chart_cm}},
                                       "first");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(hub_->apply(gitRepoYaml(lag, hub_->git().httpUrl(lag), {"chart"})).ok());
  auto rendered = [&](const std::string& commit) {
    for (const auto& record : recordsOf(*hub_, "bundles", "")) {
      if (record.getString("gitrepo") == lag && record.getString("commit") == commit &&
          record.find("lastGood") != nullptr) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(Hub::waitFor([&] { return rendered(*first); }, kLands)) << hub_->logTail("bundler");

  ASSERT_TRUE(hub_->stopService("bundler").ok());
  auto second = hub_->git().commitFiles(lag, "main", {{"chart/values.yaml", "value: v2\n"}}, "second");
  ASSERT_TRUE(second.ok());
  auto js = hub_->js();
  ASSERT_TRUE(js.ok()) << js.error().describe();
  const std::string subject = events::commitSubject("fleet-default", lag);
  std::optional<events::CommitEvent> event;
  ASSERT_TRUE(Hub::waitFor(
      [&] {
        auto last = (*js)->getLastMessage(events::kCommitStream, subject);
        if (!last.ok()) {
          return false;
        }
        auto decoded = events::parsePayload<events::CommitEvent>(last->data());
        if (decoded.ok() && decoded->commit == *second) {
          event = *decoded;
        }
        return event.has_value();
      },
      kLands))
      << hub_->logTail("poller");
  std::vector<bus::JetStream::Outgoing> burst;
  for (size_t i = 0; i < kBurst; ++i) {
    burst.push_back({.subject = subject,
                     .data = events::encode(*event).dump(),
                     .msg_id = event->id + "/burst-" + std::to_string(i)});
  }
  auto published = (*js)->publishAll(burst);
  ASSERT_TRUE(published.ok()) << published.error().describe();
  ASSERT_TRUE(writeFile(gate_dir_ + "/gate", "closed\n").ok());
  ASSERT_TRUE(hub_->startService("bundler").ok());
  EXPECT_TRUE(Hub::waitFor([&] { return std::filesystem::exists(gate_dir_ + "/inside"); }, kLands))
      << "the bundler never started rendering the second commit\n"
      << hub_->logTail("bundler");
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return prometheus_->firing("FlotillaConsumerLag",
                                   {{"job", "bundler"}, {"consumer", "commits"}, {"durable", "bundler"}});
      },
      60s))
      << alertsText() << "\n"
      << hub_->logTail("bundler");
  EXPECT_TRUE(returnsData("flotilla_bundler_consumer_pending_messages{durable=\"bundler\"} > 1000"));
}

// A store that fills: a repository whose commit takes the `sources` store past 80 % of its cap (the archive is the
// content in base64, 4/3 of it) -> FlotillaStoreFilling for sources; its next commit does not fit, the poller's
// write is refused (store_full_total{store="sources"}) -> FlotillaStoreFull for sources.
void PrometheusTest::storeFaults() {
  const int64_t before = sourcesBytes();
  ASSERT_GE(before, 0);
  ASSERT_LT(before, kSourcesCap / 2) << "the earlier commits left too little room";
  const auto content = static_cast<size_t>((kSourcesCap * 9 / 10 - before - 2048) * 3 / 4);
  const std::string full = "full-" + randomHex(3);
  ASSERT_TRUE(hub_->git().createRepo(full).ok());
  ASSERT_TRUE(hub_->git().commitFiles(full, "main", {{"app/blob.txt", noise(content, 1)}}, "big").ok());
  ASSERT_TRUE(hub_->apply(gitRepoYaml(full, hub_->git().httpUrl(full), {"app"})).ok());
  ASSERT_TRUE(Hub::waitFor([&] { return sourcesBytes() > kSourcesCap * 8 / 10; }, kLands))
      << sourcesBytes() << " bytes of " << kSourcesCap << "\n"
      << hub_->logTail("poller");
  EXPECT_LT(sourcesBytes(), kSourcesCap);
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return prometheus_->firing("FlotillaStoreFilling", {{"store", "sources"}});
      },
      60s))
      << alertsText();
  EXPECT_FALSE(prometheus_->firing("FlotillaStoreFull")) << "fires before its fault";

  ASSERT_TRUE(hub_->git().commitFiles(full, "main", {{"app/blob.txt", noise(content, 2)}}, "bigger").ok());
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return prometheus_->firing("FlotillaStoreFull", {{"store", "sources"}});
      },
      60s))
      << alertsText() << "\n"
      << hub_->logTail("poller");
  EXPECT_TRUE(returnsData("flotilla_poller_store_full_total{store=\"sources\"} > 0"));
}

TEST_F(PrometheusTest, EveryRuleHasDataWhileACommitFlowsAndFaultsFireTheirAlerts) {
  const std::vector<std::string> both = {hub_->clusterName(0), hub_->clusterName(1)};
  const std::string name = "prom-" + randomHex(3);
  auto first = applyConfigMapRepo(*hub_, name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  // A GitRepo whose host does not answer: the poller counts errors_total{stage="ls_remote"}.
  ASSERT_TRUE(hub_->apply(gitRepoYaml("unreachable-" + randomHex(3), "http://127.0.0.1:1/none.git", {"app"})).ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(*hub_, name, *first, both); }, kLands)) << hub_->allLogs();

  // Every service is scraped and says what it is.
  for (const char* job : {"poller", "bundler", "scheduler", "agent"}) {
    const std::string up = std::string("up{job=\"") + job + "\"} == 1";
    EXPECT_TRUE(returnsData(up)) << job;
    for (const char* family : {"flotilla_build_info", "process_cpu_seconds_total", "process_resident_memory_bytes",
                               "process_open_fds", "process_start_time_seconds"}) {
      EXPECT_TRUE(returnsData(std::string(family) + "{job=\"" + job + "\"}")) << family << " of " << job;
    }
  }
  // The GitRepo is Ready in the gauges too.
  EXPECT_TRUE(returnsData("flotilla_scheduler_gitrepo_ready{gitrepo=\"" + name + "\"} == 1"));
  EXPECT_TRUE(returnsData("flotilla_scheduler_clusters_by_state{state=\"Ready\"} == 2"));
  // Every rule's expression returns data while nothing is wrong (its threshold left off), and none fires yet.
  for (const auto& rule : shippedRules()) {
    const std::string expr = withoutThreshold(rule.expr);
    EXPECT_NE(expr, rule.expr) << rule.alert << ": no threshold found";
    EXPECT_TRUE(returnsData(expr)) << rule.alert << ": " << expr << " returned no data";
  }
  // Every panel of every dashboard too (the per-cluster ones with the scheduler's --per-cluster-metrics).
  const auto panels = dashboardQueries();
  EXPECT_GE(panels.size(), 20u);
  for (const auto& panel : panels) {
    EXPECT_TRUE(returnsData(panel.second)) << panel.first << ": " << panel.second << " returned no data";
  }
  // The unreachable GitRepo is the poll-error fault: FlotillaPollErrors fires (its errors go on with backoff).
  EXPECT_TRUE(Hub::waitFor([&] { return prometheus_->firing("FlotillaPollErrors"); }, 60s))
      << "alerts: " << Json(prometheus_->alerts()).dump() << "\n"
      << hub_->logTail("poller");
  for (const auto& rule : shippedRules()) {
    if (rule.alert != "FlotillaPollErrors") {
      EXPECT_FALSE(prometheus_->firing(rule.alert)) << rule.alert << " fires before its fault";
    }
  }

  // A commit that does not render: FlotillaRenderErrors fires for that GitRepo.
  ASSERT_TRUE(
      hub_->git().commitFiles(name, "main", {{"app/cm.yaml", "kind: ConfigMap\ndata: [unclosed\n"}}, "broken").ok());
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return prometheus_->firing("FlotillaRenderErrors", {{"gitrepo", name}});
      },
      60s))
      << "alerts: " << Json(prometheus_->alerts()).dump() << "\n"
      << hub_->logTail("bundler");

  // A commit that renders but which the API servers refuse (data must be a map): the bundle is ErrApplied, so
  // FlotillaApplyErrors fires, and the GitRepo is not Ready, so FlotillaGitRepoNotReady fires for it.
  const std::string refused = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata: 5\n";
  ASSERT_TRUE(hub_->git().commitFiles(name, "main", {{"app/cm.yaml", refused}}, "refused").ok());
  EXPECT_TRUE(Hub::waitFor([&] { return prometheus_->firing("FlotillaApplyErrors"); }, 60s))
      << "alerts: " << Json(prometheus_->alerts()).dump() << "\n"
      << hub_->logTail("agent-0");
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return prometheus_->firing("FlotillaGitRepoNotReady", {{"gitrepo", name}});
      },
      60s))
      << "alerts: " << Json(prometheus_->alerts()).dump();

  // An agent killed: its cluster goes Offline and FlotillaClusterOffline fires.
  hub_->kill9("agent-0");
  EXPECT_TRUE(Hub::waitFor([&] { return prometheus_->firing("FlotillaClusterOffline"); }, 60s))
      << "alerts: " << Json(prometheus_->alerts()).dump() << "\n"
      << hub_->logTail("scheduler");
  EXPECT_TRUE(returnsData("flotilla_scheduler_clusters_by_state{state=\"Offline\"} == 1"));

  for (const char* later : {"FlotillaConsumerLag", "FlotillaStoreFilling", "FlotillaStoreFull"}) {
    EXPECT_FALSE(prometheus_->firing(later)) << later << " fires before its fault";
  }
  ASSERT_NO_FATAL_FAILURE(consumerLagFault());
  for (const char* later : {"FlotillaStoreFilling", "FlotillaStoreFull"}) {
    EXPECT_FALSE(prometheus_->firing(later)) << later << " fires before its fault";
  }
  ASSERT_NO_FATAL_FAILURE(storeFaults());
}

}  // namespace
}  // namespace flotilla::e2e
