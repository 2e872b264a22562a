// Unit tests for the KV keys (pipeline.md shapes, escaping) and the record codecs the scheduler and CLI share.
#include <gtest/gtest.h>

#include "flotilla/scheduler/flags.h"
#include "flotilla/scheduler/keys.h"
#include "flotilla/scheduler/records.h"

namespace flotilla::scheduler {
namespace {

// Keys follow docs/pipeline.md, and names with dots cannot add tokens.
TEST(KeysTest, ShapesAndEscaping) {
  EXPECT_EQ(clusterRecordKey("c1"), "cluster.c1");
  EXPECT_EQ(clusterGroupRecordKey("fleet-default", "eu"), "group.fleet-default.eu");
  EXPECT_EQ(deploymentRecordKey("c1", "fleet-default", "app"), "c1.fleet-default.app");
  EXPECT_EQ(bdStatusKey("c1", "fleet-default", "app"), "bd.c1.fleet-default.app");
  EXPECT_EQ(bundleSummaryKey("fleet-default", "app"), "summary.bundle.fleet-default.app");
  EXPECT_EQ(gitRepoSummaryKey("fleet-default", "repo"), "summary.gitrepo.fleet-default.repo");
  EXPECT_EQ(clusterSummaryKey("c1"), "summary.cluster.c1");
  EXPECT_EQ(bundleSummaryKey("ws", "a.b"), "summary.bundle.ws.a=2Eb");

  auto names = keyNames(bdStatusKey("c1", "ws", "a.b"), "bd", 3);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"c1", "ws", "a.b"}));
  EXPECT_FALSE(keyNames("bd.c1.ws", "bd", 3).ok());
  EXPECT_FALSE(keyNames("group.ws.g", "cluster", 2).ok());
}

// The deploy Msg-Id is deterministic in (cluster, bundle, deploymentID or "deleted", generation).
TEST(KeysTest, DeployMsgId) {
  EXPECT_EQ(deployMsgId("c1", "app", "m:o", 7), deployMsgId("c1", "app", "m:o", 7));
  EXPECT_NE(deployMsgId("c1", "app", "m:o", 7), deployMsgId("c1", "app", "m:o", 8));
  EXPECT_NE(deployMsgId("c1", "app", "", 7).find("deleted"), std::string::npos);
}

// Records round-trip and read leniently.
TEST(RecordsTest, DeploymentAndStatusRoundTrip) {
  DeploymentRecord record{.cluster = "c1",
                          .workspace = "fleet-default",
                          .bundle = "app",
                          .gitrepo = "repo",
                          .commit = "abc",
                          .deployment_id = "m:o",
                          .manifest_id = "m",
                          .options = Json::obj({{"defaultNamespace", "app"}}),
                          .target = "default",
                          .generation = 3,
                          .updated = "2026-12-02T10:00:00.000Z"};
  auto decoded = decodeDeploymentRecord(encode(record).dump());
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, record);
  EXPECT_FALSE(decodeDeploymentRecord("{}").ok());
  EXPECT_FALSE(decodeDeploymentRecord("[1]").ok());

  events::StatusEvent event{.id = "x",
                            .time = "2026-12-02T10:00:00.000Z",
                            .cluster = "c1",
                            .workspace = "fleet-default",
                            .bundle = "app",
                            .deployment_id = "m:o",
                            .generation = 3,
                            .state = "NotReady",
                            .reason = "ResourcesNotReady",
                            .message = "1 of 3",
                            .resources = {events::ObjectResult{.api_version = "apps/v1",
                                                               .kind = "Deployment",
                                                               .ns = "app",
                                                               .name = "web",
                                                               .state = "NotReady",
                                                               .message = "1 of 3"}}};
  BdStatus status = bdStatusFrom(event);
  auto round = decodeBdStatus(encode(status).dump());
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(*round, status);
  EXPECT_EQ(round->resources.asArray()[0].getString("kind"), "Deployment");
}

