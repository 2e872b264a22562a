// Ownership handover, release hold and event-driven dependsOn (docs/pipeline.md "Ownership handover" and
// "dependsOn") against a real nats-server and kube-apiserver: each claim rule with the object's UID compared
// before and after, a double claim released by the first owner, holds and their expiry, the crash points of the
// protocol (each simulated by running the steps up to it, then handling the same event with a fresh
// DeployHandler, as a restarted agent would), and dependsOn by selector, woken by the dependency's state.
#include "handover_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

using HandoverTest = HandoverFixture;

// Rule stale: the owner named by the annotation has no inventory (here: it was lost). The object is taken over in
// one step, its UID unchanged, and the new bundle's first status is Ready.
TEST_F(HandoverTest, StaleOwnerIsTakenOverKeepingTheUid) {
  std::string a = unique("a");
  std::string b = unique("b");
  std::string before = startOwningO(a, {cm("o", "a")});
  ASSERT_FALSE(before.empty());
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", agent_namespace_, inventoryName(workspace_, a)).ok());
  ASSERT_NO_FATAL_FAILURE(expectAdopted(b, {cm("o", "b")}, before));
  EXPECT_EQ(get("v1", "ConfigMap", ns_, "o")->at({"data", "k"})->asString(), "b");
  EXPECT_EQ(metric("handovers_total", {{"rule", "stale"}}), 1);
}

// Rule released: A's new deployment leaves O; nobody claims it, so it is held (listed in flotilla-released, not
// deleted); B claims it within the hold and adopts it with its UID; the hold entry goes.
TEST_F(HandoverTest, HeldObjectIsAdoptedKeepingTheUid) {
  startWithHold(seconds(60));
  std::string a = unique("a");
  std::string b = unique("b");
  std::string before = releasesO(a);
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(uid("o"), before) << "a held object is not deleted";
  EXPECT_FALSE(lists(a, "o"));
  auto holds = held();
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds[0].ref.name, "o");
  EXPECT_EQ(holds[0].released_by, bundleOwner(a));
  EXPECT_TRUE(parseRfc3339(holds[0].released_at));
  EXPECT_EQ(metric("objects_pruned_total", {{"result", "held"}}), 1);
  EXPECT_EQ(metric("released_objects"), 1);

  ASSERT_NO_FATAL_FAILURE(expectAdopted(b, {cm("o", "b")}, before));
  EXPECT_EQ(metric("handovers_total", {{"rule", "released"}}), 1);
  EXPECT_TRUE(held().empty());
  EXPECT_EQ(metric("released_objects"), 0);
}

// After the hold a held object nobody claimed is deleted by the reaper (resync loop); metrics say so.
TEST_F(HandoverTest, ExpiredHoldIsDeleted) {
  startWithHold(seconds(1));
  std::string a = unique("a");
  ASSERT_FALSE(releasesO(a).empty());
  ASSERT_TRUE(eventually([&] { return absent("v1", "ConfigMap", ns_, "o"); }, seconds(20)));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "keep"));
  EXPECT_TRUE(eventually([&] { return metric("released_deleted_total") == 1; }, seconds(5)));
  // The hold list is written after the delete is counted: wait for it (read at once, it failed on a loaded machine).
  EXPECT_TRUE(eventually([&] { return held().empty(); }, seconds(5)));
  EXPECT_TRUE(eventually([&] { return metric("released_objects") == 0; }, seconds(5)));
}

// --release-hold 0 (the fixture's default) prunes at once, as before holds existed: no hold list is written.
TEST_F(HandoverTest, HoldZeroPrunesAtOnce) {
  startRegisteredAgent();
  std::string a = unique("a");
  ASSERT_FALSE(releasesO(a).empty());
  EXPECT_TRUE(absent("v1", "ConfigMap", ns_, "o"));
  EXPECT_TRUE(absent("v1", "ConfigMap", agent_namespace_, std::string(kReleasedName)));
  EXPECT_EQ(metric("objects_pruned_total", {{"result", "deleted"}}), 1);
}

