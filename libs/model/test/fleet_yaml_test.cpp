#include <gtest/gtest.h>

#include "decode_expect.h"
#include "flotilla/model/codec.h"

namespace flotilla::model {
namespace {

using test::expectRejected;
using test::expectRejectedWith;
using test::replacedOnce;

// Fleet's fleet.yaml reference (fleet-docs ref-fleet-yaml.md), every documented section.
constexpr const char* kReference = R"(defaultNamespace: default
namespace: default
namespaceLabels:
  key: value
namespaceAnnotations:
  key: value
name: my-great-bundle
labels:
  key: value
kustomize:
  dir: ./kustomize
helm:
  chart: ./chart
  repo: https://charts.rancher.io
  version: 0.1.0
  disableDependencyUpdate: false
  values:
    any-custom: value
    variableName: global.fleet.clusterLabels.LABELNAME
    templatedLabel: "${ .ClusterLabels.LABELNAME }-foo"
    valueFromEnv:
      "${ .ClusterLabels.ENV }": ${ .ClusterValues.someValue | upper | quote }
  valuesFiles:
    - values1.yaml
    - values2.yaml
  valuesFrom:
    - configMapKeyRef:
        name: configmap-values
        namespace: default
        key: values.yaml
    - secretKeyRef:
        name: secret-values
        namespace: default
        key: values.yaml
  releaseName: my-release
  takeOwnership: false
  force: false
  atomic: false
  disablePreProcess: false
  disableDNS: false
  skipSchemaValidation: false
  waitForJobs: true
paused: false
rolloutStrategy:
  maxUnavailable: 15%
  maxUnavailablePartitions: 20%
  autoPartitionSize: 10%
  partitions:
    - name: canary
      maxUnavailable: 10%
      clusterSelector:
        matchLabels:
          env: prod
      clusterGroup: agroup
      clusterGroupSelector:
        matchLabels:
          env: prod
targetCustomizations:
  - name: prod
    namespace: newvalue
    defaultNamespace: newdefaultvalue
    kustomize: {}
    helm: {}
    yaml:
      overlays:
        - custom2
        - custom3
    clusterSelector:
      matchLabels:
        env: prod
    clusterName: dev-cluster
    clusterGroupSelector:
      matchLabels:
        region: us-east
    clusterGroup: group1
    doNotDeploy: false
    correctDrift:
      enabled: false
      force: false
      keepFailHistory: false
dependsOn:
  - name: one-multi-cluster-hello-world
  - selector:
      matchLabels:
        app: weak-monkey
ignore:
  conditions:
    - type: Active
      status: "False"
overrideTargets:
  - clusterSelector:
      matchLabels:
        env: dev
)";

TEST(FleetYamlTest, DecodesFleetsReferenceFile) {
  auto fy = decodeFleetYaml(kReference, "fleet.yaml");
  ASSERT_TRUE(fy.ok()) << fy.error().describe();
  EXPECT_EQ(fy->name, "my-great-bundle");
  EXPECT_EQ(fy->labels.at("key"), "value");
  const auto& o = fy->spec.options;
  EXPECT_EQ(o.default_namespace, "default");
  EXPECT_EQ(o.target_namespace, "default");
  ASSERT_TRUE(o.namespace_labels);
  EXPECT_EQ(o.namespace_labels->at("key"), "value");
  ASSERT_TRUE(o.kustomize);
  EXPECT_EQ(o.kustomize->dir, "./kustomize");
  ASSERT_TRUE(o.helm);
  EXPECT_EQ(o.helm->chart, "./chart");
  EXPECT_EQ(o.helm->version, "0.1.0");
  EXPECT_EQ(o.helm->release_name, "my-release");
  EXPECT_TRUE(o.helm->wait_for_jobs);
  ASSERT_TRUE(o.helm->values);
  EXPECT_EQ(o.helm->values->getString("templatedLabel"), "${ .ClusterLabels.LABELNAME }-foo");
  EXPECT_EQ(o.helm->values_files.size(), 2u);
  ASSERT_EQ(o.helm->values_from.size(), 2u);
  ASSERT_TRUE(o.helm->values_from[1].secret_key_ref);
  EXPECT_EQ(o.helm->values_from[1].secret_key_ref->name, "secret-values");
  ASSERT_TRUE(o.ignore);
  EXPECT_EQ(o.ignore->conditions[0].at("status"), "False");
  ASSERT_TRUE(fy->spec.rollout_strategy);
  EXPECT_EQ(fy->spec.rollout_strategy->max_unavailable, (IntOrPercent{15, true}));
  ASSERT_EQ(fy->spec.rollout_strategy->partitions.size(), 1u);
  EXPECT_EQ(fy->spec.rollout_strategy->partitions[0].cluster_group, "agroup");
  ASSERT_EQ(fy->target_customizations.size(), 1u);
  const auto& prod = fy->target_customizations[0];
  EXPECT_EQ(prod.name, "prod");
  EXPECT_EQ(prod.options.target_namespace, "newvalue");
  ASSERT_TRUE(prod.options.helm);  // `helm: {}` is set, just empty
  EXPECT_EQ(*prod.options.helm, HelmOptions{});
  ASSERT_TRUE(prod.options.yaml);
  EXPECT_EQ(prod.options.yaml->overlays, (std::vector<std::string>{"custom2", "custom3"}));
  EXPECT_EQ(prod.cluster_name, "dev-cluster");
  ASSERT_EQ(fy->spec.depends_on.size(), 2u);
  EXPECT_EQ(fy->spec.depends_on[0].name, "one-multi-cluster-hello-world");
  ASSERT_TRUE(fy->spec.depends_on[1].selector);
  ASSERT_TRUE(fy->override_targets);
  ASSERT_EQ(fy->override_targets->size(), 1u);
}

TEST(FleetYamlTest, ReferenceFileRoundTrips) {
  auto fy = decodeFleetYaml(kReference, "fleet.yaml");
  ASSERT_TRUE(fy.ok());
  Json encoded = encode(*fy);
  auto again = decodeFleetYaml(toYaml(encoded), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.error().describe() << "\n" << toYaml(encoded);
  EXPECT_EQ(*again, *fy);
}

TEST(FleetYamlTest, DocsPartitionTypoIsCaughtWithItsLine) {
  // fleet-docs shows `clusterGroupSelector: {clusterSelector: {...}}` in a partition; clusterGroupSelector is a
  // plain label selector, so Fleet silently ignores the nested key and selects every group. We say so.
  const std::string text = replacedOnce(
      kReference, "      clusterGroupSelector:\n        matchLabels:\n          env: prod\n",
      "      clusterGroupSelector:\n        clusterSelector:\n          matchLabels:\n            env: prod\n");
  expectRejectedWith(
      decodeFleetYaml(text, "fleet.yaml"),
      "fleet.yaml:56: rolloutStrategy.partitions[0].clusterGroupSelector.clusterSelector: unknown field");
}

TEST(FleetYamlTest, HelmChartTypeErrorNamesFileLineAndPath) {
  const char* text =
      R"(defaultNamespace: web
helm:
  releaseName: web
  chart: 12
)";
  auto fy = decodeFleetYaml(text, "apps/web/fleet.yaml");
  ASSERT_FALSE(fy.ok());
  EXPECT_EQ(fy.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(fy.error().message, "apps/web/fleet.yaml:4: helm.chart: expected a string, got a number");
  EXPECT_EQ(fy.error().where, "apps/web/fleet.yaml:4");
}

TEST(FleetYamlTest, TypoInTargetCustomizationIsReported) {
  const char* text =
      R"(targetCustomizations:
- name: prod
  clusterSelector:
    matchLabel: {env: prod}
  helm:
    valuse: {replicas: 3}
)";
  expectRejected(decodeFleetYaml(text, "fleet.yaml"),
                 {"fleet.yaml:4: targetCustomizations[0].clusterSelector.matchLabel: unknown field (did you mean "
                  "\"matchLabels\"?)",
                  "fleet.yaml:6: targetCustomizations[0].helm.valuse: unknown field (did you mean \"values\"?)"});
}

TEST(FleetYamlTest, BundleInternalFieldsAreNotAccepted) {
  expectRejected(decodeFleetYaml("resources:\n- name: x\n  content: y\nvaluesHash: abc\n", "fleet.yaml"),
                 {"fleet.yaml:1: resources: unknown field", "fleet.yaml:4: valuesHash: unknown field"});
}

TEST(FleetYamlTest, EmptyFileIsAnEmptySpec) {
  auto empty = decodeFleetYaml("", "fleet.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, FleetYaml{});
  auto comment = decodeFleetYaml("# nothing here\n", "fleet.yaml");
  ASSERT_TRUE(comment.ok());
  EXPECT_EQ(*comment, FleetYaml{});
}

TEST(FleetYamlTest, MultipleDocumentsAndSyntaxErrorsAreRejected) {
  expectRejected(decodeFleetYaml("name: a\n---\nname: b\n", "fleet.yaml"),
                 {"fleet.yaml:3: fleet.yaml must hold one YAML document"});
  auto syntax = decodeFleetYaml("helm:\n  values: [oops\n", "fleet.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().where.find("fleet.yaml:"), std::string::npos);
  expectRejectedWith(decodeFleetYaml("just a string\n", "fleet.yaml"),
                     "fleet.yaml:1: (document): expected a map, got a string");
}

TEST(FleetYamlTest, SemanticChecks) {
  const char* text =
      R"(name: Bad_Bundle
helm:
  releaseName: this-release-name-is-far-too-long-for-helm-to-accept-it-at-all
  timeoutSeconds: -5
targetCustomizationMode: Sometimes
dependsOn:
- acceptedStates: [Ready, Happy]
rolloutStrategy:
  maxUnavailable: 150%
  autoPartitionSize: ten
imageScans:
- image: ghcr.io/x/web
)";
  expectRejected(
      decodeFleetYaml(text, "fleet.yaml"),
      {"fleet.yaml:1: name: invalid bundle name \"Bad_Bundle\"", "fleet.yaml:3: helm.releaseName: invalid release name",
       "fleet.yaml:4: helm.timeoutSeconds: must be at least 0",
       "fleet.yaml:5: targetCustomizationMode: expected FirstMatch or AllMatches",
       "fleet.yaml:7: dependsOn[0].acceptedStates[1]: unknown bundle state \"Happy\"",
       "fleet.yaml:7: dependsOn[0]: a dependsOn entry needs a name or a selector",
       "fleet.yaml:9: rolloutStrategy.maxUnavailable: a percentage must be at most 100%",
       "fleet.yaml:10: rolloutStrategy.autoPartitionSize: expected a count (10) or a percentage"});
}

TEST(FleetYamlTest, ImageScansAndOverrideTargets) {
  const char* text =
      R"(imageScans:
- tagName: web
  image: ghcr.io/x/web
  interval: 5m
  secretRef: {name: regcred}
  policy:
    semver: {range: ">=1.0.0"}
overrideTargets: []
)";
  auto fy = decodeFleetYaml(text, "fleet.yaml");
  ASSERT_TRUE(fy.ok()) << fy.error().describe();
  ASSERT_EQ(fy->image_scans.size(), 1u);
  EXPECT_EQ(fy->image_scans[0].interval, Duration{300'000});
  EXPECT_EQ(fy->image_scans[0].secret_ref_name, "regcred");
  EXPECT_EQ(fy->image_scans[0].semver_range, ">=1.0.0");
  // An explicit empty list overrides the GitRepo targets with nothing; absent keeps them.
  ASSERT_TRUE(fy->override_targets);
  EXPECT_TRUE(fy->override_targets->empty());
  auto again = decodeFleetYamlValue(encode(*fy));
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_EQ(*again, *fy);
  auto absent = decodeFleetYaml("name: x\n", "fleet.yaml");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->override_targets);
}

TEST(FleetYamlTest, NullValuesMeanAbsent) {
  auto fy = decodeFleetYaml("helm:\nkustomize: ~\nlabels:\n", "fleet.yaml");
  ASSERT_TRUE(fy.ok()) << fy.error().describe();
  EXPECT_FALSE(fy->spec.options.helm);
  EXPECT_FALSE(fy->spec.options.kustomize);
}

TEST(FleetYamlTest, LabelValuesMustBeStrings) {
  expectRejectedWith(decodeFleetYaml("labels:\n  tier: 1\n  env: prod\n", "fleet.yaml"),
                     "fleet.yaml:2: labels.tier: expected a string, got a number (quote it: \"...\")");
}

}  // namespace
}  // namespace flotilla::model
