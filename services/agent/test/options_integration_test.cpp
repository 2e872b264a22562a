// The deployment options that change how the agent applies a bundle, against a real nats-server and a real
// kube-apiserver with RBAC (tests/harness; the fixture of agent_fixture.h plays the scheduler): ownership of
// objects no bundle manages (takeOwnership), serviceAccount impersonation, deleteNamespace, helm.atomic,
// helm.timeoutSeconds / waitForJobs, and options Flotilla does not implement.
#include <algorithm>

#include "agent_fixture.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Json helm(Json fields) {
  return Json::obj({{"helm", std::move(fields)}});
}

Json withNamespace(Json options, const std::string& ns) {
  options["defaultNamespace"] = ns;
  return options;
}

// A Deployment never becomes Ready here: the harness runs no controllers.
Json deployment(const std::string& name) {
  return Json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":")" + name + R"("},
    "spec":{"replicas":1,"selector":{"matchLabels":{"app":")" +
                     name + R"("}},
      "template":{"metadata":{"labels":{"app":")" +
                     name + R"("}},
        "spec":{"containers":[{"name":"c","image":"busybox"}]}}}})")
      .value();
}

// A Job never completes here either.
Json job(const std::string& name) {
  return Json::parse(R"({"apiVersion":"batch/v1","kind":"Job","metadata":{"name":")" + name + R"("},
    "spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}})")
      .value();
}

bool listed(const std::vector<ObjectRef>& refs, const std::string& name) {
  return std::any_of(refs.begin(), refs.end(), [&](const ObjectRef& ref) { return ref.name == name; });
}

class OptionsTest : public AgentTest {
 protected:
};