// Rule newer-commit: within one GitRepo the newer commit says whose the object is; an older commit never takes
// from a newer one, and another GitRepo never takes by commit order (both are conflicts naming both bundles).
TEST_F(HandoverTest, NewerCommitTakesOverAndOlderNeverDoes) {
  std::string a = unique("a");
  std::string b = unique("b");
  std::string c = unique("c");
  std::string d = unique("d");
  std::string before = startOwningO(a, {cm("o", "a"), cm("a-own")}, {.gitrepo = "repo", .commit_sequence = 5});
  ASSERT_FALSE(before.empty());
  ASSERT_NO_FATAL_FAILURE(expectAdopted(b, {cm("o", "b")}, before, {.gitrepo = "repo", .commit_sequence = 7}));
  EXPECT_FALSE(lists(a, "o"));
  EXPECT_TRUE(lists(a, "a-own"));
  EXPECT_EQ(metric("handovers_total", {{"rule", "newer-commit"}}), 1);

  send(c, {cm("o", "c")}, {.gitrepo = "repo", .commit_sequence = 6});
  auto older = next(c);
  ASSERT_TRUE(older);
  EXPECT_EQ(older->state, "ErrApplied");
  EXPECT_EQ(older->reason, "OwnershipConflict");
  EXPECT_EQ(older->message, conflictMessage({"v1", "ConfigMap", ns_, "o"}, bundleOwner(b), bundleOwner(c)));
  send(d, {cm("o", "d")}, {.gitrepo = "other", .commit_sequence = 100});
  auto other_repo = next(d);
  ASSERT_TRUE(other_repo);
  EXPECT_EQ(other_repo->reason, "OwnershipConflict");
  EXPECT_EQ(owner("o"), bundleOwner(b));
  EXPECT_EQ(get("v1", "ConfigMap", ns_, "o")->at({"data", "k"})->asString(), "b");
  EXPECT_EQ(uid("o"), before);
  // Counted just after each report is published.
  EXPECT_TRUE(eventually([&] { return metric("ownership_conflicts_total") == 2; }, seconds(10)));
  // Two parked claimants whose results do not change never wake each other in a loop.
  std::this_thread::sleep_for(seconds(1));
  EXPECT_LE(metric("deploys_total", {{"outcome", "conflict"}}), 4);
  EXPECT_EQ(status_.all(c).size(), 1u);
  EXPECT_EQ(status_.all(d).size(), 1u);
}

// Rule forced: takeOwnership takes the object from a live owner; the old owner's inventory drops it.
TEST_F(HandoverTest, ForcedTakesOverKeepingTheUid) {
  std::string a = unique("a");
  std::string b = unique("b");
  std::string before = startOwningO(a, {cm("o", "a"), cm("a-own")});
  ASSERT_FALSE(before.empty());
  ASSERT_NO_FATAL_FAILURE(
      expectAdopted(b, {cm("o", "b")}, before, {},
                    Json::obj({{"defaultNamespace", ns_}, {"helm", Json::obj({{"takeOwnership", true}})}})));
  EXPECT_FALSE(lists(a, "o"));
  EXPECT_EQ(metric("handovers_total", {{"rule", "forced"}}), 1);
}

