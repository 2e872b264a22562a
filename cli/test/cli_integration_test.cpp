// Integration tests of the `flotilla` binary against a real nats-server -js whose topology was created the way the
// services create it (service::connectHub with kProvision). Records the scheduler and poller would write are put
// into KV directly, so each read command is checked against known content.
#include <gtest/gtest.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/service/hub.h"

namespace flotilla::cli {
namespace {

using namespace std::chrono_literals;

const char* kFleetGitRepo = R"(# A GitRepo exactly as Fleet's docs write it.
kind: GitRepo
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: simple
  namespace: fleet-default
spec:
  repo: https://github.com/rancher/fleet-examples
  branch: master
  paths:
  - simple
  targets:
  - name: prod
    clusterSelector:
      matchLabels:
        env: prod
---
kind: ClusterGroup
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: europe
  namespace: fleet-default
spec:
  selector:
    matchLabels:
      region: eu
)";

const char* kUnknownField = R"(kind: GitRepo
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: broken
spec:
  repo: https://github.com/rancher/fleet-examples
  targets:
  - name: prod
    clusterSelectr:
      matchLabels:
        env: prod
)";

class CliTest : public harness::HubTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("cli-test"));
    ASSERT_NO_FATAL_FAILURE(makeScratchDir("cli-test", dir_));
  }
  void TearDown() override {
    removeAll(dir_);
    stopHub();
  }

  CommandResult cli(std::vector<std::string> args, const std::string& input = "", std::string url = "") {
    args.insert(args.begin(), {FLOTILLA_CLI_BINARY, "--nats-url", url.empty() ? nats_->url() : url});
    auto result = runCommand({.argv = args, .input = input, .timeout = 60s});
    EXPECT_TRUE(result.ok());
    return result.ok() ? *result : CommandResult{};
  }

  std::string file(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    EXPECT_TRUE(writeFile(path, content).ok());
    return path;
  }

  //! Absent means NotFound; any other error is a failure, not an absence.
  static void expectAbsent(bus::KeyValue& kv, const std::string& key) {
    auto entry = kv.get(key);
    ASSERT_FALSE(entry.ok()) << key << " exists";
    EXPECT_EQ(entry.error().kind, ErrorKind::kNotFound) << key << ": " << entry.error().describe();
  }

  void put(bus::KeyValue& kv, const std::string& key, const Json& value) {
    ASSERT_TRUE(kv.put(key, value.dump()).ok());
  }

  //! The records a scheduler would have written for a GitRepo "simple" with one bundle on two clusters.
  void seedPipelineRecords() {
    ASSERT_EQ(cli({"apply", "-f", file("repo.yaml", kFleetGitRepo)}).exit_code, 0);
    model::Cluster c1;
    c1.metadata.name = "prod-1";
    c1.metadata.ns = "fleet-default";
    c1.metadata.labels = {{"env", "prod"}};
    c1.status.agent = model::AgentStatus{
        .last_seen = "2026-12-02T10:00:00.000Z", .version = "0.1.0", .kubernetes_version = "v1.31.2"};
    model::Cluster c2 = c1;
    c2.metadata.name = "prod-2";
    put(*hub_.clusters, events::clusterKey("prod-1"), model::encode(c1));
    put(*hub_.clusters, events::clusterKey("prod-2"), model::encode(c2));
    for (const char* cluster : {"prod-1", "prod-2"}) {
      events::DeploymentRecord record{.cluster = cluster,
                                      .workspace = "fleet-default",
                                      .bundle = "simple-simple",
                                      .gitrepo = "simple",
                                      .commit = std::string(40, 'c'),
                                      .deployment_id = std::string(64, 'a') + ":" + std::string(64, 'o'),
                                      .manifest_id = std::string(64, 'a'),
                                      .target = "prod",
                                      .generation = 3};
      put(*hub_.deployments, events::deploymentKey(cluster, "fleet-default", "simple-simple"), events::encode(record));
    }
    events::BdStatus ready{.cluster = "prod-1",
                           .workspace = "fleet-default",
                           .bundle = "simple-simple",
                           .deployment_id = std::string(64, 'a') + ":" + std::string(64, 'o'),
                           .generation = 3,
                           .state = "Ready"};
    events::BdStatus failing = ready;
    failing.cluster = "prod-2";
    failing.state = "ErrApplied";
    failing.reason = "ApplyFailed";
    failing.message = "configmaps \"x\" is forbidden";
    put(*hub_.status, events::bundleDeploymentStatusKey("prod-1", "fleet-default", "simple-simple"),
        events::encode(ready));
    put(*hub_.status, events::bundleDeploymentStatusKey("prod-2", "fleet-default", "simple-simple"),
        events::encode(failing));
    put(*hub_.status, events::gitRepoSummaryKey("fleet-default", "simple"),
        Json::parse(R"({"workspace":"fleet-default","gitrepo":"simple","state":"ErrApplied",
          "message":"ErrApplied(1) [prod-2/simple-simple: configmaps \"x\" is forbidden]",
          "readyBundleDeployments":"1/2","readyClusters":1,"desiredReadyClusters":2,"error":false,
          "summary":{"ready":1,"errApplied":1,"desiredReady":2,"nonReadyResources":[{"name":"prod-2/simple-simple",
          "bundleState":"ErrApplied","message":"configmaps \"x\" is forbidden"}]},
          "bundles":[{"bundle":"simple-simple","state":"ErrApplied","ready":1,"desiredReady":2}],"renderErrors":[]})")
            .value());
    put(*hub_.status, events::gitRepoStatusKey("fleet-default", "simple"),
        events::encode(events::PollStatus{.workspace = "fleet-default",
                                          .gitrepo = "simple",
                                          .commit = std::string(40, 'c'),
                                          .last_poll_time = "2026-12-02T10:00:00.000Z",
                                          .last_error = "authentication required",
                                          .last_error_time = "2026-12-02T10:01:00.000Z"}));
  }

  std::string dir_;
};

