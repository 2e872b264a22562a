// Strategic merge patches of yaml.overlays (patch.h): the built-in merge keys, the directives, and the merge
// patch fallback for custom resources.
#include <gtest/gtest.h>

#include "flotilla/core/yaml.h"
#include "flotilla/render/patch.h"
#include "flotilla/render/render.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

using testing::TempTree;

Json yaml(const std::string& text) {
  auto parsed = parseYaml(text, "test.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.error().describe();
  return parsed.ok() ? *parsed : Json();
}

const char* kDeployment = R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  finalizers: [a]
spec:
  replicas: 1
  template:
    spec:
      tolerations: [{key: a, operator: Exists}]
      volumes:
        - {name: data, emptyDir: {}}
        - {name: cache, emptyDir: {}}
      containers:
        - name: app
          image: app:1
          args: [--a, --b]
          env:
            - {name: A, value: "1"}
            - {name: B, value: "2"}
          ports:
            - {containerPort: 80, name: http}
            - {containerPort: 443, name: https}
          volumeMounts:
            - {mountPath: /data, name: data}
        - name: sidecar
          image: side:1
)";

const Json* container(const Json& deployment, const std::string& name) {
  for (const auto& c : deployment.at({"spec", "template", "spec", "containers"})->asArray()) {
    if (c.getString("name") == name) {
      return &c;
    }
  }
  return nullptr;
}

TEST(StrategicMerge, ContainersEnvPortsAndMountsMergeByTheirKeys) {
  Json deployment = yaml(kDeployment);
  Json patch = yaml(R"(spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: app
          image: app:2
          env:
            - {name: B, value: "20"}
            - {name: C, value: "3"}
          ports:
            - {containerPort: 443, name: tls}
          volumeMounts:
            - {mountPath: /cache, name: cache}
        - name: added
          image: new:1
)");
  ASSERT_TRUE(applyStrategicMergePatch(deployment, patch).ok());
  EXPECT_EQ(deployment.at({"spec", "replicas"})->asInt(), 3);
  const auto& containers = deployment.at({"spec", "template", "spec", "containers"})->asArray();
  ASSERT_EQ(containers.size(), 3u);  // app and sidecar kept in place, added appended
  EXPECT_EQ(containers[1].getString("name"), "sidecar");
  EXPECT_EQ(containers[2].getString("name"), "added");
  const Json* app = container(deployment, "app");
  EXPECT_EQ(app->getString("image"), "app:2");
  EXPECT_EQ(app->find("args")->size(), 2u);  // untouched fields stay
  const auto& env = app->find("env")->asArray();
  ASSERT_EQ(env.size(), 3u);
  EXPECT_EQ(env[0], yaml("{name: A, value: '1'}"));
  EXPECT_EQ(env[1], yaml("{name: B, value: '20'}"));
  EXPECT_EQ(env[2], yaml("{name: C, value: '3'}"));
  const auto& ports = app->find("ports")->asArray();
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[1].getString("name"), "tls");
  EXPECT_EQ(app->find("volumeMounts")->size(), 2u);
}

TEST(StrategicMerge, ListsWithoutAPatchStrategyAreReplaced) {
  Json deployment = yaml(kDeployment);
  Json patch = yaml(R"(spec:
  template:
    spec:
      tolerations: [{key: b, operator: Exists}]
      containers:
        - name: app
          args: [--c]
)");
  ASSERT_TRUE(applyStrategicMergePatch(deployment, patch).ok());
  EXPECT_EQ(*deployment.at({"spec", "template", "spec", "tolerations"}), yaml("[{key: b, operator: Exists}]"));
  EXPECT_EQ(*container(deployment, "app")->find("args"), yaml("[--c]"));
}

TEST(StrategicMerge, DeleteReplaceRetainKeysAndNull) {
  Json deployment = yaml(kDeployment);
  Json patch = yaml(R"(metadata:
  finalizers: [b, a]
spec:
  replicas: null
  template:
    spec:
      volumes:
        - {name: cache, $patch: delete}
      containers:
        - name: sidecar
          $patch: delete
        - name: app
          env:
            - {$patch: replace}
            - {name: ONLY, value: x}
          ports:
            - {containerPort: 80, $patch: delete}
          $deleteFromPrimitiveList/args: [--a]
)");
  auto status = applyStrategicMergePatch(deployment, patch);
  ASSERT_TRUE(status.ok()) << status.error().describe();
  EXPECT_EQ(*deployment.at({"metadata", "finalizers"}), yaml("[a, b]"));  // a primitive set: union
  EXPECT_EQ(deployment.at({"spec", "replicas"}), nullptr);
  EXPECT_EQ(*deployment.at({"spec", "template", "spec", "volumes"}), yaml("[{name: data, emptyDir: {}}]"));
  ASSERT_EQ(deployment.at({"spec", "template", "spec", "containers"})->size(), 1u);
  const Json* app = container(deployment, "app");
  EXPECT_EQ(*app->find("env"), yaml("[{name: ONLY, value: x}]"));
  EXPECT_EQ(*app->find("ports"), yaml("[{containerPort: 443, name: https}]"));
  EXPECT_EQ(*app->find("args"), yaml("[--b]"));

  Json replaced = yaml(kDeployment);
  ASSERT_TRUE(applyStrategicMergePatch(replaced, yaml("spec:\n  $patch: replace\n  replicas: 7\n")).ok());
  EXPECT_EQ(*replaced.find("spec"), yaml("{replicas: 7}"));

  Json retained = yaml(
      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
      "spec:\n  strategy:\n    type: RollingUpdate\n    rollingUpdate: {maxSurge: 1}\n");
  ASSERT_TRUE(
      applyStrategicMergePatch(retained, yaml("spec:\n  strategy:\n    $retainKeys: [type]\n    type: Recreate\n"))
          .ok());
  EXPECT_EQ(*retained.at({"spec", "strategy"}), yaml("{type: Recreate}"));
}

