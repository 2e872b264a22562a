// Integration tests of drift detection, correction, fight detection and health through the watch (watcher.h),
// against a real nats-server -js and a real kube-apiserver (the fixture of agent_fixture.h). The other writer is
// a real client with its own field manager. The resync interval is an hour, so every change below is reported by
// the watch.
#include <algorithm>

#include "agent_fixture.h"
#include "flotilla/core/time.h"

namespace flotilla::agent {
namespace {

using namespace flotilla::agent::testing;  // NOLINT(google-build-using-namespace): the fixture's helpers

class DriftTest : public AgentTest {
 protected:
  //! The agent with a resync that never runs during a test, and fight detection at `corrections` in `window`.
  void startWatchingAgent(size_t corrections = kDefaultFightCorrections, milliseconds window = kDefaultFightWindow) {
    AgentOptions options = agentOptions();
    options.resync_interval = std::chrono::hours(1);
    options.fight_corrections = corrections;
    options.fight_window = window;
    if (!responding_) {
      startResponder();
      responding_ = true;
    }
    startAgent(nullptr, /*wait_ready=*/true, options);
  }

  bool responding_ = false;

  //! Waits until the last status of `bundle` is `state` (a later report may still follow).
  bool settlesIn(const std::string& bundle, const std::string& state) {
    return eventually(
        [&] {
          auto all = status_.all(bundle);
          return !all.empty() && all.back().state == state;
        },
        seconds(30));
  }
};

//! Median and max of `values` (sorted in place).
std::pair<double, double> medianMax(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  return {values[values.size() / 2], values.back()};
}

// Without correctDrift: an edit is Modified naming the writer and the field; undoing it is Ready again; a deleted
// object is Modified ("missing") and stays deleted. Prints the edit -> Modified latency.
TEST_F(DriftTest, EditAndDeleteAreModifiedUntilUndone) {
  startWatchingAgent();
  std::string ns = unique("drift");
  std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("a", "", {{"k", "v"}}), configMap("b", "", {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns}}));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));

  std::vector<double> latencies;
  for (int i = 0; i < 10; ++i) {
    auto edited_at = std::chrono::system_clock::now();
    ASSERT_TRUE(editData("kubectl-edit", ns, "a", "k", "edit-" + std::to_string(i)).ok());
    auto modified = status_.waitForState(bundle, "Modified", seconds(30));
    ASSERT_TRUE(modified) << "edit " << i << " was not reported";
    EXPECT_EQ(modified->reason, "Drifted");
    EXPECT_NE(modified->message.find("ConfigMap/" + ns + "/a: changed by kubectl-edit: .data.k"), std::string::npos)
        << modified->message;
    ASSERT_EQ(modified->resources.size(), 1U);
    EXPECT_EQ(modified->resources[0].name, "a");
    EXPECT_EQ(modified->resources[0].state, "Modified");
    if (auto published = parseRfc3339(modified->time)) {
      latencies.push_back(std::chrono::duration<double, std::milli>(*published - edited_at).count());
    }
    ASSERT_TRUE(editData("kubectl-edit", ns, "a", "k", "v").ok());  // undone: the value is the applied one again
    ASSERT_TRUE(status_.waitForState(bundle, "Ready", seconds(30))) << "undoing edit " << i << " was not reported";
  }
  ASSERT_FALSE(latencies.empty());
  auto [median, max] = medianMax(latencies);
  std::printf(
      "[figures] drift detection latency (edit -> Modified published) over %zu edits: median %.0f ms, max %.0f "
      "ms\n",
      latencies.size(), median, max);

  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", ns, "b").ok());
  auto missing = status_.waitForState(bundle, "Modified", seconds(30));
  ASSERT_TRUE(missing);
  EXPECT_NE(missing->message.find("ConfigMap/" + ns + "/b: missing"), std::string::npos) << missing->message;
  EXPECT_TRUE(absent("v1", "ConfigMap", ns, "b")) << "re-created without correctDrift";
  EXPECT_GE(metric("watch_state_changes_total", {{"state", "Modified"}}), 11);
  EXPECT_EQ(metric("resync_state_changes_total"), 0);
}

