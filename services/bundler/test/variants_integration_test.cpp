// Per-cluster variants end to end against a real nats-server and the pinned helm: the bundler (in process, with
// its clusters watcher) renders a Helm bundle whose values are templated from cluster labels, the scheduler (in
// process) registers clusters and sends DeployEvents. Two clusters with the same labels share one manifest, a
// cluster with other labels gets another; a label change re-renders and redeploys only that cluster; a cluster
// registered later gets its own render; a chart reading .Capabilities.APIVersions renders once per reported
// API-version set, and a re-registration with a new set re-renders and redeploys that cluster.
#include "variants_fixture.h"

namespace flotilla::bundler {
namespace {

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

  const auto deploy_a = deployOf(a, web);
  const auto deploy_b = deployOf(b, web);
  const auto deploy_c = deployOf(c, web);
  ASSERT_FALSE(HasFailure());
  // Same labels share one manifest; other labels get their own.
  EXPECT_EQ(deploy_a.manifest_id, deploy_b.manifest_id);
  EXPECT_NE(deploy_a.manifest_id, deploy_c.manifest_id);
  EXPECT_NE(manifestText(deploy_a.manifest_id).find(R"("env":"prod")"), std::string::npos);
  EXPECT_NE(manifestText(deploy_a.manifest_id).find(R"("tier":"gold")"), std::string::npos);
  EXPECT_NE(manifestText(deploy_c.manifest_id).find(R"("env":"dev")"), std::string::npos);
  EXPECT_NE(manifestText(deploy_c.manifest_id).find(R"("tier":"bronze")"), std::string::npos);
  // The options carry the templated values.
  EXPECT_EQ(deploy_c.options.at({"helm", "values", "env"})->asString(), "dev");
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
  const auto redeploy_b = deployOf(b, web);
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(redeploy_b.manifest_id, deploy_b.manifest_id);
  EXPECT_GT(redeploy_b.generation, deploy_b.generation);
  EXPECT_NE(manifestText(redeploy_b.manifest_id).find(R"("env":"staging")"), std::string::npos);
  EXPECT_TRUE(waitFor([&] { return bundler_metrics_.value("rerenders_total", {{"result", "published"}}) >= 1; }));
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 3);  // one new render; two variants from the cache
  EXPECT_TRUE(deploys(a, web, 1, 1500ms).empty()) << "prod-a must not be redeployed";
  EXPECT_TRUE(deploys(c, web, 1, 500ms).empty()) << "dev-c must not be redeployed";

  // A cluster registered now gets the bundle once the bundler has rendered for it.
  auto d = agent("dev-d");
  registerCluster("dev-d", {{"env", "dev"}, {"tier", "bronze"}});
  const auto deploy_d = deployOf(d, web);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(deploy_d.manifest_id, deploy_c.manifest_id);
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

  const auto deploy_a = deployOf(a, caps);
  const auto deploy_b = deployOf(b, caps);
  const auto deploy_c = deployOf(c, caps);
  const auto deploy_d = deployOf(d, caps);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(deploy_a.manifest_id, deploy_b.manifest_id) << "the same set shares one render";
  EXPECT_NE(deploy_a.manifest_id, deploy_c.manifest_id);
  const std::string without = manifestText(deploy_a.manifest_id);
  const std::string with = manifestText(deploy_c.manifest_id);
  EXPECT_NE(without.find(R"("widgets":"false")"), std::string::npos) << without;
  EXPECT_EQ(without.find(R"("kind":"Widget")"), std::string::npos) << without;
  EXPECT_NE(with.find(R"("widgets":"true")"), std::string::npos) << with;
  EXPECT_NE(with.find(R"("kind":"Widget")"), std::string::npos) << with;
  EXPECT_NE(manifestText(deploy_d.manifest_id).find(R"("widgets":"false")"), std::string::npos);
  // a+b, c, d: three render inputs (d differs from a and b by its set, even though the output is the same).
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 3);

  // caps-a now serves example.com/v1 (a CRD was installed): its agent registers again with the new set.
  registerCluster("caps-a", {}, widgets);
  const auto redeploy_a = deployOf(a, caps);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(redeploy_a.manifest_id, deploy_c.manifest_id) << "caps-a now shares caps-c's render";
  EXPECT_GT(redeploy_a.generation, deploy_a.generation);
  EXPECT_EQ(bundler_metrics_.value("variant_renders_total"), 3) << "no new render: caps-c's input was cached";
  EXPECT_TRUE(deploys(b, caps, 1, 1500ms).empty()) << "caps-b must not be redeployed";
  EXPECT_TRUE(deploys(c, caps, 1, 500ms).empty()) << "caps-c must not be redeployed";
}

}  // namespace
}  // namespace flotilla::bundler
