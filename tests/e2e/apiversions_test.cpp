// End-to-end: the cluster's API versions reach Helm (issue 11, docs/events/register.md). A chart renders a Widget
// only where `.Capabilities.APIVersions.Has "<group>/v1/Widget"`. Someone other than Flotilla installs the Widget
// CRD on cluster 0: its agent sees the CRD through its watch, registers again with the new set, the bundler renders
// the chart again for that cluster only, and the Widget appears there; cluster 1 keeps its deployment. Deleting the
// CRD takes the kind out of the cluster's registered set.
#include <algorithm>
#include <iostream>

#include "flotilla/core/util.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class ApiVersionsTest : public SharedHubTest<ApiVersionsTest> {
 public:
  static HubOptions hubOptions() { return {}; }
};

std::string widgetCrd(const std::string& group) {
  return R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.)" +
         group + R"("},"spec":{"group":")" + group + R"(","scope":"Namespaced",
      "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
      "versions":[{"name":"v1","served":true,"storage":true,
        "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})";
}

//! A chart whose ConfigMap says whether the cluster serves the Widget kind, with a Widget only where it does.
std::map<std::string, std::string> capabilitiesChart(const std::string& ns, const std::string& group) {
  const std::string has = "(.Capabilities.APIVersions.Has \"" + group + "/v1/Widget\")";
  return {
      {"caps/fleet.yaml", "defaultNamespace: " + ns + "\nhelm:\n  releaseName: caps\n"},
      {"caps/Chart.yaml", "apiVersion: v2\nname: caps\nversion: 0.1.0\n"},
      {"caps/templates/cm.yaml",
       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n  value: {{ " + has + " | quote }}\n"},
      {"caps/templates/widget.yaml",
       "{{- if " + has + " }}\napiVersion: " + group + "/v1\nkind: Widget\nmetadata:\n  name: w\n{{- end }}\n"},
  };
}

bool widgetExists(Hub& hub, size_t cluster, const std::string& group, const std::string& ns) {
  return hub.kube(cluster).get(group + "/v1", "Widget", ns, "w").ok();
}

//! The API versions cluster `name`'s registration record holds (clusters/cluster.<name>).
std::vector<std::string> registeredApiVersions(Hub& hub, const std::string& name) {
  for (const auto& record : recordsOf(hub, "clusters", "cluster.")) {
    const Json* cluster_name = record.at({"metadata", "name"});
    const Json* versions = record.at({"status", "agent", "apiVersions"});
    if (cluster_name == nullptr || !cluster_name->isString() || cluster_name->asString() != name ||
        versions == nullptr || !versions->isArray()) {
      continue;
    }
    std::vector<std::string> out;
    for (const auto& entry : versions->asArray()) {
      out.push_back(entry.isString() ? entry.asString() : std::string());
    }
    return out;
  }
  return {};
}

bool registered(Hub& hub, const std::string& cluster, const std::string& entry) {
  auto versions = registeredApiVersions(hub, cluster);
  return std::find(versions.begin(), versions.end(), entry) != versions.end();
}

std::string wantedDeployment(Hub& hub, const std::string& cluster, const std::string& gitrepo) {
  auto items = bundlesOn(hub, cluster, gitrepo);
  return items.empty() ? std::string() : items.front().wanted_deployment;
}

TEST_F(ApiVersionsTest, ACrdInstalledByAnyoneReachesTheChartThroughTheRegistration) {
  const std::string name = "caps-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string group = name + ".example.com";
  const std::string widget_kind = group + "/v1/Widget";
  auto repo = hub().git().createRepo(name);
  ASSERT_TRUE(repo.ok());
  auto commit = hub().git().commitFiles(name, "main", capabilitiesChart(ns, group), "chart");
  ASSERT_TRUE(commit.ok());
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, repo->http, {"caps"})).ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, *commit, clusters()); }, kLands))
      << name << " not Ready";
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(hub(), c, ns, "caps", "value"), "false");
    EXPECT_TRUE(registered(hub(), hub().clusterName(c), "v1/ConfigMap")) << "the agent reports discovery";
    EXPECT_FALSE(registered(hub(), hub().clusterName(c), widget_kind));
  }
  const std::string other_deployment = wantedDeployment(hub(), hub().clusterName(1), name);

  // Someone else installs the CRD on cluster 0.
  auto crd = Json::parse(widgetCrd(group));
  ASSERT_TRUE(crd.ok());
  const auto installed = std::chrono::steady_clock::now();
  ASSERT_TRUE(hub().kube(0).apply(*crd, {.field_manager = "someone-else"}).ok());
  ASSERT_TRUE(Hub::waitFor([&] { return widgetExists(hub(), 0, group, ns); }, kLands))
      << "the Widget never reached cluster 0; registered: " << registered(hub(), hub().clusterName(0), widget_kind);
  std::cout
      << "CRD installed -> Widget applied: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - installed).count()
      << " ms\n";
  EXPECT_TRUE(registered(hub(), hub().clusterName(0), widget_kind));
  EXPECT_TRUE(Hub::waitFor(
      [&] { return bundleState(hub(), hub().clusterName(0), name, bundleId(name, "caps"), "Ready"); }, kLands));
  EXPECT_EQ(configMapValue(hub(), 0, ns, "caps", "value"), "true");
  // Cluster 1 does not serve the kind: same render, no redeploy.
  EXPECT_FALSE(registered(hub(), hub().clusterName(1), widget_kind));
  EXPECT_EQ(wantedDeployment(hub(), hub().clusterName(1), name), other_deployment);
  EXPECT_EQ(configMapValue(hub(), 1, ns, "caps", "value"), "false");

  // Deleting the CRD again is reported by the agent (agent_integration_test ApiVersionsAgentTest) and the bundler
  // re-renders, but the re-render's table equals the first one, and its BundleEvent Msg-Id (commit, table, digest
  // of the content) equals the first event's: JetStream drops it as a duplicate within the 10-minute window, so
  // the cluster keeps the Widget variant. The same holds for any cluster change that returns to earlier facts
  // (labels A -> B -> A). Known gap, not tested here until the bundler's re-render Msg-Id is fixed.
  ASSERT_TRUE(hub().kube(0).remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group).ok());
  EXPECT_TRUE(Hub::waitFor([&] { return !registered(hub(), hub().clusterName(0), widget_kind); }, kLands));
}

}  // namespace
}  // namespace flotilla::e2e