// correctDrift with force heals an edit and re-creates a deleted object; without force the conflict is reported
// (and with keepFailHistory written as an Event), while a deleted object is still re-created.
TEST_F(DriftTest, CorrectDriftHealsEditsAndRecreatesDeletedObjects) {
  startWatchingAgent();
  std::string ns = unique("heal");
  std::string forced = unique("forced");
  std::string gentle = unique("gentle");
  deploy(forced, putManifest({configMap("a", "", {{"k", "v"}}), configMap("b", "", {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns}, {"correctDrift", Json::obj({{"enabled", true}, {"force", true}})}}));
  deploy(gentle, putManifest({configMap("c", "", {{"k", "v"}}), configMap("d", "", {{"k", "v"}})}),
         Json::obj(
             {{"defaultNamespace", ns}, {"correctDrift", Json::obj({{"enabled", true}, {"keepFailHistory", true}})}}));
  ASSERT_TRUE(status_.waitForState(forced, "Ready"));
  ASSERT_TRUE(status_.waitForState(gentle, "Ready"));

  ASSERT_TRUE(editData("kubectl-edit", ns, "a", "k", "edited").ok());
  EXPECT_TRUE(eventually([&] { return dataOf(ns, "a", "k") == "v"; }, seconds(30))) << "the edit was not healed";
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", ns, "b").ok());
  EXPECT_TRUE(eventually([&] { return dataOf(ns, "b", "k") == "v"; }, seconds(30))) << "b was not re-created";
  EXPECT_TRUE(settlesIn(forced, "Ready"));
  EXPECT_GE(metric("drift_corrections_total", {{"result", "ok"}}), 2);

  // Without force the field kubectl-edit now holds is a conflict: reported, and the bundle stays Modified.
  ASSERT_TRUE(editData("kubectl-edit", ns, "c", "k", "edited").ok());
  auto failed = status_.waitFor(
      gentle, [](const events::StatusEvent& s) { return s.message.find("correction failed") != std::string::npos; },
      seconds(30));
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->state, "Modified");
  EXPECT_NE(failed->message.find("kubectl-edit"), std::string::npos) << failed->message;
  EXPECT_EQ(dataOf(ns, "c", "k"), "edited");
  EXPECT_TRUE(eventually([&] { return eventsAbout(ns, "c", "DriftCorrectionFailed") >= 1; }, seconds(10)));
  // A deleted object has no other owner: re-created even without force.
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", ns, "d").ok());
  EXPECT_TRUE(eventually([&] { return dataOf(ns, "d", "k") == "v"; }, seconds(30))) << "d was not re-created";
}

// diff.comparePatches hides a field: editing it is no drift, editing another field is; an operation the agent does
// not implement is refused naming the field.
TEST_F(DriftTest, ComparePatchesHideAnIgnoredField) {
  startWatchingAgent();
  std::string ns = unique("cmp");
  std::string bundle = unique("bundle");
  Json patch = Json::obj({{"apiVersion", "v1"},
                          {"kind", "ConfigMap"},
                          {"name", "a"},
                          {"jsonPointers", Json(Json::Array{"/data/ignored"})}});
  Json options =
      Json::obj({{"defaultNamespace", ns}, {"diff", Json::obj({{"comparePatches", Json(Json::Array{patch})}})}});
  deploy(bundle, putManifest({configMap("a", "", {{"ignored", "x"}, {"watched", "y"}})}), options);
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));
  ASSERT_TRUE(editData("other-tool", ns, "a", "ignored", "changed").ok());
  ASSERT_TRUE(editData("other-tool", ns, "a", "watched", "changed").ok());
  auto modified = status_.waitForState(bundle, "Modified", seconds(30));
  ASSERT_TRUE(modified);
  EXPECT_NE(modified->message.find(".data.watched"), std::string::npos) << modified->message;
  EXPECT_EQ(modified->message.find(".data.ignored"), std::string::npos) << modified->message;

  Json bad = patch;
  bad["operations"] = Json(Json::Array{Json::obj({{"op", "replace"}, {"path", "/data/x"}})});
  std::string refused = unique("bundle");
  deploy(refused, putManifest({configMap("z", "", {})}),
         Json::obj({{"defaultNamespace", ns}, {"diff", Json::obj({{"comparePatches", Json(Json::Array{bad})}})}}));
  auto invalid = status_.waitForState(refused, "ErrApplied");
  ASSERT_TRUE(invalid);
  EXPECT_EQ(invalid->reason, "InvalidOptions");
  EXPECT_NE(invalid->message.find("diff.comparePatches[0].operations[0].op"), std::string::npos) << invalid->message;
}

