// Per-cluster variants end to end against a real nats-server and the pinned helm: the bundler (in process, with
// its clusters watcher) renders a Helm bundle whose values are templated from cluster labels, the scheduler (in
// process) registers clusters and sends DeployEvents. Two clusters with the same labels share one manifest, a
// cluster with other labels gets another; a label change re-renders and redeploys only that cluster; a cluster
// registered later gets its own render; a chart reading .Capabilities.APIVersions renders once per reported
// API-version set, and a re-registration with a new set re-renders and redeploys that cluster.
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/bundler/bundler.h"
#include "flotilla/bundler/flags.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/variants.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/hub.h"
#include "flotilla/source/archive.h"
#include "test_util.h"

namespace flotilla::bundler {
namespace {

using namespace std::chrono_literals;

constexpr const char* kWs = "fleet-default";
constexpr const char* kGitRepo = "apps";

bool waitFor(const std::function<bool()>& check, std::chrono::milliseconds timeout = 30s) {
  return harness::waitUntil(check, timeout);
}

const std::map<std::string, std::string> kFiles = {
    {"web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"},
    {"web/templates/cm.yaml",
     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  env: {{ .Values.env | quote }}\n"
     "  tier: {{ .Values.tier | quote }}\n"},
    {"web/fleet.yaml",
     "helm:\n  releaseName: web\n  values:\n    env: ${ .ClusterLabels.env }\n"
     "    tier: global.fleet.clusterLabels.tier\n"},
    {"plain/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n"},
};

// A chart that renders a Widget only where the cluster serves example.com/v1 (reported at registration).
const std::map<std::string, std::string> kCapabilitiesFiles = {
    {"caps/Chart.yaml", "apiVersion: v2\nname: caps\nversion: 0.1.0\n"},
    {"caps/templates/cm.yaml",
     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n"
     "  widgets: {{ .Capabilities.APIVersions.Has \"example.com/v1\" | quote }}\n"},
    {"caps/templates/widget.yaml",
     "{{- if .Capabilities.APIVersions.Has \"example.com/v1/Widget\" }}\n"
     "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n{{- end }}\n"},
    {"caps/fleet.yaml", "helm:\n  releaseName: caps\n"},
};

class VariantsIntegrationTest : public harness::HubTest {
 protected:
  void SetUp() override {
    helm_ = render::testing::pinnedTool("helm");
    if (helm_.empty()) {
      GTEST_SKIP() << "helm is not in .tools/bin (run scripts/setup)";
    }
    ASSERT_NO_FATAL_FAILURE(startHub("variants-test"));
    ASSERT_NO_FATAL_FAILURE(makeScratchDir("variants-work", work_dir_));

    model::GitRepo repo;  // no targets: every cluster of the workspace (the implicit default group)
    repo.metadata.name = kGitRepo;
    repo.metadata.ns = kWs;
    repo.spec.repo = "https://example.com/apps.git";
    ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(kWs, kGitRepo), model::encode(repo).dump()).ok());

    scheduler_metrics_ = std::make_unique<Metrics>("scheduler");
    scheduler::SchedulerOptions options{.fetch_timeout = 200ms, .ack_wait = 10s, .retry_base = 100ms, .retry_max = 1s};
    auto created = scheduler::Scheduler::create(hub_, *scheduler_metrics_, options);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    scheduler_ = std::move(created).value();
    ASSERT_TRUE(scheduler_->start().ok());
    ASSERT_TRUE(waitFor([&] { return scheduler_->caughtUp(); }));
  }

  void TearDown() override {
    if (bundler_) {
      bundler_->stop();
    }
    bundler_.reset();
    if (scheduler_) {
      scheduler_->stop();
    }
    scheduler_.reset();
    stopHub();
    if (!work_dir_.empty()) {
      removeAll(work_dir_);
    }
  }

  void startBundler() {
    render::RendererBinaries binaries;
    binaries.helm = helm_;
    BundlerOptions options;
    options.handler.work_dir = work_dir_;
    options.handler.retry_base = 100ms;
    options.handler.retry_max = 500ms;
    options.ack_wait = 30s;
    HandlerBus bus = hub_;
    bundler_ = std::make_unique<Bundler>(bus, render::makeRenderers(binaries), bundler_metrics_, options);
    auto started = bundler_->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
  }

  void registerCluster(const std::string& name, events::StringMap labels, std::vector<std::string> api_versions = {}) {
    auto reply = harness::requestRegistration(hub_, name, kWs, std::move(labels), std::move(api_versions));
    ASSERT_TRUE(reply.ok()) << reply.error().describe();
    auto decoded = events::parsePayload<events::RegisterReply>(reply->data());
    ASSERT_TRUE(decoded.ok() && decoded->accepted) << reply->data();
  }

