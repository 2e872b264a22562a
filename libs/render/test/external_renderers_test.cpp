// Helm and kustomize rendering with the pinned binaries from .tools/bin (scripts/setup builds them).
#include "flotilla/render/external_renderers.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/render/render_bundle.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::configMap;
using testing::TempTree;

// A checkout whose root is <tmp>/src, like the handler's (scratch dirs go next to it).
class Checkout : public TempTree {
 public:
  Checkout() { mkdir("src"); }
  [[nodiscard]] std::string src() const { return root() + "/src"; }
  void add(const std::string& path, const std::string& content) const { write("src/" + path, content); }
};

const char* kChartYaml = "apiVersion: v2\nname: demo\nversion: 0.1.0\n";
const char* kTemplate =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\n"
    "data:\n  greeting: {{ .Values.greeting | quote }}\n  replicas: {{ .Values.replicas | quote }}\n"
    "  namespace: {{ .Release.Namespace }}\n";

RenderRequest request(const Checkout& checkout, const std::string& path, model::BundleDeploymentOptions options = {}) {
  return RenderRequest{checkout.src(), path, "repo-app", std::move(options), RenderLimits{}};
}

const RenderedObject* byName(const std::vector<RenderedObject>& objects, const std::string& name) {
  for (const auto& o : objects) {
    if (o.object.at({"metadata", "name"}) != nullptr && o.object.at({"metadata", "name"})->asString() == name) {
      return &o;
    }
  }
  return nullptr;
}

TEST(HelmRenderer, LocalChartWithValuesAndValuesFiles) {
  REQUIRE_TOOL(helm, "helm");
  Checkout checkout;
  checkout.add("app/Chart.yaml", kChartYaml);
  checkout.add("app/values.yaml", "greeting: hello\nreplicas: 1\n");
  checkout.add("app/templates/cm.yaml", kTemplate);
  checkout.add("app/templates/empty.yaml", "{{- if false }}\nnope: 1\n{{- end }}\n");
  checkout.add("app/crds/crd.yaml",
               "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: "
               "widgets.example.com\nspec: {}\n");
  checkout.add("app/prod-values.yaml", "replicas: 5\n");
  model::BundleDeploymentOptions options;
  options.default_namespace = "web";
  options.helm = model::HelmOptions{};
  options.helm->values = Json::parse(R"({"greeting":"from fleet.yaml","replicas":2})").value();
  options.helm->values_files = {"prod-values.yaml"};
  auto objects = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 2u);
  const auto* cm = byName(*objects, "repo-app-cfg");  // release name defaults to the bundle ID
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ(cm->object.at({"data", "greeting"})->asString(), "from fleet.yaml");
  EXPECT_EQ(cm->object.at({"data", "replicas"})->asString(), "5");  // valuesFiles win over values
  EXPECT_EQ(cm->object.at({"data", "namespace"})->asString(), "web");
  EXPECT_EQ(cm->file, "app/templates/cm.yaml");
  ASSERT_NE(byName(*objects, "widgets.example.com"), nullptr);
  // Scratch directories are gone.
  for (const auto& entry : std::filesystem::directory_iterator(checkout.root())) {
    EXPECT_EQ(entry.path().filename(), "src");
  }
}

TEST(HelmRenderer, ReleaseNameAndChartPathFromOptions) {
  REQUIRE_TOOL(helm, "helm");
  Checkout checkout;
  checkout.add("app/fleet.yaml", "helm: {chart: ./chart, releaseName: rel}\n");
  checkout.add("app/chart/Chart.yaml", kChartYaml);
  checkout.add("app/chart/templates/cm.yaml", kTemplate);
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->chart = "./chart";
  options.helm->release_name = "rel";
  auto objects = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 1u);
  EXPECT_EQ((*objects)[0].object.at({"metadata", "name"})->asString(), "rel-cfg");
  EXPECT_EQ((*objects)[0].object.at({"data", "namespace"})->asString(), "default");
  EXPECT_EQ((*objects)[0].file, "app/chart/templates/cm.yaml");
}

// helm template of the chart at app/ (kChartYaml) whose only template is `file` with `content`.
auto renderOneTemplate(const std::string& helm, const std::string& file, const std::string& content) {
  Checkout checkout;
  checkout.add("app/Chart.yaml", kChartYaml);
  checkout.add(file, content);
  return HelmRenderer(helm).render(request(checkout, "app"));
}

TEST(HelmRenderer, TemplateErrorsNameTheTemplateFile) {
  REQUIRE_TOOL(helm, "helm");
  auto objects = renderOneTemplate(helm, "app/templates/cm.yaml",
                                   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.x.y.z }}\n");
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(objects.error().where, "app/templates/cm.yaml:4") << objects.error().message;
  EXPECT_NE(objects.error().message.find("helm template failed"), std::string::npos);
}

TEST(HelmRenderer, RenderedNonObjectsAreErrors) {
  REQUIRE_TOOL(helm, "helm");
  auto objects = renderOneTemplate(helm, "app/templates/bad.yaml", "kind: ConfigMap\nmetadata:\n  name: x\n");
  ASSERT_FALSE(objects.ok());
  EXPECT_TRUE(startsWith(objects.error().where, "app/templates/bad.yaml")) << objects.error().where;
  EXPECT_NE(objects.error().message.find("apiVersion is missing"), std::string::npos);
}