// The bundles record may be the BundleEvent itself or hold it; anything else is reported, not guessed.
TEST(RecordsTest, BundleRecordShapes) {
  events::BundleEvent event;
  event.id = "e";
  event.time = "2026-12-02T10:00:00.000Z";
  event.workspace = "fleet-default";
  event.gitrepo = "repo";
  event.bundle = "repo-app";
  event.commit = "abc";
  event.manifest_id = std::string(64, 'a');
  auto direct = bundleFromRecord(events::encode(event).dump());
  ASSERT_TRUE(direct.ok()) << direct.error().describe();
  EXPECT_EQ(direct->bundle, "repo-app");
  ASSERT_TRUE(direct->targeting.has_value());
  EXPECT_EQ(direct->targeting->manifest_id, event.manifest_id);

  // The bundler's BundleRecord: the last good event plus the current render error.
  Json bundler_record = Json::obj({{"apiVersion", "bundler.flotilla.io/v1"},
                                   {"kind", "BundleRecord"},
                                   {"workspace", "fleet-default"},
                                   {"gitrepo", "repo"},
                                   {"bundle", "repo-app"},
                                   {"commit", "def"},
                                   {"manifestID", event.manifest_id},
                                   {"lastGood", events::encode(event)},
                                   {"error", Json::obj({{"file", "fleet.yaml"}, {"line", 4}, {"message", "bad"}})}});
  auto from_bundler = bundleFromRecord(bundler_record.dump());
  ASSERT_TRUE(from_bundler.ok()) << from_bundler.error().describe();
  ASSERT_TRUE(from_bundler->targeting.has_value());
  EXPECT_EQ(from_bundler->targeting->manifest_id, event.manifest_id);
  ASSERT_TRUE(from_bundler->error.has_value());
  EXPECT_EQ(from_bundler->error->line, 4);
  EXPECT_EQ(from_bundler->error_commit, "def");
  bundler_record.erase("lastGood");
  auto never_good = bundleFromRecord(bundler_record.dump());
  ASSERT_TRUE(never_good.ok());
  EXPECT_FALSE(never_good->targeting.has_value());

  Json wrapped = Json::obj({{"lastEvent", events::encode(event)}, {"extra", 1}});
  EXPECT_TRUE(bundleFromRecord(wrapped.dump()).ok());
  EXPECT_FALSE(bundleFromRecord(R"({"kind":"Something"})").ok());

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

// A deleted bundle event decodes without a manifest.
TEST(RecordsTest, DeletedBundleMessage) {
  Json json = Json::obj({{"apiVersion", "events.flotilla.io/v1"},
                         {"kind", "BundleEvent"},
                         {"id", "d"},
                         {"time", "2026-12-02T10:00:00.000Z"},
                         {"workspace", "fleet-default"},
                         {"gitrepo", "repo"},
                         {"bundle", "repo-app"},
                         {"commit", "abc"},
                         {"deleted", true}});
  auto message = decodeBundleMessage(json);
  ASSERT_TRUE(message.ok()) << message.error().describe();
  EXPECT_TRUE(message->deleted);
  EXPECT_EQ(message->event.bundle, "repo-app");
}

// Flags: defaults, values, and errors naming the flag.
TEST(FlagsTest, OptionsFromFlags) {
  const char* none[] = {"flotilla-scheduler"};
  auto config = service::Config::parse(1, none, schedulerFlags()).value();
  auto options = schedulerOptionsFrom(config);
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->public_events);

  const char* some[] = {"flotilla-scheduler", "--ack-wait", "5", "--public-events=false"};
  auto parsed = schedulerOptionsFrom(service::Config::parse(4, some, schedulerFlags()).value());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->ack_wait, std::chrono::seconds(5));
  EXPECT_FALSE(parsed->public_events);

  const char* bad[] = {"flotilla-scheduler", "--ack-wait", "soon"};
  auto failed = schedulerOptionsFrom(service::Config::parse(3, bad, schedulerFlags()).value());
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("--ack-wait"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::scheduler