// An object that exists and no bundle manages is refused without takeOwnership (Helm's message, naming its field
// managers), never pruned later, and adopted with takeOwnership (recorded as adopted, then prunable).
TEST_F(OptionsTest, UnmanagedObjectIsRefusedWithoutTakeOwnershipAndAdoptedWithIt) {
  startRegisteredAgent();
  std::string ns = preexistingNamespace("unmanaged");
  std::string bundle = unique("bundle");
  ASSERT_TRUE(
      kube_->apply(configMap("pre", ns, {{"k", "theirs"}}), kube::ApplyOptions{.field_manager = "kubectl-edit"}).ok());
  Json options = withNamespace(Json::object(), ns);
  deploy(bundle, putManifest({configMap("pre", "", {{"k", "ours"}}), configMap("mine", "", {{"k", "ours"}})}), options);
  auto refused = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->state, "ErrApplied");
  EXPECT_EQ(refused->reason, "UnmanagedObject");
  EXPECT_TRUE(contains(refused->message, "ConfigMap " + ns +
                                             "/pre exists and is not managed by Flotilla (field managers: "
                                             "kubectl-edit); set helm.takeOwnership to adopt it"))
      << refused->message;
  EXPECT_EQ(dataOf(ns, "pre", "k"), "theirs");
  EXPECT_EQ(dataOf(ns, "mine", "k"), "ours");
  EXPECT_FALSE(listed(inventory(bundle)->objects, "pre"));
  EXPECT_EQ(metric("unmanaged_objects_total", {{"result", "refused"}}), 1);

  // A manifest without it: the refused object (in the intent of the first apply) is left alone.
  deploy(bundle, putManifest({configMap("mine", "", {{"k", "ours"}})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  EXPECT_EQ(dataOf(ns, "pre", "k"), "theirs");

  Json take = withNamespace(helm(Json::obj({{"takeOwnership", true}})), ns);
  deploy(bundle, putManifest({configMap("pre", "", {{"k", "ours"}}), configMap("mine", "", {{"k", "ours"}})}), take);
  auto adopted = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(adopted);
  EXPECT_EQ(adopted->state, "Ready") << adopted->message;
  EXPECT_EQ(dataOf(ns, "pre", "k"), "ours");
  EXPECT_EQ(ownerOfLive("v1", "ConfigMap", ns, "pre"), workspace_ + "/" + bundle);
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_TRUE(listed(inv->objects, "pre"));
  EXPECT_TRUE(listed(inv->adopted, "pre"));
  EXPECT_FALSE(listed(inv->adopted, "mine"));
  EXPECT_EQ(metric("unmanaged_objects_total", {{"result", "adopted"}}), 1);

  // Explicitly adopted, so it goes when the bundle stops wanting it.
  deploy(bundle, putManifest({configMap("mine", "", {{"k", "ours"}})}), take);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  EXPECT_TRUE(eventually([&] { return absent("v1", "ConfigMap", ns, "pre"); }, seconds(10)));
}

// serviceAccount: the bundle is applied as system:serviceaccount:<agent ns>:<name>; a verb its Role lacks is
// ErrApplied naming it; once granted, the same deployment applies. A missing account is reported and parked.
TEST_F(OptionsTest, ServiceAccountBoundsTheBundleByItsRbac) {
  startRegisteredAgent();
  std::string ns = preexistingNamespace("sa");
  std::string bundle = unique("bundle");
  ASSERT_TRUE(kube_->apply(namespaceObject(agent_namespace_), kube::ApplyOptions{.field_manager = "test"}).ok());
  Json options = withNamespace(Json::obj({{"serviceAccount", "deployer"}}), ns);
  std::string id = putManifest({configMap("as-sa", "", {{"k", "v"}})});

  deploy(bundle, id, options);
  auto missing = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->state, "ErrApplied");
  EXPECT_EQ(missing->reason, "ServiceAccountNotFound");
  EXPECT_TRUE(contains(missing->message, "serviceAccount deployer does not exist in namespace " + agent_namespace_))
      << missing->message;

  Json account = Json::obj({{"apiVersion", "v1"},
                            {"kind", "ServiceAccount"},
                            {"metadata", Json::obj({{"name", "deployer"}, {"namespace", agent_namespace_}})}});
  ASSERT_TRUE(kube_->apply(account).ok());
  auto rule = [&](const Json& verbs) {
    Json role = Json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role",
      "metadata":{"name":"deployer"},"rules":[{"apiGroups":[""],"resources":["configmaps"]}]})")
                    .value();
    role["metadata"]["namespace"] = ns;
    role["rules"].asArray()[0]["verbs"] = verbs;
    return role;
  };
  ASSERT_TRUE(kube_->apply(rule(Json::parse(R"(["get","list"])").value())).ok());
  Json binding = Json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
    "metadata":{"name":"deployer"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"deployer"},
    "subjects":[{"kind":"ServiceAccount","name":"deployer"}]})")
                     .value();
  binding["metadata"]["namespace"] = ns;
  binding["subjects"].asArray()[0]["namespace"] = agent_namespace_;
  ASSERT_TRUE(kube_->apply(binding).ok());

  deploy(bundle, id, options);
  auto denied =
      status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.reason != "ServiceAccountNotFound"; });
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->state, "ErrApplied");
  EXPECT_TRUE(contains(denied->message, "system:serviceaccount:" + agent_namespace_ + ":deployer")) << denied->message;
  EXPECT_TRUE(contains(denied->message, "cannot patch resource \"configmaps\"")) << denied->message;
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "as-sa"));

  ASSERT_TRUE(kube_->apply(rule(Json::parse(R"(["get","list","create","patch","delete"])").value())).ok());
  auto as_deployer = kube_->impersonating(
      kube::Impersonation{.user = "system:serviceaccount:" + agent_namespace_ + ":deployer", .groups = {}});
  ASSERT_TRUE(eventually(  // RBAC takes effect within moments
      [&] { return as_deployer->apply(configMap("probe", ns, {}), kube::ApplyOptions{.dry_run = true}).ok(); },
      seconds(10)));
  deploy(bundle, id, options);
  auto applied = status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.state == "Ready"; });
  ASSERT_TRUE(applied);
  EXPECT_EQ(dataOf(ns, "as-sa", "k"), "v");
  deploy(bundle, "", options, /*remove=*/true);
  ASSERT_TRUE(status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.reason == "Deleted"; }));
  EXPECT_TRUE(eventually([&] { return absent("v1", "ConfigMap", ns, "as-sa"); }, seconds(10)));
}

