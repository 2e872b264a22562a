// Unit tests for drift detection's pure part (drift.h): field sets from managedFields, lost fields and who holds
// them, diff.comparePatches, messages; ignore.conditions in health; the drift settings of a bundle's options.
#include "flotilla/agent/drift.h"

#include <gtest/gtest.h>

#include "flotilla/agent/health.h"
#include "flotilla/agent/watcher.h"
#include "flotilla/testing/json.h"

namespace flotilla::agent {
namespace {

//! A JSON object written in the test.
Json parse(const char* text) {
  return flotilla::testing::parseJson(text);
}

// A Deployment as the API server answers the agent's apply: flotilla (Apply) holds replicas, the container's image
// and the owner annotation.
const char* kApplied = R"({
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "app", "managedFields": [
    {"manager": "flotilla", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {
      "f:metadata": {"f:annotations": {"f:flotilla.io/bundle": {}}},
      "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}}]},
  "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}}}})";

// The same object after `kubectl edit` changed replicas and the image: both fields moved to kubectl-edit.
const char* kEdited = R"({
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "app", "managedFields": [
    {"manager": "flotilla", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {
      "f:metadata": {"f:annotations": {"f:flotilla.io/bundle": {}}},
      "f:spec": {"f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"web\"}": {".": {}, "f:name": {}}}}}}}},
    {"manager": "kubectl-edit", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {
      "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"web\"}": {"f:image": {}}}}}}}}]},
  "spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}})";

TEST(DriftTest, ManagedFieldSetHasLeavesAndMarkedNodes) {
  FieldSet fields = managedFieldSet(parse(kApplied), "flotilla", "Apply");
  std::vector<std::string> shown;
  for (const auto& path : fields) {
    shown.push_back(displayPath(path));
  }
  EXPECT_EQ(shown, (std::vector<std::string>{".metadata.annotations.flotilla.io/bundle", ".spec.replicas",
                                             ".spec.template.spec.containers[name=web]",
                                             ".spec.template.spec.containers[name=web].image",
                                             ".spec.template.spec.containers[name=web].name"}));
  EXPECT_TRUE(managedFieldSet(parse(kApplied), "kubectl-edit", "").empty());
}

TEST(DriftTest, FieldValuesShareTheirPaths) {
  const size_t before = sharedFieldPathBlocks();
  {
    Json scaled = parse(kApplied);
    scaled["spec"]["replicas"] = 5;  // another value, the same fields
    FieldValues first = appliedFieldValues(parse(kApplied));
    FieldValues second = appliedFieldValues(scaled);
    EXPECT_EQ(sharedFieldPathBlocks(), before + 1);  // one block for both
    ASSERT_EQ(first.size(), 5u);
    ASSERT_EQ(second.size(), 5u);
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(first[i].path, second[i].path);
      EXPECT_EQ(first[i].path.data(), second[i].path.data());  // the same text, not a copy
    }
    EXPECT_EQ(displayPath(std::string(first[1].path)), ".spec.replicas");
    EXPECT_NE(first[1].hash, second[1].hash);  // each keeps its own values
    EXPECT_EQ(first[0].hash, second[0].hash);
    FieldValues other = appliedFieldValues(parse(kEdited));  // fewer fields: a block of its own
    EXPECT_EQ(other.size(), 3u);
    EXPECT_EQ(sharedFieldPathBlocks(), before + 2);
  }
  EXPECT_EQ(sharedFieldPathBlocks(), before);  // forgotten with their last user
}

TEST(DriftTest, UnchangedObjectHasNoDrift) {
  Json applied = parse(kApplied);
  ObjectDrift drift = computeDrift(appliedFieldValues(applied), applied, {});
  EXPECT_FALSE(drift.drifted());
  EXPECT_EQ(describeDrift(drift), "");
}

