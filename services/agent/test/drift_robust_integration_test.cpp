// Integration tests of the drift worker's robustness (watcher.h), against a real nats-server -js and a real
// kube-apiserver with RBAC (the fixture of agent_fixture.h): corrections made as the bundle's serviceAccount, so its
// RBAC bounds them; a failed correction retried with backoff until it succeeds, with no further change to the object;
// a bundle whose deploy is stuck in a long CRD wait never delays the other bundles' drift reports and corrections;
// fight detection counts corrections per field. The other writers are real clients with their own field managers;
// the resync interval is an hour, so every report below comes from the watch.
#include <algorithm>
#include <thread>

#include "agent_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class DriftRobustTest : public AgentTest {
 protected:
  //! The agent with a resync that never runs during a test.
  void startWatchingAgent(std::chrono::milliseconds crd_timeout = seconds(30)) {
    AgentOptions options = agentOptions();
    options.resync_interval = std::chrono::hours(1);
    options.crd_timeout = crd_timeout;
    if (!responding_) {
      startResponder();
      responding_ = true;
    }
    startAgent(nullptr, /*wait_ready=*/true, options);
  }

  //! The service account `name` in the agent namespace (Fleet's rule: serviceAccount lives there).
  void createServiceAccount(const std::string& name) {
    ASSERT_TRUE(kube_->apply(namespaceObject(agent_namespace_), kube::ApplyOptions{.field_manager = "test"}).ok());
    Json account = Json::obj({{"apiVersion", "v1"},
                              {"kind", "ServiceAccount"},
                              {"metadata", Json::obj({{"name", name}, {"namespace", agent_namespace_}})}});
    ASSERT_TRUE(kube_->apply(account).ok());
    as_account_ = kube_->impersonating(
        kube::Impersonation{.user = "system:serviceaccount:" + agent_namespace_ + ":" + name, .groups = {}});
  }

  //! Lets the service account get, create and patch ConfigMaps in `ns` (a Role and its RoleBinding).
  void grantConfigMaps(const std::string& account, const std::string& ns) {
    Json role = Json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"cm"},
      "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","create","patch"]}]})")
                    .value();
    role["metadata"]["namespace"] = ns;
    ASSERT_TRUE(kube_->apply(role).ok());
    ASSERT_TRUE(kube_->apply(binding(account, ns)).ok());
  }
  Json binding(const std::string& account, const std::string& ns) {
    Json object = Json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
      "metadata":{"name":"cm"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"cm"},
      "subjects":[{"kind":"ServiceAccount"}]})")
                      .value();
    object["metadata"]["namespace"] = ns;
    object["subjects"].asArray()[0]["name"] = account;
    object["subjects"].asArray()[0]["namespace"] = agent_namespace_;
    return object;
  }
  //! Whether the service account may patch ConfigMaps in `ns` now (RBAC takes effect within moments).
  bool accountMayPatch(const std::string& ns) {
    return as_account_->apply(configMap("probe", ns, {}), kube::ApplyOptions{.dry_run = true}).ok();
  }

  std::unique_ptr<kube::KubeClient> as_account_;
  bool responding_ = false;
};

// serviceAccount bounds corrections as it bounds deploys: drift the account may correct is healed (an edit, and a
// deleted object re-created), while the correction of an object in a namespace the account lost is refused by the
// API server and reported (Modified with its Forbidden message naming the verb and the account, an Event with
// keepFailHistory, a metric). The refused correction is retried with backoff, not in a loop, and succeeds once the
// account is allowed again, without any further change to the object.
TEST_F(DriftRobustTest, CorrectionsActAsTheServiceAccountAndRetryUntilAllowed) {
  startWatchingAgent();
  const std::string allowed = preexistingNamespace("sa-ok");
  const std::string revoked = preexistingNamespace("sa-off");
  ASSERT_NO_FATAL_FAILURE(createServiceAccount("corrector"));
  ASSERT_NO_FATAL_FAILURE(grantConfigMaps("corrector", allowed));
  ASSERT_NO_FATAL_FAILURE(grantConfigMaps("corrector", revoked));
  ASSERT_TRUE(eventually([&] { return accountMayPatch(allowed) && accountMayPatch(revoked); }, seconds(10)));
  const std::string bundle = unique("bundle");
  Json options =
      Json::obj({{"defaultNamespace", allowed},
                 {"serviceAccount", "corrector"},
                 {"correctDrift", Json::obj({{"enabled", true}, {"force", true}, {"keepFailHistory", true}})}});
  deploy(bundle, putManifest({configMap("a", "", {{"k", "v"}}), configMap("b", revoked, {{"k", "v"}})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));

  ASSERT_TRUE(kube_->remove("rbac.authorization.k8s.io/v1", "RoleBinding", revoked, "cm").ok());
  ASSERT_TRUE(eventually([&] { return !accountMayPatch(revoked); }, seconds(10)));
  ASSERT_TRUE(editData("kubectl-edit", allowed, "a", "k", "edited").ok());
  EXPECT_TRUE(eventually([&] { return dataOf(allowed, "a", "k") == "v"; }, seconds(30))) << "a was not healed";
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", allowed, "a").ok());
  EXPECT_TRUE(eventually([&] { return dataOf(allowed, "a", "k") == "v"; }, seconds(30))) << "a was not re-created";

  ASSERT_TRUE(editData("kubectl-edit", revoked, "b", "k", "edited").ok());
  auto refused = status_.waitFor(
      bundle, [](const events::StatusEvent& s) { return contains(s.message, "correction failed"); }, seconds(30));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->state, "Modified");
  EXPECT_TRUE(contains(refused->message, "system:serviceaccount:" + agent_namespace_ + ":corrector"))
      << refused->message;
  EXPECT_TRUE(contains(refused->message, "cannot patch resource \"configmaps\"")) << refused->message;
  EXPECT_TRUE(eventually([&] { return eventsAbout(revoked, "b", "DriftCorrectionFailed") >= 1; }, seconds(10)));
  EXPECT_GE(metric("drift_corrections_total", {{"result", "failed"}}), 1);
  // Retried after a backoff (1 s, doubling): a few attempts over several seconds, not a hot loop; the agent's own
  // identity (which could patch it) is never used.
  ASSERT_TRUE(eventually([&] { return metric("drift_correction_retries_total") >= 2; }, seconds(30)));
  EXPECT_LE(metric("drift_corrections_total", {{"result", "failed"}}), 8);
  EXPECT_EQ(dataOf(revoked, "b", "k"), "edited");

  ASSERT_TRUE(kube_->apply(binding("corrector", revoked)).ok());
  EXPECT_TRUE(eventually([&] { return dataOf(revoked, "b", "k") == "v"; }, seconds(60)))
      << "the refused correction was not retried once allowed";
  EXPECT_TRUE(status_.waitForState(bundle, "Ready", seconds(30)));
}