// A double claim: the second bundle gets ErrApplied naming both bundles (its other objects applied, the claim in
// its inventory) and is parked; when the first lets go (a new deployment without the object), the object is
// handed over, not deleted, and the claimant is woken and Ready without a new DeployEvent. Its status stream is
// exactly ErrApplied, Ready.
TEST_F(HandoverTest, DoubleClaimRecoversWhenTheFirstReleases) {
  std::string a = unique("a");
  std::string b = unique("b");
  std::string before = startOwningO(a, {cm("o", "a"), cm("keep")});
  ASSERT_FALSE(before.empty());
  send(b, {cm("o", "b"), cm("p")});
  auto conflict = next(b);
  ASSERT_TRUE(conflict);
  EXPECT_EQ(conflict->state, "ErrApplied");
  EXPECT_EQ(conflict->reason, "OwnershipConflict");
  EXPECT_EQ(conflict->message, conflictMessage({"v1", "ConfigMap", ns_, "o"}, bundleOwner(a), bundleOwner(b)));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "p"));
  auto claimant = inventory(b);
  ASSERT_TRUE(claimant);
  EXPECT_TRUE(claimant->claimsObject({"v1", "ConfigMap", ns_, "o"}));
  EXPECT_FALSE(claimant->lists({"v1", "ConfigMap", ns_, "o"}));
  // Counted once its report is published (a report that fails to publish is retried, and counted then).
  EXPECT_TRUE(eventually([&] { return metric("ownership_conflicts_total") == 1; }, seconds(10)));
  EXPECT_TRUE(eventually(
      [&] {
        return metric("settled_total", {{"consumer", "deploy"}, {"action", "wait"}}) == 1;
      },
      seconds(10)));

  ASSERT_NO_FATAL_FAILURE(sendReady(a, {cm("keep")}));
  auto ready = next(b);
  ASSERT_TRUE(ready) << "the claimant was not woken";
  EXPECT_EQ(ready->state, "Ready") << ready->message;
  EXPECT_EQ(ready->deployment_id, conflict->deployment_id);
  EXPECT_EQ(uid("o"), before);
  EXPECT_EQ(owner("o"), bundleOwner(b));
  EXPECT_EQ(get("v1", "ConfigMap", ns_, "o")->at({"data", "k"})->asString(), "b");
  EXPECT_FALSE(lists(a, "o"));
  claimant = inventory(b);
  ASSERT_TRUE(claimant);
  EXPECT_TRUE(claimant->lists({"v1", "ConfigMap", ns_, "o"}));
  EXPECT_TRUE(claimant->claims.empty());
  EXPECT_EQ(metric("objects_pruned_total", {{"result", "handed_over"}}), 1);
  EXPECT_EQ(metric("handovers_total", {{"rule", "stale"}}), 1);
  EXPECT_GE(metric("wakes_total", {{"consumer", "deploy"}}), 1);
  std::vector<std::string> states;
  for (const auto& s : status_.all(b)) {
    states.push_back(s.state);
  }
  EXPECT_EQ(states, (std::vector<std::string>{"ErrApplied", "Ready"}));
}

// The first owner deleted (a GitRepo renamed by creating the new one and deleting the old): its cascade hands the
// claimed object over instead of deleting it, and prunes the rest.
TEST_F(HandoverTest, DeleteHandsClaimedObjectsOver) {
  std::string a = unique("a");
  std::string b = unique("b");
  std::string before = startOwningO(a, {cm("o", "a"), cm("a-only")});
  ASSERT_FALSE(before.empty());
  send(b, {cm("o", "b")});
  auto conflict = next(b);
  ASSERT_TRUE(conflict);
  ASSERT_EQ(conflict->reason, "OwnershipConflict");
  sendDelete(a);
  auto deleted = status_.waitFor(a, [](const events::StatusEvent& s) { return s.reason == "Deleted"; });
  ASSERT_TRUE(deleted);
  EXPECT_NE(deleted->message.find("handed over 1"), std::string::npos) << deleted->message;
  auto ready = next(b);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->state, "Ready") << ready->message;
  EXPECT_EQ(uid("o"), before);
  EXPECT_TRUE(absent("v1", "ConfigMap", ns_, "a-only"));
  EXPECT_FALSE(inventory(a));
}

// keepResources orphans the objects (left as they are); a later claim adopts them (rule stale), UID kept.
TEST_F(HandoverTest, KeepResourcesOrphansAndAClaimAdopts) {
  std::string a = unique("a");
  std::string b = unique("b");
  std::string before = startOwningO(a, {cm("o", "a")});
  ASSERT_FALSE(before.empty());
  sendDelete(a, Json::obj({{"keepResources", true}}));
  ASSERT_TRUE(status_.waitFor(a, [](const events::StatusEvent& s) { return s.reason == "Orphaned"; }));
  EXPECT_EQ(owner("o"), bundleOwner(a));
  EXPECT_TRUE(held().empty());
  ASSERT_NO_FATAL_FAILURE(expectAdopted(b, {cm("o", "b")}, before));
  EXPECT_EQ(metric("handovers_total", {{"rule", "stale"}}), 1);
}

