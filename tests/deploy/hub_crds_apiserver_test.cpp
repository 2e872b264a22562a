// The hub chart's Fleet CRDs (charts/flotilla-hub/crds/) on a real kube-apiserver (tests/harness/kube): they become
// Established; an unchanged Fleet GitRepo with many fields, a ClusterGroup and a Cluster are accepted and `kubectl
// get gitrepos -A` reads like Fleet's; bad specs are refused by the API server naming the field; and the GitRepos the
// repository uses as valid examples (tests/conformance/cases) pass a server-side dry run.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_suite.h"
#include "flotilla/core/util.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kWorkspace = "crds-fleet-default";

// A GitRepo as a Fleet user writes it, with most of Fleet's spec fields.
constexpr const char* kFleetGitRepo = R"(apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: shop
  namespace: crds-fleet-default
  labels:
    team: web
spec:
  repo: https://github.com/example/shop
  branch: main
  paths:
    - charts/frontend
    - manifests/*
  targetNamespace: shop
  clientSecretName: github-token
  helmSecretName: helm-repo-creds
  helmRepoURLRegex: https://charts\.example\.com/.*
  insecureSkipTLSVerify: false
  serviceAccount: fleet-deployer
  paused: false
  forceSyncGeneration: 2
  pollingInterval: 1m30s
  disablePolling: false
  keepResources: true
  deleteNamespace: false
  correctDrift:
    enabled: true
    force: false
    keepFailHistory: true
  targets:
    - name: prod
      clusterSelector:
        matchLabels:
          env: prod
        matchExpressions:
          - key: region
            operator: In
            values: [eu-west, eu-central]
    - name: canary
      clusterGroup: canary
    - name: one
      clusterName: edge-7
    - clusterGroupSelector:
        matchLabels:
          tier: edge
)";

constexpr const char* kClusterGroup = R"(apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata:
  name: canary
  namespace: crds-fleet-default
spec:
  selector:
    matchLabels:
      canary: "true"
    matchExpressions:
      - key: env
        operator: NotIn
        values: [dev]
)";

constexpr const char* kCluster = R"(apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: edge-7
  namespace: crds-fleet-default
  labels:
    env: prod
spec:
  paused: false
  templateValues:
    region: eu-west
    replicas: 3
    ingress: {host: edge-7.example.com}
  agentEnvVars:
    - name: HTTPS_PROXY
      value: http://proxy:3128
  agentTolerations:
    - key: node-role.kubernetes.io/control-plane
      operator: Exists
      effect: NoSchedule
  agentResources:
    limits: {cpu: 500m, memory: 512Mi}
)";

class HubCrdsOnApiserver : public ApiserverSuite {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(ApiserverSuite::SetUpTestSuite());
    ASSERT_NO_FATAL_FAILURE(applyHubCrds());
    ASSERT_NO_FATAL_FAILURE(createNamespace(kWorkspace));
  }

  //! `kubectl apply` of `yaml` (kubectl's default strict field validation); `dry_run` asks the server only.
  static CommandResult apply(const std::string& yaml, bool dry_run = false) {
    std::vector<std::string> args{"apply", "-f", "-"};
    if (dry_run) {
      args.emplace_back("--dry-run=server");
    }
    return kubectl(args, yaml);
  }
};

TEST_F(HubCrdsOnApiserver, EveryCrdIsEstablishedAndServed) {
  for (const std::string plural : {"gitrepos", "clustergroups", "clusters", "bundles", "bundledeployments"}) {
    auto crd = kubectl({"get", "crd", plural + ".fleet.cattle.io", "-o",
                        R"(jsonpath={.status.conditions[?(@.type=="Established")].status})"});
    EXPECT_EQ(crd.exit_code, 0) << crd.err;
    EXPECT_EQ(crd.out, "True") << plural;
    auto list = kubectl({"get", plural + ".fleet.cattle.io", "-A"});
    EXPECT_EQ(list.exit_code, 0) << plural << ": " << list.err;
  }
  auto resources = kubectl({"api-resources", "--api-group=fleet.cattle.io", "--categories=fleet", "-o", "name"});
  ASSERT_EQ(resources.exit_code, 0) << resources.err;
  EXPECT_EQ(resources.out,
            "bundledeployments.fleet.cattle.io\nbundles.fleet.cattle.io\nclustergroups.fleet.cattle.io\n"
            "clusters.fleet.cattle.io\ngitrepos.fleet.cattle.io\n");
}

TEST_F(HubCrdsOnApiserver, FleetGitRepoClusterGroupAndClusterAreAccepted) {
  for (const char* yaml : {kFleetGitRepo, kClusterGroup, kCluster}) {
    auto applied = apply(yaml);
    EXPECT_EQ(applied.exit_code, 0) << applied.err << "\n" << yaml;
    EXPECT_THAT(applied.err, Not(HasSubstr("Warning"))) << yaml;
  }
  // Nothing was pruned: what was written is what is stored.
  auto stored = kubectl({"-n", kWorkspace, "get", "gitrepo", "shop", "-o",
                         "jsonpath={.spec.targets[0].clusterSelector.matchExpressions[0].values[1]} "
                         "{.spec.correctDrift.keepFailHistory} {.spec.pollingInterval} {.spec.forceSyncGeneration}"});
  EXPECT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_EQ(stored.out, "eu-central true 1m30s 2");
  auto values = kubectl({"-n", kWorkspace, "get", "cluster", "edge-7", "-o", "jsonpath={.spec.templateValues}"});
  EXPECT_EQ(values.out, R"({"ingress":{"host":"edge-7.example.com"},"region":"eu-west","replicas":3})");

  // The gateway writes status through the subresource; the printer columns show it like Fleet's.
  const std::string status =
      R"({"status":{"commit":"4f2a9c1","display":{"readyBundleDeployments":"2/3"},)"
      R"("conditions":[{"type":"Ready","status":"False","message":"NotReady(1) [Cluster edge-7]"}]}})";
  auto patched =
      kubectl({"-n", kWorkspace, "patch", "gitrepo", "shop", "--subresource=status", "--type=merge", "-p", status});
  ASSERT_EQ(patched.exit_code, 0) << patched.err;
  auto table = kubectl({"get", "gitrepos", "-A"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  const std::string header = table.out.substr(0, table.out.find('\n'));
  EXPECT_THAT(header, ::testing::MatchesRegex("NAMESPACE +NAME +REPO +COMMIT +BUNDLEDEPLOYMENTS-READY +STATUS +AGE"));
  EXPECT_THAT(table.out, ::testing::ContainsRegex("crds-fleet-default +shop +https://github.com/example/shop +"
                                                  "4f2a9c1 +2/3 +NotReady\\(1\\) \\[Cluster edge-7\\]"));
  auto clusters = kubectl({"-n", kWorkspace, "get", "clusters.fleet.cattle.io"});
  EXPECT_THAT(clusters.out.substr(0, clusters.out.find('\n')),
              ::testing::MatchesRegex("NAME +BUNDLES-READY +LAST-SEEN +STATUS +AGE"));
  auto groups = kubectl({"-n", kWorkspace, "get", "clustergroups"});
  EXPECT_THAT(groups.out.substr(0, groups.out.find('\n')),
              ::testing::MatchesRegex("NAME +CLUSTERS-READY +BUNDLES-READY +STATUS +AGE"));
}

// Each bad spec is refused by the API server itself (nothing stored), and the message names the field.
TEST_F(HubCrdsOnApiserver, BadSpecsAreRefusedNamingTheField) {
  const std::string head =
      "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: bad, namespace: crds-fleet-default}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"spec: {repo: https://example.com/r, pollingIntervall: 15s}", R"(unknown field "spec.pollingIntervall")"},
      {"spec: {repo: https://example.com/r, correctDrift: {enable: true}}",
       R"(unknown field "spec.correctDrift.enable")"},
      {"spec: {repo: https://example.com/r, paths: a}", "spec.paths: Invalid value"},
      {"spec: {repo: https://example.com/r, paused: \"yes\"}", "spec.paused: Invalid value"},
      {"spec: {repo: https://example.com/r, forceSyncGeneration: \"2\"}", "spec.forceSyncGeneration: Invalid value"},
      {"spec: {branch: main}", "spec.repo: Required value"},
      {"spec: {repo: https://example.com/r, targets: [{clusterSelector: {matchLabels: {env: 1}}}]}",
       "spec.targets[0].clusterSelector.matchLabels.env: Invalid value"},
      {"spec: {repo: https://example.com/r, targets: [{clusterSelector: {matchExpressions: [{key: a, operator: "
       "Is}]}}]}",
       "spec.targets[0].clusterSelector.matchExpressions[0].operator: Unsupported value"},
      {"spec: {repo: https://example.com/r, caBundle: not-base64!}", "spec.caBundle"},
  };
  for (const auto& [spec, message] : cases) {
    auto refused = apply(head + spec + "\n");
    EXPECT_NE(refused.exit_code, 0) << spec;
    EXPECT_THAT(refused.err, HasSubstr(message)) << spec;
  }
  auto group = apply(
      "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: bad, namespace: "
      "crds-fleet-default}\nspec: {selector: {matchLabel: {env: prod}}}\n");
  EXPECT_NE(group.exit_code, 0);
  EXPECT_THAT(group.err, HasSubstr(R"(unknown field "spec.selector.matchLabel")"));
  auto cluster = apply(
      "apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata: {name: bad, namespace: "
      "crds-fleet-default}\nspec: {paused: 1}\n");
  EXPECT_NE(cluster.exit_code, 0);
  EXPECT_THAT(cluster.err, HasSubstr("spec.paused: Invalid value"));
  auto none = kubectl({"-n", kWorkspace, "get", "gitrepo", "bad", "--ignore-not-found", "-o", "name"});
  EXPECT_EQ(none.out, "");
}

// The GitRepo documents of the conformance cases (valid examples `flotilla apply` accepts) pass a server-side dry
// run, in their own namespace.
TEST_F(HubCrdsOnApiserver, TheRepositorysGitRepoExamplesPassADryRun) {
  ASSERT_NO_FATAL_FAILURE(createNamespace("fleet-default"));
  int checked = 0;
  const std::filesystem::path cases = std::filesystem::path(sourceDir()) / "tests/conformance/cases";
  for (const auto& entry : std::filesystem::directory_iterator(cases)) {
    const auto file = entry.path() / "gitrepo.yaml";
    if (!std::filesystem::exists(file)) {
      continue;
    }
    auto text = readFile(file.string());
    ASSERT_TRUE(text.ok()) << file;
    auto dry = apply(*text, true);
    EXPECT_EQ(dry.exit_code, 0) << file << ": " << dry.err;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace flotilla::deploy_test
