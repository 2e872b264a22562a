#include <gtest/gtest.h>

#include "flotilla/core/log.h"
#include "flotilla/core/metrics.h"

namespace flotilla {
namespace {

TEST(LogTest, WritesOneJsonObjectPerLineWithContextFields) {
  std::vector<std::string> lines;
  log::setSink([&](std::string_view line) { lines.emplace_back(line); });
  log::setService("test");
  log::warn("fetch failed", {{"gitrepo", "demo"}, {"attempt", 3}, {"empty", ""}});
  log::debug("hidden at info level");
  log::setSink(nullptr);
  ASSERT_EQ(lines.size(), 1u);
  auto parsed = Json::parse(lines[0]);
  ASSERT_TRUE(parsed.ok()) << lines[0];
  EXPECT_EQ(parsed->getString("level"), "warn");
  EXPECT_EQ(parsed->getString("service"), "test");
  EXPECT_EQ(parsed->getString("gitrepo"), "demo");
  EXPECT_EQ(parsed->getInt("attempt"), 3);
  EXPECT_FALSE(parsed->contains("empty"));
}

TEST(MetricsTest, NamesFollowTheSchemeAndValuesReadBack) {
  Metrics metrics("poller");
  metrics.counter("polls_total", "Polls", {{"outcome", "ok"}}).Increment(2);
  metrics.counter("polls_total", "Polls", {{"outcome", "ok"}}).Increment();
  metrics.gauge("inflight_operations", "In flight").Set(4);
  metrics.histogram("fetch_duration_seconds", "Fetch", Metrics::durationBuckets()).Observe(0.2);
  EXPECT_EQ(metrics.value("polls_total", {{"outcome", "ok"}}), 3);
  EXPECT_EQ(metrics.value("inflight_operations"), 4);
  EXPECT_EQ(metrics.value("fetch_duration_seconds"), 1);
  EXPECT_NE(metrics.exposition().find("flotilla_poller_polls_total{outcome=\"ok\"} 3"), std::string::npos);
}

}  // namespace
}  // namespace flotilla