// After a restart the agent rebuilds a serviceAccount bundle's desired state from its inventory, and still corrects
// it as the account: drift the account may not correct stays refused, not healed with the agent's own rights.
TEST_F(DriftRobustTest, CorrectionsAfterARestartStillActAsTheServiceAccount) {
  startWatchingAgent();
  const std::string ns = preexistingNamespace("sa-restart");
  ASSERT_NO_FATAL_FAILURE(createServiceAccount("corrector"));
  ASSERT_NO_FATAL_FAILURE(grantConfigMaps("corrector", ns));
  ASSERT_TRUE(eventually([&] { return accountMayPatch(ns); }, seconds(10)));
  const std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("a", "", {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns},
                    {"serviceAccount", "corrector"},
                    {"correctDrift", Json::obj({{"enabled", true}, {"force", true}})}}));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  auto kept = inventory(bundle);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->options.getString("serviceAccount"), "corrector");
  stopAgent();

  ASSERT_TRUE(kube_->remove("rbac.authorization.k8s.io/v1", "RoleBinding", ns, "cm").ok());
  ASSERT_TRUE(eventually([&] { return !accountMayPatch(ns); }, seconds(10)));
  ASSERT_TRUE(editData("kubectl-edit", ns, "a", "k", "edited").ok());
  startWatchingAgent();
  auto refused = status_.waitFor(
      bundle, [](const events::StatusEvent& s) { return contains(s.message, "correction failed"); }, seconds(30));
  ASSERT_TRUE(refused);
  EXPECT_TRUE(contains(refused->message, "cannot patch resource \"configmaps\"")) << refused->message;
  EXPECT_EQ(dataOf(ns, "a", "k"), "edited");
  EXPECT_EQ(metric("watch_restore_failures_total"), 0);
}

