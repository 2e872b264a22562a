// The hub chart's RBAC and admission policy for Fleet's CRDs, applied for real on a kube-apiserver that authorizes
// with RBAC, with a kube-controller-manager that aggregates ClusterRoles (tests/harness/kube): a user bound only to
// the built-in view role reads all five kinds and writes none; one bound to edit creates GitRepos but not Bundles;
// the ValidatingAdmissionPolicy (gateway.enabled) refuses a cluster admin's writes of Bundles and BundleDeployments
// with its message and lets the gateway's ServiceAccount write them. Checked with `kubectl auth can-i --as` and
// real requests made with each ServiceAccount's token.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_suite.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::HasSubstr;

constexpr const char* kHubNamespace = "flotilla-system";
constexpr const char* kRelease = "hub";
constexpr const char* kWorkspace = "team-a";
constexpr const char* kGateway = "system:serviceaccount:flotilla-system:hub-flotilla-hub-gateway";
constexpr const char* kViewer = "system:serviceaccount:team-a:viewer";
constexpr const char* kEditor = "system:serviceaccount:team-a:editor";
const std::vector<std::string> kKinds = {"gitrepos", "clustergroups", "clusters", "bundles", "bundledeployments"};

std::string bundle(const std::string& name, const std::string& kind = "Bundle") {
  return "apiVersion: fleet.cattle.io/v1alpha1\nkind: " + kind + "\nmetadata: {name: " + name +
         ", namespace: team-a, labels: {fleet.cattle.io/repo-name: shop}}\nspec: {resources: []}\n";
}

class HubRbacOnApiserver : public ApiserverSuite {
 protected:
  // A cluster of its own: the shared one runs no kube-controller-manager, which aggregates ClusterRoles.
  static void SetUpTestSuite() {
    kubectl_ = toolPath("kubectl");
    ASSERT_FALSE(kubectl_.empty()) << "kubectl missing: run scripts/setup --no-run";
    ASSERT_TRUE(harness::KubeCluster::controllerManagerAvailable()) << "kube-controller-manager missing";
    auto started = harness::KubeCluster::start({.name = "hub-rbac", .with_controller_manager = true});
    ASSERT_TRUE(started.ok()) << started.error().describe();
    own_ = std::move(*started);
    cluster_ = own_.get();
    ASSERT_NO_FATAL_FAILURE(applyHubCrds());
    for (const std::string ns : {kHubNamespace, kWorkspace}) {
      ASSERT_NO_FATAL_FAILURE(createNamespace(ns));
    }
    ASSERT_NO_FATAL_FAILURE(applyChartRbac());
    for (const std::string role : {"view", "edit"}) {
      const std::string account = role == "view" ? "viewer" : "editor";
      ASSERT_EQ(kubectl({"-n", kWorkspace, "create", "serviceaccount", account}).exit_code, 0);
      auto bound = kubectl({"-n", kWorkspace, "create", "rolebinding", account, "--clusterrole=" + role,
                            "--serviceaccount=team-a:" + account});
      ASSERT_EQ(bound.exit_code, 0) << bound.err;
    }
    ASSERT_NO_FATAL_FAILURE(waitForAggregation());
  }

  static void TearDownTestSuite() {
    cluster_ = nullptr;
    own_.reset();
  }

  //! The chart's ClusterRoles and (gateway.enabled) the gateway's objects and admission policy, applied as a List.
  static void applyChartRbac() {
    auto objects =
        renderChart("flotilla-hub", {"--set", "nats.auth.lookupSecrets=false", "--set", "gateway.enabled=true"},
                    kRelease, kHubNamespace);
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    Json list = Json::obj({{"apiVersion", "v1"}, {"kind", "List"}, {"items", Json::array()}});
    for (const auto& object : *objects) {
      const std::string kind = object.getString("kind");
      const bool wanted =
          kind.starts_with("ClusterRole") || kind.starts_with("ValidatingAdmissionPolicy") ||
          (kind == "ServiceAccount" && object.at({"metadata", "name"})->asString().ends_with("gateway"));
      if (wanted) {
        Json copy = object;
        if (kind == "ServiceAccount") {
          copy["metadata"]["namespace"] = Json(kHubNamespace);
        }
        list.find("items")->push(copy);
      }
    }
    ASSERT_EQ(list.find("items")->size(), 7u)
        << "2 aggregated ClusterRoles, gateway SA, ClusterRole(+Binding), policy(+binding)";
    auto applied = kubectl({"apply", "-f", "-"}, list.dump());
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
  }