// deleteNamespace: the namespaces the agent created for the bundle go with it; one that existed before stays, and
// so does a created one without the option.
TEST_F(OptionsTest, DeleteNamespaceRemovesOnlyTheNamespacesTheBundleCreated) {
  startRegisteredAgent();
  std::string created = unique("created");
  std::string before = preexistingNamespace("before");
  std::string bundle = unique("bundle");
  Json options = withNamespace(Json::obj({{"deleteNamespace", true}}), created);
  deploy(bundle, putManifest({configMap("a", "", {}), configMap("b", before, {})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_EQ(inv->created_namespaces, std::vector<std::string>{created});

  deploy(bundle, "", options, /*remove=*/true);
  auto deleted = status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.reason == "Deleted"; });
  ASSERT_TRUE(deleted);
  EXPECT_TRUE(contains(deleted->message, "deleted 1 namespaces (deleteNamespace)")) << deleted->message;
  EXPECT_TRUE(eventually([&] { return goneOrDeleting("v1", "Namespace", "", created); }, seconds(10)));
  EXPECT_TRUE(exists("v1", "Namespace", "", before));
  EXPECT_FALSE(goneOrDeleting("v1", "Namespace", "", before));

  std::string kept = unique("kept");
  std::string other = unique("bundle");
  deploy(other, putManifest({configMap("a", "", {})}), withNamespace(Json::object(), kept));
  ASSERT_TRUE(status_.waitForState(other, "Ready"));
  deploy(other, "", withNamespace(Json::object(), kept), /*remove=*/true);
  ASSERT_TRUE(status_.waitFor(other, [](const events::StatusEvent& s) { return s.reason == "Deleted"; }));
  EXPECT_FALSE(goneOrDeleting("v1", "Namespace", "", kept));
}

// helm.atomic: an apply with a failed object is followed by the previous manifest; both are reported, and objects
// only the failed manifest had are released.
TEST_F(OptionsTest, AtomicRevertsAFailedApplyToThePreviousManifest) {
  startRegisteredAgent();
  std::string ns = preexistingNamespace("atomic");
  std::string bundle = unique("bundle");
  Json options = withNamespace(helm(Json::obj({{"atomic", true}})), ns);
  std::string good = putManifest({configMap("a", "", {{"v", "1"}})});
  deploy(bundle, good, options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));

  Json invalid = configMap("broken", "", {});
  invalid["data"] = Json::obj({{"k", 5}});  // ConfigMap data must be strings: the API server rejects it
  deploy(bundle, putManifest({configMap("a", "", {{"v", "2"}}), configMap("extra", "", {}), invalid}), options);
  auto reverted = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(reverted);
  EXPECT_EQ(reverted->state, "ErrApplied");
  EXPECT_EQ(reverted->reason, "ApplyFailed");
  EXPECT_TRUE(contains(reverted->message, "ConfigMap/" + ns + "/broken")) << reverted->message;
  EXPECT_TRUE(
      contains(reverted->message, "atomic: reverted to the previous manifest " + good.substr(0, 12) + ": Ready"))
      << reverted->message;
  EXPECT_EQ(dataOf(ns, "a", "v"), "1");
  EXPECT_TRUE(eventually([&] { return absent("v1", "ConfigMap", ns, "extra"); }, seconds(10)));
  auto inv = inventory(bundle);
  ASSERT_TRUE(inv);
  EXPECT_FALSE(inv->applied);
  EXPECT_EQ(inv->previous_manifest_id, good);
  EXPECT_EQ(metric("atomic_reverts_total", {{"trigger", "apply"}}), 1);
}

