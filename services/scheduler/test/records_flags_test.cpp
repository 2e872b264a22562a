// Unit tests of the scheduler's view of the KV records (their codecs are libs/events'), deploy Msg-Ids and flags.
#include <gtest/gtest.h>

#include "flotilla/scheduler/flags.h"
#include "flotilla/scheduler/placement.h"
#include "flotilla/scheduler/records.h"
#include "sample_events.h"

namespace flotilla::scheduler {
namespace {

// Deploy Msg-Ids: the same (cluster, bundle, deployment, generation) gives the same id; a removal says "deleted".
TEST(PlacementTest, DeployMsgId) {
  EXPECT_EQ(deployMsgId("c1", "app", "m:o", 7), deployMsgId("c1", "app", "m:o", 7));
  EXPECT_NE(deployMsgId("c1", "app", "m:o", 7), deployMsgId("c1", "app", "m:o", 8));
  EXPECT_NE(deployMsgId("c1", "app", "", 7).find("deleted"), std::string::npos);
}

// The scheduler's view of the bundler's BundleRecord: lastGood gives the targeting, error the render error.
TEST(RecordsTest, BundleFromRecord) {
  const events::BundleEvent event = events::test::sampleBundleEvent();
  events::BundleRecord record{.workspace = "fleet-default",
                              .gitrepo = "simple",
                              .bundle = "simple-app",
                              .commit = "def",
                              .last_good = event,
                              .error = events::RenderError{.file = "fleet.yaml", .line = 4, .message = "bad"}};
  auto from_bundler = bundleFromRecord(record);
  ASSERT_TRUE(from_bundler.ok()) << from_bundler.error().describe();
  ASSERT_TRUE(from_bundler->targeting.has_value());
  EXPECT_EQ(from_bundler->targeting->manifest_id, event.manifest_id);
  ASSERT_TRUE(from_bundler->error.has_value());
  EXPECT_EQ(from_bundler->error->line, 4);
  EXPECT_EQ(from_bundler->error_commit, "def");
  record.last_good.reset();
  auto never_good = bundleFromRecord(record);
  ASSERT_TRUE(never_good.ok());
  EXPECT_FALSE(never_good->targeting.has_value());
  EXPECT_EQ(never_good->bundle, "simple-app");

  // A render error keeps the previous targeting.
  auto first = bundleFromEvent(event, nullptr).value();
  events::BundleEvent broken = event;
  broken.manifest_id.clear();
  broken.error = events::RenderError{.file = "fleet.yaml", .line = 2, .message = "bad"};
  auto after = bundleFromEvent(broken, &first).value();
  ASSERT_TRUE(after.targeting.has_value());
  EXPECT_EQ(after.targeting->manifest_id, event.manifest_id);
  ASSERT_TRUE(after.error.has_value());
  EXPECT_EQ(after.error->line, 2);
}

// Flags: defaults, values, and errors naming the flag.
TEST(FlagsTest, OptionsFromFlags) {
  const char* none[] = {"flotilla-scheduler"};
  auto config = service::Config::parse(1, none, schedulerFlags()).value();
  auto options = schedulerOptionsFrom(config);
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->public_events);
  EXPECT_FALSE(options->per_cluster_metrics);
  EXPECT_EQ(options->ack_wait, std::chrono::seconds(30));
  EXPECT_EQ(options->heartbeat_interval, std::chrono::seconds(30));
  EXPECT_NE(schedulerFlags().at("ack-wait").find("(default 30;"), std::string::npos) << "the help names the default";

  const char* some[] = {"flotilla-scheduler",         "--ack-wait", "5", "--public-events=false",
                        "--agent-heartbeat-interval", "5"};
  auto parsed = schedulerOptionsFrom(service::Config::parse(6, some, schedulerFlags()).value());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->ack_wait, std::chrono::seconds(5));
  EXPECT_FALSE(parsed->public_events);
  EXPECT_EQ(parsed->heartbeat_interval, std::chrono::seconds(5));

  for (const char* flag : {"--ack-wait", "--agent-heartbeat-interval"}) {
    const char* bad[] = {"flotilla-scheduler", flag, flag == std::string_view("--ack-wait") ? "soon" : "0"};
    auto failed = schedulerOptionsFrom(service::Config::parse(3, bad, schedulerFlags()).value());
    ASSERT_FALSE(failed.ok()) << flag;
    EXPECT_NE(failed.error().message.find(flag), std::string::npos) << failed.error().message;
  }
}