  void publishCommit(const std::string& commit, const std::map<std::string, std::string>& files = kFiles) {
    source::Archive archive;
    archive.commit = commit;
    for (const auto& [path, content] : files) {
      archive.files.push_back(source::File{path, "100644", content});
    }
    const std::string encoded = source::encode(archive);
    const std::string object = source::objectName(encoded);
    ASSERT_TRUE(hub_.sources->put(object, encoded).ok());
    events::CommitEvent event;
    event.workspace = kWs;
    event.gitrepo = kGitRepo;
    event.repo = "https://example.com/apps.git";
    event.commit = commit;
    event.source_object = object;
    event.id = events::commitMsgId(kWs, kGitRepo, commit, 0);
    event.time = log::nowRfc3339();
    ASSERT_TRUE(hub_.js->publish(events::commitSubject(kWs, kGitRepo), events::encode(event).dump(), event.id).ok());
  }

  bus::PullConsumer agent(const std::string& cluster) { return harness::agentDurable(hub_, cluster); }

  //! Registers prod-a (env prod, tier gold), starts the bundler on `commit` and waits for apps-web's first
  //! deploy on prod-a's durable, returned in `a`. Call inside ASSERT_NO_FATAL_FAILURE.
  void deployWebToProdA(const std::string& commit, bus::PullConsumer& a) {
    registerCluster("prod-a", {{"env", "prod"}, {"tier", "gold"}});
    a = agent("prod-a");
    startBundler();
    publishCommit(commit);
    auto first = deploys(a, "apps-web", 1);
    ASSERT_EQ(first.size(), 1u);
  }

  //! DeployEvents for `bundle` until `count` arrived or `timeout` passed (other bundles' events are acked and
  //! skipped).
  std::vector<events::DeployEvent> deploys(bus::PullConsumer& consumer, const std::string& bundle, size_t count,
                                           std::chrono::milliseconds timeout = 30s) {
    return harness::fetchPayloads<events::DeployEvent>(
        consumer, {.count = count, .timeout = timeout, .wait = 200ms, .batch = 4},
        [&](const bus::Message& message, const Result<events::DeployEvent>& event) {
          EXPECT_TRUE(event.ok()) << message.data();
          return event.ok() && event->bundle == bundle;
        });
  }

  std::string manifestText(const std::string& manifest_id) {
    auto data = hub_.manifests->get(events::manifestObjectName(manifest_id));
    EXPECT_TRUE(data.ok()) << manifest_id;
    return data.ok() ? *data : std::string();
  }

  std::string helm_;
  std::string work_dir_;
  std::unique_ptr<Metrics> scheduler_metrics_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  Metrics bundler_metrics_{"bundler"};
  std::unique_ptr<Bundler> bundler_;
};

