// The state gauges follow the summaries one change at a time: counts per state, per-GitRepo series that go with
// their GitRepo, per-cluster series only when asked for, a partition's scope, and nothing left behind.
#include "flotilla/scheduler/state_gauges.h"

#include <gtest/gtest.h>

namespace flotilla::scheduler {
namespace {

StateGaugeScope everything() {
  return {.owns_gitrepo = [](const std::string&, const std::string&) { return true; },
          .owns_cluster = [](const std::string&) { return true; }};
}

Json gitrepo(const std::string& name, const std::string& state, bool error = false) {
  return Json::obj({{"workspace", "ws"}, {"gitrepo", name}, {"state", state}, {"error", error}});
}

Json cluster(const std::string& name, const std::string& state) {
  return Json::obj({{"cluster", name}, {"state", state}, {"offline", state == "Offline"}});
}

TEST(StateGaugesTest, CountsByStateFollowEachChangeAndStartAtZero) {
  Metrics metrics("scheduler");
  StateGauges gauges(metrics, {}, false, everything());
  EXPECT_NE(metrics.exposition().find("flotilla_scheduler_clusters_by_state{state=\"Offline\"} 0"), std::string::npos);
  EXPECT_NE(metrics.exposition().find("flotilla_scheduler_gitrepos_by_state{state=\"Deleting\"} 0"), std::string::npos);
  Json a = gitrepo("a", "WaitApplied");
  Json b = gitrepo("b", "WaitApplied");
  gauges.change("summary.gitrepo.ws.a", nullptr, &a);
  gauges.change("summary.gitrepo.ws.b", nullptr, &b);
  EXPECT_EQ(metrics.value("gitrepos_by_state", {{"state", "WaitApplied"}}), 2);
  Json a_ready = gitrepo("a", "Ready");
  gauges.change("summary.gitrepo.ws.a", &a, &a_ready);
  EXPECT_EQ(metrics.value("gitrepos_by_state", {{"state", "WaitApplied"}}), 1);
  EXPECT_EQ(metrics.value("gitrepos_by_state", {{"state", "Ready"}}), 1);
  Json bundle = Json::obj({{"workspace", "ws"}, {"bundle", "a-x"}, {"gitrepo", "a"}, {"state", "ErrApplied"}});
  gauges.change("summary.bundle.ws.a-x", nullptr, &bundle);
  EXPECT_EQ(metrics.value("bundles_by_state", {{"state", "ErrApplied"}}), 1);
  gauges.change("summary.bundle.ws.a-x", &bundle, nullptr);
  EXPECT_EQ(metrics.value("bundles_by_state", {{"state", "ErrApplied"}}), 0);
  Json c = cluster("c1", "Ready");
  Json c_offline = cluster("c1", "Offline");
  gauges.change("summary.cluster.c1", nullptr, &c);
  gauges.change("summary.cluster.c1", &c, &c_offline);
  EXPECT_EQ(metrics.value("clusters_by_state", {{"state", "Offline"}}), 1);
  EXPECT_EQ(metrics.value("clusters_by_state", {{"state", "Ready"}}), 0);
  // Not a summary: ignored.
  gauges.change("bd.c1.ws.a-x", nullptr, &c);
  EXPECT_EQ(metrics.value("clusters_by_state", {{"state", "Offline"}}), 1);
}

TEST(StateGaugesTest, PerGitRepoSeriesGoWithTheirGitRepo) {
  Metrics metrics("scheduler");
  StateGauges gauges(metrics, {}, false, everything());
  Json broken = gitrepo("a", "ErrApplied", true);
  gauges.change("summary.gitrepo.ws.a", nullptr, &broken);
  const prometheus::Labels labels = {{"workspace", "ws"}, {"gitrepo", "a"}};
  EXPECT_EQ(metrics.value("gitrepo_ready", labels), 0);
  EXPECT_EQ(metrics.value("gitrepo_render_error", labels), 1);
  EXPECT_NE(metrics.exposition().find("flotilla_scheduler_gitrepo_ready{gitrepo=\"a\",workspace=\"ws\"} 0"),
            std::string::npos)
      << metrics.exposition();
  Json fixed = gitrepo("a", "Ready");
  gauges.change("summary.gitrepo.ws.a", &broken, &fixed);
  EXPECT_EQ(metrics.value("gitrepo_ready", labels), 1);
  EXPECT_EQ(metrics.value("gitrepo_render_error", labels), 0);
  gauges.change("summary.gitrepo.ws.a", &fixed, nullptr);
  EXPECT_EQ(metrics.exposition().find("gitrepo_ready{"), std::string::npos) << metrics.exposition();
  EXPECT_EQ(metrics.exposition().find("gitrepo_render_error{"), std::string::npos);
}

TEST(StateGaugesTest, PerClusterSeriesOnlyWhenAskedFor) {
  Metrics off_metrics("scheduler");
  Metrics on_metrics("scheduler");
  StateGauges off(off_metrics, {}, false, everything());
  StateGauges on(on_metrics, {}, true, everything());
  Json c = cluster("c1", "Offline");
  off.change("summary.cluster.c1", nullptr, &c);
  on.change("summary.cluster.c1", nullptr, &c);
  EXPECT_EQ(off_metrics.exposition().find("cluster_offline{"), std::string::npos) << off_metrics.exposition();
  EXPECT_EQ(on_metrics.value("cluster_offline", {{"cluster", "c1"}}), 1);
  EXPECT_EQ(on_metrics.value("cluster_ready", {{"cluster", "c1"}}), 0);
  on.change("summary.cluster.c1", &c, nullptr);
  EXPECT_EQ(on_metrics.exposition().find("cluster_offline{"), std::string::npos) << on_metrics.exposition();
}

TEST(StateGaugesTest, APartitionCountsWhatItOwnsAndTakesItsSeriesAlongWhenItGoes) {
  Metrics metrics("scheduler");
  Json mine = gitrepo("mine", "Ready");
  Json theirs = gitrepo("theirs", "Ready");
  {
    StateGauges gauges(metrics, {{"partition", "p0"}}, false,
                       {.owns_gitrepo = [](const std::string&, const std::string& name) { return name == "mine"; },
                        .owns_cluster = [](const std::string&) { return false; }});
    gauges.change("summary.gitrepo.ws.mine", nullptr, &mine);
    gauges.change("summary.gitrepo.ws.theirs", nullptr, &theirs);
    EXPECT_EQ(metrics.value("gitrepos_by_state", {{"state", "Ready"}, {"partition", "p0"}}), 1);
    EXPECT_EQ(metrics.value("gitrepo_ready", {{"workspace", "ws"}, {"gitrepo", "mine"}, {"partition", "p0"}}), 1);
  }
  const std::string left = metrics.exposition();
  EXPECT_EQ(left.find("by_state{"), std::string::npos) << left;
  EXPECT_EQ(left.find("gitrepo_ready{"), std::string::npos) << left;
}

}  // namespace
}  // namespace flotilla::scheduler