  //! The aggregation controller folds the chart's roles into view/edit asynchronously: wait until it has.
  static void waitForAggregation() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int attempts = 0;
    while (true) {
      ++attempts;
      if (canI({"list", "bundles.fleet.cattle.io", "-n", kWorkspace}, kViewer) == "yes" &&
          canI({"create", "gitrepos.fleet.cattle.io", "-n", kWorkspace}, kEditor) == "yes") {
        std::cerr << "roles aggregated into view and edit after " << attempts << " check(s)\n";
        return;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "view/edit never got the chart's rules\n"
                                                            << cluster_->logTail(40);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  static std::string canI(std::vector<std::string> what, const std::string& as) {
    what.insert(what.begin(), {"auth", "can-i"});
    what.push_back("--as=" + as);
    auto result = kubectl(what);
    return result.out.substr(0, result.out.find('\n'));
  }

  //! A token of ServiceAccount `ns`/`name`.
  static std::string tokenOf(const std::string& ns, const std::string& name) {
    auto token = kubectl({"-n", ns, "create", "token", name});
    EXPECT_EQ(token.exit_code, 0) << token.err;
    return token.out.substr(0, token.out.find('\n'));
  }

  //! kubectl with only a bearer token (no client certificate).
  static CommandResult asToken(const std::string& token, std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig=/dev/null", "--server=" + cluster_->serverUrl(),
                               "--certificate-authority=" + cluster_->caFile(), "--token=" + token});
    return run(args, input);
  }

  static inline std::unique_ptr<harness::KubeCluster> own_;
};

TEST_F(HubRbacOnApiserver, ViewReadsAllFiveKindsAndWritesNone) {
  for (const auto& kind : kKinds) {
    const std::string resource = kind + ".fleet.cattle.io";
    for (const char* verb : {"get", "list", "watch"}) {
      EXPECT_EQ(canI({verb, resource, "-n", kWorkspace}, kViewer), "yes") << verb << " " << kind;
    }
    for (const char* verb : {"create", "update", "patch", "delete"}) {
      EXPECT_EQ(canI({verb, resource, "-n", kWorkspace}, kViewer), "no") << verb << " " << kind;
    }
    EXPECT_EQ(canI({"list", resource, "-n", kHubNamespace}, kViewer), "no") << "outside its namespace: " << kind;
  }
  const std::string token = tokenOf(kWorkspace, "viewer");
  for (const auto& kind : kKinds) {
    auto listed = asToken(token, {"-n", kWorkspace, "get", kind + ".fleet.cattle.io"});
    EXPECT_EQ(listed.exit_code, 0) << kind << ": " << listed.err;
  }
  auto created = asToken(token, {"apply", "-f", "-"},
                         "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: by-viewer, "
                         "namespace: team-a}\nspec: {repo: https://example.com/r}\n");
  EXPECT_NE(created.exit_code, 0);
  EXPECT_THAT(created.err, HasSubstr("forbidden"));
}

