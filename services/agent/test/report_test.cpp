// Unit tests for bundle state summaries, status ids and flag parsing.
#include "flotilla/agent/report.h"

#include <gtest/gtest.h>

#include "flotilla/agent/agent.h"
#include "flotilla/agent/deploy_handler.h"
#include "flotilla/agent/flags.h"
#include "flotilla/agent/scope.h"

namespace flotilla::agent {
namespace {

ObjectOutcome ok(std::string name) {
  return ObjectOutcome{.ref = {"v1", "ConfigMap", "ns", name}, .ready = true};
}

//! `r` has `state`, `reason` and `message`, and resources in `resource_states`.
void expectSummary(const BundleReport& r, model::BundleState state, std::string_view reason, std::string_view message,
                   const std::vector<std::string>& resource_states) {
  EXPECT_EQ(r.state, state);
  EXPECT_EQ(r.reason, reason);
  EXPECT_EQ(r.message, message);
  std::vector<std::string> states;
  for (const auto& resource : r.resources) {
    states.push_back(resource.state);
  }
  EXPECT_EQ(states, resource_states);
}

// All applied and healthy: Ready without reason.
TEST(ReportTest, ReadyWhenEverythingIsHealthy) {
  BundleReport r = summarize({ok("a"), ok("b")});
  EXPECT_EQ(r.state, model::BundleState::kReady);
  EXPECT_TRUE(r.reason.empty());
  EXPECT_TRUE(r.resources.empty());
}

// Unhealthy objects make NotReady with per-object messages.
TEST(ReportTest, NotReadyListsObjects) {
  ObjectOutcome web{.ref = {"apps/v1", "Deployment", "prod", "web"}, .message = "0 of 2 replicas available"};
  BundleReport r = summarize({ok("a"), web});
  expectSummary(r, model::BundleState::kNotReady, kReasonNotReady,
                "1 of 2 objects not ready: Deployment/prod/web: 0 of 2 replicas available", {"NotReady"});
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(r.resources[0].ns, "prod");
}

// Any apply failure wins, and the message names each failed object with the server's message.
TEST(ReportTest, ErrAppliedNamesFailedObjects) {
  ObjectOutcome bad{.ref = {"v1", "ConfigMap", "prod", "bad"}, .apply_failed = true, .error = "data: expected map"};
  ObjectOutcome web{.ref = {"apps/v1", "Deployment", "prod", "web"}, .message = "waiting"};
  BundleReport r = summarize({bad, web, ok("c")});
  expectSummary(r, model::BundleState::kErrApplied, kReasonApplyFailed,
                "failed to apply 1 of 3 objects: ConfigMap/prod/bad: data: expected map", {"ErrApplied", "NotReady"});
}

// Ownership conflicts only: reason OwnershipConflict and the conflict messages, which name both bundles.
TEST(ReportTest, OwnershipConflictNamesBothBundles) {
  ObjectRef ref{"v1", "ConfigMap", "app", "x"};
  std::string message = conflictMessage(ref, "ws/a", "ws/b");
  EXPECT_EQ(
      message,
      "ConfigMap app/x is owned by bundle ws/a and also claimed by ws/b; ws/b takes it over when ws/a releases it");
  ObjectOutcome conflict{.ref = ref, .apply_failed = true, .conflict = true, .error = message};
  BundleReport r = summarize({conflict, ok("c")});
  EXPECT_EQ(r.state, model::BundleState::kErrApplied);
  EXPECT_EQ(r.reason, kReasonOwnershipConflict);
  EXPECT_EQ(r.message, message);
  // With another failure the reason stays ApplyFailed; both are named.
  ObjectOutcome bad{.ref = {"v1", "ConfigMap", "app", "bad"}, .apply_failed = true, .error = "invalid"};
  BundleReport mixed = summarize({conflict, bad});
  EXPECT_EQ(mixed.reason, kReasonApplyFailed);
  EXPECT_NE(mixed.message.find(message), std::string::npos) << mixed.message;
  EXPECT_NE(mixed.message.find("ConfigMap/app/bad: invalid"), std::string::npos) << mixed.message;
  EXPECT_EQ(conflictMessage({"v1", "Namespace", "", "n"}, "ws/a", "ws/b").substr(0, 23), "Namespace n is owned by");
}

// Long lists are capped in the message and in resources.
TEST(ReportTest, CapsLongLists) {
  std::vector<ObjectOutcome> outcomes;
  for (int i = 0; i < 60; ++i) {
    outcomes.push_back(ObjectOutcome{.ref = {"v1", "ConfigMap", "ns", "c" + std::to_string(i)}, .message = "no"});
  }
  BundleReport r = summarize(outcomes);
  EXPECT_EQ(r.resources.size(), kMaxReportedResources);
  EXPECT_NE(r.message.find("(and 50 more)"), std::string::npos);
  EXPECT_EQ(truncateMessage(std::string(2000, 'x')).size(), kMaxObjectMessage + 3);
  EXPECT_EQ(truncateMessage("short"), "short");
  // A two-byte UTF-8 character is never split.
  std::string text = std::string(kMaxObjectMessage - 1, 'x') + "\xC3\xA9";
  EXPECT_EQ(truncateMessage(text), std::string(kMaxObjectMessage - 1, 'x') + "...");
}

TEST(ReportTest, ForceFromOptions) {
  model::BundleDeploymentOptions options;
  EXPECT_FALSE(wantsForce(options));
  options.helm = model::HelmOptions{.take_ownership = true};
  EXPECT_TRUE(wantsForce(options));
  options.helm.reset();
  options.correct_drift = model::CorrectDrift{.enabled = true, .force = true};
  EXPECT_TRUE(wantsForce(options));
}

// Retry delays double per delivery and stop at the cap.
TEST(ReportTest, BackoffGrowsAndCaps) {
  DeployHandlerOptions options{.retry_base = std::chrono::milliseconds(100),
                               .retry_max = std::chrono::milliseconds(1000)};
  EXPECT_EQ(retryDelay(0, options).count(), 100);
  EXPECT_EQ(retryDelay(1, options).count(), 100);
  EXPECT_EQ(retryDelay(3, options).count(), 400);
  EXPECT_EQ(retryDelay(10, options).count(), 1000);
  EXPECT_EQ(retryDelay(1000000, options).count(), 1000);
}

// --labels and interval flags.
TEST(FlagsTest, ParseLabelsAndIntervals) {
  auto labels = parseLabels("env=cluster1, region = eu ,");
  ASSERT_TRUE(labels.ok()) << labels.error().describe();
  EXPECT_EQ(labels->size(), 2u);
  EXPECT_EQ(labels->at("region"), "eu");
  EXPECT_TRUE(parseLabels("")->empty());
  EXPECT_FALSE(parseLabels("novalue").ok());
  EXPECT_FALSE(parseLabels("bad key=x").ok());
  EXPECT_EQ(parseInterval("30s")->count(), 30000);
  EXPECT_EQ(parseInterval("5")->count(), 5000);
  EXPECT_EQ(parseInterval("1m30s")->count(), 90000);
  EXPECT_FALSE(parseInterval("soon").ok());
  EXPECT_FALSE(parseInterval("0s").ok());
  EXPECT_EQ(parseHold("0")->count(), 0);
  EXPECT_EQ(parseHold("0s")->count(), 0);
  EXPECT_EQ(parseHold("90")->count(), 90000);
  EXPECT_EQ(parseHold("2m")->count(), 120000);
  EXPECT_FALSE(parseHold("-1s").ok());
  EXPECT_FALSE(parseHold("later").ok());
}

TEST(FlagsTest, OptionsFromFlags) {
  const char* argv[] = {"flotilla-agent", "--cluster-name",    "c1", "--labels",
                        "env=x",          "--resync-interval", "2s", "--agent-namespace",
                        "agent-ns",       "--release-hold",    "0"};
  auto config = service::Config::parse(11, argv, agentFlags());
  ASSERT_TRUE(config.ok()) << config.error().describe();
  auto options = agentOptionsFrom(*config);
  ASSERT_TRUE(options.ok()) << options.error().describe();
  EXPECT_EQ(options->cluster_name, "c1");
  EXPECT_EQ(options->labels.at("env"), "x");
  EXPECT_EQ(options->resync_interval.count(), 2000);
  EXPECT_EQ(options->heartbeat_interval.count(), 30000);
  EXPECT_EQ(options->agent_namespace, "agent-ns");
  EXPECT_EQ(options->retry.release_hold.count(), 0);
  const char* missing[] = {"flotilla-agent"};
  auto bare = service::Config::parse(1, missing, agentFlags());
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(agentOptionsFrom(*bare).ok());
  const char* defaults[] = {"flotilla-agent", "--cluster-name", "c1"};
  EXPECT_EQ(agentOptionsFrom(*service::Config::parse(3, defaults, agentFlags()))->retry.release_hold,
            kDefaultReleaseHold);
  const char* bad_hold[] = {"flotilla-agent", "--cluster-name", "c1", "--release-hold", "soon"};
  auto bad = agentOptionsFrom(*service::Config::parse(5, bad_hold, agentFlags()));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--release-hold"), std::string::npos);
  EXPECT_EQ(agentOptionsFrom(*service::Config::parse(3, defaults, agentFlags()))->fight_window, kDefaultFightWindow);
  const char* fights[] = {"flotilla-agent", "--cluster-name", "c1", "--fight-corrections", "5", "--fight-window", "2m"};
  auto fight = agentOptionsFrom(*service::Config::parse(7, fights, agentFlags()));
  ASSERT_TRUE(fight.ok()) << fight.error().describe();
  EXPECT_EQ(fight->fight_corrections, 5U);
  EXPECT_EQ(fight->fight_window.count(), 120000);
  const char* no_fights[] = {"flotilla-agent", "--cluster-name", "c1", "--fight-corrections", "0"};
  auto refused = agentOptionsFrom(*service::Config::parse(5, no_fights, agentFlags()));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--fight-corrections"), std::string::npos);
  EXPECT_EQ(heartbeatSubjectFor("c.1"), "flotilla.status.c=2E1.=");
  EXPECT_EQ(consumerName("c.1"), "agent-c=2E1");
}

// --parallel-bundles: default 4, 1..64, anything else an error naming the flag (never ignored).
TEST(FlagsTest, ParallelBundles) {
  EXPECT_EQ(*parseParallelBundles(""), kDefaultParallelBundles);
  EXPECT_EQ(*parseParallelBundles("1"), 1);
  EXPECT_EQ(*parseParallelBundles(" 64 "), 64);
  for (const char* bad : {"0", "65", "-1", "four", "2.5", "1000000000000"}) {
    auto parsed = parseParallelBundles(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.error().message.find("--parallel-bundles"), std::string::npos);
  }
  const char* argv[] = {"flotilla-agent", "--cluster-name", "c1", "--parallel-bundles", "8"};
  EXPECT_EQ(agentOptionsFrom(*service::Config::parse(5, argv, agentFlags()))->parallel_bundles, 8);
  const char* defaults[] = {"flotilla-agent", "--cluster-name", "c1"};
  EXPECT_EQ(agentOptionsFrom(*service::Config::parse(3, defaults, agentFlags()))->parallel_bundles, 4);
  const char* wrong[] = {"flotilla-agent", "--cluster-name", "c1", "--parallel-bundles", "many"};
  EXPECT_FALSE(agentOptionsFrom(*service::Config::parse(5, wrong, agentFlags())).ok());
}

// --namespaces: a sorted list of namespace names; empty means unrestricted; a bad item is an error naming the flag
// and the item, never dropped.
TEST(FlagsTest, NamespacesFlag) {
  const char* argv[] = {"flotilla-agent", "--cluster-name", "c1", "--namespaces", "web, app"};
  auto options = agentOptionsFrom(*service::Config::parse(5, argv, agentFlags()));
  ASSERT_TRUE(options.ok()) << options.error().describe();
  EXPECT_EQ(options->namespaces.namespaces(), (std::vector<std::string>{"app", "web"}));
  const char* defaults[] = {"flotilla-agent", "--cluster-name", "c1"};
  EXPECT_FALSE(agentOptionsFrom(*service::Config::parse(3, defaults, agentFlags()))->namespaces.restricted());
  for (const std::string& bad :
       std::vector<std::string>{"app,", "app,,web", "App", "a_b", "app,app", std::string(64, 'a')}) {
    auto parsed = NamespaceScope::parse(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.error().message.find("--namespaces"), std::string::npos) << parsed.error().message;
    const char* flags[] = {"flotilla-agent", "--cluster-name", "c1", "--namespaces", bad.c_str()};
    EXPECT_FALSE(agentOptionsFrom(*service::Config::parse(5, flags, agentFlags())).ok()) << bad;
  }
  EXPECT_NE(NamespaceScope::parse("app,App").error().message.find("\"App\""), std::string::npos);
  EXPECT_NE(NamespaceScope::parse("app,app").error().message.find("listed twice"), std::string::npos);
}

// What --namespaces refuses, and the message naming the object and the allowed namespaces.
TEST(NamespaceScopeTest, RefusesClusterScopedAndOtherNamespaces) {
  const NamespaceScope scope = NamespaceScope::parse("b,a").value();
  EXPECT_EQ(scope.describe(), "a, b");
  EXPECT_FALSE(scope.refusal({"v1", "ConfigMap", "a", "x"}));
  EXPECT_EQ(scope.refusal({"rbac.authorization.k8s.io/v1", "ClusterRole", "", "x"}),
            "ClusterRole x is cluster-scoped; this agent may deploy only to namespaces a, b (--namespaces)");
  EXPECT_EQ(scope.refusal({"v1", "ConfigMap", "c", "x"}),
            "ConfigMap c/x is in namespace c; this agent may deploy only to namespaces a, b (--namespaces)");
  EXPECT_EQ(scope.refusal({"v1", "Namespace", "", "a"}),
            "Namespace a is cluster-scoped; this agent may deploy only to namespaces a, b (--namespaces), which must "
            "exist: it does not create namespaces");
  const NamespaceScope any;
  EXPECT_FALSE(any.restricted());
  EXPECT_FALSE(any.refusal({"rbac.authorization.k8s.io/v1", "ClusterRole", "", "x"}));
  EXPECT_FALSE(any.refusal({"v1", "ConfigMap", "c", "x"}));

  // Counted, and summarized as OutsideNamespaces with the refusal itself as the message.
  Metrics metrics("agent");
  auto refused = refuseOutside(scope, {"rbac.authorization.k8s.io/v1", "ClusterRole", "", "x"}, "ws/b", metrics);
  ASSERT_TRUE(refused);
  EXPECT_TRUE(refused->apply_failed && refused->outside);
  EXPECT_FALSE(refuseOutside(scope, {"v1", "ConfigMap", "a", "x"}, "ws/b", metrics));
  EXPECT_EQ(metrics.value("outside_namespaces_total", {{"scope", "cluster"}}), 1);
  BundleReport report = summarize({ok("a"), *refused});
  EXPECT_EQ(report.state, model::BundleState::kErrApplied);
  EXPECT_EQ(report.reason, kReasonOutsideNamespaces);
  EXPECT_EQ(report.message, refused->error);
  ObjectOutcome rejected{.ref = {"v1", "ConfigMap", "a", "y"}, .apply_failed = true, .error = "denied"};
  EXPECT_EQ(summarize({*refused, rejected}).reason, kReasonApplyFailed);
}

}  // namespace
}  // namespace flotilla::agent
