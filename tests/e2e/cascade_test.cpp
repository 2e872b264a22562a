// End-to-end: deletes that cascade (issue 10, docs/pipeline.md "Deletes that cascade"). `flotilla delete gitrepo`
// → its bundles are deleted → their objects pruned on every cluster (after the agents' release hold, 2 s here) or
// kept with keepResources → the hub's records removed, the progress visible in `flotilla get gitrepos`.
#include <thread>

#include "handover_checks.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class CascadeTest : public SharedHubTest<CascadeTest> {
 public:
  static HubOptions hubOptions() {
    return {.services = {{"agent", {.flags = {"--release-hold", "2s", "--resync-interval", "1s"}}}}};
  }

 protected:
  //! The `flotilla get gitrepos` row of `gitrepo` ("" when it is not listed).
  static std::string gitRepoRow(const std::string& gitrepo) {
    auto table = hub().cli({"get", "gitrepos"});
    if (!table.ok() || table->exit_code != 0) {
      return "(get gitrepos failed)";
    }
    for (const auto& line : split(table->out, '\n')) {
      if (line.find(gitrepo) != std::string::npos) {
        return line;
      }
    }
    return {};
  }

  //! Two bundles (one: ConfigMaps a and b; two: ConfigMap c) in namespace `ns`, Ready on both clusters.
  std::string twoBundles(const std::string& name, const std::string& ns, const std::string& extra_spec = "") {
    return deployGitRepo(hub(), name,
                         merged(bundleFiles("one", ns, {{"a", configMap("a", "1")}, {"b", configMap("b", "2")}}),
                                bundleFiles("two", ns, {{"c", configMap("c", "3")}})),
                         {"one", "two"}, extra_spec)
        .commit;
  }
};

// Deleting a GitRepo prunes its objects on both clusters. One agent is stopped during the delete, so the GitRepo
// stays listed as Deleting until that cluster has reported too; then it disappears.
TEST_F(CascadeTest, DeleteGitRepoPrunesOnBothClustersAndShowsDeleting) {
  const std::string name = "del-" + randomHex(3);
  const std::string ns = "ns-" + name;
  twoBundles(name, ns);
  ASSERT_FALSE(HasFailure());
  const uint64_t mark = status().mark();
  ASSERT_TRUE(hub().stopService("agent-1").ok());

  auto deleted = hub().cli({"delete", "gitrepo", name});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->exit_code, 0) << deleted->err;
  EXPECT_TRUE(Hub::waitFor([&] { return gitRepoRow(name).find("Deleting") != std::string::npos; }, kLands))
      << "flotilla get gitrepos must show the GitRepo as Deleting while a cluster has not reported: "
      << gitRepoRow(name);
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return configMapGone(hub(), 0, ns, "a") && configMapGone(hub(), 0, ns, "b") && configMapGone(hub(), 0, ns, "c");
      },
      kLands))
      << "objects not pruned on the connected cluster";
  EXPECT_TRUE(configMapExists(hub(), 1, ns, "a")) << "the stopped agent's cluster is untouched until it runs";
  EXPECT_NE(gitRepoRow(name).find("Deleting"), std::string::npos)
      << "still Deleting while cluster 2 has not reported: " << gitRepoRow(name);

  ASSERT_TRUE(hub().startService("agent-1").ok());
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return configMapGone(hub(), 1, ns, "a") && configMapGone(hub(), 1, ns, "b") && configMapGone(hub(), 1, ns, "c");
      },
      kLands))
      << "objects not pruned on the second cluster";
  EXPECT_TRUE(Hub::waitFor([&] { return gitRepoRow(name).empty(); }, kLands))
      << "the deleted GitRepo is still listed: " << gitRepoRow(name);
  for (const auto& path : {"one", "two"}) {
    const std::string bundle = bundleId(name, path);
    EXPECT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub(), bundle).empty(); }, kLands))
        << bundleRecordsLeft(hub(), bundle);
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_TRUE(inventoryGone(hub(), c, bundle)) << bundle << " on cluster " << c;
      EXPECT_TRUE(neverStuck(status().of(hub().clusterName(c), bundle, mark)))
          << status().describe(hub().clusterName(c), bundle, mark);
    }
  }
  EXPECT_FALSE(gitRepoSummary(hub(), name).has_value()) << "the GitRepo's summary must be removed";
}

