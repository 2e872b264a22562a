// End-to-end: kill -9 at each step of the ownership handover (docs/pipeline.md "Order of writes and crashes"),
// through the fault points of libs/core fault.h: a service started with FLOTILLA_FAULT_POINTS=<point> dies with
// SIGKILL when it reaches that step; the test restarts it without the variable and checks the same end state as
// without a crash — the objects handed over with their UIDs, nothing pruned that a live bundle wants, never stuck.
// The agents hold released objects for 5 minutes (longer than any redelivery here); a message a killed service held
// comes back 10 s after it died (--ack-wait 10s on the bundler and the scheduler, and --agent-ack-wait 10 on the
// scheduler for the agents' durables, which it creates; 30 s by default).
#include <csignal>

#include "handover_checks.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class HandoverCrashTest : public SharedHubTest<HandoverCrashTest> {
 public:
  static HubOptions hubOptions() {
    // One bundle at a time on the agents: a crash point is a place in one order of the handover's steps, and the
    // order must be the one the test names. With parallel bundles the old bundle's delete (later in the stream)
    // can finish before the new bundle's claim; the claim then takes the objects from the release hold (rule
    // released, the same end state) and `agent.claim.dropped`, which needs the old inventory still there, is never
    // reached. Parallel claims and releases are tested in services/agent/test/parallel_integration_test.cpp.
    return {.services = {{"agent", {.flags = {"--release-hold", "5m", "--parallel-bundles", "1"}}},
                         {"scheduler", baseSettings("scheduler")},
                         {"bundler", baseSettings("bundler")}}};
  }

 protected:
  //! Restarts `service` so that it dies at `point`.
  static void arm(const std::string& service, const std::string& point) {
    ServiceSettings settings = baseSettings(service);
    settings.env["FLOTILLA_FAULT_POINTS"] = point;
    hub().configure(service, settings);
    ASSERT_TRUE(hub().restartService(service).ok()) << hub().logTail(service);
  }

  //! Waits until `service` died at `point` (SIGKILL, the point named in its log), then starts it without it.
  static void expectDiedAtAndRestart(const std::string& service, const std::string& point) {
    auto code = hub().waitExit(service, kLands);
    ASSERT_TRUE(code.has_value()) << service << " did not reach " << point << "\n" << hub().logTail(service, 60);
    EXPECT_EQ(*code, 128 + SIGKILL) << service << " must die by SIGKILL at " << point;
    EXPECT_NE(hub().logTail(service, 200).find(point), std::string::npos) << "the log must name " << point;
    hub().configure(service, baseSettings(service));
    ASSERT_TRUE(hub().startService(service).ok());
  }

  //! A service's own flags (for agents: the "agent-<i>" entry; their common ones are in the "agent" entry).
  static ServiceSettings baseSettings(const std::string& service) {
    if (service == "scheduler") {
      return ServiceSettings{.flags = {"--ack-wait", "10", "--agent-ack-wait", "10"}};
    }
    if (service == "bundler") {
      return ServiceSettings{.flags = {"--ack-wait", "10s"}};
    }
    return ServiceSettings{};
  }

  //! GitRepo `name` with bundle app/one (a Namespace and two ConfigMaps) and app/keep (a ConfigMap, untouched by
  //! the tests, so the GitRepo never runs out of bundles), Ready on both clusters.
  struct Renamable {
    std::string name, ns;
    std::map<std::string, std::string> objects;
    std::vector<ObjectRef> refs;
  };
  Renamable renamable(const std::string& prefix) {
    Renamable r;
    r.name = prefix + "-" + randomHex(3);
    r.ns = "ns-" + r.name;
    r.objects = {{"ns", namespaceYaml(r.ns)}, {"a", configMap("a", "1")}, {"b", configMap("b", "2")}};
    r.refs = {namespaceRef(r.ns), configMapRef(r.ns, "a"), configMapRef(r.ns, "b")};
    deployGitRepo(hub(), r.name,
                  merged(bundleFiles("app/one", r.ns, r.objects),
                         bundleFiles("app/keep", r.ns + "-keep", {{"k", configMap("k", "1")}})),
                  {"app"});
    return r;
  }

  //! Renames app/one to app/two in one commit while `service` is armed with `point`, and checks the end state.
  void renameThroughCrash(const std::string& prefix, const std::string& service, const std::string& point) {
    Renamable r = renamable(prefix);
    ASSERT_FALSE(HasFailure());
    arm(service, point);
    auto handover =
        beginHandover(hub(), status(), r.name, bundleId(r.name, "app/one"), bundleId(r.name, "app/two"), r.refs);
    auto renamed =
        hub().git().commitFiles(r.name, "main", bundleFiles("app/two", r.ns, r.objects), "rename", {"app/one"});
    ASSERT_TRUE(renamed.ok());
    expectDiedAtAndRestart(service, point);
    expectHandedOver(hub(), status(), handover, *renamed, std::chrono::seconds(120));
  }
};

