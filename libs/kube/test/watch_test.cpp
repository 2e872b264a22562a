// Watches against real kube-apiservers: events in order, starting points, selectors, 410 Gone, server-side
// timeouts and an API server restart.
#include <gtest/gtest.h>

#include "flotilla/kube/client.h"
#include "kube_test_util.h"

namespace flotilla::kube {
namespace {

using testing::clientFor;
using testing::configMap;
using testing::KubeTest;

using namespace std::chrono_literals;

// The next non-bookmark event within `timeout`.
Result<std::optional<WatchEvent>> nextChange(Watch& watch, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return std::optional<WatchEvent>();
    }
    auto event = watch.next(left);
    FLOTILLA_TRY(event);
    if (!*event || (*event)->type != WatchEventType::kBookmark) {
      return event;
    }
  }
}

std::string describe(const std::optional<WatchEvent>& event) {
  if (!event) {
    return "(no event)";
  }
  const Json* name = event->object.at({"metadata", "name"});
  return std::string(watchEventTypeName(event->type)) + " " + (name != nullptr ? name->asString() : "?");
}

class KubeWatchTest : public KubeTest {};

TEST_F(KubeWatchTest, SeesAddedModifiedDeleted) {
  auto watch = client_->watch("v1", "ConfigMap", ns_);
  ASSERT_TRUE(watch.ok()) << watch.error().describe();
  ASSERT_TRUE(client_->apply(configMap(ns_, "w", {{"k", "1"}})).ok());
  ASSERT_TRUE(client_->apply(configMap(ns_, "w", {{"k", "2"}})).ok());
  ASSERT_TRUE(client_->remove("v1", "ConfigMap", ns_, "w").ok());

  // The namespace's own kube-root-ca.crt ConfigMap may show up too (made by a controller, if one runs).
  std::vector<std::string> seen;
  while (seen.size() < 3) {
    auto event = nextChange(**watch, 10s);
    ASSERT_TRUE(event.ok()) << event.error().describe();
    ASSERT_TRUE(event->has_value()) << "after " << seen.size() << " events";
    if ((*event)->object.at({"metadata", "name"})->asString() != "w") {
      continue;
    }
    seen.push_back(describe(*event) + "=" + (*event)->object.at({"data", "k"})->asString());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED w=1", "MODIFIED w=2", "DELETED w=2"}));
  EXPECT_FALSE((*watch)->resourceVersion().empty());
  auto quiet = nextChange(**watch, 300ms);
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(quiet->has_value());
}

TEST_F(KubeWatchTest, StartsFromAListResourceVersionWithSelector) {
  ASSERT_TRUE(client_->apply(configMap(ns_, "before", {{"k", "v"}}, {{"app", "x"}})).ok());
  auto list = client_->list("v1", "ConfigMap", ns_, {.label_selector = "app=x"});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);

  auto watch =
      client_->watch("v1", "ConfigMap", ns_, {.resource_version = list->resource_version, .label_selector = "app=x"});
  ASSERT_TRUE(watch.ok()) << watch.error().describe();
  ASSERT_TRUE(client_->apply(configMap(ns_, "other-app", {{"k", "v"}}, {{"app", "y"}})).ok());
  ASSERT_TRUE(client_->apply(configMap(ns_, "after", {{"k", "v"}}, {{"app", "x"}})).ok());
  auto event = nextChange(**watch, 10s);
  ASSERT_TRUE(event.ok()) << event.error().describe();
  EXPECT_EQ(describe(*event), "ADDED after");  // not "before" (older), not "other-app" (selector)

  // From "" the current objects come first as ADDED.
  auto replay = client_->watch("v1", "ConfigMap", ns_, {.label_selector = "app=x"});
  ASSERT_TRUE(replay.ok());
  std::set<std::string> names;
  for (int i = 0; i < 2; ++i) {
    auto e = nextChange(**replay, 10s);
    ASSERT_TRUE(e.ok() && e->has_value());
    EXPECT_EQ((*e)->type, WatchEventType::kAdded);
    names.insert((*e)->object.at({"metadata", "name"})->asString());
  }
  EXPECT_EQ(names, (std::set<std::string>{"after", "before"}));
}

TEST_F(KubeWatchTest, ResumesWhenTheServerEndsTheWatch) {
  auto watch = client_->watch("v1", "ConfigMap", ns_, {.server_timeout = 1s});
  ASSERT_TRUE(watch.ok()) << watch.error().describe();
  auto idle = nextChange(**watch, 2500ms);  // spans at least one server-side end of the request
  ASSERT_TRUE(idle.ok()) << idle.error().describe();
  EXPECT_FALSE(idle->has_value());
  EXPECT_GE((*watch)->reconnects(), 1u);
  EXPECT_EQ(client_->metrics().value("kube_watch_reconnects_total"), static_cast<double>((*watch)->reconnects()));
  ASSERT_TRUE(client_->apply(configMap(ns_, "late", {{"k", "v"}})).ok());
  auto event = nextChange(**watch, 10s);
  ASSERT_TRUE(event.ok()) << event.error().describe();
  EXPECT_EQ(describe(*event), "ADDED late");
}