// A Fleet GitRepo (and ClusterGroup) YAML is stored under gitrepos/<ws>.<name> and clusters/group.<ws>.<name>;
// applying it again changes nothing; a spec change bumps the generation.
TEST_F(CliTest, ApplyStoresFleetYaml) {
  auto result = cli({"apply", "-f", file("repo.yaml", kFleetGitRepo)});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("gitrepo.fleet.cattle.io/simple created"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("clustergroup.fleet.cattle.io/europe created"), std::string::npos) << result.out;

  auto entry = hub_.gitrepos->get(events::gitRepoKey("fleet-default", "simple"));
  ASSERT_TRUE(entry.ok());
  auto stored = model::decodeGitRepo(Json::parse(entry->value).value());
  ASSERT_TRUE(stored.ok()) << stored.error().describe();
  EXPECT_EQ(stored->spec.repo, "https://github.com/rancher/fleet-examples");
  ASSERT_EQ(stored->spec.targets.size(), 1u);
  EXPECT_EQ(stored->spec.targets[0].cluster_selector->match_labels.at("env"), "prod");
  EXPECT_EQ(stored->metadata.generation, 1);
  EXPECT_TRUE(hub_.clusters->get(events::clusterGroupKey("fleet-default", "europe")).ok());

  auto again = cli({"apply", "-f", "-"}, kFleetGitRepo);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("gitrepo.fleet.cattle.io/simple unchanged"), std::string::npos) << again.out;

  std::string changed = kFleetGitRepo;
  changed.replace(changed.find("branch: master"), 14, "branch: main");
  auto configured = cli({"apply", "-f", file("changed.yaml", changed)});
  ASSERT_EQ(configured.exit_code, 0) << configured.err;
  EXPECT_NE(configured.out.find("gitrepo.fleet.cattle.io/simple configured"), std::string::npos);
  auto updated = model::decodeGitRepo(
      Json::parse(hub_.gitrepos->get(events::gitRepoKey("fleet-default", "simple"))->value).value());
  EXPECT_EQ(updated->metadata.generation, 2);
  EXPECT_EQ(updated->spec.branch, "main");
}