// After the agent applied an object for the new bundle, before the old bundle's inventory dropped it.
TEST_F(HandoverCrashTest, AgentKilledAfterClaimApplied) {
  renameThroughCrash("kca", "agent-0", "agent.claim.applied");
}

// After the agent widened the new bundle's inventory with the objects it is about to apply, before any is applied.
TEST_F(HandoverCrashTest, AgentKilledAfterClaimIntent) {
  renameThroughCrash("kci", "agent-0", "agent.claim.intent");
}

// After the old bundle's inventory dropped an object the new bundle took over, before its hold entry is removed.
TEST_F(HandoverCrashTest, AgentKilledAfterClaimDropped) {
  renameThroughCrash("kcd", "agent-0", "agent.claim.dropped");
}

// After the bundler published the commit's live bundles, before the deleted ones.
TEST_F(HandoverCrashTest, BundlerKilledAfterCommitPublished) {
  renameThroughCrash("kbp", "bundler", "bundler.commit.published");
}

// After the scheduler sent the new bundle to the first cluster, before the others.
TEST_F(HandoverCrashTest, SchedulerKilledAfterBundleDeployed) {
  renameThroughCrash("ksd", "scheduler", "scheduler.bundle.deployed");
}

// A release with a claimant: X drops an object that Y's bundle claims; the agent dies after X's inventory dropped
// it, before waking Y. After the restart Y takes it (rule stale), same UID.
TEST_F(HandoverCrashTest, AgentKilledAfterReleaseDropped) {
  const CrossRepoMove m = crossRepoMove(hub(), "kr");
  ASSERT_FALSE(HasFailure());
  arm("agent-0", "agent.release.dropped");

  Handover handover = beginCrossRepoHandover(hub(), status(), m);
  const std::string y_first = claimByY(hub(), m, /*y_own=*/false);
  ASSERT_FALSE(HasFailure());
  for (const auto& cluster : clusters()) {
    ASSERT_TRUE(Hub::waitFor(
        [&] { return ownershipConflict(status(), cluster, m.y_bundle, m.x_bundle, handover.mark); }, kLands))
        << status().describe(cluster, m.y_bundle, handover.mark);
  }
  handover.mark = status().mark();
  const std::string x_release = releaseByX(hub(), m);
  ASSERT_FALSE(HasFailure());
  expectDiedAtAndRestart("agent-0", "agent.release.dropped");
  expectHandedOver(hub(), status(), handover, y_first, std::chrono::seconds(120));
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(hub(), c, m.ns, "moved", "value"), "y");
    EXPECT_TRUE(configMapExists(hub(), c, m.ns, "stays"));
    EXPECT_TRUE(Hub::waitFor(
        [&] { return bundleState(hub(), hub().clusterName(c), m.x, m.x_bundle, "Ready", x_release); }, kLands));
  }
}

// A release without a claimant in a rename across two commits: app/one is removed (its objects held), the agent
// dies after listing them in flotilla-released, before the old inventory is rewritten; app/two with the same
// objects comes in the next commit and adopts them (same UIDs).
TEST_F(HandoverCrashTest, AgentKilledAfterHoldListed) {
  Renamable r = renamable("khl");
  ASSERT_FALSE(HasFailure());
  arm("agent-0", "agent.hold.listed");
  auto handover =
      beginHandover(hub(), status(), r.name, bundleId(r.name, "app/one"), bundleId(r.name, "app/two"), r.refs);
  auto removed = hub().git().deleteFiles(r.name, "main", {"app/one"}, "remove app/one");
  ASSERT_TRUE(removed.ok());
  expectDiedAtAndRestart("agent-0", "agent.hold.listed");
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(uidsOf(hub(), c, r.refs), handover.uids[c]) << "held objects must not be deleted";
  }
  auto added = hub().git().commitFiles(r.name, "main", bundleFiles("app/two", r.ns, r.objects), "add app/two");
  ASSERT_TRUE(added.ok());
  expectHandedOver(hub(), status(), handover, *added, std::chrono::seconds(120));
}

}  // namespace
}  // namespace flotilla::e2e