TEST_F(VariantsIntegrationTest, TemplatedValuesPerClusterAndLabelChanges) {
  registerCluster("prod-a", {{"env", "prod"}, {"tier", "gold"}});
  registerCluster("prod-b", {{"env", "prod"}, {"tier", "gold"}});
  registerCluster("dev-c", {{"env", "dev"}, {"tier", "bronze"}});
  auto a = agent("prod-a");
  auto b = agent("prod-b");
  auto c = agent("dev-c");
  startBundler();
  publishCommit("1111111111111111111111111111111111111111");
  const std::string web = "apps-web";

  auto deploy_a = deploys(a, web, 1);
  auto deploy_b = deploys(b, web, 1);
  auto deploy_c = deploys(c, web, 1);
  ASSERT_EQ(deploy_a.size(), 1u);
  ASSERT_EQ(deploy_b.size(), 1u);
  ASSERT_EQ(deploy_c.size(), 1u);
  // Same labels share one manifest; other labels get their own.
  EXPECT_EQ(deploy_a[0].manifest_id, deploy_b[0].manifest_id);
  EXPECT_NE(deploy_a[0].manifest_id, deploy_c[0].manifest_id);
  EXPECT_NE(manifestText(deploy_a[0].manifest_id).find(R"("env":"prod")"), std::string::npos);
  EXPECT_NE(manifestText(deploy_a[0].manifest_id).find(R"("tier":"gold")"), std::string::npos);
  EXPECT_NE(manifestText(deploy_c[0].manifest_id).find(R"("env":"dev")"), std::string::npos);
  EXPECT_NE(manifestText(deploy_c[0].manifest_id).find(R"("tier":"bronze")"), std::string::npos);
  // The options carry the templated values.
  EXPECT_EQ(deploy_c[0].options.at({"helm", "values", "env"})->asString(), "dev");
  // Two distinct renders for three clusters; the bundle without templates kept its single render.
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 2);

  // The BundleEvent names a variants table in the object store.
  auto record = hub_.bundles->get(events::bundleKey(kWs, web));
  ASSERT_TRUE(record.ok());
  auto record_json = Json::parse(record->value);
  ASSERT_TRUE(record_json.ok());
  const std::string table_name = record_json->at({"lastGood", "variantsObject"})->asString();
  auto table_text = hub_.manifests->get(table_name);
  ASSERT_TRUE(table_text.ok()) << table_name;
  auto table = events::decodeBundleVariants(*Json::parse(*table_text));
  ASSERT_TRUE(table.ok()) << table.error().describe();
  EXPECT_EQ(table->clusters.size(), 3u);
  EXPECT_EQ(table->variants.size(), 2u);

  // prod-b moves to dev: only prod-b is re-rendered (cache for the others) and redeployed.
  registerCluster("prod-b", {{"env", "staging"}, {"tier", "gold"}});
  auto redeploy_b = deploys(b, web, 1);
  ASSERT_EQ(redeploy_b.size(), 1u);
  EXPECT_NE(redeploy_b[0].manifest_id, deploy_b[0].manifest_id);
  EXPECT_GT(redeploy_b[0].generation, deploy_b[0].generation);
  EXPECT_NE(manifestText(redeploy_b[0].manifest_id).find(R"("env":"staging")"), std::string::npos);
  EXPECT_TRUE(waitFor([&] { return bundler_metrics_.value("rerenders_total", {{"result", "published"}}) >= 1; }));
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 3);  // one new render; two variants from the cache
  EXPECT_TRUE(deploys(a, web, 1, 1500ms).empty()) << "prod-a must not be redeployed";
  EXPECT_TRUE(deploys(c, web, 1, 500ms).empty()) << "dev-c must not be redeployed";

  // A cluster registered now gets the bundle once the bundler has rendered for it.
  auto d = agent("dev-d");
  registerCluster("dev-d", {{"env", "dev"}, {"tier", "bronze"}});
  auto deploy_d = deploys(d, web, 1);
  ASSERT_EQ(deploy_d.size(), 1u);
  EXPECT_EQ(deploy_d[0].manifest_id, deploy_c[0].manifest_id);
}

// A template that fails for one cluster (a missing label: Fleet's missingkey=error) makes the bundle a render
// error naming fleet.yaml, the value path, the cluster and the key; the deployments already running stay. Adding
// the label re-renders the bundle, clears the error and deploys the cluster.
TEST_F(VariantsIntegrationTest, TemplateErrorForOneClusterIsFixedByItsLabels) {
  bus::PullConsumer a;
  ASSERT_NO_FATAL_FAILURE(deployWebToProdA("2222222222222222222222222222222222222222", a));
  const std::string web = "apps-web";

  auto x = agent("x-1");
  registerCluster("x-1", {{"tier", "gold"}});  // no env label
  auto status_key = renderStatusKey(kWs, web);
  ASSERT_TRUE(waitFor([&] {
    auto entry = hub_.status->get(status_key);
    return entry.ok() && entry->value.find("\"error\":{") != std::string::npos;
  })) << "no render error recorded";
  auto status = Json::parse(hub_.status->get(status_key)->value);
  ASSERT_TRUE(status.ok());
  const std::string message = status->at({"error", "message"})->asString();
  EXPECT_EQ(status->at({"error", "file"})->asString(), "web/fleet.yaml");
  EXPECT_NE(message.find("helm.values.env"), std::string::npos) << message;
  EXPECT_NE(message.find("\"x-1\""), std::string::npos) << message;
  EXPECT_NE(message.find("no entry for key \"env\""), std::string::npos) << message;
  EXPECT_TRUE(deploys(a, web, 1, 1s).empty()) << "prod-a keeps its deployment";
  EXPECT_TRUE(deploys(x, web, 1, 500ms).empty()) << "x-1 gets nothing while the bundle fails";

  registerCluster("x-1", {{"tier", "gold"}, {"env", "qa"}});
  auto fixed = deploys(x, web, 1);
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_NE(manifestText(fixed[0].manifest_id).find(R"("env":"qa")"), std::string::npos);
  EXPECT_TRUE(waitFor([&] {
    auto entry = hub_.status->get(status_key);
    return entry.ok() && entry->value.find("\"error\":null") != std::string::npos;
  }));
  EXPECT_TRUE(deploys(a, web, 1, 500ms).empty());
}