// A bundle whose deploy is stuck in its CRD wait (a CRD that is never Established, --crd-timeout 120s) while the
// watch has a change of it to report does not hold up the others: another bundle's edit is reported Modified, and a
// correctDrift bundle's edit is healed, while the slow deploy still waits. The slow bundle's report is deferred,
// not lost.
TEST_F(DriftRobustTest, ASlowBundleNeverDelaysOtherBundlesDriftReports) {
  startWatchingAgent(seconds(120));
  const std::string ns = preexistingNamespace("busy");
  const std::string group = randomHex(4) + ".example.com";
  ASSERT_NO_FATAL_FAILURE(applyEstablishedCrd(group, "widgets", "Widget"));
  const std::string slow = unique("slow");
  const std::string plain = unique("plain");
  const std::string healing = unique("healing");
  Json in_ns = Json::obj({{"defaultNamespace", ns}});
  deploy(slow, putManifest({configMap("s", "", {{"k", "v"}})}), in_ns);
  deploy(plain, putManifest({configMap("p", "", {{"k", "v"}})}), in_ns);
  deploy(healing, putManifest({configMap("h", "", {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns}, {"correctDrift", Json::obj({{"enabled", true}, {"force", true}})}}));
  for (const auto& bundle : {slow, plain, healing}) {
    ASSERT_TRUE(status_.waitForState(bundle, "Ready")) << bundle;
  }

  // The slow bundle's next deploy: a CRD whose names conflict with widgets (never Established), then its ConfigMap.
  deploy(slow, putManifest({crd(group, "gizmos", "Widget"), configMap("s", "", {{"k", "v"}})}), in_ns);
  ASSERT_TRUE(
      eventually([&] { return exists("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gizmos." + group); },
                 seconds(30)));  // stage 1 applied: the deploy now waits, holding the bundle's lock
  // A change of the slow bundle for the watch to report while its deploy waits; the other edits come after the
  // watch has seen it (so its worker has it in hand first).
  const double events_before = metric("watch_events_total");
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", ns, "s").ok());
  ASSERT_TRUE(eventually([&] { return metric("watch_events_total") > events_before; }, seconds(30)));
  std::this_thread::sleep_for(milliseconds(500));

  ASSERT_TRUE(editData("kubectl-edit", ns, "p", "k", "edited").ok());
  auto modified = status_.waitForState(plain, "Modified", seconds(30));
  ASSERT_TRUE(modified) << "the slow bundle held up another bundle's drift report";
  EXPECT_GE(metric("watch_reports_deferred_total"), 1);
  EXPECT_TRUE(contains(modified->message, "ConfigMap/" + ns + "/p: changed by kubectl-edit: .data.k"))
      << modified->message;
  ASSERT_TRUE(editData("kubectl-edit", ns, "h", "k", "edited").ok());
  EXPECT_TRUE(eventually([&] { return dataOf(ns, "h", "k") == "v"; }, seconds(30)))
      << "the slow bundle held up another bundle's correction";
  // Still waiting: nothing reported for the slow bundle since its first deploy, and its ConfigMap not re-applied.
  auto slow_reports = status_.all(slow);
  ASSERT_FALSE(slow_reports.empty());
  EXPECT_EQ(slow_reports.back().state, "Ready");
  EXPECT_EQ(slow_reports.back().generation, 1);
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "s"));

  // widgets gone, gizmos' names are accepted: the slow deploy goes on and reports for itself.
  ASSERT_TRUE(kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets." + group).ok());
  auto done = status_.waitFor(
      slow, [](const events::StatusEvent& s) { return s.generation == 2; }, seconds(60));
  EXPECT_TRUE(done);
  EXPECT_TRUE(eventually([&] { return exists("v1", "ConfigMap", ns, "s"); }, seconds(10)));
  stopAgent();
  (void)kube_->remove("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gizmos." + group);
}

// Fights are counted per field: two writers taking turns on two fields of one object are corrected each time (two
// corrections per field stay under K = 3, while the object was corrected four times); one writer that keeps changing
// one field is a fight naming that writer and that field.
TEST_F(DriftRobustTest, FightsAreCountedPerField) {
  startWatchingAgent();
  const std::string ns = preexistingNamespace("perfield");
  const std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("a", "", {{"x", "ours"}, {"y", "ours"}})}),
         Json::obj({{"defaultNamespace", ns}, {"correctDrift", Json::obj({{"enabled", true}, {"force", true}})}}));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));

  for (int round = 0; round < 2; ++round) {
    for (const std::string& field : {std::string("x"), std::string("y")}) {
      ASSERT_TRUE(editData("writer-" + field, ns, "a", field, "theirs-" + std::to_string(round)).ok());
      ASSERT_TRUE(eventually([&] { return dataOf(ns, "a", field) == "ours"; }, seconds(30)))
          << "round " << round << ": " << field << " was not corrected";
    }
  }
  EXPECT_EQ(metric("drift_fights_total"), 0);
  // The counter moves just after the corrected object is visible on the API server.
  EXPECT_TRUE(eventually(
      [&] {
        return metric("drift_corrections_total", {{"result", "ok"}}) >= 4;
      },
      seconds(10)))
      << metric("drift_corrections_total", {{"result", "ok"}});

  // A third correction of x, then x drifts again: a fight over .data.x with writer-x.
  ASSERT_TRUE(editData("writer-x", ns, "a", "x", "theirs-2").ok());
  ASSERT_TRUE(eventually([&] { return dataOf(ns, "a", "x") == "ours"; }, seconds(30)));
  EXPECT_EQ(metric("drift_fights_total"), 0);
  ASSERT_TRUE(editData("writer-x", ns, "a", "x", "theirs-3").ok());
  auto fight = status_.waitFor(
      bundle, [](const events::StatusEvent& s) { return s.reason == "DriftFight"; }, seconds(30));
  ASSERT_TRUE(fight);
  EXPECT_EQ(fight->state, "Modified");
  EXPECT_TRUE(contains(fight->message, "fight with field manager writer-x over .data.x")) << fight->message;
  EXPECT_EQ(metric("drift_fights_total"), 1);
  EXPECT_TRUE(eventually([&] { return eventsAbout(ns, "a", "DriftFight") >= 1; }, seconds(10)));
  EXPECT_EQ(dataOf(ns, "a", "x"), "theirs-3");
}

}  // namespace
}  // namespace flotilla::agent