// An unknown field fails with file:line and the field path, exit 1, and nothing is written (not even the valid
// documents of the same file).
TEST_F(CliTest, UnknownFieldIsRejectedWithLineAndPath) {
  std::string path = file("broken.yaml", std::string(kFleetGitRepo) + "---\n" + kUnknownField);
  auto result = cli({"apply", "-f", path});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("broken.yaml:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("spec.targets[0].clusterSelectr"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(":36"), std::string::npos) << result.err;  // the line of clusterSelectr
  expectAbsent(*hub_.gitrepos, events::gitRepoKey("fleet-default", "simple"));
  expectAbsent(*hub_.gitrepos, events::gitRepoKey("fleet-default", "broken"));
  expectAbsent(*hub_.clusters, events::clusterGroupKey("fleet-default", "europe"));

  auto bundle =
      cli({"apply", "-f", "-"}, "apiVersion: fleet.cattle.io/v1alpha1\nkind: Bundle\nmetadata:\n  name: b1\n");
  EXPECT_EQ(bundle.exit_code, 1);
  EXPECT_NE(bundle.err.find("only GitRepo, ClusterGroup and Cluster"), std::string::npos) << bundle.err;
}

// get -o json lists full records (spec + status) built from what the services wrote.
TEST_F(CliTest, GetJsonOverRecords) {
  seedPipelineRecords();
  auto bds = cli({"get", "bundledeployments", "-o", "json"});
  ASSERT_EQ(bds.exit_code, 0) << bds.err;
  auto list = Json::parse(bds.out);
  ASSERT_TRUE(list.ok()) << bds.out;
  EXPECT_EQ(list->getString("apiVersion"), "v1");
  EXPECT_EQ(list->getString("kind"), "List");
  ASSERT_EQ(list->find("items")->size(), 2u);
  const Json& second = list->find("items")->asArray()[1];
  EXPECT_EQ(second.getString("kind"), "BundleDeployment");
  EXPECT_EQ(second.at({"spec", "cluster"})->asString(), "prod-2");
  EXPECT_EQ(second.at({"spec", "generation"})->asInt(), 3);
  EXPECT_EQ(second.at({"status", "state"})->asString(), "ErrApplied");
  EXPECT_EQ(second.at({"status", "message"})->asString(), "configmaps \"x\" is forbidden");

  auto repos = cli({"get", "gitrepos", "-n", "fleet-default", "-o", "json"});
  ASSERT_EQ(repos.exit_code, 0) << repos.err;
  auto repo_list = Json::parse(repos.out).value();
  ASSERT_EQ(repo_list.find("items")->size(), 1u);  // listing: a List even of one, as kubectl prints it
  const Json& repo = repo_list.find("items")->asArray()[0];
  EXPECT_EQ(repo.at({"spec", "repo"})->asString(), "https://github.com/rancher/fleet-examples");
  EXPECT_EQ(repo.at({"status", "display", "readyBundleDeployments"})->asString(), "1/2");
  EXPECT_EQ(repo.at({"status", "display", "state"})->asString(), "ErrApplied");
  EXPECT_TRUE(repo.at({"status", "display", "error"})->asBool());
  EXPECT_EQ(repo.at({"status", "lastError"})->asString(), "authentication required");
  EXPECT_EQ(repo.at({"status", "summary", "errApplied"})->asInt(), 1);

  auto clusters = cli({"get", "clusters", "-o", "json"});
  ASSERT_EQ(clusters.exit_code, 0) << clusters.err;
  EXPECT_EQ(Json::parse(clusters.out)->find("items")->size(), 2u);

  auto bundles = cli({"get", "bundles", "-o", "yaml"});
  ASSERT_EQ(bundles.exit_code, 0) << bundles.err;
  EXPECT_NE(bundles.out.find("simple-simple"), std::string::npos);
  EXPECT_NE(bundles.out.find("kind: List\n"), std::string::npos) << bundles.out;

  // One object asked for by name is printed as itself.
  auto one = cli({"get", "gitrepo", "simple", "-o", "json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(Json::parse(one.out)->getString("kind"), "GitRepo") << one.out;
  // A cluster's deployments, asked for by the cluster's name, are a List.
  auto by_cluster = cli({"get", "bd", "prod-1", "-o", "json"});
  ASSERT_EQ(by_cluster.exit_code, 0) << by_cluster.err;
  EXPECT_EQ(Json::parse(by_cluster.out)->getString("kind"), "List") << by_cluster.out;

  auto table = cli({"get", "gitrepos"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("BUNDLES-READY"), std::string::npos);
  EXPECT_NE(table.out.find("1/2"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cccccccc"), std::string::npos) << table.out;
  auto bd_table = cli({"get", "bd", "-n", "fleet-default"});
  EXPECT_NE(bd_table.out.find("prod-2"), std::string::npos) << bd_table.out;
  EXPECT_NE(bd_table.out.find("ErrApplied"), std::string::npos) << bd_table.out;

  auto missing = cli({"get", "gitrepos", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not found"), std::string::npos);
}

// describe shows the summary, per-cluster states and messages, and the last error with its time.
TEST_F(CliTest, DescribeShowsPerClusterStates) {
  seedPipelineRecords();
  auto result = cli({"describe", "gitrepo", "simple"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("prod-1/simple-simple"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("prod-2/simple-simple"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("configmaps \"x\" is forbidden"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("authentication required (at 2026-12-02T10:01:00.000Z)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("ErrApplied"), std::string::npos);

  auto bundle = cli({"describe", "bundle", "simple-simple"});
  ASSERT_EQ(bundle.exit_code, 0) << bundle.err;
  EXPECT_NE(bundle.out.find("prod-2"), std::string::npos) << bundle.out;
  EXPECT_NE(bundle.out.find("Ready"), std::string::npos);

  auto bd = cli({"describe", "bd", "prod-2/simple-simple"});
  ASSERT_EQ(bd.exit_code, 0) << bd.err;
  EXPECT_NE(bd.out.find("ApplyFailed"), std::string::npos) << bd.out;

  auto cluster = cli({"describe", "cluster", "prod-1"});
  ASSERT_EQ(cluster.exit_code, 0) << cluster.err;
  EXPECT_NE(cluster.out.find("env=prod"), std::string::npos) << cluster.out;
  EXPECT_NE(cluster.out.find("fleet-default/simple-simple"), std::string::npos) << cluster.out;

  EXPECT_EQ(cli({"describe", "gitrepo", "nope"}).exit_code, 1);
}

// delete removes the spec.
TEST_F(CliTest, DeleteRemovesTheSpec) {
  ASSERT_EQ(cli({"apply", "-f", file("repo.yaml", kFleetGitRepo)}).exit_code, 0);
  auto result = cli({"delete", "gitrepo", "simple"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("gitrepo.fleet.cattle.io/simple deleted"), std::string::npos);
  expectAbsent(*hub_.gitrepos, events::gitRepoKey("fleet-default", "simple"));
  EXPECT_EQ(cli({"delete", "gitrepo", "simple"}).exit_code, 1);
  EXPECT_EQ(cli({"delete", "clustergroup", "europe", "-n", "fleet-default"}).exit_code, 0);
  EXPECT_EQ(cli({"delete", "bundle", "x"}).exit_code, 2);
}

// Against a NATS server no service has initialised, and against no server at all: a clear error, exit 1, and
// nothing is created.
TEST_F(CliTest, UninitialisedOrUnreachableHub) {
  auto bare = harness::NatsServer::start();
  ASSERT_TRUE(bare.ok());
  auto result = cli({"get", "gitrepos"}, "", (*bare)->url());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("not initialised"), std::string::npos) << result.err;
  auto apply = cli({"apply", "-f", file("repo.yaml", kFleetGitRepo)}, "", (*bare)->url());
  EXPECT_EQ(apply.exit_code, 1);
  auto connection = bus::Connection::connect({.servers = {(*bare)->url()}});
  ASSERT_TRUE(connection.ok());
  auto js = bus::JetStream::create(*connection).value();
  auto opened = bus::KeyValue::open(js, "gitrepos");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().kind, ErrorKind::kNotFound) << opened.error().describe();

  auto port = harness::freeTcpPort();
  ASSERT_TRUE(port.ok());
  auto down = cli({"--timeout", "1", "get", "gitrepos"}, "", "nats://127.0.0.1:" + std::to_string(*port));
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.err.find("cannot connect"), std::string::npos) << down.err;
}

// FLOTILLA_NATS_URL is used when --nats-url is absent.
TEST_F(CliTest, UrlFromEnvironment) {
  auto result = runCommand(
      {.argv = {FLOTILLA_CLI_BINARY, "get", "gitrepos", "-o", "json"}, .env = {{"FLOTILLA_NATS_URL", nats_->url()}}});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 0) << result->err;
  auto list = Json::parse(result->out);
  ASSERT_TRUE(list.ok()) << result->out;
  EXPECT_EQ(list->getString("kind"), "List");
  EXPECT_EQ(list->find("items")->size(), 0u);
}

}  // namespace
}  // namespace flotilla::cli

namespace flotilla::cli {
namespace {

const char* kList = R"(apiVersion: v1
kind: List
items:
- apiVersion: fleet.cattle.io/v1alpha1
  kind: ClusterGroup
  metadata:
    name: europe
    namespace: fleet-default
  spec: {selector: {matchLabels: {region: eu}}}
- apiVersion: fleet.cattle.io/v1alpha1
  kind: GitRepo
  metadata:
    name: simple
    namespace: fleet-default
  spec:
    repo: https://github.com/rancher/fleet-examples
)";

// A kind: List (as kubectl writes it) is applied item by item, in order.
TEST_F(CliTest, ApplyAcceptsAList) {
  auto result = cli({"apply", "-f", file("list.yaml", kList)});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "clustergroup.fleet.cattle.io/europe created\ngitrepo.fleet.cattle.io/simple created\n");
  EXPECT_TRUE(hub_.gitrepos->get(events::gitRepoKey("fleet-default", "simple")).ok());
  EXPECT_TRUE(hub_.clusters->get(events::clusterGroupKey("fleet-default", "europe")).ok());
  auto again = cli({"apply", "-f", "-"}, kList);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("gitrepo.fleet.cattle.io/simple unchanged"), std::string::npos) << again.out;
}

// A bad item names its index and its line; nothing of the List is stored.
TEST_F(CliTest, ABadListItemNamesItsIndex) {
  std::string bad = kList;
  bad.replace(bad.find("    repo: "), 4, "    repoo: x\n    ");
  auto result = cli({"apply", "-f", file("bad-list.yaml", bad)});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(result.err.starts_with("error: items[1]: ")) << result.err;
  EXPECT_NE(result.err.find("bad-list.yaml:16: spec.repoo: unknown field"), std::string::npos) << result.err;
  expectAbsent(*hub_.clusters, events::clusterGroupKey("fleet-default", "europe"));

  auto wrong_version = cli({"apply", "-f", "-"}, "apiVersion: v2\nkind: List\nitems: []\n");
  EXPECT_EQ(wrong_version.exit_code, 1);
  EXPECT_NE(wrong_version.err.find("apiVersion v1"), std::string::npos) << wrong_version.err;
}

// Global flags are accepted after the command and its arguments too; the ones a command has no use for are
// rejected before anything is contacted.
TEST_F(CliTest, GlobalFlagsInAnyPosition) {
  ASSERT_EQ(cli({"apply", "-f", file("repo.yaml", kFleetGitRepo)}).exit_code, 0);
  auto result = runCommand({.argv = {FLOTILLA_CLI_BINARY, "get", "gitrepos", "simple", "-ojson", "--nats-url",
                                     nats_->url(), "-n", "fleet-default"}});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 0) << result->err;
  EXPECT_EQ(Json::parse(result->out)->getString("kind"), "GitRepo") << result->out;
  EXPECT_EQ(cli({"describe", "gitrepo", "simple", "-o", "json"}).exit_code, 2);
  EXPECT_EQ(cli({"apply", "-n", "fleet-default", "-f", file("repo.yaml", kFleetGitRepo)}).exit_code, 2);
}

// `wait` (and `explain`) await every registered cluster the bundle targets, not only the ones the scheduler has
// placed it on: with prod-1 placed and Ready and prod-2 registered (env=prod, targeted) but not placed yet, `wait`
// times out naming prod-2 and explain blocks at target; once prod-2 has its deployment and it is Ready, `wait`
// returns 0. Records as the services write them, in a real hub's KV.
TEST_F(CliTest, WaitAwaitsATargetedClusterTheSchedulerHasNotPlacedOn) {
  ASSERT_EQ(cli({"apply", "-f", file("repo.yaml", kFleetGitRepo)}).exit_code, 0);
  const std::string ws = "fleet-default";
  const std::string bundle = "simple-simple";
  const std::string commit(40, 'c');
  const std::string deployment = std::string(64, 'a') + ":" + std::string(64, 'o');
  events::BundleEvent rendered{.workspace = ws,
                               .gitrepo = "simple",
                               .bundle = bundle,
                               .path = "simple",
                               .commit = commit,
                               .manifest_id = std::string(64, 'a')};
  rendered.id = events::bundleMsgId(ws, bundle, commit, rendered.manifest_id);
  rendered.time = "2026-12-06T08:00:00.000Z";
  rendered.targets = Json::parse(R"([{"name":"prod","clusterSelector":{"matchLabels":{"env":"prod"}}}])").value();
  put(*hub_.bundles, events::bundleKey(ws, bundle),
      events::encode(events::BundleRecord{.workspace = ws,
                                          .gitrepo = "simple",
                                          .bundle = bundle,
                                          .path = "simple",
                                          .commit = commit,
                                          .last_good = rendered}));
  put(*hub_.status, events::gitRepoStatusKey(ws, "simple"),
      events::encode(events::PollStatus{.workspace = ws, .gitrepo = "simple", .commit = commit}));
  put(*hub_.status, events::bundleSummaryKey(ws, bundle),
      events::encode(events::BundleSummary{
          .workspace = ws, .bundle = bundle, .state = "Ready", .gitrepo = "simple", .commit = commit}));
  auto placeOn = [&](const std::string& cluster) {
    put(*hub_.deployments, events::deploymentKey(cluster, ws, bundle),
        events::encode(events::DeploymentRecord{.cluster = cluster,
                                                .workspace = ws,
                                                .bundle = bundle,
                                                .gitrepo = "simple",
                                                .commit = commit,
                                                .deployment_id = deployment,
                                                .generation = 1}));
    put(*hub_.status, events::bundleDeploymentStatusKey(cluster, ws, bundle),
        events::encode(events::BdStatus{.cluster = cluster,
                                        .workspace = ws,
                                        .bundle = bundle,
                                        .deployment_id = deployment,
                                        .generation = 1,
                                        .state = "Ready"}));
  };
  for (const char* cluster : {"prod-1", "prod-2", "dev-1"}) {
    model::Cluster registration;
    registration.metadata.name = cluster;
    registration.metadata.ns = ws;
    registration.metadata.labels = {{"env", std::string(cluster).substr(0, std::string(cluster).find('-'))}};
    put(*hub_.clusters, events::clusterKey(cluster), model::encode(registration));
  }
  placeOn("prod-1");

  auto waited = cli({"wait", "gitrepo", "simple", "--timeout", "2s"});
  EXPECT_EQ(waited.exit_code, 3) << waited.out << waited.err;
  EXPECT_NE(waited.err.find("targets cluster prod-2 but is not placed there yet"), std::string::npos) << waited.err;
  auto explained = Json::parse(cli({"explain", "simple"}).out);
  ASSERT_TRUE(explained.ok());
  EXPECT_EQ(explained->at({"blocked", "stage"})->asString(), "target") << explained->dump();
  EXPECT_EQ(*explained->at({"blocked", "clusters"}), Json::parse(R"(["prod-2"])").value()) << "dev-1 is not targeted";

  placeOn("prod-2");
  waited = cli({"wait", "gitrepo", "simple", "--timeout", "10s"});
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;
  EXPECT_TRUE(Json::parse(cli({"explain", "bundle/" + bundle}).out).value().getBool("ready"));
}

}  // namespace
}  // namespace flotilla::cli
