// Unit tests for manifest parsing, object naming, namespace placement and the staged apply order.
#include "flotilla/agent/objects.h"

#include <gtest/gtest.h>

namespace flotilla::agent {
namespace {

Json object(std::string api_version, std::string kind, std::string name, std::string ns = {}) {
  Json o = Json::obj({{"apiVersion", api_version}, {"kind", kind}, {"metadata", Json::obj({{"name", name}})}});
  if (!ns.empty()) {
    o["metadata"]["namespace"] = ns;
  }
  return o;
}

PlannedObject planned(std::string api_version, std::string kind, std::string name, bool namespaced, size_t index) {
  PlannedObject p;
  p.object = object(api_version, kind, name);
  p.ref = *objectRefOf(p.object);
  p.stage = stageOf(p.ref, namespaced);
  p.index = index;
  return p;
}

// Refs name objects the way status messages do, and compare without the version.
TEST(ObjectsTest, RefDescribesAndIdentifies) {
  auto ref = objectRefOf(object("apps/v1", "Deployment", "web", "prod"));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->describe(), "Deployment/prod/web");
  EXPECT_EQ(ref->group(), "apps");
  auto older = objectRefOf(object("apps/v1beta2", "Deployment", "web", "prod"));
  EXPECT_EQ(ref->identity(), older->identity());
  EXPECT_EQ(objectRefOf(object("v1", "Namespace", "prod"))->describe(), "Namespace/prod");
  EXPECT_EQ(objectRefOf(object("v1", "Namespace", "prod"))->group(), "");
}

// A usable object needs apiVersion, kind and metadata.name.
TEST(ObjectsTest, RefRejectsIncompleteObjects) {
  EXPECT_FALSE(objectRefOf(Json("x")).ok());
  Json no_name = Json::obj({{"apiVersion", "v1"}, {"kind", "ConfigMap"}});
  auto missing = objectRefOf(no_name);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("metadata.name"), std::string::npos);
  Json no_kind = Json::obj({{"apiVersion", "v1"}, {"metadata", Json::obj({{"name", "a"}})}});
  EXPECT_NE(objectRefOf(no_kind).error().message.find("kind"), std::string::npos);
}

// The manifest is a JSON array; anything else is an invalid manifest.
TEST(ObjectsTest, ParseManifest) {
  auto parsed = parseManifest(R"([{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}, 5])");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->size(), 2u);
  EXPECT_EQ(parseManifest("{}").error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(parseManifest("not json").error().kind, ErrorKind::kInvalid);
  EXPECT_TRUE(parseManifest("[]")->empty());
}

// Stage 1 is CRDs and Namespaces, then cluster-scoped kinds, then namespaced objects.
TEST(ObjectsTest, StagesByKindAndScope) {
  auto crd = *objectRefOf(object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com"));
  auto ns = *objectRefOf(object("v1", "Namespace", "prod"));
  auto role = *objectRefOf(object("rbac.authorization.k8s.io/v1", "ClusterRole", "r"));
  auto cm = *objectRefOf(object("v1", "ConfigMap", "c"));
  EXPECT_EQ(stageOf(crd, false), Stage::kDefinitions);
  EXPECT_EQ(stageOf(ns, false), Stage::kDefinitions);
  EXPECT_EQ(stageOf(role, false), Stage::kClusterScoped);
  EXPECT_EQ(stageOf(cm, true), Stage::kNamespaced);
  // A kind named like a definition in another group is an ordinary object.
  auto fake = *objectRefOf(object("example.com/v1", "Namespace", "x"));
  EXPECT_FALSE(isDefinitionKind(fake));
}

// Sorting puts stages in order, then Helm's kind order, then keeps the manifest order.
TEST(ObjectsTest, SortForApplyIsStagedAndStable) {
  std::vector<PlannedObject> objects = {
      planned("apps/v1", "Deployment", "web", true, 0),
      planned("example.com/v1", "Widget", "w", true, 1),
      planned("v1", "ConfigMap", "b", true, 2),
      planned("v1", "ServiceAccount", "sa", true, 3),
      planned("rbac.authorization.k8s.io/v1", "ClusterRole", "r", false, 4),
      planned("v1", "Namespace", "prod", false, 5),
      planned("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com", false, 6),
      planned("v1", "ConfigMap", "a", true, 7),
  };
  sortForApply(objects);
  std::vector<std::string> order;
  for (const auto& o : objects) {
    order.push_back(o.ref.kind + "/" + o.ref.name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"Namespace/prod", "CustomResourceDefinition/widgets.example.com",
                                             "ClusterRole/r", "ServiceAccount/sa", "ConfigMap/b", "ConfigMap/a",
                                             "Deployment/web", "Widget/w"}));
}