// A cluster that changed while no bundler ran is picked up at start: the bundler re-renders the per-cluster
// bundles of every workspace once and redeploys what changed.
TEST_F(VariantsIntegrationTest, ChangesWhileTheBundlerWasDownAreRenderedAtStart) {
  bus::PullConsumer a;
  ASSERT_NO_FATAL_FAILURE(deployWebToProdA("3333333333333333333333333333333333333333", a));
  const std::string web = "apps-web";
  bundler_->stop();
  bundler_.reset();

  registerCluster("prod-a", {{"env", "dev"}, {"tier", "gold"}});
  EXPECT_TRUE(deploys(a, web, 1, 1s).empty()) << "nothing changes without a bundler";
  startBundler();
  auto again = deploys(a, web, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(manifestText(again[0].manifest_id).find(R"("env":"dev")"), std::string::npos);
}

// The API versions an agent reports reach helm as --api-versions: clusters with the same set share one render,
// a cluster with another set gets its own, one without a set renders with helm's defaults, and a re-registration
// with a new set (a CRD installed) re-renders and redeploys only that cluster.
TEST_F(VariantsIntegrationTest, ApiVersionSetsAreARenderInputAndANewSetRedeploys) {
  const std::vector<std::string> plain = {"apps/v1", "apps/v1/Deployment", "v1", "v1/ConfigMap"};
  const std::vector<std::string> widgets = {"apps/v1", "apps/v1/Deployment", "example.com/v1", "example.com/v1/Widget",
                                            "v1",      "v1/ConfigMap"};
  registerCluster("caps-a", {}, plain);
  registerCluster("caps-b", {}, plain);
  registerCluster("caps-c", {}, widgets);
  registerCluster("caps-d", {});  // no set reported
  auto a = agent("caps-a");
  auto b = agent("caps-b");
  auto c = agent("caps-c");
  auto d = agent("caps-d");
  startBundler();
  publishCommit("4444444444444444444444444444444444444444", kCapabilitiesFiles);
  const std::string caps = "apps-caps";

  auto deploy_a = deploys(a, caps, 1);
  auto deploy_b = deploys(b, caps, 1);
  auto deploy_c = deploys(c, caps, 1);
  auto deploy_d = deploys(d, caps, 1);
  ASSERT_EQ(deploy_a.size(), 1u);
  ASSERT_EQ(deploy_b.size(), 1u);
  ASSERT_EQ(deploy_c.size(), 1u);
  ASSERT_EQ(deploy_d.size(), 1u);
  EXPECT_EQ(deploy_a[0].manifest_id, deploy_b[0].manifest_id) << "the same set shares one render";
  EXPECT_NE(deploy_a[0].manifest_id, deploy_c[0].manifest_id);
  const std::string without = manifestText(deploy_a[0].manifest_id);
  const std::string with = manifestText(deploy_c[0].manifest_id);
  EXPECT_NE(without.find(R"("widgets":"false")"), std::string::npos) << without;
  EXPECT_EQ(without.find(R"("kind":"Widget")"), std::string::npos) << without;
  EXPECT_NE(with.find(R"("widgets":"true")"), std::string::npos) << with;
  EXPECT_NE(with.find(R"("kind":"Widget")"), std::string::npos) << with;
  EXPECT_NE(manifestText(deploy_d[0].manifest_id).find(R"("widgets":"false")"), std::string::npos);
  // a+b, c, d: three render inputs (d differs from a and b by its set, even though the output is the same).
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 3);

  // caps-a now serves example.com/v1 (a CRD was installed): its agent registers again with the new set.
  registerCluster("caps-a", {}, widgets);
  auto redeploy_a = deploys(a, caps, 1);
  ASSERT_EQ(redeploy_a.size(), 1u);
  EXPECT_EQ(redeploy_a[0].manifest_id, deploy_c[0].manifest_id) << "caps-a now shares caps-c's render";
  EXPECT_GT(redeploy_a[0].generation, deploy_a[0].generation);
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 3) << "no new render: caps-c's input was cached";
  EXPECT_TRUE(deploys(b, caps, 1, 1500ms).empty()) << "caps-b must not be redeployed";
  EXPECT_TRUE(deploys(c, caps, 1, 500ms).empty()) << "caps-c must not be redeployed";
}

}  // namespace
}  // namespace flotilla::bundler
