// apiserver_suite.h
//
// The base of the deployment tests that run against a real kube-apiserver (tests/harness/kube): the process's
// shared cluster and the pinned kubectl, with its admin kubeconfig. The cluster is shared with every other suite of
// the process, so suites name their namespaces and objects apart.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "deploy_util.h"
#include "flotilla/harness/kube_cluster.h"

namespace flotilla::deploy_test {

class ApiserverSuite : public ::testing::Test {
 protected:
  //! The shared cluster and kubectl; a suite with more to set up calls it first, in ASSERT_NO_FATAL_FAILURE.
  static void SetUpTestSuite() {
    auto clusters = harness::sharedKubeClusters(1);
    ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
    cluster_ = clusters->front();
    kubectl_ = toolPath("kubectl");
    ASSERT_FALSE(kubectl_.empty()) << "kubectl missing: run scripts/setup --no-run";
  }

  //! kubectl with the cluster admin's kubeconfig.
  static CommandResult kubectl(std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig", cluster_->kubeconfigPath()});
    return run(args, input);
  }

  //! Creates namespace `ns` unless it exists (an earlier suite of the process may have made it).
  static void createNamespace(const std::string& ns) {
    auto created = kubectl({"create", "namespace", ns});
    ASSERT_TRUE(created.exit_code == 0 || created.err.find("AlreadyExists") != std::string::npos) << created.err;
  }

  //! Applies the hub chart's Fleet CRDs (charts/flotilla-hub/crds/, what `helm install` installs) and waits until
  //! each is Established.
  static void applyHubCrds() {
    const std::string dir = chartDir("flotilla-hub") + "/crds";
    auto applied = kubectl({"apply", "-f", dir});
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    auto established = kubectl({"wait", "--for=condition=Established", "--timeout=60s", "-f", dir});
    ASSERT_EQ(established.exit_code, 0) << established.out << established.err;
  }

  static inline harness::KubeCluster* cluster_ = nullptr;
  static inline std::string kubectl_;
};

}  // namespace flotilla::deploy_test