// Crash at agent.claim.applied: B's inventory widened with O and O applied with B's annotation, A's inventory
// still listing O. A restarted agent re-handles B's event (Ready, nothing else to do), and A's next deployment
// drops O from A's list without pruning it.
TEST_F(HandoverTest, CrashAfterClaimAppliedConverges) {
  std::string a = unique("a");
  auto first = rig();
  std::string before = appliedWithO(*first, a);
  ASSERT_FALSE(HasFailure());
  std::string b = unique("b");
  auto claim = event(b, {cm("o", "b")});
  // B's steps up to the crash point.
  ASSERT_TRUE(first->inventories
                  .save(Inventory{.workspace = workspace_, .bundle = b, .objects = {{"v1", "ConfigMap", ns_, "o"}}})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(annotateO(b, "b"));
  first.reset();

  auto restarted = rig();
  EXPECT_EQ(restarted->handle(claim).result, "applied");
  auto ready = status_.waitFor(b, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->state, "Ready") << ready->message;
  EXPECT_TRUE(lists(a, "o")) << "the step the crash skipped";
  EXPECT_EQ(restarted->handle(event(a, {cm("keep")})).result, "applied");
  EXPECT_EQ(uid("o"), before) << "never pruned: its annotation names B";
  EXPECT_FALSE(lists(a, "o"));
  EXPECT_TRUE(lists(b, "o"));
  EXPECT_TRUE(held().empty());
}

// Crash at agent.release.dropped: A's inventory dropped the claimed O but the wake never happened. The claimant's
// redelivered event, handled by a restarted agent, finds O no longer listed by A (rule stale) and takes it.
TEST_F(HandoverTest, CrashAfterReleaseDroppedConverges) {
  std::string a = unique("a");
  std::string b = unique("b");
  auto first = rig();
  std::string before = appliedWithO(*first, a);
  ASSERT_FALSE(HasFailure());
  auto claim = event(b, {cm("o", "b")});
  auto parked = first->handle(claim);
  EXPECT_EQ(parked.action, Outcome::Action::kWait);
  EXPECT_EQ(parked.result, "conflict");
  int wakes = first->wakes;
  EXPECT_EQ(first->handle(event(a, {cm("keep")})).result, "applied");
  EXPECT_GT(first->wakes.load(), wakes) << "a release with a claimant wakes the parked deploys";
  EXPECT_FALSE(lists(a, "o"));
  EXPECT_EQ(uid("o"), before);
  first.reset();  // the crash: B was never run again

  auto restarted = rig();
  EXPECT_EQ(restarted->handle(claim).result, "applied");
  EXPECT_EQ(uid("o"), before);
  EXPECT_EQ(owner("o"), bundleOwner(b));
  EXPECT_EQ(restarted->metrics.value("handovers_total", {{"rule", "stale"}}), 1);
}

// Crash at agent.hold.listed: O is in flotilla-released and still in A's inventory. The reaper never deletes an
// object a live inventory lists (it drops the entry); A's redelivered deployment, handled by a restarted agent,
// holds O again and drops it from A's inventory; the reaper deletes it once that hold expires.
TEST_F(HandoverTest, CrashAfterHoldListedConverges) {
  std::string a = unique("a");
  ManualClock clock;
  DeployHandlerOptions options{.release_hold = seconds(60), .clock = &clock};
  auto first = rig(options);
  ASSERT_EQ(first->handle(event(a, {cm("o"), cm("keep")})).result, "applied");
  auto release = event(a, {cm("keep")});
  // A's release of O up to the crash point.
  Metrics metrics("agent");
  ReleasedStore store(*kube_, agent_namespace_, metrics);
  ASSERT_TRUE(store
                  .add({ReleasedObject{.ref = {"v1", "ConfigMap", ns_, "o"},
                                       .released_by = bundleOwner(a),
                                       .released_at = formatRfc3339(clock.now())}})
                  .ok());
  first.reset();

  auto restarted = rig(options);
  clock.advance(std::chrono::minutes(2));
  auto reaped = restarted->handler->reapReleased();
  ASSERT_TRUE(reaped.ok()) << reaped.error().describe();
  EXPECT_EQ(*reaped, 0u);
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "o")) << "listed by A's inventory: never reaped";
  EXPECT_TRUE(held().empty());

  EXPECT_EQ(restarted->handle(release).result, "applied");
  EXPECT_FALSE(lists(a, "o"));
  ASSERT_EQ(held().size(), 1u);
  EXPECT_EQ(*restarted->handler->reapReleased(), 0u) << "the hold has not expired";
  clock.advance(std::chrono::minutes(2));
  EXPECT_EQ(*restarted->handler->reapReleased(), 1u);
  EXPECT_TRUE(goneOrDeleting("v1", "ConfigMap", ns_, "o"));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "keep"));
  EXPECT_TRUE(held().empty());
  EXPECT_EQ(restarted->metrics.value("released_deleted_total"), 1);
}