TEST_F(HubRbacOnApiserver, EditCreatesGitReposButNotBundles) {
  for (const char* kind : {"gitrepos", "clustergroups", "clusters"}) {
    for (const char* verb : {"create", "update", "patch", "delete"}) {
      EXPECT_EQ(canI({verb, std::string(kind) + ".fleet.cattle.io", "-n", kWorkspace}, kEditor), "yes")
          << verb << " " << kind;
    }
  }
  for (const char* kind : {"bundles", "bundledeployments"}) {
    const std::string resource = std::string(kind) + ".fleet.cattle.io";
    EXPECT_EQ(canI({"list", resource, "-n", kWorkspace}, kEditor), "yes") << kind;
    for (const char* verb : {"create", "update", "patch", "delete"}) {
      EXPECT_EQ(canI({verb, resource, "-n", kWorkspace}, kEditor), "no") << verb << " " << kind;
    }
    EXPECT_EQ(canI({"patch", resource, "--subresource=status", "-n", kWorkspace}, kEditor), "no") << kind;
  }
  const std::string token = tokenOf(kWorkspace, "editor");
  auto repo = asToken(token, {"apply", "-f", "-"},
                      "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata: {name: by-editor, namespace: "
                      "team-a}\nspec: {repo: https://example.com/r, paths: [apps]}\n");
  EXPECT_EQ(repo.exit_code, 0) << repo.err;
  auto refused = asToken(token, {"create", "-f", "-"}, bundle("by-editor"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("cannot create resource \"bundles\""));
}

// The policy is enforced shortly after it is created: the first check is retried until the API server refuses the
// admin's dry run, then everything else is checked once.
TEST_F(HubRbacOnApiserver, OnlyTheGatewayWritesBundlesAndBundleDeployments) {
  const std::string message =
      ".fleet.cattle.io may be written only by the Flotilla hub gateway, " + std::string(kGateway) + ", not by ";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int attempt = 1;; ++attempt) {
    auto probe = kubectl({"create", "--dry-run=server", "-f", "-"}, bundle("probe"));
    if (probe.exit_code != 0 && probe.err.find(message) != std::string::npos) {
      std::cerr << "admission policy in effect after " << attempt << " attempt(s)\n";
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the admission policy never refused the admin: " << probe.out << probe.err;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // The cluster admin (system:masters, every RBAC check passes) is refused, naming the gateway and the admin.
  for (const char* kind : {"Bundle", "BundleDeployment"}) {
    auto admin = kubectl({"create", "-f", "-"}, bundle("by-admin", kind));
    EXPECT_NE(admin.exit_code, 0) << kind;
    EXPECT_THAT(admin.err, HasSubstr("ValidatingAdmissionPolicy")) << admin.err;
    EXPECT_THAT(admin.err, HasSubstr(message + "admin")) << admin.err;
  }

  // The gateway creates, updates (status too) and deletes them with its own token.
  const std::string gateway = tokenOf(kHubNamespace, "hub-flotilla-hub-gateway");
  EXPECT_EQ(canI({"create", "bundles.fleet.cattle.io", "-n", kWorkspace}, kGateway), "yes");
  // It creates specs' CRs (a registered cluster's, an adopted KV spec's) but never changes or deletes a user's.
  for (const char* kind : {"gitrepos", "clustergroups", "clusters"}) {
    const std::string resource = std::string(kind) + ".fleet.cattle.io";
    EXPECT_EQ(canI({"create", resource, "-n", kWorkspace}, kGateway), "yes") << kind;
    for (const char* verb : {"update", "patch", "delete"}) {
      EXPECT_EQ(canI({verb, resource, "-n", kWorkspace}, kGateway), "no") << verb << " " << kind;
    }
  }
  EXPECT_EQ(canI({"patch", "gitrepos.fleet.cattle.io", "--subresource=status", "-n", kWorkspace}, kGateway), "yes");
  for (const char* kind : {"Bundle", "BundleDeployment"}) {
    auto created = asToken(gateway, {"create", "-f", "-"}, bundle("by-gateway", kind));
    EXPECT_EQ(created.exit_code, 0) << kind << ": " << created.err;
  }
  const std::string status = R"({"status":{"display":{"readyClusters":"1/1"}}})";
  auto gateway_status = asToken(gateway, {"-n", kWorkspace, "patch", "bundle", "by-gateway", "--subresource=status",
                                          "--type=merge", "-p", status});
  EXPECT_EQ(gateway_status.exit_code, 0) << gateway_status.err;

  // The admin may read them, but not change their status, labels or existence.
  auto read = kubectl({"-n", kWorkspace, "get", "bundle", "by-gateway", "-o", "jsonpath={.status.display}"});
  EXPECT_EQ(read.out, R"({"readyClusters":"1/1"})");
  auto admin_status = kubectl({"-n", kWorkspace, "patch", "bundle", "by-gateway", "--subresource=status",
                               "--type=merge", "-p", R"({"status":{"display":{"readyClusters":"0/1"}}})"});
  EXPECT_NE(admin_status.exit_code, 0);
  EXPECT_THAT(admin_status.err, HasSubstr(message)) << admin_status.err;
  auto admin_label = kubectl({"-n", kWorkspace, "label", "bundledeployment", "by-gateway", "x=y"});
  EXPECT_NE(admin_label.exit_code, 0);
  EXPECT_THAT(admin_label.err, HasSubstr(message)) << admin_label.err;
  auto admin_delete = kubectl({"-n", kWorkspace, "delete", "bundle", "by-gateway"});
  EXPECT_NE(admin_delete.exit_code, 0);
  EXPECT_THAT(admin_delete.err, HasSubstr(message)) << admin_delete.err;
  for (const char* kind : {"bundle", "bundledeployment"}) {
    auto deleted = asToken(gateway, {"-n", kWorkspace, "delete", kind, "by-gateway"});
    EXPECT_EQ(deleted.exit_code, 0) << kind << ": " << deleted.err;
  }
}

}  // namespace
}  // namespace flotilla::deploy_test