TEST(DriftTest, ChangedFieldsNameTheOtherManager) {
  ObjectDrift drift = computeDrift(appliedFieldValues(parse(kApplied)), parse(kEdited), {});
  ASSERT_EQ(drift.changes.size(), 2U);
  EXPECT_EQ(drift.changes[0].manager, "kubectl-edit");
  EXPECT_EQ(describeDrift(drift),
            "changed by kubectl-edit: .spec.replicas, .spec.template.spec.containers[name=web].image");
}

TEST(DriftTest, AnEditThatWasUndoneIsNoDrift) {
  // kubectl-edit holds the fields, but their values are the applied ones again.
  Json undone = parse(kEdited);
  undone["spec"]["replicas"] = 2;
  undone["spec"]["template"]["spec"]["containers"].asArray()[0]["image"] = "nginx:1";
  ObjectDrift drift = computeDrift(appliedFieldValues(parse(kApplied)), undone, {});
  EXPECT_FALSE(drift.drifted()) << describeDrift(drift);
  undone["spec"]["replicas"] = 3;
  EXPECT_EQ(describeDrift(computeDrift(appliedFieldValues(parse(kApplied)), undone, {})),
            "changed by kubectl-edit: .spec.replicas");
}

TEST(DriftTest, RemovedFieldHasNoManagerAndOnlyTheOutermostPathIsListed) {
  // The container was removed by a writer that holds nothing of it: its node and fields left every entry.
  Json live = parse(R"({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "managedFields": [
    {"manager": "flotilla", "operation": "Apply", "fieldsV1": {
      "f:metadata": {"f:annotations": {"f:flotilla.io/bundle": {}}}, "f:spec": {"f:replicas": {}}}}]},
    "spec": {"replicas": 2, "template": {"spec": {"containers": []}}}})");
  ObjectDrift drift = computeDrift(appliedFieldValues(parse(kApplied)), live, {});
  ASSERT_EQ(drift.changes.size(), 1U);
  EXPECT_EQ(drift.changes[0].manager, "");
  EXPECT_EQ(describeDrift(drift), "removed: .spec.template.spec.containers[name=web]");
}

TEST(DriftTest, MissingObject) {
  EXPECT_EQ(describeDrift(ObjectDrift{.missing = true}), "missing");
  EXPECT_TRUE(ObjectDrift{.missing = true}.drifted());
}

TEST(DriftTest, ComparePatchesHideFieldsOfTheObjectsTheyName) {
  ObjectRef web{.api_version = "apps/v1", .kind = "Deployment", .ns = "app", .name = "web"};
  model::DiffOptions diff{
      .compare_patches = {model::ComparePatch{.kind = "Deployment",
                                              .api_version = "apps/v1",
                                              .ns = "app",
                                              .name = "web",
                                              .operations = {{.op = "remove", .path = "/spec/replicas"},
                                                             {.op = "add", .path = "/metadata"}},
                                              .json_pointers = {"/spec/template/spec/containers/0/image"}},
                          model::ComparePatch{.kind = "Deployment", .name = "other", .json_pointers = {"/spec"}}}};
  auto pointers = ignoredPointers(diff, web);
  EXPECT_EQ(pointers, (std::vector<std::string>{"/spec/template/spec/containers/0/image", "/spec/replicas"}));
  ObjectDrift drift = computeDrift(appliedFieldValues(parse(kApplied)), parse(kEdited), pointers);
  EXPECT_FALSE(drift.drifted()) << describeDrift(drift);
  // Only the replicas hidden: the image still shows.
  drift = computeDrift(appliedFieldValues(parse(kApplied)), parse(kEdited), {"/spec/replicas"});
  EXPECT_EQ(describeDrift(drift), "changed by kubectl-edit: .spec.template.spec.containers[name=web].image");
  // A pointer above the field hides everything under it.
  drift = computeDrift(appliedFieldValues(parse(kApplied)), parse(kEdited), {"/spec"});
  EXPECT_FALSE(drift.drifted());
}

