// Issue 17: a real Prometheus (Debian's `prometheus`, installed by scripts/setup) scrapes a running hub while a
// commit flows. Every expression of the shipped alert rules (charts/flotilla-hub/files/flotilla-rules.yaml) returns
// data through /api/v1/query, so a metric renamed in code fails here; and faults make their alerts fire in
// seconds, with the shipped expressions and a test copy of the file whose `for:` is 0s, evaluated every second:
// a GitRepo whose host does not answer -> FlotillaPollErrors; a commit that does not render -> FlotillaRenderErrors;
// one the API servers refuse -> FlotillaApplyErrors and FlotillaGitRepoNotReady; an agent killed with kill -9 ->
// FlotillaClusterOffline (--cluster-offline-after 3).
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
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
    auto started = Hub::start({.services = services});
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

  //! Waits until `expr` returns at least one series.
  bool returnsData(const std::string& expr, std::chrono::seconds timeout = 30s) {
    return Hub::waitFor([&] { return vectorSize(prometheus_->query(expr)) > 0; }, timeout);
  }

  std::unique_ptr<Hub> hub_;
  std::unique_ptr<Prometheus> prometheus_;
};

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
}

}  // namespace
}  // namespace flotilla::e2e