// Prune goes the other way: namespaced objects first, Namespaces and CRDs last.
TEST(ObjectsTest, SortForPruneReversesStages) {
  std::vector<ObjectRef> refs = {
      {"v1", "Namespace", "", "prod"},
      {"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"},
      {"v1", "ConfigMap", "prod", "a"},
      {"rbac.authorization.k8s.io/v1", "ClusterRole", "", "r"},
      {"apps/v1", "Deployment", "prod", "web"},
  };
  sortForPrune(refs);
  EXPECT_EQ(refs[0].kind, "Deployment");
  EXPECT_EQ(refs[1].kind, "ConfigMap");
  EXPECT_EQ(refs[2].kind, "ClusterRole");
  EXPECT_EQ(refs[3].kind, "CustomResourceDefinition");
  EXPECT_EQ(refs[4].kind, "Namespace");
}

// defaultNamespace fills in, namespace forces, cluster-scoped objects lose theirs; the owner annotation is added.
TEST(ObjectsTest, PlaceObjectAppliesNamespaceOptions) {
  NamespacePolicy defaults{.default_namespace = "apps"};
  Json placed = placeObject(object("v1", "ConfigMap", "c"), true, defaults, "ws/b");
  EXPECT_EQ(placed.at({"metadata", "namespace"})->asString(), "apps");
  EXPECT_EQ(placed.at({"metadata", "annotations", kBundleAnnotation})->asString(), "ws/b");
  Json own = placeObject(object("v1", "ConfigMap", "c", "mine"), true, defaults, "ws/b");
  EXPECT_EQ(own.at({"metadata", "namespace"})->asString(), "mine");
  NamespacePolicy forced{.default_namespace = "apps", .target_namespace = "forced"};
  Json moved = placeObject(object("v1", "ConfigMap", "c", "mine"), true, forced, "ws/b");
  EXPECT_EQ(moved.at({"metadata", "namespace"})->asString(), "forced");
  Json cluster = placeObject(object("rbac.authorization.k8s.io/v1", "ClusterRole", "r", "mine"), false, forced, "o");
  EXPECT_EQ(cluster.at({"metadata", "namespace"}), nullptr);
  EXPECT_EQ(effectiveNamespace(object("v1", "ConfigMap", "c"), NamespacePolicy{}), "default");
}

// Other fields of the manifest stay exactly as written, existing annotations included.
TEST(ObjectsTest, PlaceObjectKeepsOtherFields) {
  Json o = object("v1", "ConfigMap", "c");
  o["data"]["k"] = "v";
  o["metadata"]["annotations"]["keep"] = "me";
  o["metadata"]["labels"]["app"] = "x";
  Json placed = placeObject(o, true, NamespacePolicy{.default_namespace = "n"}, "ws/b");
  EXPECT_EQ(placed.at({"data", "k"})->asString(), "v");
  EXPECT_EQ(placed.at({"metadata", "annotations", "keep"})->asString(), "me");
  EXPECT_EQ(placed.at({"metadata", "labels", "app"})->asString(), "x");
}

}  // namespace
}  // namespace flotilla::agent
