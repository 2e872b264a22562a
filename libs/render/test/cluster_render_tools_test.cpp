// renderForCluster with the pinned helm from .tools/bin: templated values and the cluster's Kubernetes version.
#include <gtest/gtest.h>

#include "flotilla/render/cluster_render.h"
#include "flotilla/render/external_renderers.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

const char* kChart = "apiVersion: v2\nname: app\nversion: 0.1.0\n";
const char* kTemplate = R"(apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cfg
data:
  env: {{ .Values.env | quote }}
  replicas: {{ .Values.replicas | quote }}
  replicasKind: {{ kindOf .Values.replicas | quote }}
)";
const char* kFleetYaml = R"(helm:
  releaseName: app
  values:
    env: ${ .ClusterLabels.env }
    replicas: ${ index .ClusterValues "replicas" | default 1 }
)";

ClusterFacts cluster(const std::string& name, const std::string& env) {
  ClusterFacts facts;
  facts.name = name;
  facts.workspace = "ws";
  facts.labels = {{"env", env}};
  return facts;
}

TEST(RenderForClusterHelm, TemplatedValuesReachTheChart) {
  const std::string helm = testing::pinnedTool("helm");
  if (helm.empty()) {
    GTEST_SKIP() << "helm is not in .tools/bin (run scripts/setup)";
  }
  testing::TempTree tree(
      {{"app/Chart.yaml", kChart}, {"app/templates/cm.yaml", kTemplate}, {"app/fleet.yaml", kFleetYaml}});
  RenderTools tools{.helm_binary = helm, .kustomize_binary = "none"};
  auto prod = cluster("prod-1", "prod");
  prod.template_values = Json::obj({{"replicas", 5}});
  auto rendered = renderForCluster(tree.root(), prod, tools);
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_EQ(rendered->size(), 1u);
  const auto& bundle = rendered->front();
  ASSERT_EQ(bundle.decision, ClusterBundle::Decision::kDeploy) << (bundle.error ? bundle.error->message : "");
  EXPECT_EQ(bundle.renderer, "helm");
  ASSERT_TRUE(bundle.manifest.has_value());
  EXPECT_NE(bundle.manifest->text.find(R"("env":"prod")"), std::string::npos) << bundle.manifest->text;
  // The template produced a number, and helm saw a number (not the string "5").
  EXPECT_NE(bundle.manifest->text.find(R"("replicas":"5")"), std::string::npos) << bundle.manifest->text;
  EXPECT_NE(bundle.manifest->text.find(R"("replicasKind":"float64")"), std::string::npos) << bundle.manifest->text;
  ASSERT_TRUE(bundle.options.helm && bundle.options.helm->values);
  ASSERT_NE(bundle.options.helm->values->find("replicas"), nullptr);
  EXPECT_EQ(*bundle.options.helm->values->find("replicas"), Json(5));

  auto dev = renderForCluster(tree.root(), cluster("dev-1", "dev"), tools);
  ASSERT_TRUE(dev.ok());
  ASSERT_TRUE(dev->front().manifest.has_value());
  EXPECT_NE(dev->front().manifest->text.find(R"("env":"dev")"), std::string::npos);
  EXPECT_NE(dev->front().manifest->text.find(R"("replicas":"1")"), std::string::npos);
  EXPECT_NE(dev->front().manifest->manifest_id, bundle.manifest->manifest_id);
  // The same labels and values give the same manifest.
  auto prod2 = cluster("prod-2", "prod");
  prod2.template_values = Json::obj({{"replicas", 5}});
  auto same = renderForCluster(tree.root(), prod2, tools);
  ASSERT_TRUE(same.ok());
  ASSERT_TRUE(same->front().manifest.has_value());
  EXPECT_EQ(same->front().manifest->manifest_id, bundle.manifest->manifest_id);
}

TEST(RenderForClusterHelm, KubernetesVersionOfTheCluster) {
  const std::string helm = testing::pinnedTool("helm");
  if (helm.empty()) {
    GTEST_SKIP() << "helm is not in .tools/bin (run scripts/setup)";
  }
  testing::TempTree tree(
      {{"Chart.yaml", kChart},
       {"templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube\ndata:\n"
        "  version: {{ .Capabilities.KubeVersion.Version | quote }}\n"
        "  monitoring: {{ .Capabilities.APIVersions.Has \"monitoring.coreos.com/v1\" | quote }}\n"}});
  RenderTools tools{.helm_binary = helm, .kustomize_binary = "none"};
  auto old_cluster = cluster("old", "prod");
  old_cluster.kubernetes_version = "v1.27.4";
  auto rendered = renderForCluster(tree.root(), old_cluster, tools);
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_TRUE(rendered->front().manifest.has_value())
      << (rendered->front().error ? rendered->front().error->message : "");
  EXPECT_NE(rendered->front().manifest->text.find(R"("version":"v1.27.4")"), std::string::npos)
      << rendered->front().manifest->text;
  EXPECT_NE(rendered->front().manifest->text.find(R"("monitoring":"false")"), std::string::npos);
  auto new_cluster = cluster("new", "prod");
  new_cluster.kubernetes_version = "v1.31.0";
  new_cluster.api_versions = {"monitoring.coreos.com/v1"};
  auto other = renderForCluster(tree.root(), new_cluster, tools);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->front().manifest.has_value());
  EXPECT_NE(other->front().manifest->text.find(R"("version":"v1.31.0")"), std::string::npos);
  EXPECT_NE(other->front().manifest->text.find(R"("monitoring":"true")"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::render
