// End-to-end: a bundle renamed or moved is handed over in one step, never stuck (issue 10, docs/pipeline.md
// "Ownership handover"). Real git server, nats-server and two kube-apiservers; the services run as processes, the
// agents with a short release hold (3 s) except where a test needs a long one.
#include <thread>

#include "handover_checks.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class HandoverTest : public SharedHubTest<HandoverTest> {
 public:
  static HubOptions hubOptions() {
    return {.services = {{"agent", {.flags = {"--release-hold", "3s", "--resync-interval", "2s"}}}}};
  }

 protected:
  //! Restarts both agents with `hold` as their release hold.
  static void restartAgentsWithHold(const std::string& hold) {
    hub().configure("agent", {.flags = {"--release-hold", hold, "--resync-interval", "2s"}});
    for (size_t c = 0; c < hub().clusterCount(); ++c) {
      ASSERT_TRUE(hub().restartService("agent-" + std::to_string(c)).ok());
    }
  }

  //! Both agents run with release hold `hold` while it lives, and with the suite's 3 s again after.
  class ScopedHold {
   public:
    explicit ScopedHold(const std::string& hold) { restartAgentsWithHold(hold); }
    ~ScopedHold() { restartAgentsWithHold("3s"); }
    ScopedHold(const ScopedHold&) = delete;
    ScopedHold& operator=(const ScopedHold&) = delete;
  };
};

// app/one → app/two in one commit, same objects (a Namespace and two ConfigMaps).
TEST_F(HandoverTest, RenameInOneCommitKeepsUidsAndIsReadyAtOnce) {
  const std::string name = "ren-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::map<std::string, std::string> objects = {
      {"ns", namespaceYaml(ns)}, {"a", configMap("a", "1")}, {"b", configMap("b", "2")}};
  deployGitRepo(hub(), name, bundleFiles("app/one", ns, objects), {"app"});
  ASSERT_FALSE(HasFailure());

  auto handover = beginHandover(hub(), status(), name, bundleId(name, "app/one"), bundleId(name, "app/two"),
                                {namespaceRef(ns), configMapRef(ns, "a"), configMapRef(ns, "b")});
  auto renamed = hub().git().commitFiles(name, "main", bundleFiles("app/two", ns, objects), "rename", {"app/one"});
  ASSERT_TRUE(renamed.ok());
  expectHandedOver(hub(), status(), handover, *renamed);
}

// One commit moves ConfigMap y from bundle a to bundle b (both stay): b takes it with its UID, both stay Ready.
TEST_F(HandoverTest, ObjectMovedBetweenTwoBundlesInOneCommit) {
  const std::string name = "mov-" + randomHex(3);
  const std::string ns = "ns-" + name;
  deployGitRepo(hub(), name,
                merged(bundleFiles("app/a", ns, {{"x", configMap("x", "1")}, {"y", configMap("y", "1")}}),
                       bundleFiles("app/b", ns, {{"z", configMap("z", "1")}})),
                {"app"});
  ASSERT_FALSE(HasFailure());
  const std::string a = bundleId(name, "app/a");
  const std::string b = bundleId(name, "app/b");

  Handover handover = beginHandover(hub(), status(), name, a, b, {configMapRef(ns, "y")});
  handover.old_bundle_deleted = false;
  auto moved =
      hub().git().commitFiles(name, "main", {{"app/b/y.yaml", configMap("y", "1")}}, "move y to b", {"app/a/y.yaml"});
  ASSERT_TRUE(moved.ok());
  expectHandedOver(hub(), status(), handover, *moved);
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, name, a, "Ready", *moved); }, kLands))
        << status().describe(cluster, a, handover.mark);
    EXPECT_EQ(ownerOf(hub(), c, configMapRef(ns, "x")), qualified(a));
    EXPECT_TRUE(Hub::waitFor(
        [&] {
          auto inventory = inventoryOf(hub(), c, a);
          return inventory && inventory->dump().find("\"y\"") == std::string::npos;
        },
        kLands))
        << "a's inventory must no longer list y on " << cluster;
  }
}