// Another field manager keeps rewriting a field the agent corrects: after K corrections in the window the agent
// stops, reports DriftFight naming the manager and the field, writes an Event; it corrects again once the writer
// has been quiet for the window.
TEST_F(DriftTest, AFightIsDetectedReportedAndStopsTheLoop) {
  const milliseconds window = seconds(3);
  startWatchingAgent(3, window);
  std::string ns = unique("fight");
  std::string bundle = unique("bundle");
  deploy(bundle, putManifest({configMap("a", "", {{"k", "ours"}})}),
         Json::obj({{"defaultNamespace", ns}, {"correctDrift", Json::obj({{"enabled", true}, {"force", true}})}}));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready"));

  std::atomic<bool> fighting{true};
  std::thread fighter([&] {
    while (fighting) {
      (void)editData("fighter", ns, "a", "k", "theirs");
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  auto fight = status_.waitFor(
      bundle, [](const events::StatusEvent& s) { return s.reason == "DriftFight"; }, seconds(60));
  EXPECT_TRUE(fight);
  if (fight) {
    EXPECT_EQ(fight->state, "Modified");
    EXPECT_NE(fight->message.find("fighter"), std::string::npos) << fight->message;
    EXPECT_NE(fight->message.find(".data.k"), std::string::npos) << fight->message;
  }
  EXPECT_TRUE(eventually([&] { return eventsAbout(ns, "a", "DriftFight") >= 1; }, seconds(10)));
  EXPECT_GE(metric("drift_fights_total"), 1);
  // The loop has stopped: while the fighter keeps writing, no more corrections.
  const double corrections = metric("drift_corrections_total", {{"result", "ok"}});
  std::this_thread::sleep_for(window / 2);
  EXPECT_EQ(metric("drift_corrections_total", {{"result", "ok"}}), corrections);
  EXPECT_EQ(dataOf(ns, "a", "k"), "theirs");

  fighting = false;
  fighter.join();
  // Quiet for the window: corrected again.
  EXPECT_TRUE(eventually([&] { return dataOf(ns, "a", "k") == "ours"; }, seconds(30)));
  EXPECT_TRUE(settlesIn(bundle, "Ready"));
}

// Health changes reach the hub from the watch: Ready -> NotReady -> Ready without a resync (an hour away).
TEST_F(DriftTest, ReadyNotReadyReadyThroughTheWatch) {
  startWatchingAgent();
  std::string ns = unique("health");
  std::string bundle = unique("bundle");
  Json service = Json::parse(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"lb"},
    "spec":{"type":"LoadBalancer","ports":[{"port":80}]}})")
                     .value();
  deploy(bundle, putManifest({service}), Json::obj({{"defaultNamespace", ns}}));
  ASSERT_TRUE(status_.waitForState(bundle, "NotReady"));
  const std::string status_path = "/api/v1/namespaces/" + ns + "/services/lb/status";
  auto set_address = [&](bool present) {
    Json ingress = present ? Json(Json::Array{Json::obj({{"ip", "192.0.2.1"}})}) : Json();
    Json patch = Json::obj({{"status", Json::obj({{"loadBalancer", Json::obj({{"ingress", ingress}})}})}});
    return kube_->request("PATCH", status_path, patch.dump(), "application/merge-patch+json").ok();
  };
  ASSERT_TRUE(set_address(true));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready", seconds(30)));
  ASSERT_TRUE(set_address(false));
  auto not_ready = status_.waitForState(bundle, "NotReady", seconds(30));
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->reason, "ResourcesNotReady");
  ASSERT_TRUE(set_address(true));
  ASSERT_TRUE(status_.waitForState(bundle, "Ready", seconds(30)));
  EXPECT_EQ(metric("resync_state_changes_total"), 0);
}

// Drift made while the agent was down is found by the restarted agent: it rebuilds the desired state from the
// manifest and the inventory, re-lists, reports the edit and the deletion, and corrects a correctDrift bundle.
TEST_F(DriftTest, AgentRestartDuringAWatch) {
  startWatchingAgent();
  std::string ns = unique("restart");
  std::string plain = unique("plain");
  std::string healing = unique("healing");
  deploy(plain, putManifest({configMap("a", "", {{"k", "v"}}), configMap("b", "", {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns}}));
  deploy(healing, putManifest({configMap("c", "", {{"k", "v"}})}),
         Json::obj({{"defaultNamespace", ns}, {"correctDrift", Json::obj({{"enabled", true}, {"force", true}})}}));
  ASSERT_TRUE(status_.waitForState(plain, "Ready"));
  ASSERT_TRUE(status_.waitForState(healing, "Ready"));
  stopAgent();

  ASSERT_TRUE(editData("kubectl-edit", ns, "a", "k", "edited").ok());
  ASSERT_TRUE(kube_->remove("v1", "ConfigMap", ns, "b").ok());
  ASSERT_TRUE(editData("kubectl-edit", ns, "c", "k", "edited").ok());

  startWatchingAgent();
  auto modified = status_.waitForState(plain, "Modified", seconds(30));
  ASSERT_TRUE(modified);
  EXPECT_NE(modified->message.find("ConfigMap/" + ns + "/a: changed by kubectl-edit: .data.k"), std::string::npos)
      << modified->message;
  EXPECT_NE(modified->message.find("ConfigMap/" + ns + "/b: missing"), std::string::npos) << modified->message;
  EXPECT_TRUE(eventually([&] { return dataOf(ns, "c", "k") == "v"; }, seconds(30))) << "not healed after restart";
  EXPECT_EQ(metric("watch_restore_failures_total"), 0);
}

}  // namespace
}  // namespace flotilla::agent
