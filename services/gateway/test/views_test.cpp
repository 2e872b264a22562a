// The Bundle and BundleDeployment views in Fleet's shape (views.h).
#include "flotilla/gateway/views.h"

#include <gtest/gtest.h>

namespace flotilla::gateway {
namespace {

TEST(Views, BundleCarriesItsGitRepoCommitAndRollUp) {
  events::BundleSummary summary;
  summary.workspace = "fleet-default";
  summary.bundle = "web-app";
  summary.gitrepo = "web";
  summary.commit = "0123456789abcdef0123456789abcdef01234567";
  summary.state = "NotReady";
  summary.message = "NotReady(1) [Cluster edge-1: deployment web not available]";
  summary.ready_clusters = "1/2";
  const View view = bundleView(summary);
  EXPECT_EQ(view.object.getString("kind"), "Bundle");
  EXPECT_EQ(view.object.at({"metadata", "namespace"})->asString(), "fleet-default");
  EXPECT_EQ(view.object.at({"metadata", "name"})->asString(), "web-app");
  EXPECT_EQ(view.object.at({"metadata", "labels", "fleet.cattle.io/repo-name"})->asString(), "web");
  EXPECT_EQ(view.object.at({"metadata", "labels", "fleet.cattle.io/commit"})->asString(), summary.commit);
  EXPECT_EQ(view.status.at({"display", "readyClusters"})->asString(), "1/2");
  const Json& ready = view.status.find("conditions")->asArray().front();
  EXPECT_EQ(ready.getString("status"), "False");
  EXPECT_EQ(ready.getString("message"), summary.message);
}

events::DeploymentRecord record() {
  events::DeploymentRecord out;
  out.cluster = "edge-1";
  out.workspace = "fleet-default";
  out.bundle = "web-app";
  out.gitrepo = "web";
  out.commit = "abc";
  out.deployment_id = "m1:o1";
  return out;
}

TEST(Views, ABundleDeploymentNotYetReportedWaitsForItsDeployment) {
  auto view = bundleDeploymentView({.record = record(), .status = std::nullopt});
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->object.at({"metadata", "name"})->asString(), "web-app.edge-1");
  EXPECT_EQ(view->object.at({"metadata", "labels", "fleet.cattle.io/cluster"})->asString(), "edge-1");
  EXPECT_EQ(view->object.at({"metadata", "labels", "fleet.cattle.io/bundle-name"})->asString(), "web-app");
  EXPECT_EQ(view->object.at({"spec", "deploymentID"})->asString(), "m1:o1");
  EXPECT_EQ(view->status.at({"display", "deployed"})->asString(), "No");
  EXPECT_EQ(view->status.find("conditions")->asArray().front().getString("status"), "Unknown");
}

TEST(Views, AReportedBundleDeploymentShowsItsStateAndNonReadyObjects) {
  events::BdStatus status;
  status.cluster = "edge-1";
  status.workspace = "fleet-default";
  status.bundle = "web-app";
  status.deployment_id = "m1:o1";
  status.state = "NotReady";
  status.message = "deployment web: 0 of 2 available";
  status.resources = {
      {.api_version = "apps/v1",
       .kind = "Deployment",
       .ns = "web",
       .name = "web",
       .state = "NotReady",
       .message = "0 of 2 available"},
      {.api_version = "v1", .kind = "Service", .ns = "web", .name = "web", .state = "Ready", .message = ""}};
  auto view = bundleDeploymentView({.record = record(), .status = status});
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->status.at({"display", "deployed"})->asString(), "Yes");
  EXPECT_EQ(view->status.at({"display", "monitored"})->asString(), "NotReady: deployment web: 0 of 2 available");
  ASSERT_EQ(view->status.find("nonReadyStatus")->size(), 1u);
  EXPECT_EQ(view->status.find("nonReadyStatus")->asArray().front().getString("kind"), "Deployment");
  EXPECT_EQ(view->status.find("conditions")->asArray().front().getString("reason"), "NotReady");

  // Nothing left: no view.
  EXPECT_FALSE(bundleDeploymentView({}).has_value());
}

}  // namespace
}  // namespace flotilla::gateway