// helm.timeoutSeconds: the agent waits for health (parked, not blocking) up to the timeout, then ErrApplied/
// HealthTimeout naming what is not ready; with atomic it then reverts. Jobs count only with waitForJobs.
TEST_F(OptionsTest, TimeoutSecondsWaitsForHealthThenFails) {
  startRegisteredAgent();
  std::string ns = preexistingNamespace("timeout");
  std::string bundle = unique("bundle");
  Json options = withNamespace(helm(Json::obj({{"timeoutSeconds", 2}, {"atomic", true}})), ns);
  std::string good = putManifest({configMap("a", "", {})});
  deploy(bundle, good, options);
  auto ready = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->state, "Ready") << ready->message;  // healthy at once: no wait

  deploy(bundle, putManifest({configMap("a", "", {}), deployment("web")}), options);
  auto waiting = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->state, "NotReady");
  EXPECT_TRUE(contains(waiting->message, "waiting for health until")) << waiting->message;
  auto timed_out = status_.waitFor(bundle, [](const events::StatusEvent& s) { return s.state == "ErrApplied"; });
  ASSERT_TRUE(timed_out);
  EXPECT_EQ(timed_out->reason, "HealthTimeout");
  EXPECT_TRUE(contains(timed_out->message, "not healthy within 2 s (helm.timeoutSeconds)")) << timed_out->message;
  EXPECT_TRUE(contains(timed_out->message, "Deployment/" + ns + "/web")) << timed_out->message;
  EXPECT_TRUE(contains(timed_out->message, "atomic: reverted to the previous manifest")) << timed_out->message;
  EXPECT_TRUE(eventually([&] { return goneOrDeleting("apps/v1", "Deployment", ns, "web"); }, seconds(10)));
  EXPECT_EQ(metric("health_timeouts_total"), 1);

  // A Job that never completes: not waited for without waitForJobs (NotReady as always), a timeout with it.
  std::string jobs = unique("jobs");
  Json no_wait = withNamespace(helm(Json::obj({{"timeoutSeconds", 2}})), ns);
  deploy(jobs, putManifest({job("migrate")}), no_wait);
  auto settled = status_.waitFor(jobs, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(settled);
  EXPECT_EQ(settled->state, "NotReady");
  EXPECT_FALSE(contains(settled->message, "waiting for health")) << settled->message;
  Json wait_jobs = withNamespace(helm(Json::obj({{"timeoutSeconds", 2}, {"waitForJobs", true}})), ns);
  deploy(jobs, putManifest({job("migrate")}), wait_jobs);
  auto job_timeout = status_.waitFor(jobs, [](const events::StatusEvent& s) { return s.state == "ErrApplied"; });
  ASSERT_TRUE(job_timeout);
  EXPECT_EQ(job_timeout->reason, "HealthTimeout");
  EXPECT_TRUE(contains(job_timeout->message, "Job/" + ns + "/migrate")) << job_timeout->message;
}

// An option Flotilla does not implement is never accepted and ignored: ErrApplied/InvalidOptions naming it.
TEST_F(OptionsTest, UnsupportedOptionsAreRefusedNamingTheField) {
  startRegisteredAgent();
  std::string bundle = unique("bundle");
  Json options = helm(Json::obj({{"valuesFrom", Json::parse(R"([{"secretKeyRef":{"name":"s","key":"k"}}])").value()}}));
  options["downstreamResources"] = Json::parse(R"([{"kind":"Secret","name":"db"}])").value();
  deploy(bundle, putManifest({configMap("a", "default", {})}), options);
  auto refused = status_.waitFor(bundle, [](const events::StatusEvent&) { return true; });
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->state, "ErrApplied");
  EXPECT_EQ(refused->reason, "InvalidOptions");
  EXPECT_TRUE(contains(refused->message, "options.downstreamResources: not supported")) << refused->message;
  EXPECT_TRUE(contains(refused->message, "options.helm.valuesFrom: not supported")) << refused->message;
  EXPECT_TRUE(absent("v1", "ConfigMap", "default", "a"));
}

}  // namespace
}  // namespace flotilla::agent