// The reaper leaves a held object another bundle has adopted meanwhile (its annotation no longer names the
// releaser) and one that was taken back by its releaser (listed again): only the entries go.
TEST_F(HandoverTest, ReaperSparesAdoptedObjects) {
  std::string a = unique("a");
  std::string b = unique("b");
  ManualClock clock;
  DeployHandlerOptions options{.release_hold = seconds(60), .clock = &clock};
  auto handler = rig(options);
  ASSERT_EQ(handler->handle(event(a, {cm("o"), cm("back"), cm("keep")})).result, "applied");
  ASSERT_EQ(handler->handle(event(a, {cm("keep")})).result, "applied");
  ASSERT_EQ(held().size(), 2u);
  // "o" adopted by another writer's annotation change (as after a crash mid-claim), "back" re-wanted by A.
  ASSERT_NO_FATAL_FAILURE(annotateO(b, "v"));
  ASSERT_EQ(handler->handle(event(a, {cm("keep"), cm("back")})).result, "applied");
  clock.advance(std::chrono::minutes(2));
  EXPECT_EQ(*handler->handler->reapReleased(), 0u);
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "o"));
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "back"));
  EXPECT_TRUE(held().empty());
}

// A hold list that does not decode is logged, counted and read as empty: nothing it named is deleted.
TEST_F(HandoverTest, UnreadableHoldListIsIgnored) {
  Metrics metrics("agent");
  ReleasedStore store(*kube_, agent_namespace_, metrics);
  ASSERT_TRUE(kube_->apply(namespaceObject(agent_namespace_), kube::ApplyOptions{.field_manager = "test"}).ok());
  Json broken = configMap(std::string(kReleasedName), agent_namespace_, {{std::string(kReleasedDataKey), "{"}});
  ASSERT_TRUE(kube_->apply(broken, kube::ApplyOptions{.field_manager = "test"}).ok());
  auto loaded = store.load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->empty());
  EXPECT_EQ(metrics.value("released_invalid_total"), 1);
}