TEST(StrategicMerge, ServicePortsMergeByPort) {
  Json service = yaml(
      "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
      "spec:\n  ports:\n    - {port: 80, targetPort: 8080}\n    - {port: 443, targetPort: 8443}\n");
  ASSERT_TRUE(applyStrategicMergePatch(service, yaml("spec:\n  ports:\n    - {port: 80, targetPort: 9090}\n")).ok());
  EXPECT_EQ(*service.at({"spec", "ports"}), yaml("[{port: 80, targetPort: 9090}, {port: 443, targetPort: 8443}]"));
}

TEST(StrategicMerge, BadPatchesNameTheField) {
  Json deployment = yaml(kDeployment);
  auto missing_key = applyStrategicMergePatch(deployment, yaml("spec:\n  template:\n    spec:\n      containers:\n"
                                                               "        - {image: x}\n"));
  ASSERT_FALSE(missing_key.ok());
  EXPECT_NE(missing_key.error().message.find("spec.template.spec.containers[0]"), std::string::npos)
      << missing_key.error().message;
  EXPECT_NE(missing_key.error().message.find("\"name\""), std::string::npos);
  auto bad_directive = applyStrategicMergePatch(deployment, yaml("spec:\n  $patch: explode\n"));
  ASSERT_FALSE(bad_directive.ok());
  EXPECT_NE(bad_directive.error().message.find("explode"), std::string::npos);
  EXPECT_EQ(deployment, yaml(kDeployment));  // unchanged on failure
}

TEST(OverlayPatch, BuiltinKindsGetStrategicMergeCustomResourcesAMergePatch) {
  EXPECT_TRUE(isBuiltinApiVersion("v1"));
  EXPECT_TRUE(isBuiltinApiVersion("apps/v1"));
  EXPECT_TRUE(isBuiltinApiVersion("networking.k8s.io/v1"));
  EXPECT_FALSE(isBuiltinApiVersion("example.com/v1"));
  EXPECT_FALSE(isBuiltinApiVersion("fleet.cattle.io/v1alpha1"));

  const std::string patch = "spec:\n  items:\n    - {name: b}\n  containers:\n    - {name: app, image: x}\n";
  Json custom = yaml(
      "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
      "spec:\n  containers:\n    - {name: app, image: old}\n    - {name: other}\n");
  ASSERT_TRUE(applyOverlayPatch(custom, yaml(patch)).ok());
  EXPECT_EQ(custom.at({"spec", "containers"})->size(), 1u);  // a merge patch replaces lists

  Json pod = yaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
      "spec:\n  containers:\n    - {name: app, image: old}\n    - {name: other}\n");
  ASSERT_TRUE(applyOverlayPatch(pod, yaml(patch)).ok());
  EXPECT_EQ(pod.at({"spec", "containers"})->size(), 2u);
  EXPECT_EQ(pod.at({"spec", "containers"})->asArray()[0].getString("image"), "x");
  EXPECT_FALSE(applyOverlayPatch(pod, Json("text")).ok());
}

TEST(RawRenderer, OverlayPatchOfADeploymentIsAStrategicMerge) {
  TempTree tree{{"b/deploy.yaml", kDeployment},
                {"b/overlays/prod/deploy_patch.yaml",
                 "spec:\n  template:\n    spec:\n      containers:\n        - {name: sidecar, image: side:2}\n"}};
  model::BundleDeploymentOptions options;
  options.yaml = model::YamlOptions{{"prod"}};
  auto objects = RawRenderer().render(RenderRequest{tree.root(), "b", "bundle", options, RenderLimits{}});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 1u);
  const auto& deployment = (*objects)[0].object;
  ASSERT_EQ(deployment.at({"spec", "template", "spec", "containers"})->size(), 2u);
  EXPECT_EQ(container(deployment, "app")->getString("image"), "app:1");
  EXPECT_EQ(container(deployment, "sidecar")->getString("image"), "side:2");

  tree.write("b/overlays/bad/deploy_patch.yaml", "spec:\n  template:\n    spec:\n      containers: [{image: x}]\n");
  options.yaml = model::YamlOptions{{"bad"}};
  auto bad = RawRenderer().render(RenderRequest{tree.root(), "b", "bundle", options, RenderLimits{}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().where, "b/overlays/bad/deploy_patch.yaml");
  EXPECT_NE(bad.error().message.find("merge key"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace flotilla::render