// keepResources: the bundles and the hub's records go, the objects stay (same UIDs) on both clusters.
TEST_F(CascadeTest, DeleteGitRepoWithKeepResourcesKeepsObjects) {
  const std::string name = "keep-" + randomHex(3);
  const std::string ns = "ns-" + name;
  twoBundles(name, ns, "  keepResources: true\n");
  ASSERT_FALSE(HasFailure());
  const std::vector<ObjectRef> refs = {configMapRef(ns, "a"), configMapRef(ns, "b"), configMapRef(ns, "c")};
  std::vector<std::map<std::string, std::string>> uids = {uidsOf(hub(), 0, refs), uidsOf(hub(), 1, refs)};

  auto deleted = hub().cli({"delete", "gitrepo", name});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->exit_code, 0) << deleted->err;
  for (const auto& path : {"one", "two"}) {
    const std::string bundle = bundleId(name, path);
    EXPECT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub(), bundle).empty(); }, kLands))
        << bundleRecordsLeft(hub(), bundle);
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_TRUE(Hub::waitFor([&] { return inventoryGone(hub(), c, bundle); }, kLands)) << bundle << " on " << c;
    }
  }
  EXPECT_TRUE(Hub::waitFor([&] { return gitRepoRow(name).empty(); }, kLands)) << gitRepoRow(name);
  // Longer than the release hold: a kept object must not be pruned later either.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(uidsOf(hub(), c, refs), uids[c]) << "keepResources objects must stay on cluster " << c;
    EXPECT_EQ(releaseHoldText(hub(), c).find(ns), std::string::npos) << "kept objects are not held for pruning";
  }
}

// A path dropped from `paths` deletes its bundles (objects pruned, records gone); the other bundle is untouched.
TEST_F(CascadeTest, PathDroppedFromPathsDeletesItsBundles) {
  const std::string name = "drop-" + randomHex(3);
  const std::string ns = "ns-" + name;
  twoBundles(name, ns);
  ASSERT_FALSE(HasFailure());
  const std::vector<ObjectRef> kept = {configMapRef(ns, "a"), configMapRef(ns, "b")};
  std::vector<std::map<std::string, std::string>> uids = {uidsOf(hub(), 0, kept), uidsOf(hub(), 1, kept)};
  const uint64_t mark = status().mark();

  ASSERT_TRUE(hub().apply(gitRepoYaml(name, hub().git().httpUrl(name), {"one"})).ok());
  const std::string dropped = bundleId(name, "two");
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(hub(), c, ns, "c"); }, kLands))
        << "the dropped path's object is still on cluster " << c;
    EXPECT_TRUE(Hub::waitFor([&] { return inventoryGone(hub(), c, dropped); }, kLands));
    EXPECT_EQ(uidsOf(hub(), c, kept), uids[c]) << "the remaining bundle's objects must stay";
    EXPECT_TRUE(neverStuck(status().of(hub().clusterName(c), bundleId(name, "one"), mark)));
    EXPECT_TRUE(bundleState(hub(), hub().clusterName(c), name, bundleId(name, "one"), "Ready"));
  }
  EXPECT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub(), dropped).empty(); }, kLands))
      << bundleRecordsLeft(hub(), dropped);
}

//! A ValidatingAdmissionPolicy (and its binding) on `cluster` that refuses deleting ConfigMap `name` in `ns`.
Status refuseDeletes(Hub& hub, size_t cluster, const std::string& policy, const std::string& ns,
                     const std::string& name) {
  auto vap = Json::parse(R"({"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy",
    "metadata":{"name":")" +
                         policy + R"("},"spec":{"failurePolicy":"Fail","matchConstraints":{"resourceRules":[
      {"apiGroups":[""],"apiVersions":["v1"],"operations":["DELETE"],"resources":["configmaps"]}]},
    "validations":[{"expression":"oldObject.metadata.name != ')" +
                         name + R"('",
      "message":"deleting this ConfigMap is refused by a test policy"}]}})");
  auto binding = Json::parse(R"({"apiVersion":"admissionregistration.k8s.io/v1",
    "kind":"ValidatingAdmissionPolicyBinding","metadata":{"name":")" +
                             policy + R"("},"spec":{"policyName":")" + policy +
                             R"(","validationActions":["Deny"],"matchResources":{"namespaceSelector":{
      "matchLabels":{"kubernetes.io/metadata.name":")" +
                             ns + R"("}}}}})");
  FLOTILLA_TRY(vap);
  FLOTILLA_TRY(binding);
  FLOTILLA_TRY(hub.kube(cluster).apply(*vap, {.field_manager = "e2e"}));
  FLOTILLA_TRY(hub.kube(cluster).apply(*binding, {.field_manager = "e2e"}));
  return {};
}