// A Helm bundle renamed in one commit: its release name (the bundle name) changes, so an object named after the
// release is a new object (the old one released and pruned after the hold), while an object with a fixed name is
// handed over with its UID. Never stuck either way.
TEST_F(HandoverTest, HelmRenameHandsOverFixedNamesAndReplacesReleaseNamedObjects) {
  const std::string name = "hrn-" + randomHex(3);
  const std::string ns = "ns-" + name;
  auto chart = [&](const std::string& dir) {
    return std::map<std::string, std::string>{
        {dir + "/fleet.yaml", "defaultNamespace: " + ns + "\n"},
        {dir + "/Chart.yaml", "apiVersion: v2\nname: handover\nversion: 0.1.0\n"},
        {dir + "/values.yaml", "value: v1\n"},
        {dir + "/templates/fixed.yaml", configMap("fixed", "{{ .Values.value }}")},
        {dir + "/templates/named.yaml",
         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  value: v1\n"}};
  };
  deployGitRepo(hub(), name, chart("app/one"), {"app"});
  ASSERT_FALSE(HasFailure());
  const std::string old_bundle = bundleId(name, "app/one");
  const std::string new_bundle = bundleId(name, "app/two");
  ASSERT_TRUE(configMapExists(hub(), 0, ns, old_bundle + "-cm"));

  auto handover = beginHandover(hub(), status(), name, old_bundle, new_bundle, {configMapRef(ns, "fixed")});
  auto renamed = hub().git().commitFiles(name, "main", chart("app/two"), "rename", {"app/one"});
  ASSERT_TRUE(renamed.ok());
  expectHandedOver(hub(), status(), handover, *renamed);
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_TRUE(configMapExists(hub(), c, ns, new_bundle + "-cm")) << "cluster " << c;
    EXPECT_TRUE(Hub::waitFor([&] { return configMapGone(hub(), c, ns, old_bundle + "-cm"); }, kLands))
        << "the old release's object must be pruned after the hold on cluster " << c;
  }
}

// The GitRepo's `paths` change (one → two, same objects), then its `repo` (a new repository whose layout gives the
// bundle another name): every bundle name changes, the objects stay.
TEST_F(HandoverTest, GitRepoPathsThenRepoChangeHandsOver) {
  const std::string name = "pth-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::map<std::string, std::string> objects = {{"ns", namespaceYaml(ns)}, {"a", configMap("a", "1")}};
  const PushedRepo repo =
      deployGitRepo(hub(), name, merged(bundleFiles("one", ns, objects), bundleFiles("two", ns, objects)), {"one"});
  ASSERT_FALSE(HasFailure());
  const std::vector<ObjectRef> refs = {namespaceRef(ns), configMapRef(ns, "a")};

  auto by_paths = beginHandover(hub(), status(), name, bundleId(name, "one"), bundleId(name, "two"), refs);
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, repo.url, {"two"})).ok());
  expectHandedOver(hub(), status(), by_paths, repo.commit);
  if (HasFailure()) {
    return;
  }

  auto moved_repo = hub().git().createRepo(name + "-moved");
  ASSERT_TRUE(moved_repo.ok());
  auto moved = hub().git().commitFiles(name + "-moved", "main", bundleFiles("two/moved", ns, objects), "moved");
  ASSERT_TRUE(moved.ok());
  auto by_repo = beginHandover(hub(), status(), name, bundleId(name, "two"), bundleId(name, "two/moved"), refs);
  ASSERT_TRUE(hub().apply(gitRepoYaml(name, moved_repo->http, {"two"})).ok());
  expectHandedOver(hub(), status(), by_repo, *moved);
}