// dependsOn by selector: met when every bundle the selector matches (by the labels of its DeployEvent, kept in its
// inventory) is Ready; a selector that matches nothing is not met; a NotReady match parks the deploy until the
// resync sees it Ready, which wakes it (no new DeployEvent, no fixed requeue).
TEST_F(HandoverTest, DependsOnSelectorMetUnmetAndNoMatch) {
  startRegisteredAgent();
  std::string infra = unique("infra");
  std::string db = unique("db");
  std::string app1 = unique("app1");
  std::string app2 = unique("app2");
  std::string app3 = unique("app3");
  send(infra, {cm("infra")}, {.labels = {{"tier", "infra"}}});
  ASSERT_TRUE(status_.waitForState(infra, "Ready"));
  send(app1, {cm("app1")}, {.depends_on = selectorOn("tier", "infra")});
  auto met = next(app1);
  ASSERT_TRUE(met);
  EXPECT_EQ(met->state, "Ready") << met->message;

  send(app2, {cm("app2")}, {.depends_on = selectorOn("tier", "nothing")});
  auto no_match = next(app2);
  ASSERT_TRUE(no_match);
  EXPECT_EQ(no_match->state, "WaitApplied");
  EXPECT_EQ(no_match->reason, "DependenciesNotReady");
  EXPECT_NE(no_match->message.find("no bundle matches selector tier=nothing"), std::string::npos) << no_match->message;

  send(db, {webDeployment()}, {.labels = {{"tier", "db"}}});
  ASSERT_TRUE(status_.waitForState(db, "NotReady"));
  send(app3, {cm("app3")}, {.depends_on = selectorOn("tier", "db")});
  auto unmet = next(app3);
  ASSERT_TRUE(unmet);
  EXPECT_EQ(unmet->state, "WaitApplied");
  EXPECT_NE(unmet->message.find("bundle " + db + " is NotReady"), std::string::npos) << unmet->message;
  EXPECT_TRUE(absent("v1", "ConfigMap", ns_, "app3"));

  // Play the deployment controller: the resync reports db Ready, which wakes app3.
  int64_t generation = get("apps/v1", "Deployment", ns_, "web")->at({"metadata", "generation"})->asInt();
  Json patch = Json::obj({{"status", Json::obj({{"observedGeneration", generation},
                                                {"replicas", 1},
                                                {"updatedReplicas", 1},
                                                {"readyReplicas", 1},
                                                {"availableReplicas", 1}})}});
  ASSERT_TRUE(kube_
                  ->request("PATCH", "/apis/apps/v1/namespaces/" + ns_ + "/deployments/web/status", patch.dump(),
                            "application/merge-patch+json")
                  .ok());
  ASSERT_TRUE(status_.waitForState(db, "Ready", seconds(20)));
  auto woken = next(app3, seconds(20));
  ASSERT_TRUE(woken) << "the dependent was not woken by its dependency's new state";
  EXPECT_EQ(woken->state, "Ready") << woken->message;
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "app3"));
  EXPECT_EQ(status_.all(app2).size(), 1u) << "WaitApplied is reported once";
}

// A dependsOn cycle among waiting bundles: ErrApplied/DependencyCycle naming the cycle, for each bundle of it (they
// stay parked); a new deployment that breaks the cycle releases them.
TEST_F(HandoverTest, DependsOnCycleIsReportedAndBrokenByANewDeploy) {
  startRegisteredAgent();
  std::string a = unique("a");
  std::string b = unique("b");
  auto dependsOnName = [](const std::string& name) { return Json(Json::Array{Json::obj({{"name", name}})}); };
  send(a, {cm("a")}, {.depends_on = dependsOnName(b)});
  auto waiting = next(a);
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "WaitApplied");
  send(b, {cm("b")}, {.depends_on = dependsOnName(a)});
  std::string wa = bundleOwner(a);
  std::string wb = bundleOwner(b);
  // Both reports come from b's deploy; the reader is asked by bundle, in any order.
  auto cycleOf = [&](const std::string& bundle) {
    std::optional<events::StatusEvent> found;
    eventually(
        [&] {
          for (const auto& s : status_.all(bundle)) {
            if (s.reason == "DependencyCycle") {
              found = s;
            }
          }
          return found.has_value();
        },
        seconds(30));
    return found;
  };
  auto cycle_a = cycleOf(a);
  auto cycle_b = cycleOf(b);
  ASSERT_TRUE(cycle_a);
  ASSERT_TRUE(cycle_b);
  EXPECT_EQ(cycle_a->state, "ErrApplied");
  EXPECT_EQ(cycle_a->reason, "DependencyCycle");
  EXPECT_EQ(cycle_a->message, "dependsOn cycle: " + wa + " → " + wb + " → " + wa);
  EXPECT_EQ(cycle_b->reason, "DependencyCycle");
  EXPECT_EQ(cycle_b->message, "dependsOn cycle: " + wb + " → " + wa + " → " + wb);
  EXPECT_EQ(metric("dependency_cycles_total"), 1);
  EXPECT_TRUE(absent("v1", "ConfigMap", ns_, "a"));

  send(b, {cm("b")});  // without dependsOn
  auto b_ready = status_.waitForState(b, "Ready");
  ASSERT_TRUE(b_ready);
  auto a_ready = status_.waitForState(a, "Ready");
  ASSERT_TRUE(a_ready) << "the waiting bundle was not released";
  EXPECT_TRUE(exists("v1", "ConfigMap", ns_, "a"));
  EXPECT_EQ(metric("dependency_cycles_total"), 1);
}

}  // namespace
}  // namespace flotilla::agent