TEST(HelmRenderer, AnUnreachableChartRepositoryIsARenderErrorNamingFleetYaml) {
  REQUIRE_TOOL(helm, "helm");
  Checkout checkout;
  checkout.add("app/fleet.yaml", "helm: {repo: http://127.0.0.1:9/charts, chart: nginx}\n");
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->repo = "http://127.0.0.1:9/charts";  // the discard port: connection refused
  options.helm->chart = "nginx";
  auto objects = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(objects.error().where, "app/fleet.yaml");
  EXPECT_NE(objects.error().message.find("helm repo add"), std::string::npos) << objects.error().message;
}

TEST(HelmRenderer, ValuesFilesMustStayInsideTheCheckout) {
  REQUIRE_TOOL(helm, "helm");
  Checkout checkout;
  checkout.add("app/Chart.yaml", kChartYaml);
  checkout.add("app/templates/cm.yaml", kTemplate);
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->values_files = {"../../../../etc/passwd"};
  auto objects = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
}

TEST(HelmRenderer, ATimeoutIsReportedAsARenderError) {
  Checkout checkout;
  checkout.add("app/Chart.yaml", kChartYaml);
  // Stands in for a chart that never finishes rendering: only the time limit is under test.
  checkout.write("slow-helm", "#!/bin/sh\nsleep 30\n");
  std::filesystem::permissions(checkout.root() + "/slow-helm", std::filesystem::perms::owner_all);
  auto req = request(checkout, "app");
  req.limits.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto objects = HelmRenderer(checkout.root() + "/slow-helm").render(req);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(objects.error().message.find("did not finish"), std::string::npos);
}

TEST(KustomizeRenderer, BuildsAnOverlayOfABase) {
  REQUIRE_TOOL(kustomize, "kustomize");
  Checkout checkout;
  checkout.add("k/base/kustomization.yaml", "resources: [cm.yaml]\n");
  checkout.add("k/base/cm.yaml", configMap("cfg"));
  checkout.add("k/overlays/prod/kustomization.yaml",
               "resources: [../../base]\nnamePrefix: prod-\ncommonLabels: {env: prod}\n");
  model::BundleDeploymentOptions options;
  options.kustomize = model::KustomizeOptions{"overlays/prod"};
  auto objects = KustomizeRenderer(kustomize).render(request(checkout, "k", options));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 1u);
  EXPECT_EQ((*objects)[0].object.at({"metadata", "name"})->asString(), "prod-cfg");
  EXPECT_EQ((*objects)[0].object.at({"metadata", "labels", "env"})->asString(), "prod");
  EXPECT_EQ((*objects)[0].file, "k/overlays/prod/kustomization.yaml");
}

TEST(KustomizeRenderer, ErrorsNameTheKustomization) {
  REQUIRE_TOOL(kustomize, "kustomize");
  Checkout checkout;
  checkout.add("k/kustomization.yaml", "resources: [missing.yaml]\n");
  auto objects = KustomizeRenderer(kustomize).render(request(checkout, "k"));
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().where, "k/kustomization.yaml");
  EXPECT_NE(objects.error().message.find("missing.yaml"), std::string::npos) << objects.error().message;
  EXPECT_EQ(objects.error().message.find(checkout.src()), std::string::npos) << "absolute paths leak";
}

TEST(KustomizeRenderer, RemoteBasesAreNotFetched) {
  REQUIRE_TOOL(kustomize, "kustomize");
  Checkout checkout;
  checkout.add("k/kustomization.yaml", "resources:\n- https://example.com/some/remote.yaml\n");
  auto req = request(checkout, "k");
  req.limits.timeout = std::chrono::seconds(20);
  auto objects = KustomizeRenderer(kustomize).render(req);
  ASSERT_FALSE(objects.ok());
  EXPECT_EQ(objects.error().kind, ErrorKind::kInvalid);
}

TEST(RenderBundleWithHelm, CustomizationsWithOtherValuesGetTheirOwnManifest) {
  REQUIRE_TOOL(helm, "helm");
  Checkout checkout;
  checkout.add("app/fleet.yaml",
               "defaultNamespace: web\nhelm:\n  values: {greeting: hi, replicas: 1}\n"
               "targetCustomizations:\n"
               "- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  helm: {values: {replicas: 3}}\n"
               "- name: labels-only\n  clusterName: c1\n  serviceAccount: deployer\n");
  checkout.add("app/Chart.yaml", kChartYaml);
  checkout.add("app/templates/cm.yaml", kTemplate);
  testing::BundleRenderInputs inputs("repo", helm);
  auto rendered = inputs.renderIn(checkout.src(), BundleDir{"app", "app/fleet.yaml"});
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_FALSE(rendered->error) << rendered->error->message;
  EXPECT_EQ(rendered->renderer, "helm");
  const auto& c = rendered->event.customizations;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NE(c[0].manifest_id, rendered->event.manifest_id);
  EXPECT_EQ(c[1].manifest_id, rendered->event.manifest_id);
  auto prod = Json::parse(rendered->manifests.at(c[0].manifest_id).text).value();
  EXPECT_EQ(prod.asArray()[0].at({"data", "replicas"})->asString(), "3");
  EXPECT_EQ(prod.asArray()[0].at({"data", "greeting"})->asString(), "hi");
}

TEST(FindExecutable, PathSearch) {
  EXPECT_FALSE(findExecutable("sh").empty());
  EXPECT_TRUE(findExecutable("definitely-not-a-binary-xyz").empty());
  EXPECT_TRUE(findExecutable("/nonexistent/helm").empty());
}

}  // namespace
}  // namespace flotilla::render