// An object leaves GitRepo X's bundle after GitRepo Y's bundle claimed it: Y is ErrApplied naming both bundles
// while X holds it, and Ready with X's object (same UID, Y's content) as soon as X releases it.
TEST_F(HandoverTest, MoveAcrossGitReposClaimFirstIsWokenByTheRelease) {
  const CrossRepoMove m = crossRepoMove(hub(), "mc");
  ASSERT_FALSE(HasFailure());

  Handover handover = beginCrossRepoHandover(hub(), status(), m);
  const std::string y_first = claimByY(hub(), m, /*y_own=*/true);
  ASSERT_FALSE(HasFailure());
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    ASSERT_TRUE(Hub::waitFor(
        [&] { return ownershipConflict(status(), cluster, m.y_bundle, m.x_bundle, handover.mark); }, kLands))
        << "expected ErrApplied/OwnershipConflict naming " << qualified(m.x_bundle) << " and " << qualified(m.y_bundle)
        << ": " << status().describe(cluster, m.y_bundle, handover.mark);
    EXPECT_EQ(ownerOf(hub(), c, m.moved), qualified(m.x_bundle)) << "X keeps the object while it wants it";
    EXPECT_EQ(configMapValue(hub(), c, m.ns, "moved", "value"), "x");
    EXPECT_TRUE(Hub::waitFor([&] { return configMapExists(hub(), c, m.ns, "y-own"); }, kLands))
        << "Y applies its other objects while it waits for the claimed one";
    EXPECT_TRUE(bundleState(hub(), cluster, m.x, m.x_bundle, "Ready")) << "X is not disturbed by the claim";
  }
  // Long enough that a retry timer would have backed off well beyond the wake-up delay measured below.
  std::this_thread::sleep_for(std::chrono::seconds(8));

  const uint64_t before_release = status().mark();
  const std::string x_release = releaseByX(hub(), m);
  ASSERT_FALSE(HasFailure());
  expectHandedOver(
      hub(), status(),
      [&] {
        Handover after = handover;
        after.mark = before_release;  // Y's reports before the release were ErrApplied, as checked above
        return after;
      }(),
      y_first);
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    EXPECT_EQ(configMapValue(hub(), c, m.ns, "moved", "value"), "y") << cluster;
    EXPECT_TRUE(configMapExists(hub(), c, m.ns, "stays")) << cluster;
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, m.x, m.x_bundle, "Ready", x_release); }, kLands));
    auto released = status().first(cluster, m.x_bundle, "Ready", before_release);
    auto adopted = status().first(cluster, m.y_bundle, "Ready", before_release);
    ASSERT_TRUE(released.ok() && adopted.ok()) << status().describe(cluster, m.x_bundle, before_release);
    auto delay =
        std::chrono::duration_cast<std::chrono::milliseconds>(reportedAt(adopted->event) - reportedAt(released->event));
    std::cout << "[ measure  ] " << cluster << ": Y Ready " << delay.count() << " ms after X released the object"
              << std::endl;
    EXPECT_LT(delay, std::chrono::seconds(6)) << "the claimant must be woken by the release, not a timer";
  }
}

// The release comes first: X drops the object (held by the agent), then GitRepo Y claims it within the hold
// and adopts it — the same object, no ErrApplied on the way.
TEST_F(HandoverTest, MoveAcrossGitReposReleaseFirstAdoptsTheHeldObject) {
  const ScopedHold hold("5m");
  const CrossRepoMove m = crossRepoMove(hub(), "mr");
  ASSERT_FALSE(HasFailure());

  Handover handover = beginCrossRepoHandover(hub(), status(), m);
  const std::string x_release = releaseByX(hub(), m);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), m.x, x_release, clusters()); }, kLands));
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_FALSE(uidOf(hub(), c, m.moved).empty()) << "a released object is held, not deleted at once";
    const std::string held = releaseHoldText(hub(), c);
    EXPECT_TRUE(held.find(m.ns) != std::string::npos && held.find("moved") != std::string::npos)
        << "flotilla-released on cluster " << c << " must list the held object: " << held;
  }

  const std::string y_first = claimByY(hub(), m, /*y_own=*/true);
  ASSERT_FALSE(HasFailure());
  expectHandedOver(hub(), status(), handover, y_first);
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(configMapValue(hub(), c, m.ns, "moved", "value"), "y");
    EXPECT_TRUE(Hub::waitFor([&] { return releaseHoldText(hub(), c).find("moved") == std::string::npos; }, kLands))
        << "the adopted object must leave the hold list on cluster " << c << ": " << releaseHoldText(hub(), c);
  }
}