TEST(DriftTest, PointerTokensResolveListItemsInTheLiveObject) {
  Json live = parse(kEdited);
  FieldPath image = "f:spec\tf:template\tf:spec\tf:containers\tk:{\"name\":\"web\"}\tf:image";
  EXPECT_EQ(pointerTokens(image, live),
            (std::vector<std::string>{"spec", "template", "spec", "containers", "0", "image"}));
  FieldPath absent = "f:spec\tf:template\tf:spec\tf:containers\tk:{\"name\":\"db\"}\tf:image";
  EXPECT_EQ(pointerTokens(absent, live)[4], "k:{\"name\":\"db\"}");
  EXPECT_EQ(displayPath("f:spec\tf:ports\tk:{\"port\":80,\"protocol\":\"TCP\"}"), ".spec.ports[port=80,protocol=TCP]");
  EXPECT_EQ(displayPath("f:metadata\tf:finalizers\tv:\"a\""), ".metadata.finalizers[a]");
}

TEST(DriftTest, LongDiffsAreCapped) {
  ObjectDrift drift;
  for (int i = 0; i < 8; ++i) {
    drift.changes.push_back(FieldChange{.path = "f:data\tf:k" + std::to_string(i), .manager = "x"});
  }
  EXPECT_EQ(describeDrift(drift), "changed by x: .data.k0, .data.k1, .data.k2, .data.k3, .data.k4 (+3 more)");
}

TEST(DriftTest, IgnoredConditionsDoNotMakeAnObjectUnhealthy) {
  Json live = parse(R"({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
    "status": {"conditions": [{"type": "Ready", "status": "False", "message": "waiting for a cloud"}]}})");
  EXPECT_FALSE(evaluateHealth(live).ready);
  EXPECT_TRUE(evaluateHealth(live, {{{"type", "Ready"}, {"status", "False"}}}).ready);
  // Every key of the map must match.
  EXPECT_FALSE(evaluateHealth(live, {{{"type", "Ready"}, {"status", "Unknown"}}}).ready);
  EXPECT_FALSE(evaluateHealth(live, {model::Labels{}}).ready);
}

TEST(DriftTest, SettingsFromOptions) {
  model::BundleDeploymentOptions options;
  EXPECT_FALSE(driftSettings(options, "flotilla-system").correct);
  EXPECT_EQ(driftSettings(options, "flotilla-system").service_account_user, "");
  options.correct_drift = model::CorrectDrift{.enabled = true, .force = true, .keep_fail_history = true};
  options.ignore = model::IgnoreOptions{.conditions = {{{"type", "Ready"}}}};
  options.service_account = "deployer";
  DriftSettings settings = driftSettings(options, "flotilla-system");
  EXPECT_TRUE(settings.correct);
  EXPECT_TRUE(settings.force);
  EXPECT_TRUE(settings.keep_fail_history);
  EXPECT_EQ(settings.ignore_conditions.size(), 1U);
  // Corrections are made as the bundle's service account, like its deploys.
  EXPECT_EQ(settings.service_account_user, "system:serviceaccount:flotilla-system:deployer");
}

TEST(DriftTest, ComparePatchOperationsTheAgentDoesNotDoAreRefused) {
  model::BundleDeploymentOptions options;
  EXPECT_TRUE(checkDriftOptions(options).ok());
  options.diff =
      model::DiffOptions{.compare_patches = {model::ComparePatch{
                             .operations = {{.op = "remove", .path = "/spec/replicas"}}, .json_pointers = {"/data"}}}};
  EXPECT_TRUE(checkDriftOptions(options).ok());
  options.diff->compare_patches[0].operations.push_back({.op = "replace", .path = "/spec", .value = "1"});
  auto refused = checkDriftOptions(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("diff.comparePatches[0].operations[1].op"), std::string::npos)
      << refused.error().message;
  options.diff->compare_patches[0].operations.pop_back();
  options.diff->compare_patches[0].json_pointers.emplace_back("spec");
  refused = checkDriftOptions(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("diff.comparePatches[0].jsonPointers[1]"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::agent
