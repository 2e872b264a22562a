// Shared pieces of the kube integration tests: clients for harness clusters, unique names, small objects.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/harness/poll.h"
#include "flotilla/kube/client.h"

namespace flotilla::kube::testing {

inline Result<std::unique_ptr<KubeClient>> clientFor(const std::string& kubeconfig_path,
                                                     KubeClientOptions options = {}) {
  auto config = Kubeconfig::load(kubeconfig_path);
  FLOTILLA_TRY(config);
  return KubeClient::create(*config, std::move(options));
}

inline std::string uniqueName(const std::string& prefix) {
  return prefix + "-" + randomHex(4);
}

inline Json namespaceObject(const std::string& name) {
  return Json::obj({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Json::obj({{"name", name}})}});
}

inline Json configMap(const std::string& ns, const std::string& name, std::map<std::string, std::string> data,
                      std::map<std::string, std::string> labels = {}) {
  Json object = Json::obj(
      {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", Json::obj({{"name", name}, {"namespace", ns}})}});
  for (const auto& [k, v] : data) {
    object["data"][k] = v;
  }
  for (const auto& [k, v] : labels) {
    object["metadata"]["labels"][k] = v;
  }
  return object;
}

//! Polls `condition` every 100 ms until it holds or `timeout` passes.
inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  return harness::waitUntil(condition, timeout, std::chrono::milliseconds(100));
}

//! A fixture with the shared clusters, an admin client on the first one and a fresh namespace there.
class KubeTest : public ::testing::Test {
 protected:
  //! How many shared clusters the test needs (most need one).
  virtual size_t clustersWanted() const { return 1; }

  void SetUp() override {
    auto clusters = harness::sharedKubeClusters(clustersWanted());
    ASSERT_TRUE(clusters.ok()) << clusters.error().describe();
    clusters_ = *clusters;
    for (auto* c : clusters_) {
      std::fprintf(stderr, "using kube-apiserver %s at %s (started in %.1fs)\n", c->name().c_str(),
                   c->serverUrl().c_str(), c->startSeconds());
    }
    auto client = clientFor(clusters_[0]->kubeconfigPath());
    ASSERT_TRUE(client.ok()) << client.error().describe();
    client_ = std::move(*client);
    ns_ = uniqueName("t");
    auto created = client_->apply(namespaceObject(ns_));
    ASSERT_TRUE(created.ok()) << created.error().describe();
  }

  void TearDown() override {
    if (HasFailure()) {
      for (auto* c : clusters_) {
        auto health = c->healthy();
        if (!health.ok()) {
          std::fprintf(stderr, "%s\n", health.error().message.c_str());
        }
      }
    }
  }

  std::vector<harness::KubeCluster*> clusters_;
  std::unique_ptr<KubeClient> client_;
  std::string ns_;
};

}  // namespace flotilla::kube::testing