// A GitRepo renamed the only way KV mode allows: the old one deleted, the new one (same repository and paths)
// created. Returns what the test checks next; the agents hold released objects for 5 minutes meanwhile.
struct GitRepoRename {
  std::string old_name, new_name, ns, commit;
  Handover handover;
};

// Creates GitRepo `old`, Ready; deletes it and (after its cascade finished, when `wait_for_cascade`) creates the new;
// then checks that the new GitRepo's bundle took the objects over.
void renameGitRepo(Hub& hub, StatusLog& status, bool wait_for_cascade, GitRepoRename& out) {
  const std::string hex = randomHex(3);
  out.old_name = "gro-" + hex;
  out.new_name = "grn-" + hex;
  out.ns = "ns-" + out.old_name;
  const PushedRepo repo =
      deployGitRepo(hub, out.old_name,
                    bundleFiles("app", out.ns, {{"ns", namespaceYaml(out.ns)}, {"a", configMap("a", "1")}}), {"app"});
  ASSERT_FALSE(::testing::Test::HasFailure());
  out.commit = repo.commit;
  const std::string old_bundle = bundleId(out.old_name, "app");
  out.handover = beginHandover(hub, status, out.new_name, old_bundle, bundleId(out.new_name, "app"),
                               {namespaceRef(out.ns), configMapRef(out.ns, "a")});
  auto deleted = hub.cli({"delete", "gitrepo", out.old_name});
  ASSERT_TRUE(deleted.ok() && deleted->exit_code == 0) << (deleted.ok() ? deleted->err : "");
  if (wait_for_cascade) {
    ASSERT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub, old_bundle).empty(); }, kLands))
        << bundleRecordsLeft(hub, old_bundle);
  }
  ASSERT_TRUE(hub.apply(gitRepoYaml(out.new_name, repo.url, {"app"})).ok());
  expectHandedOver(hub, status, out.handover, out.commit, kLands);
}

// Delete, the cascade finishes (the objects are held), then create: the new GitRepo's bundle adopts the objects in
// one step — same UIDs, first report Ready, the old GitRepo's records gone.
TEST_F(HandoverTest, GitRepoRenamedByDeleteThenCreateAdoptsTheObjects) {
  const ScopedHold hold("5m");
  GitRepoRename rename;
  renameGitRepo(hub(), status(), /*wait_for_cascade=*/true, rename);
  ASSERT_FALSE(HasFailure());
  EXPECT_FALSE(gitRepoSummary(hub(), rename.old_name).has_value()) << "the old GitRepo's summary must be removed";
}

// Delete and create at once (`flotilla delete gitrepo old && flotilla apply -f new.yaml`): the new GitRepo's
// deployment may reach an agent before the old one's cascade. The scheduler lists the old bundle as `retiring` in
// it (the old GitRepo's spec is gone), so the claim is a handover on the first apply: the new bundle's first report
// is Ready, nothing ErrApplied or WaitApplied on the way, same UIDs, the old bundle's records and inventory gone.
TEST_F(HandoverTest, GitRepoRenamedByDeleteAndCreateAtOnceIsOneStep) {
  const ScopedHold hold("5m");
  GitRepoRename rename;
  renameGitRepo(hub(), status(), /*wait_for_cascade=*/false, rename);
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(Hub::waitFor([&] { return !gitRepoSummary(hub(), rename.old_name).has_value(); }, kLands))
      << "the old GitRepo's summary must be removed";
}

