// End-to-end: two replicas of the poller and of the bundler, as the chart runs them (issue 13, "Replicas"). Each
// poller has its own mirrors and polls every GitRepo; a commit both see is stored once (the same Nats-Msg-Id,
// JetStream drops the copy). The bundlers share one durable consumer, so each commit event is rendered by one of
// them. kill -9 of one replica of each loses nothing: the next commit lands on every cluster through the others.
#include <gtest/gtest.h>

#include "e2e_util.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::e2e {
namespace {

//! Messages stored on `subject` in `stream` (0 when it cannot be read).
uint64_t storedOn(Hub& hub, std::string_view stream, const std::string& subject) {
  auto js = hub.js();
  if (!js.ok()) {
    return 0;
  }
  auto info = (*js)->streamInfo(stream, subject);
  if (!info.ok()) {
    return 0;
  }
  auto it = info->subjects.find(subject);
  return it == info->subjects.end() ? 0 : it->second;
}

TEST(PipelineReplicasTest, TwoPollersAndTwoBundlersPublishEachCommitOnceAndSurviveKillingOneOfEach) {
  // With the hub's identities: a second replica connects as its service, as in the chart.
  auto started = Hub::start({.secure = true});
  ASSERT_TRUE(started.ok()) << started.error().describe();
  Hub& hub = **started;
  ASSERT_TRUE(hub.startService("poller-2").ok());
  ASSERT_TRUE(hub.startService("bundler-2").ok());
  const std::vector<std::string> clusters = clusterNames(hub);
  const std::string name = "replicas-" + randomHex(3);
  const std::string ns = "ns-" + name;
  const std::string commits = events::commitSubject("fleet-default", name);

  auto first = applyConfigMapRepo(hub, name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *first, clusters); }, kLands)) << hub.allLogs();
  auto second = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *second, clusters); }, kLands)) << hub.allLogs();
  // Both pollers polled both commits (1 s interval); each is stored once.
  EXPECT_EQ(storedOn(hub, events::kCommitStream, commits), 2U) << hub.logTail("poller") << hub.logTail("poller-2");
  EXPECT_NE(hub.logTail("poller-2", 400).find("commit event"), std::string::npos) << hub.logTail("poller-2");

  hub.kill9("poller");
  hub.kill9("bundler");
  auto third = hub.git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v3")}}, "third");
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub, name, *third, clusters); }, kLands)) << hub.allLogs();
  for (size_t i = 0; i < hub.clusterCount(); ++i) {
    EXPECT_EQ(configMapValue(hub, i, ns, "c", "value"), "v3") << clusters[i];
  }
  EXPECT_EQ(storedOn(hub, events::kCommitStream, commits), 3U);
  // One bundle event per commit (the bundle's own Msg-Id): no commit was rendered into two.
  EXPECT_EQ(storedOn(hub, events::kBundleStream, events::bundleSubject("fleet-default", name + "-app")), 3U)
      << hub.logTail("bundler-2");
}

}  // namespace
}  // namespace flotilla::e2e
