// End-to-end: dependsOn (issue 10, docs/pipeline.md "dependsOn"), evaluated by each agent for the bundles of one
// workspace on its cluster. A selector dependency releases its dependent the moment the dependency becomes Ready
// (an event, not a requeue), and a dependency cycle is an error naming the cycle. The agents re-check health every
// second, so a dependency's change of state is seen at once.
#include <thread>

#include "handover_checks.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class DependsOnTest : public SharedHubTest<DependsOnTest> {
 public:
  static HubOptions hubOptions() {
    return {.services = {{"agent", {.flags = {"--release-hold", "3s", "--resync-interval", "1s"}}}}};
  }
};

// A LoadBalancer Service is NotReady until it has an address; without a cloud controller the test gives it one
// through the status subresource, as a load balancer controller would.
std::string loadBalancer(const std::string& name) {
  return "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + name +
         "\nspec:\n  type: LoadBalancer\n  selector:\n    app: " + name + "\n  ports:\n  - port: 5432\n";
}

Status giveAddress(Hub& hub, size_t cluster, const std::string& ns, const std::string& name) {
  auto patched = hub.kube(cluster).requestJson("PATCH", "/api/v1/namespaces/" + ns + "/services/" + name + "/status",
                                               R"({"status":{"loadBalancer":{"ingress":[{"ip":"10.0.0.7"}]}}})",
                                               "application/merge-patch+json");
  if (!patched.ok()) {
    return fail(patched.error());
  }
  return {};
}

TEST_F(DependsOnTest, SelectorDependencyIsReleasedWhenTheDependencyBecomesReady) {
  const std::string name = "dep-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const PushedRepo repo =
      pushRepo(hub(), name,
               merged(bundleFiles("db", ns, {{"svc", loadBalancer("db")}}, "labels:\n  tier: db-" + name + "\n"),
                      bundleFiles("app", ns, {{"cm", configMap("app", "1")}},
                                  "dependsOn:\n- selector:\n    matchLabels:\n      tier: db-" + name + "\n")),
               "db and app");
  ASSERT_FALSE(HasFailure());
  const uint64_t mark = status().mark();
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, repo.url, {"db", "app"})).ok());
  const std::string db = bundleId(name, "db");
  const std::string app = bundleId(name, "app");
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    ASSERT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, name, db, "NotReady", repo.commit); }, kLands))
        << status().describe(cluster, db, mark);
    ASSERT_TRUE(Hub::waitFor([&] { return status().saw(cluster, app, "WaitApplied", mark); }, kLands))
        << status().describe(cluster, app, mark);
    EXPECT_EQ(status().first(cluster, app, "WaitApplied", mark)->event.reason, "DependenciesNotReady");
  }
  // Long enough that a requeue timer would have backed off past the wake-up delay measured below.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_TRUE(configMapGone(hub(), c, ns, "app")) << "app must not be applied while db is not Ready";
    EXPECT_FALSE(status().saw(hub().clusterName(c), app, "Ready", mark))
        << status().describe(hub().clusterName(c), app);
  }

  for (size_t c = 0; c < 2; ++c) {
    ASSERT_TRUE(giveAddress(hub(), c, ns, "db").ok());
  }
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    ASSERT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, name, app, "Ready", repo.commit); }, kLands))
        << status().describe(cluster, app, mark);
    EXPECT_TRUE(configMapExists(hub(), c, ns, "app"));
    auto db_ready = status().first(cluster, db, "Ready", mark);
    auto app_ready = status().first(cluster, app, "Ready", mark);
    ASSERT_TRUE(db_ready.ok() && app_ready.ok());
    EXPECT_LT(db_ready->sequence, app_ready->sequence) << "app must become Ready after db";
    auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(reportedAt(app_ready->event) -
                                                                       reportedAt(db_ready->event));
    std::cout << "[ measure  ] " << cluster << ": app Ready " << delay.count() << " ms after db became Ready"
              << std::endl;
    EXPECT_LT(delay, std::chrono::seconds(5)) << "the dependency's Ready must release app at once";
    size_t waits = 0;
    for (const auto& recorded : status().of(cluster, app, mark)) {
      waits += recorded.event.state == "WaitApplied" ? 1 : 0;
    }
    EXPECT_EQ(waits, 1u) << "WaitApplied is reported once, not per retry: " << status().describe(cluster, app, mark);
  }
}

// a dependsOn b by name, b dependsOn a by selector: both ErrApplied/DependencyCycle naming the cycle; a commit that
// drops one edge releases both.
TEST_F(DependsOnTest, CycleIsReportedNamingTheCycleAndAFixReleasesIt) {
  const std::string name = "cyc-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string a = bundleId(name, "a");
  const std::string b = bundleId(name, "b");
  const std::string b_fleet_tail = "labels:\n  cyc: b-" + name + "\n";
  const PushedRepo repo = pushRepo(
      hub(), name,
      merged(bundleFiles("a", ns, {{"cm", configMap("a", "1")}},
                         "labels:\n  cyc: a-" + name + "\ndependsOn:\n- name: " + b + "\n"),
             bundleFiles("b", ns, {{"cm", configMap("b", "1")}},
                         b_fleet_tail + "dependsOn:\n- selector:\n    matchLabels:\n      cyc: a-" + name + "\n")),
      "a cycle");
  ASSERT_FALSE(HasFailure());
  const uint64_t mark = status().mark();
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, repo.url, {"a", "b"})).ok());
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    for (const auto& bundle : {a, b}) {
      ASSERT_TRUE(
          Hub::waitFor([&] { return bundleState(hub(), cluster, name, bundle, "ErrApplied", repo.commit); }, kLands))
          << status().describe(cluster, bundle, mark);
      auto error = status().first(cluster, bundle, "ErrApplied", mark);
      ASSERT_TRUE(error.ok());
      EXPECT_EQ(error->event.reason, "DependencyCycle");
      EXPECT_NE(error->event.message.find("cycle"), std::string::npos) << error->event.message;
      EXPECT_NE(error->event.message.find(qualified(a)), std::string::npos) << error->event.message;
      EXPECT_NE(error->event.message.find(qualified(b)), std::string::npos) << error->event.message;
    }
    EXPECT_TRUE(configMapGone(hub(), c, ns, "a"));
  }

  auto fixed = hub().git().commitFiles(
      name, "main", {{"b/fleet.yaml", "defaultNamespace: " + ns + "\n" + b_fleet_tail}}, "b no longer depends on a");
  ASSERT_TRUE(fixed.ok());
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, name, b, "Ready", *fixed); }, kLands))
        << status().describe(cluster, b, mark);
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, name, a, "Ready"); }, kLands))
        << "a was released by b becoming Ready: " << status().describe(cluster, a, mark);
    EXPECT_TRUE(configMapExists(hub(), c, ns, "a"));
  }
}

}  // namespace
}  // namespace flotilla::e2e
