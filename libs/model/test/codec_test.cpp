#include "flotilla/model/codec.h"

#include <gtest/gtest.h>

#include "decode_expect.h"

namespace flotilla::model {
namespace {

using test::expectRejected;
using test::expectRejectedWith;
using test::replacedOnce;

// A GitRepo in Fleet's documented form (fleet-docs gitrepo-add / gitrepo-targets).
constexpr const char* kFleetGitRepo = R"(kind: GitRepo
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: simple
  namespace: fleet-local
  labels:
    created-by: fleet
spec:
  repo: https://github.com/rancher/fleet-examples
  branch: main
  paths:
  - simple
  - multi-cluster/*
  pollingInterval: 1m30s
  clientSecretName: my-ssh-key
  helmSecretName: my-helm-secret
  helmRepoURLRegex: https://charts.rancher.io/*
  insecureSkipTLSVerify: false
  forceSyncGeneration: 2
  serviceAccount: moreSecureAccountThanClusterAdmin
  keepResources: true
  correctDrift:
    enabled: true
    force: false
  targets:
  - name: prod
    clusterSelector:
      matchLabels:
        env: prod
      matchExpressions:
      - key: region
        operator: In
        values: [eu-west, eu-central]
  - name: staging
    clusterGroup: staging
  - clusterName: local
  - name: by-group-label
    clusterGroupSelector:
      matchExpressions:
      - key: tier
        operator: Exists
)";

TEST(CodecTest, DecodesFleetGitRepoWithTargetsAndSelectors) {
  auto resources = decodeResources(kFleetGitRepo, "gitrepo.yaml");
  ASSERT_TRUE(resources.ok()) << resources.error().describe();
  ASSERT_EQ(resources->size(), 1u);
  const auto& repo = std::get<GitRepo>(resources->front());
  EXPECT_EQ(repo.metadata.name, "simple");
  EXPECT_EQ(repo.metadata.ns, "fleet-local");
  EXPECT_EQ(repo.metadata.labels.at("created-by"), "fleet");
  EXPECT_EQ(repo.spec.repo, "https://github.com/rancher/fleet-examples");
  EXPECT_EQ(repo.spec.branch, "main");
  EXPECT_EQ(repo.spec.paths, (std::vector<std::string>{"simple", "multi-cluster/*"}));
  EXPECT_EQ(repo.spec.polling_interval, Duration{90'000});
  EXPECT_EQ(repo.spec.effectivePollingInterval(), Duration{90'000});
  EXPECT_EQ(repo.spec.force_sync_generation, 2);
  EXPECT_TRUE(repo.spec.keep_resources);
  ASSERT_TRUE(repo.spec.correct_drift);
  EXPECT_TRUE(repo.spec.correct_drift->enabled);
  ASSERT_EQ(repo.spec.targets.size(), 4u);
  const auto& prod = repo.spec.targets[0];
  ASSERT_TRUE(prod.cluster_selector);
  EXPECT_EQ(prod.cluster_selector->match_labels.at("env"), "prod");
  ASSERT_EQ(prod.cluster_selector->match_expressions.size(), 1u);
  EXPECT_EQ(prod.cluster_selector->match_expressions[0].op, SelectorOperator::kIn);
  EXPECT_TRUE(prod.cluster_selector->matches({{"env", "prod"}, {"region", "eu-west"}}));
  EXPECT_FALSE(prod.cluster_selector->matches({{"env", "prod"}, {"region", "us-east"}}));
  EXPECT_EQ(repo.spec.targets[1].cluster_group, "staging");
  EXPECT_EQ(repo.spec.targets[2].cluster_name, "local");
  ASSERT_TRUE(repo.spec.targets[3].cluster_group_selector);
  EXPECT_EQ(repo.spec.targets[3].cluster_group_selector->match_expressions[0].op, SelectorOperator::kExists);
}

TEST(CodecTest, MissingNamespaceIsTheDefaultWorkspace) {
  auto repo = decodeGitRepo(Json::obj({{"apiVersion", "fleet.cattle.io/v1alpha1"},
                                       {"kind", "GitRepo"},
                                       {"metadata", Json::obj({{"name", "r"}})},
                                       {"spec", Json::obj({{"repo", "https://example.com/r.git"}})}}));
  ASSERT_TRUE(repo.ok()) << repo.error().describe();
  EXPECT_EQ(repo->metadata.ns, "fleet-default");
  EXPECT_EQ(repo->spec.effectivePollingInterval(), kDefaultPollingInterval);
}

TEST(CodecTest, UnknownFieldNamesPathLineAndSuggestion) {
  std::string text = kFleetGitRepo;
  text.replace(text.find("    clusterSelector:\n      matchLabels:"), 20, "    clusterSelectr:\n");
  auto resources = decodeResources(text, "gitrepo.yaml");
  ASSERT_FALSE(resources.ok());
  const Error& e = resources.error();
  EXPECT_EQ(e.kind, ErrorKind::kInvalid);
  EXPECT_NE(e.message.find("gitrepo.yaml:27: spec.targets[0].clusterSelectr: unknown field"), std::string::npos)
      << e.message;
  EXPECT_NE(e.message.find("did you mean \"clusterSelector\""), std::string::npos) << e.message;
  EXPECT_EQ(e.where, "gitrepo.yaml:27");
  EXPECT_EQ(e.describe(), e.message);
}

TEST(CodecTest, WrongTypeNamesPathAndLine) {
  const char* text =
      R"(apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: r}
spec:
  repo: https://example.com/r.git
  pollingInterval: 15
)";
  expectRejectedWith(decodeResources(text, "r.yaml"),
                     "r.yaml:6: spec.pollingInterval: expected a duration string like \"15s\", got a number");
}

TEST(CodecTest, ReportsSeveralProblemsAtOnce) {
  const char* text =
      R"(apiVersion: flotilla.io/v1alpha1
kind: GitRepo
metadata:
  name: Bad_Name
  labels: {version: 2}
spec:
  paused: "yes"
  paths: [a, 3]
)";
  auto resources = decodeResources(text, "r.yaml");
  ASSERT_NO_FATAL_FAILURE(expectRejected(
      resources,
      {"r.yaml:4: metadata.name: invalid name \"Bad_Name\"",
       "r.yaml:5: metadata.labels.version: expected a string, got a number",
       "r.yaml:6: spec.repo: required field is missing", "r.yaml:7: spec.paused: expected true or false, got a string",
       "r.yaml:8: spec.paths[1]: expected a string, got a number"}));
  EXPECT_EQ(resources.error().where, "r.yaml:4");
}

TEST(CodecTest, UnknownKindAndApiVersionNameTheDocumentLine) {
  std::string good = std::string(kFleetGitRepo);
  auto kind = decodeResources(good + "---\napiVersion: fleet.cattle.io/v1alpha1\nkind: HelmOp\nmetadata: {name: h}\n",
                              "multi.yaml");
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.error().message.find("multi.yaml:44: kind: unsupported kind \"HelmOp\""), std::string::npos)
      << kind.error().message;
  expectRejected(decodeResources("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "d.yaml"),
                 {"d.yaml:1: apiVersion: unsupported apiVersion \"apps/v1\""});
  expectRejected(decodeResources("metadata: {name: d}\n", "m.yaml"), {"apiVersion: required field is missing"});
  auto syntax = decodeResources("kind: [\n", "s.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().where.find("s.yaml:"), std::string::npos);
}

TEST(CodecTest, FleetStatusIsIgnoredAndServerFieldsAreAccepted) {
  // The shape `kubectl get gitrepo -o yaml` prints on a Fleet cluster.
  const char* text = R"(apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: simple
  namespace: fleet-default
  uid: 1b7c
  resourceVersion: "4242"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  finalizers: [fleet.cattle.io/gitrepo-finalizer]
  managedFields: [{manager: kubectl, operation: Update}]
spec:
  repo: https://github.com/rancher/fleet-examples
status:
  commit: abc
  gitJobStatus: Current
  summary: {ready: 1, desiredReady: 1}
)";
  auto resources = decodeResources(text, "export.yaml");
  ASSERT_TRUE(resources.ok()) << resources.error().describe();
  const auto& repo = std::get<GitRepo>(resources->front());
  EXPECT_EQ(repo.metadata.generation, 3);
  EXPECT_EQ(repo.metadata.resource_version, "4242");
  EXPECT_EQ(repo.status, GitRepoStatus{});
  // The same status under Flotilla's apiVersion is decoded strictly: gitJobStatus is not ours.
  expectRejected(decodeResources(replacedOnce(text, "fleet.cattle.io/v1alpha1", "flotilla.io/v1alpha1"), "export.yaml"),
                 {"export.yaml:16: status.gitJobStatus: unknown field"});
}

TEST(CodecTest, GenerateNameIsRejected) {
  expectRejected(decodeCluster(Json::obj({{"apiVersion", "fleet.cattle.io/v1alpha1"},
                                          {"kind", "Cluster"},
                                          {"metadata", Json::obj({{"generateName", "c-"}})}})),
                 {"metadata.name: required field is missing", "metadata.generateName: generateName is not supported"});
}

TEST(CodecTest, DecodesFleetCluster) {
  const char* text = R"(apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: downstream-eu-1
  namespace: fleet-default
  labels:
    env: prod
    region: eu-west
    app.kubernetes.io/managed-by: rancher
spec:
  kubeConfigSecret: downstream-eu-1-kubeconfig
  clientID: c-m-123
  paused: false
  templateValues:
    replicas: 3
    ingress: {host: eu.example.com}
  agentEnvVars:
  - name: HTTP_PROXY
    value: http://proxy:3128
  agentTolerations:
  - key: node-role.kubernetes.io/control-plane
    operator: Exists
    effect: NoSchedule
  hostNetwork: true
)";
  auto resources = decodeResources(text, "cluster.yaml");
  ASSERT_TRUE(resources.ok()) << resources.error().describe();
  const auto& cluster = std::get<Cluster>(resources->front());
  EXPECT_EQ(cluster.metadata.labels.size(), 3u);
  EXPECT_EQ(cluster.spec.kube_config_secret, "downstream-eu-1-kubeconfig");
  ASSERT_TRUE(cluster.spec.template_values);
  EXPECT_EQ(cluster.spec.template_values->getInt("replicas"), 3);
  ASSERT_TRUE(cluster.spec.agent_env_vars);
  EXPECT_EQ(cluster.spec.agent_env_vars->size(), 1u);
  EXPECT_EQ(cluster.spec.host_network, true);
  EXPECT_EQ(kindOf(resources->front()), "Cluster");
  EXPECT_EQ(metaOf(resources->front()).name, "downstream-eu-1");
}

TEST(CodecTest, DecodesFleetClusterGroupAndChecksItsSelector) {
  const char* text = R"(kind: ClusterGroup
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: production-group
  namespace: clusters
spec:
  selector:
    matchLabels:
      env: prod
    matchExpressions:
    - key: region
      operator: NotIn
      values: [us-east]
    - key: legacy
      operator: DoesNotExist
)";
  auto resources = decodeResources(text, "group.yaml");
  ASSERT_TRUE(resources.ok()) << resources.error().describe();
  const auto& group = std::get<ClusterGroup>(resources->front());
  ASSERT_TRUE(group.spec.selector);
  EXPECT_TRUE(group.spec.selector->matches({{"env", "prod"}, {"region", "eu"}}));
  EXPECT_FALSE(group.spec.selector->matches({{"env", "prod"}, {"legacy", "yes"}}));

  expectRejected(decodeResources(replacedOnce(text, "NotIn", "Notin"), "group.yaml"),
                 {"group.yaml:12: spec.selector.matchExpressions[0].operator: unknown operator \"Notin\""});
  expectRejected(decodeResources(replacedOnce(text, "      values: [us-east]\n", ""), "group.yaml"),
                 {"group.yaml:11: spec.selector.matchExpressions[0]: operator NotIn needs at least one value"});
}

TEST(CodecTest, TypedDecoderRejectsAnotherKind) {
  expectRejected(decodeBundle(Json::obj({{"apiVersion", "flotilla.io/v1alpha1"},
                                         {"kind", "Cluster"},
                                         {"metadata", Json::obj({{"name", "c"}})}}),
                              "kv"),
                 {"expected kind Bundle, got Cluster"});
}

StateSummary sampleSummary() {
  StateSummary s;
  s.add(BundleState::kReady, "c1");
  s.add(BundleState::kErrApplied, "c2", "apply failed: forbidden");
  s.add(BundleState::kNotReady, "c3", "Deployment web: 1/3 ready");
  return s;
}

GitRepo sampleGitRepo() {
  GitRepo repo;
  repo.metadata = {.name = "web",
                   .ns = "team-a",
                   .labels = {{"team", "a"}},
                   .annotations = {{"flotilla.io/note", "hello world"}},
                   .generation = 4,
                   .resource_version = "17",
                   .uid = "u-1",
                   .creation_timestamp = "2026-12-02T10:00:00Z"};
  repo.spec.repo = "https://git.example.com/web.git";
  repo.spec.revision = "v1.2.3";
  repo.spec.paths = {"apps/*", "infra"};
  repo.spec.bundles = {{"apps/web", "fleet-prod.yaml"}};
  repo.spec.target_namespace = "web";
  repo.spec.targets = {GitTarget{.name = "eu",
                                 .cluster_selector = LabelSelector{{{"region", "eu"}}, {}},
                                 .cluster_group_selector = LabelSelector{}},
                       GitTarget{.cluster_group = "default"}};
  repo.spec.ca_bundle = "LS0tLS1CRUdJTg==";
  repo.spec.insecure_skip_tls_verify = true;
  repo.spec.correct_drift = CorrectDrift{true, true, false};
  repo.spec.polling_interval = Duration{1500};
  repo.spec.disable_polling = true;
  repo.spec.webhook_secret = "hook";
  repo.spec.image_scan_interval = Duration{60'000};
  repo.spec.image_scan_commit = CommitSpec{"bot", "bot@example.com", ""};
  repo.status.observed_generation = 4;
  repo.status.commit = "0123456789abcdef0123456789abcdef01234567";
  repo.status.polling_commit = repo.status.commit;
  repo.status.summary = sampleSummary();
  repo.status.display = {"1/3", "ErrApplied", "boom", true};
  repo.status.resource_counts.ready = 7;
  repo.status.conditions = {{"Ready", "False", "ErrApplied", "boom", "2026-12-02T10:00:01Z", ""}};
  return repo;
}

BundleDeploymentOptions sampleOptions() {
  BundleDeploymentOptions o;
  o.default_namespace = "web";
  o.helm =
      HelmOptions{.chart = "oci://ghcr.io/x/web",
                  .version = "~1.2",
                  .timeout_seconds = 300,
                  .values = Json::obj({{"replicas", 3}, {"image", Json::obj({{"tag", "${ .ClusterLabels.env }"}})}}),
                  .values_from = {ValuesFrom{.secret_key_ref = KeySelector{"vals", "web", "values.yaml"}}},
                  .template_values = Labels{{"a", "b"}},
                  .take_ownership = true,
                  .max_history = 5};
  o.kustomize = KustomizeOptions{"overlays/prod"};
  o.yaml = YamlOptions{{"prod"}};
  o.diff = DiffOptions{{ComparePatch{"Deployment", "apps/v1", "web", "web", {{"remove", "/spec/replicas", ""}}, {}}}};
  o.ignore = IgnoreOptions{{{{"type", "Active"}, {"status", "False"}}}};
  o.correct_drift = CorrectDrift{};
  o.namespace_labels = Labels{};
  o.downstream_resources = {{"Secret", "db"}};
  o.keep_resources = true;
  return o;
}

TEST(CodecTest, GitRepoRoundTrips) {
  GitRepo repo = sampleGitRepo();
  Json encoded = encode(repo);
  EXPECT_EQ(encoded.getString("apiVersion"), "flotilla.io/v1alpha1");
  EXPECT_EQ(encoded.at({"spec", "pollingInterval"})->asString(), "1.5s");
  auto decoded = decodeGitRepo(encoded, "kv");
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe() << "\n" << encoded.pretty();
  EXPECT_EQ(*decoded, repo);
  // Through YAML text too, as the CLI prints and re-applies it.
  auto again = decodeResources(toYaml(encoded), "printed.yaml");
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_EQ(std::get<GitRepo>(again->front()), repo);
}

// insecureAllowHTTP is Flotilla's own field (Fleet has none for credentials over http://): decoded, round-tripped,
// and a misspelling is still an unknown field.
TEST(CodecTest, InsecureAllowHttpIsDecodedAndAMisspellingIsRejected) {
  const std::string text =
      "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: r, namespace: team-a}\n"
      "spec:\n  repo: http://git.internal/r.git\n  clientSecretName: creds\n  insecureAllowHTTP: true\n";
  auto decoded = decodeResources(text, "r.yaml");
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  const auto& repo = std::get<GitRepo>(decoded->front());
  EXPECT_TRUE(repo.spec.insecure_allow_http);
  auto again = decodeGitRepo(encode(repo), "kv");
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_TRUE(again->spec.insecure_allow_http);
  expectRejected(decodeResources(replacedOnce(text, "insecureAllowHTTP", "insecureAllowHttp"), "r.yaml"),
                 {"r.yaml:7: spec.insecureAllowHttp: unknown field"});
}

TEST(CodecTest, EncodingForFleetUsesFleetApiVersion) {
  Json encoded = encode(sampleGitRepo(), kFleetApiVersion);
  EXPECT_EQ(encoded.getString("apiVersion"), "fleet.cattle.io/v1alpha1");
  auto decoded = decodeGitRepo(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(decoded->spec, sampleGitRepo().spec);
}

TEST(CodecTest, ClusterAndClusterGroupRoundTrip) {
  Cluster cluster;
  cluster.metadata = {.name = "eu-1", .ns = "fleet-default", .labels = {{"env", "prod"}}};
  cluster.spec.client_id = "abc";
  cluster.spec.template_values = Json::obj({{"replicas", 2}});
  cluster.spec.agent_tolerations = Json(Json::Array{Json::obj({{"key", "x"}})});
  cluster.spec.host_network = false;
  cluster.status.summary = sampleSummary();
  cluster.status.display = {"2/3", "ErrApplied", ""};
  cluster.status.agent = {"2026-12-02T10:00:00.000Z", "0.1.0", "v1.31.2"};
  cluster.status.ready_git_repos = 1;
  auto c = decodeCluster(encode(cluster));
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(*c, cluster);

  ClusterGroup group;
  group.metadata = {.name = "prod", .ns = "fleet-default"};
  group.spec.selector = LabelSelector{{{"env", "prod"}}, {{"region", SelectorOperator::kIn, {"eu", "us"}}}};
  group.status.cluster_count = 3;
  group.status.non_ready_clusters = {"eu-2"};
  group.status.display = {"2/3", "", "NotReady"};
  auto g = decodeClusterGroup(encode(group));
  ASSERT_TRUE(g.ok()) << g.error().describe();
  EXPECT_EQ(*g, group);
}

TEST(CodecTest, BundleAndBundleDeploymentRoundTrip) {
  Bundle bundle;
  bundle.metadata = {.name = "web-apps-web", .ns = "team-a", .labels = {{"fleet.cattle.io/commit", "abc"}}};
  bundle.spec.options = sampleOptions();
  bundle.spec.paused = true;
  bundle.spec.rollout_strategy =
      RolloutStrategy{.max_unavailable = IntOrPercent{15, true},
                      .max_new = 10,
                      .partitions = {Partition{.name = "canary",
                                               .max_unavailable = IntOrPercent{1, false},
                                               .cluster_selector = LabelSelector{{{"canary", "true"}}, {}}}}};
  bundle.spec.resources = {{"deploy.yaml", "kind: Deployment\n", ""}};
  bundle.spec.targets = {BundleTarget{.name = "prod",
                                      .cluster_group = "prod",
                                      .do_not_deploy = true,
                                      .options = BundleDeploymentOptions{.target_namespace = "web-prod"}}};
  bundle.spec.target_restrictions = {GitTarget{.cluster_group = "prod"}};
  bundle.spec.depends_on = {BundleRef{.name = "web-infra", .accepted_states = {"Ready", "Modified"}},
                            BundleRef{.selector = LabelSelector{{{"app", "db"}}, {}}}};
  bundle.spec.target_customization_mode = "AllMatches";
  bundle.status.summary = sampleSummary();
  bundle.status.partitions = {PartitionStatus{"canary", 1, 1, 0, StateSummary{}}};
  bundle.status.resource_key = {{"Deployment", "apps/v1", "web", "web"}};
  bundle.status.commit = "abc";
  bundle.status.manifest_id = std::string(64, 'a');
  auto b = decodeBundle(encode(bundle));
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_EQ(*b, bundle);

  BundleDeployment bd;
  bd.metadata = {.name = "web-apps-web", .ns = "cluster-eu-1"};
  bd.spec.options = sampleOptions();
  bd.spec.staged_options = sampleOptions();
  bd.spec.deployment_id = std::string(64, 'a') + ":" + std::string(64, 'b');
  bd.spec.staged_deployment_id = bd.spec.deployment_id;
  bd.spec.depends_on = {BundleRef{.name = "web-infra"}};
  bd.status.applied_deployment_id = bd.spec.deployment_id;
  bd.status.ready = false;
  bd.status.non_modified = true;
  bd.status.non_ready_status = {NonReadyStatus{"u", "Deployment", "apps/v1", "web", "web",
                                               ObjectSummary{"in-progress", false, true, {"1/3 ready"}}}};
  bd.status.modified_status = {ModifiedStatus{"ConfigMap", "v1", "web", "cfg", false, true, false, ""}};
  bd.status.display = {"Deployed", "Monitored", "NotReady", "ResourcesNotReady", "Deployment web: 1/3 ready"};
  bd.status.sync_generation = 0;
  bd.status.resources = {{"Deployment", "apps/v1", "web", "web", "2026-12-02T10:00:00Z"}};
  auto d = decodeBundleDeployment(encode(bd));
  ASSERT_TRUE(d.ok()) << d.error().describe();
  EXPECT_EQ(*d, bd);
}

TEST(CodecTest, OptionsRoundTripAndStrictErrors) {
  BundleDeploymentOptions options = sampleOptions();
  auto decoded = decodeOptions(encodeOptions(options));
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, options);

  auto bad =
      decodeOptions(Json::obj({{"helm", Json::obj({{"chart", 5}, {"releaseName", "Not_Valid"}})},
                               {"namespace", "web"},
                               {"ignore", Json::obj({{"conditions", Json(Json::Array{Json::obj({{"x", 1}})})}})}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("options.helm.chart: expected a string, got a number"), std::string::npos)
      << bad.error().message;
  EXPECT_NE(bad.error().message.find("options.helm.releaseName: invalid release name"), std::string::npos);
  EXPECT_NE(bad.error().message.find("options.ignore.conditions[0].x: expected a string"), std::string::npos);

  BundleTarget target{.name = "t", .cluster_name = "c", .options = sampleOptions()};
  auto t = decodeBundleTarget(encodeBundleTarget(target));
  ASSERT_TRUE(t.ok()) << t.error().describe();
  EXPECT_EQ(*t, target);
  GitTarget git{.name = "g", .cluster_group = "prod"};
  auto g = decodeGitTarget(encodeGitTarget(git));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, git);
  RolloutStrategy rollout{.auto_partition_size = IntOrPercent{25, true}, .auto_partition_threshold = 200};
  auto r = decodeRolloutStrategy(encodeRolloutStrategy(rollout));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, rollout);
  BundleRef ref{.name = "x", .accepted_states = {"Ready"}};
  auto f = decodeBundleRef(encodeBundleRef(ref));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, ref);
}

TEST(CodecTest, InvalidValuesAreRejected) {
  auto base = [](Json spec) {
    return Json::obj({{"apiVersion", "fleet.cattle.io/v1alpha1"},
                      {"kind", "GitRepo"},
                      {"metadata", Json::obj({{"name", "r"}, {"namespace", "Team"}})},
                      {"spec", std::move(spec)}});
  };
  auto r = decodeGitRepo(base(Json::obj({{"repo", "x"},
                                         {"caBundle", "not base64!"},
                                         {"pollingInterval", "10 minutes"},
                                         {"forceSyncGeneration", -1},
                                         {"paths", Json(Json::Array{Json("")})}})));
  expectRejected(r,
                 {"metadata.namespace: invalid namespace \"Team\"", "spec.caBundle: expected base64-encoded PEM data",
                  "spec.pollingInterval: invalid duration \"10 minutes\"",
                  "spec.forceSyncGeneration: must be at least 0, got -1", "spec.paths[0]: must not be empty"});
}

TEST(CodecTest, TooManyProblemsAreCapped) {
  Json spec = Json::obj({{"repo", "x"}});
  for (int i = 0; i < 15; ++i) {
    spec["unknown" + std::to_string(i)] = i;
  }
  expectRejected(decodeGitRepo(Json::obj({{"apiVersion", "fleet.cattle.io/v1alpha1"},
                                          {"kind", "GitRepo"},
                                          {"metadata", Json::obj({{"name", "r"}})},
                                          {"spec", spec}})),
                 {"; and 5 more"});
}

}  // namespace
}  // namespace flotilla::model