// A delete the API server refuses (a ValidatingAdmissionPolicy on cluster 1 denies deleting ConfigMap a; the agents
// prune at once: --release-hold 0): the agent reports ErrApplied/PruneFailed naming the refusal, the GitRepo stays
// Deleting, and the scheduler sends the delete again with a backoff (the refusal is reported again); once the policy
// is lifted the cascade finishes on its own: the object is pruned, the records and the GitRepo's row are gone.
TEST_F(CascadeTest, RefusedPruneIsRetriedAndTheCascadeFinishesWhenAllowed) {
  hub().configure("agent", {.flags = {"--release-hold", "0", "--resync-interval", "1s"}});
  for (const auto* agent : {"agent-0", "agent-1"}) {
    ASSERT_TRUE(hub().restartService(agent).ok());
  }
  struct Restore {
    ~Restore() {
      hub().configure("agent", {.flags = {"--release-hold", "2s", "--resync-interval", "1s"}});
      for (const auto* agent : {"agent-0", "agent-1"}) {
        EXPECT_TRUE(hub().restartService(agent).ok());
      }
    }
  } restore;
  const std::string name = "refuse-" + randomHex(3);
  const std::string ns = "ns-" + name;
  twoBundles(name, ns);
  ASSERT_FALSE(HasFailure());
  const std::string policy = "deny-" + name;
  ASSERT_TRUE(refuseDeletes(hub(), 0, policy, ns, "a").ok());
  ASSERT_TRUE(
      Hub::waitFor([&] { return !hub().kube(0).remove("v1", "ConfigMap", ns, "a", {.dry_run = true}).ok(); }, kLands))
      << "the policy never took effect";
  const uint64_t mark = status().mark();
  const std::string cluster = hub().clusterName(0);
  const std::string bundle = bundleId(name, "one");

  auto deleted = hub().cli({"delete", "gitrepo", name});
  ASSERT_TRUE(deleted.ok());
  ASSERT_EQ(deleted->exit_code, 0) << deleted->err;
  auto refusals = [&] {
    size_t count = 0;
    for (const auto& recorded : status().of(cluster, bundle, mark)) {
      if (recorded.event.state == "ErrApplied" && recorded.event.reason == "PruneFailed" &&
          recorded.event.message.find("refused by a test policy") != std::string::npos) {
        ++count;
      }
    }
    return count;
  };
  EXPECT_TRUE(Hub::waitFor([&] { return refusals() >= 2; }, kLands))
      << "the refused delete must be reported and sent again: " << status().describe(cluster, bundle, mark);
  EXPECT_NE(gitRepoRow(name).find("Deleting"), std::string::npos) << gitRepoRow(name);
  EXPECT_TRUE(configMapExists(hub(), 0, ns, "a"));
  EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(hub(), 1, ns, "a"); }, kLands))
      << "the other cluster is pruned meanwhile";

  ASSERT_TRUE(
      hub().kube(0).remove("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "", policy).ok());
  EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(hub(), 0, ns, "a"); }, kLands))
      << "the delete must go through once allowed: " << status().describe(cluster, bundle, mark);
  EXPECT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub(), bundle).empty(); }, kLands))
      << bundleRecordsLeft(hub(), bundle);
  EXPECT_TRUE(Hub::waitFor([&] { return gitRepoRow(name).empty(); }, kLands)) << gitRepoRow(name);
  EXPECT_TRUE(inventoryGone(hub(), 0, bundle));
  (void)hub().kube(0).remove("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", policy);
}

// `flotilla delete cluster` while its agent is connected: the cluster's objects are pruned there (the other cluster
// is untouched), its records go, and it leaves `flotilla get clusters`. Applying its Cluster document again
// withdraws the deregistration: the agent registers on its next start and the GitRepo is deployed there again.
TEST_F(CascadeTest, DeregisteringAConnectedClusterPrunesItsObjectsAndCanBeUndone) {
  const std::string name = "dereg-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string commit = twoBundles(name, ns);
  ASSERT_FALSE(HasFailure());
  const std::string gone = hub().clusterName(1);
  const std::vector<ObjectRef> refs = {configMapRef(ns, "a"), configMapRef(ns, "b"), configMapRef(ns, "c")};
  const auto kept_uids = uidsOf(hub(), 0, refs);

  auto deleted = hub().cli({"delete", "cluster", gone});
  ASSERT_TRUE(deleted.ok());
  ASSERT_EQ(deleted->exit_code, 0) << deleted->err << deleted->out;
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        return configMapGone(hub(), 1, ns, "a") && configMapGone(hub(), 1, ns, "b") && configMapGone(hub(), 1, ns, "c");
      },
      kLands))
      << "the deregistered cluster's objects must be pruned while its agent is connected";
  EXPECT_TRUE(Hub::waitFor(
      [&] {
        auto table = hub().cli({"get", "clusters"});
        return table.ok() && table->exit_code == 0 && table->out.find(gone) == std::string::npos;
      },
      kLands))
      << "the deregistered cluster is still listed";
  EXPECT_TRUE(Hub::waitFor([&] { return bundlesOn(hub(), gone, name).empty(); }, kLands));
  for (const auto& record : recordsOf(hub(), "status", "bd.")) {
    EXPECT_NE(record.getString("cluster"), gone) << "bd status left: " << record.dump();
  }
  EXPECT_EQ(uidsOf(hub(), 0, refs), kept_uids) << "the other cluster must be untouched";
  EXPECT_TRUE(readyEverywhere(hub(), name, commit, {hub().clusterName(0)}));

  ASSERT_TRUE(hub()
                  .apply("apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + gone +
                         "\n  namespace: fleet-default\n  labels:\n    env: cluster2\n")
                  .ok());
  ASSERT_TRUE(hub().restartService("agent-1").ok());
  EXPECT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, commit, clusters()); }, kLands))
      << "the GitRepo must be deployed again on the re-registered cluster";
  EXPECT_TRUE(configMapExists(hub(), 1, ns, "a"));
}

}  // namespace
}  // namespace flotilla::e2e