// X owns an object that Y and Z both claim: each claimant is ErrApplied naming the owner and itself. X's GitRepo
// is deleted: one claimant takes the object (same UID) and the other now waits for it; when that one's GitRepo is
// deleted too, the last claimant takes it. Never stuck, never re-created.
TEST_F(HandoverTest, DoubleClaimThenRelease) {
  const std::string hex = randomHex(3);
  const std::string x = "dcx-" + hex;
  const std::string y = "dcy-" + hex;
  const std::string z = "dcz-" + hex;
  const std::string ns = "ns-" + x;
  std::map<std::string, std::string> urls;
  std::map<std::string, std::string> commits;
  for (const auto& name : {x, y, z}) {
    const PushedRepo repo =
        pushRepo(hub(), name, bundleFiles("app", ns, {{"shared", configMap("shared", name)}}), name);
    ASSERT_FALSE(HasFailure());
    urls[name] = repo.url;
    commits[name] = repo.commit;
  }
  applyAndWait(hub(), x, urls[x], {"app"}, commits[x]);
  ASSERT_FALSE(HasFailure());
  const ObjectRef shared = configMapRef(ns, "shared");
  std::vector<std::string> uids = {uidOf(hub(), 0, shared), uidOf(hub(), 1, shared)};
  const uint64_t mark = status().mark();
  ASSERT_TRUE(hub().apply(gitRepoYaml(y, urls[y], {"app"})).ok());
  ASSERT_TRUE(hub().apply(gitRepoYaml(z, urls[z], {"app"})).ok());
  for (const auto& claimant : {y, z}) {
    for (const auto& cluster : clusters()) {
      EXPECT_TRUE(Hub::waitFor(
          [&] { return ownershipConflict(status(), cluster, bundleId(claimant, "app"), bundleId(x, "app"), mark); },
          kLands))
          << status().describe(cluster, bundleId(claimant, "app"), mark);
    }
  }

  // X goes away: on each cluster exactly one claimant takes the object, the other waits for it.
  const uint64_t x_deleted = status().mark();
  auto deleted = hub().cli({"delete", "gitrepo", x});
  ASSERT_TRUE(deleted.ok() && deleted->exit_code == 0) << (deleted.ok() ? deleted->err : "");
  std::vector<std::string> winners(2);
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    ASSERT_TRUE(Hub::waitFor(
        [&] {
          for (const auto& name : {y, z}) {
            if (bundleState(hub(), cluster, name, bundleId(name, "app"), "Ready") &&
                ownerOf(hub(), c, shared) == qualified(bundleId(name, "app"))) {
              winners[c] = name;
              return true;
            }
          }
          return false;
        },
        kLands))
        << "no claimant took the object on " << cluster << "\n"
        << status().describe(cluster, bundleId(y, "app"), x_deleted) << "\n"
        << status().describe(cluster, bundleId(z, "app"), x_deleted);
    const std::string loser = winners[c] == y ? z : y;
    EXPECT_EQ(uidOf(hub(), c, shared), uids[c]) << "handed over, not re-created, on " << cluster;
    EXPECT_EQ(configMapValue(hub(), c, ns, "shared", "value"), winners[c]);
    EXPECT_TRUE(Hub::waitFor(
        [&] {
          return ownershipConflict(status(), cluster, bundleId(loser, "app"), bundleId(winners[c], "app"), x_deleted);
        },
        kLands))
        << "the other claimant keeps waiting, naming the new owner, on " << cluster << ": "
        << status().describe(cluster, bundleId(loser, "app"), x_deleted);
  }

  // The winner on the first cluster goes away too: the last claimant ends up with the object everywhere.
  const std::string gone = winners[0];
  const std::string last = gone == y ? z : y;
  auto second_delete = hub().cli({"delete", "gitrepo", gone});
  ASSERT_TRUE(second_delete.ok() && second_delete->exit_code == 0);
  for (size_t c = 0; c < 2; ++c) {
    const std::string cluster = hub().clusterName(c);
    EXPECT_TRUE(Hub::waitFor([&] { return bundleState(hub(), cluster, last, bundleId(last, "app"), "Ready"); }, kLands))
        << status().describe(cluster, bundleId(last, "app"), x_deleted);
    EXPECT_EQ(ownerOf(hub(), c, shared), qualified(bundleId(last, "app")));
    EXPECT_EQ(uidOf(hub(), c, shared), uids[c]) << "handed over, not re-created, on " << cluster;
    EXPECT_EQ(configMapValue(hub(), c, ns, "shared", "value"), last);
  }
  for (const auto& name : {x, gone}) {
    EXPECT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub(), bundleId(name, "app")).empty(); }, kLands))
        << bundleRecordsLeft(hub(), bundleId(name, "app"));
  }
}

}  // namespace
}  // namespace flotilla::e2e
