#include "flotilla/model/identity.h"

#include <gtest/gtest.h>

namespace flotilla::model {
namespace {

// Expected values are the ones Fleet's own names.HelmReleaseName tests pin down, so our bundle names match Fleet's.
TEST(IdentityTest, HelmReleaseNameMatchesFleet) {
  const std::string str50 = "12345678901234567890123456789012345678901234567890";
  const std::string str53 = str50 + "123";
  const std::string str63 = str50 + "1234567890123";
  EXPECT_EQ(helmReleaseName(str53), str53);
  EXPECT_EQ(helmReleaseName(str53 + "a"), "12345678901234567890123456789012345678901234567-fdba4");
  EXPECT_EQ(helmReleaseName(str63 + "a"), "12345678901234567890123456789012345678901234567-eb12d");
  EXPECT_EQ(helmReleaseName("long-name-test-shortpath-with@char"), "long-name-test-shortpath-with-char-031bab5e");
  EXPECT_EQ(helmReleaseName("long-name-test-shortpath-with+char"), "long-name-test-shortpath-with-char-21c88393");
  EXPECT_EQ(helmReleaseName("long-name-test-0.App_ "), "long-name-test-0-app-5bf6b3fb");
  EXPECT_EQ(helmReleaseName("long-name-test--App_-_12.factor"), "long-name-test-app-12-factor-0efbac37");
  EXPECT_EQ(helmReleaseName("bundle.name.example.com"), "bundle-name-example-com-645ef821");
  EXPECT_EQ(helmReleaseName(str53.substr(0, 46) + "-1234567"), "1234567890123456789012345678901234567890123456-d0bce");
}

TEST(IdentityTest, HelmReleaseNameOfNothingUsableIsAChecksum) {
  // Only invalid characters: the md5 suffix is all that survives the cleanup.
  std::string name = helmReleaseName("___");
  EXPECT_EQ(name.size(), 8u);
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef"), std::string::npos);
  // Nothing at all: Fleet's fallback, 24 hex characters of md5.
  EXPECT_EQ(helmReleaseName(""), "d41d8cd98f00b204e9800998");
}

TEST(IdentityTest, BundleIdFollowsFleetNaming) {
  // fleet-docs: GitRepo "one", path "/multi-cluster/hello-world" => "one-multi-cluster-hello-world".
  EXPECT_EQ(bundleID("one", "/multi-cluster/hello-world"), "one-multi-cluster-hello-world");
  EXPECT_EQ(bundleID("one", "multi-cluster/hello-world/"), "one-multi-cluster-hello-world");
  EXPECT_EQ(bundleID("simple", ""), "simple");
  EXPECT_EQ(bundleID("simple", "/"), "simple");
  EXPECT_EQ(bundleID("simple", "."), "simple");
  EXPECT_EQ(bundleID("simple", "./a/./b//c"), "simple-a-b-c");
  EXPECT_EQ(bundleID("repo", "apps/../infra"), "repo-infra");
  // fleet.yaml's name wins, verbatim.
  EXPECT_EQ(bundleID("one", "x", "my-great-bundle"), "my-great-bundle");
  // Upper case or dots get Fleet's md5 suffix; long names are shortened to 53 characters.
  EXPECT_EQ(bundleID("repo", "Apps/Web"), helmReleaseName("repo/Apps/Web"));
  EXPECT_NE(bundleID("repo", "Apps/Web"), bundleID("repo", "apps/web"));
  // fleet-docs: "opni-fleet-examples-fleets-opni-ui-plugin-operator-crd" is shortened this way.
  std::string long_id = bundleID("opni-fleet-examples", "fleets/opni-ui-plugin-operator-crd");
  EXPECT_EQ(long_id.size(), 53u);
  EXPECT_EQ(long_id, "opni-fleet-examples-fleets-opni-ui-plugin-opera-021f7");
}

TEST(IdentityTest, ManifestAndDeploymentIds) {
  EXPECT_EQ(manifestID(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::string m = manifestID("kind: ConfigMap\n");
  EXPECT_EQ(m.size(), 64u);
  Json a = Json::obj({{"namespace", "web"}, {"helm", Json::obj({{"atomic", true}})}});
  Json b;  // the same options built in another order
  b["helm"]["atomic"] = true;
  b["namespace"] = "web";
  std::string id = deploymentID(m, a);
  EXPECT_EQ(id, deploymentID(m, b));
  EXPECT_EQ(id.substr(0, 65), m + ":");
  EXPECT_EQ(id.size(), 64u + 1 + 64u);
  EXPECT_NE(id, deploymentID(m, Json::obj({{"namespace", "web2"}})));
}

}  // namespace
}  // namespace flotilla::model