TEST(FlagsTest, PerClusterMetricsIsOptIn) {
  const char* on[] = {"flotilla-scheduler", "--per-cluster-metrics=true"};
  auto parsed = schedulerOptionsFrom(service::Config::parse(2, on, schedulerFlags()).value());
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->per_cluster_metrics);
  const char* bad[] = {"flotilla-scheduler", "--per-cluster-metrics=maybe"};
  auto failed = schedulerOptionsFrom(service::Config::parse(2, bad, schedulerFlags()).value());
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("--per-cluster-metrics"), std::string::npos) << failed.error().message;
}

// --lease-ttl and --replica-id: no lease by default; an id only with a ttl; a ttl a positive number of seconds.
TEST(FlagsTest, ReplicaOptionsFromFlags) {
  const char* none[] = {"flotilla-scheduler"};
  auto defaults = replicaOptionsFrom(service::Config::parse(1, none, schedulerFlags()).value());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->lease_ttl.count(), 0);
  EXPECT_FALSE(defaults->id.empty()) << "the host name";

  const char* leased[] = {"flotilla-scheduler", "--lease-ttl", "4", "--replica-id", "b"};
  auto parsed = replicaOptionsFrom(service::Config::parse(5, leased, schedulerFlags()).value());
  ASSERT_TRUE(parsed.ok()) << parsed.error().describe();
  EXPECT_EQ(parsed->lease_ttl, std::chrono::seconds(4));
  EXPECT_EQ(parsed->id, "b");

  const char* zero[] = {"flotilla-scheduler", "--lease-ttl", "0"};
  auto refused = replicaOptionsFrom(service::Config::parse(3, zero, schedulerFlags()).value());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("--lease-ttl"), std::string::npos) << refused.error().message;
  const char* lonely[] = {"flotilla-scheduler", "--replica-id", "b"};
  auto unleased = replicaOptionsFrom(service::Config::parse(3, lonely, schedulerFlags()).value());
  ASSERT_FALSE(unleased.ok());
  EXPECT_NE(unleased.error().message.find("--replica-id"), std::string::npos) << unleased.error().message;
}

// --agent-labels: none by default; exact keys, `prefix*` and `*`; a bad entry is an error naming the flag and entry.
TEST(FlagsTest, AgentLabelPolicy) {
  const char* none[] = {"flotilla-scheduler"};
  auto defaults = schedulerOptionsFrom(service::Config::parse(1, none, schedulerFlags()).value());
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->agent_labels.allows("env"));
  EXPECT_EQ(defaults->agent_labels.describe(), "none");

  const char* some[] = {"flotilla-scheduler", "--agent-labels", "env,example.com/*"};
  auto parsed = schedulerOptionsFrom(service::Config::parse(3, some, schedulerFlags()).value());
  ASSERT_TRUE(parsed.ok()) << parsed.error().describe();
  std::vector<std::string> left_out;
  auto allowed = parsed->agent_labels.filter({{"env", "prod"}, {"example.com/tier", "web"}, {"team", "x"}}, left_out);
  EXPECT_EQ(allowed, (model::Labels{{"env", "prod"}, {"example.com/tier", "web"}}));
  EXPECT_EQ(left_out, std::vector<std::string>{"team"});
  EXPECT_EQ(parsed->agent_labels.describe(), "env,example.com/*");
  EXPECT_TRUE(AgentLabelPolicy::parse("*")->allows("anything/at-all"));
  EXPECT_TRUE(AgentLabelPolicy::all().allows("team"));
  EXPECT_FALSE(AgentLabelPolicy::parse("none")->allows("env"));

  for (const char* bad : {"env,,team", "Not A Key!", "ex*ample/*"}) {
    auto failed = AgentLabelPolicy::parse(bad);
    ASSERT_FALSE(failed.ok()) << bad;
    EXPECT_NE(failed.error().message.find("--agent-labels"), std::string::npos) << failed.error().message;
  }
}

}  // namespace
}  // namespace flotilla::scheduler