TEST_F(KubeWatchTest, WatchOfAForbiddenOrUnknownCollectionFailsAtStart) {
  auto unknown = client_->watch("v1", "NoSuchKind", ns_);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, ErrorKind::kNotFound);
  auto agent = clientFor(clusters_[0]->tokenKubeconfigPath());
  ASSERT_TRUE(agent.ok());
  auto forbidden = (*agent)->watch("v1", "Secret", ns_);
  ASSERT_FALSE(forbidden.ok());
  EXPECT_EQ(forbidden.error().kind, ErrorKind::kPermanent);
  EXPECT_NE(forbidden.error().message.find("cannot watch resource \"secrets\""), std::string::npos)
      << forbidden.error().message;
}

// A cluster of its own, because its API server is restarted: pooled connections go stale (the client resends on a
// new one) and a watch fails once, then resumes from its resourceVersion.
TEST(KubeRestartTest, ClientAndWatchSurviveAnApiserverRestart) {
  auto cluster = harness::KubeCluster::start({.name = "restart"});
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  auto client = clientFor((*cluster)->kubeconfigPath());
  ASSERT_TRUE(client.ok());
  auto& c = **client;
  ASSERT_TRUE(c.apply(configMap("default", "before", {{"k", "v"}})).ok());
  auto watch = c.watch("v1", "ConfigMap", "default");
  ASSERT_TRUE(watch.ok());
  bool saw_before = false;
  while (!saw_before) {
    auto e = nextChange(**watch, 10s);
    ASSERT_TRUE(e.ok() && e->has_value());
    saw_before = (*e)->object.at({"metadata", "name"})->asString() == "before";
  }
  size_t opened = c.http().connectionsOpened();
  std::string version_before = (*watch)->resourceVersion();
  // A write this watch does not see moves etcd's revision past version_before, so the restarted server's watch
  // cache (which starts at the revision current when it initializes) cannot serve version_before any more.
  ASSERT_TRUE(c.apply(configMap("kube-system", "elsewhere", {{"k", "v"}})).ok());

  ASSERT_TRUE((*cluster)->restartApiserver().ok());

  auto after_restart = c.get("v1", "ConfigMap", "default", "before");
  ASSERT_TRUE(after_restart.ok()) << after_restart.error().describe();
  EXPECT_EQ(c.http().staleRetries(), 1u);
  EXPECT_EQ(c.metrics().value("kube_stale_connection_retries_total"), 1.0);
  EXPECT_GT(c.http().connectionsOpened(), opened);

  // A new watch from before the restart: the restarted API server's watch cache begins later, so that
  // resourceVersion is gone: 410, which isGone() recognizes.
  Error too_old;
  auto old_watch = c.watch("v1", "ConfigMap", "default", {.resource_version = version_before});
  if (!old_watch.ok()) {
    too_old = old_watch.error();  // an HTTP 410 answer
  } else {
    auto first = (*old_watch)->next(10s);  // or an ERROR event carrying code 410
    ASSERT_FALSE(first.ok()) << describe(*first);
    too_old = first.error();
  }
  EXPECT_TRUE(isGone(too_old)) << too_old.describe();
  EXPECT_EQ(too_old.kind, ErrorKind::kConflict);
  std::fprintf(stderr, "watch from before the restart: %s\n", too_old.describe().c_str());

  // The watch's connection broke: at most one transport error, then it resumes where it was, or the server says
  // the resourceVersion is gone (its watch cache restarted) and the caller lists again.
  ASSERT_TRUE(c.apply(configMap("default", "after", {{"k", "v"}})).ok());
  std::optional<WatchEvent> event;
  int transport_errors = 0;
  bool gone = false;
  for (int i = 0; i < 5 && !event && !gone; ++i) {
    auto e = nextChange(**watch, 10s);
    if (!e.ok()) {
      std::fprintf(stderr, "watch after restart: %s\n", e.error().describe().c_str());
      gone = isGone(e.error());
      transport_errors += e.error().kind == ErrorKind::kTransient ? 1 : 0;
      continue;
    }
    event = *e;
  }
  EXPECT_LE(transport_errors, 1);
  if (gone) {
    auto relisted = c.list("v1", "ConfigMap", "default", {.field_selector = "metadata.name=after"});
    ASSERT_TRUE(relisted.ok());
    EXPECT_EQ(relisted->items.size(), 1u);
  } else {
    EXPECT_EQ(describe(event), "ADDED after");
  }
}

}  // namespace
}  // namespace flotilla::kube
