// The bundler against a real nats-server: commits in, bundle events, manifests and records out.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>

#include "bundler_fixture.h"
#include "flotilla/bundler/bundler.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "flotilla/service/hub.h"
#include "flotilla/source/archive.h"

namespace flotilla::bundler {
namespace {

using namespace std::chrono_literals;
using namespace flotilla::bundler::bundler_test;

TEST_F(BundlerIntegrationTest, RendersEveryBundleStoresManifestsAndRecords) {
  auto events = renderFirstCommit();
  ASSERT_EQ(events.size(), 3u);
  for (const char* name : {"repo-apps-web", "repo-apps-api", "repo-apps-db"}) {
    const auto* event = find(events, name);
    ASSERT_NE(event, nullptr) << name;
    EXPECT_EQ(event->commit, kCommit1);
    EXPECT_EQ(event->gitrepo, gitrepo_);
    ASSERT_EQ(event->manifest_id.size(), 64u);
    EXPECT_FALSE(event->error);
    EXPECT_EQ(event->targets.dump(), R"([{"clusterSelector":{"matchLabels":{"env":"prod"}},"name":"prod"}])");
    EXPECT_EQ(event->labels.at("team"), "web");
    // The manifest is in the object store under its ID, and the ID is the sha256 of its bytes.
    auto manifest = hub_.manifests->get(events::manifestObjectName(event->manifest_id));
    ASSERT_TRUE(manifest.ok()) << manifest.error().describe();
    EXPECT_EQ(model::manifestID(*manifest), event->manifest_id);
    // The record and the render status.
    auto rec = record(name);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->commit, kCommit1);
    ASSERT_TRUE(rec->last_good);
    EXPECT_EQ(rec->last_good->manifest_id, event->manifest_id);
    EXPECT_EQ(rec->last_good->id, event->id);
    EXPECT_FALSE(rec->error);
    auto status = renderStatus(name);
    ASSERT_TRUE(status);
    EXPECT_EQ(status->manifest_id, event->manifest_id);
    EXPECT_FALSE(status->error);
  }
  const auto* web = find(events, "repo-apps-web");
  EXPECT_EQ(web->options.getString("defaultNamespace"), "web");
  EXPECT_EQ(web->labels.at("tier"), "front");
  EXPECT_EQ(find(events, "repo-apps-api")->options.getString("namespace"), "api");
  auto objects = Json::parse(hub_.manifests->get(web->manifest_id).value()).value();
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects.asArray()[0].at({"metadata", "name"})->asString(), "web-a");
  // Namespaces are options for the agent, not written into the objects.
  EXPECT_EQ(objects.asArray()[0].at({"metadata", "namespace"}), nullptr);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 1; }));
  EXPECT_EQ(metrics_.value("bundles_rendered_total", {{"outcome", "ok"}}), 3);
  EXPECT_EQ(metrics_.value("manifest_puts_total", {{"result", "stored"}}), 3);
  // The commit's time -> each of its three BundleEvents stored (docs/pipeline.md "Stage latency").
  EXPECT_EQ(metrics_.value("stage_latency_seconds", {{"stage", "commit_to_bundle"}}), 3);
  expectNoMoreEvents();
}

TEST_F(BundlerIntegrationTest, UnchangedBundlesKeepTheirManifestAndRemovedOnesAreDeleted) {
  auto first = renderFirstCommit();
  ASSERT_EQ(first.size(), 3u);

  auto files = threeBundles();
  files["apps/web/cm.yaml"] = configMap("web-a", "changed");
  files.erase("apps/db/db.json");
  publishCommit(kCommit2, files, {"apps/*"});
  auto second = readEvents(3);
  ASSERT_EQ(second.size(), 3u);
  const auto* api = find(second, "repo-apps-api");
  const auto* web = find(second, "repo-apps-web");
  const auto* db = find(second, "repo-apps-db");
  ASSERT_TRUE(api && web && db);
  EXPECT_EQ(api->commit, kCommit2);
  EXPECT_EQ(api->manifest_id, find(first, "repo-apps-api")->manifest_id);
  EXPECT_NE(web->manifest_id, find(first, "repo-apps-web")->manifest_id);
  EXPECT_TRUE(db->deleted);
  EXPECT_EQ(db->commit, kCommit2);
  EXPECT_TRUE(db->manifest_id.empty());
  // The deleted event is published before the record and status are dropped: wait for the handler to finish.
  EXPECT_TRUE(eventually([&] { return !record("repo-apps-db") && !renderStatus("repo-apps-db"); }));
  EXPECT_EQ(record("repo-apps-api")->commit, kCommit2);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 2; }));
  // api's inputs did not change: its last render was reused (the render cache), nothing was put.
  EXPECT_EQ(metrics_.value("render_cache_total", {{"result", "hit"}}), 1);
  EXPECT_EQ(metrics_.value("manifest_puts_total", {{"result", "existing"}}), 0);
  EXPECT_EQ(metrics_.value("bundles_rendered_total", {{"outcome", "deleted"}}), 1);
  expectNoMoreEvents();
}

TEST_F(BundlerIntegrationTest, ABrokenBundleReportsFileAndLineWhileTheOthersPublish) {
  auto first = renderFirstCommit();
  ASSERT_EQ(first.size(), 3u);
  const std::string good_web = find(first, "repo-apps-web")->manifest_id;

  auto files = threeBundles();
  files["apps/web/cm.yaml"] = configMap("web-a") + "---\n- not\n- an object\n";
  files["apps/api/svc.yaml"] = configMap("api", "v2");
  publishCommit(kCommit2, files, {"apps/*"});
  auto second = readEvents(3);
  ASSERT_EQ(second.size(), 3u);
  const auto* web = find(second, "repo-apps-web");
  ASSERT_NE(web, nullptr);
  ASSERT_TRUE(web->error);
  EXPECT_EQ(web->error->file, "apps/web/cm.yaml");
  EXPECT_EQ(web->error->line, 8);
  EXPECT_NE(web->error->message.find("apps/web/cm.yaml:8"), std::string::npos) << web->error->message;
  EXPECT_TRUE(web->manifest_id.empty());
  const auto* api = find(second, "repo-apps-api");
  ASSERT_NE(api, nullptr);
  EXPECT_FALSE(api->error);
  EXPECT_NE(api->manifest_id, find(first, "repo-apps-api")->manifest_id);
  // The last good render stays recorded next to the error.
  auto rec = record("repo-apps-web");
  ASSERT_TRUE(rec && rec->last_good && rec->error);
  EXPECT_EQ(rec->last_good->manifest_id, good_web);
  EXPECT_EQ(rec->last_good->commit, kCommit1);
  EXPECT_EQ(rec->commit, kCommit2);
  auto status = renderStatus("repo-apps-web");
  ASSERT_TRUE(status && status->error);
  EXPECT_EQ(status->error->line, 8);
  EXPECT_EQ(status->last_good_manifest_id, good_web);
  EXPECT_EQ(status->commit, kCommit2);

  // Fixing it in the next commit clears the error.
  publishCommit(kCommit3, threeBundles(), {"apps/*"});
  auto third = readEvents(3);
  ASSERT_EQ(third.size(), 3u);
  const auto* fixed = find(third, "repo-apps-web");
  ASSERT_NE(fixed, nullptr);
  EXPECT_FALSE(fixed->error);
  EXPECT_EQ(fixed->manifest_id, good_web);
  EXPECT_FALSE(record("repo-apps-web")->error);
  EXPECT_FALSE(renderStatus("repo-apps-web")->error);
  EXPECT_EQ(metrics_.value("bundles_rendered_total", {{"outcome", "error"}}), 1);

  // Each render announced publicly: .failed for the broken one (with its error), .rendered for the others.
  auto announced = [&](const std::string& bundle) {
    auto last = hub_.js->getLastMessage(service::kEventsStream, events::eventsSubject("bundle", {ws_, bundle}));
    return last.ok() ? events::decodeCloudEvent(Json::parse(last->data()).value()).valueOr(events::CloudEvent{})
                     : events::CloudEvent{};
  };
  ASSERT_TRUE(eventually([&] {
    return metrics_.value("public_events_total", {{"type", "io.flotilla.bundle.failed"}}) == 1 &&
           metrics_.value("public_events_total", {{"type", "io.flotilla.bundle.rendered"}}) == 8;
  }));
  EXPECT_EQ(announced("repo-apps-web").type, "io.flotilla.bundle.rendered");
  EXPECT_EQ(announced("repo-apps-web").data.getString("commit"), kCommit3);
  EXPECT_EQ(announced("repo-apps-web").source, "/flotilla/bundler");
  EXPECT_EQ(metrics_.value("public_event_failures_total", {{"reason", "publish"}}), 0);
}

// The public events are a degraded path: without an events stream the bundle events still go out and the commit
// is acked; the public ones are dropped, counted and logged.
TEST_F(BundlerIntegrationTest, WithoutTheEventsStreamTheCommitStillRendersAndTheDropIsCounted) {
  ASSERT_TRUE(hub_.js->deleteStream(service::kEventsStream).ok());
  startBundler();
  publishCommit(kCommit1, threeBundles(), {"apps/*"});
  ASSERT_EQ(readEvents(3).size(), 3u);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 1; }));
  EXPECT_TRUE(eventually([&] { return metrics_.value("public_event_failures_total", {{"reason", "publish"}}) >= 3; }));
  EXPECT_EQ(metrics_.value("public_events_total", {{"type", "io.flotilla.bundle.rendered"}}), 0);
}

TEST_F(BundlerIntegrationTest, UnknownFleetYamlFieldIsAnErrorEvent) {
  startBundler();
  auto files = threeBundles();
  files["apps/api/fleet.yaml"] = "namespace: api\nhelm:\n  releaseNmae: x\n";
  publishCommit(kCommit1, files, {"apps/*"});
  auto events = readEvents(3);
  const auto* api = find(events, "repo-apps-api");
  ASSERT_NE(api, nullptr);
  ASSERT_TRUE(api->error);
  EXPECT_EQ(api->error->file, "apps/api/fleet.yaml");
  EXPECT_EQ(api->error->line, 3);
  EXPECT_NE(api->error->message.find("releaseNmae"), std::string::npos);
  EXPECT_FALSE(find(events, "repo-apps-web")->error);
  // Never rendered well: the record holds only the error.
  auto rec = record("repo-apps-api");
  ASSERT_TRUE(rec);
  EXPECT_FALSE(rec->last_good);
  EXPECT_TRUE(rec->error);
}

TEST_F(BundlerIntegrationTest, RedeliveryAfterACrashPublishesNoDuplicates) {
  // A first "process" handles the commit but dies before acking it.
  auto opts = options();
  bus::PullConsumer consumer;
  ASSERT_NO_FATAL_FAILURE(bindDurable(service::kCommitsStream,
                                      {.durable = std::string(kConsumerName),
                                       .filter_subject = std::string(events::kCommitFilter),
                                       .ack_wait = opts.ack_wait},
                                      consumer));
  publishCommit(kCommit1, threeBundles(), {"apps/*"});
  auto batch = consumer.fetch(1, 5s);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 1u);
  {
    Metrics crashed_metrics("bundler");
    BundlerMetrics m(crashed_metrics);
    CommitHandler crashed(handlerBus(), std::make_shared<const render::RendererSet>(), m, opts.handler);
    auto meta = (*batch)[0].metadata();
    ASSERT_TRUE(meta.ok());
    auto outcome = crashed.handle((*batch)[0].data(), Delivery{meta->stream_sequence, meta->num_delivered});
    EXPECT_EQ(outcome.action, Outcome::Action::kAck);
    // ... and the process dies here: no ack.
  }
  auto first = readEvents(3);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(bundleMessages(), 3u);

  // The restarted bundler gets the message again after ack_wait and redoes it; JetStream drops the copies.
  startBundler();
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 1; }, 30s));
  EXPECT_EQ(metrics_.value("events_published_total", {{"result", "duplicate"}}), 3);
  // The records the crashed handler wrote carry the render keys: nothing is rendered again, the events are equal.
  EXPECT_EQ(metrics_.value("render_cache_total", {{"result", "hit"}}), 3);
  EXPECT_EQ(bundleMessages(), 3u);
  expectNoMoreEvents();
  auto info = hub_.js->consumerInfo(service::kCommitsStream, std::string(kConsumerName));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->num_ack_pending, 0);
}

TEST_F(BundlerIntegrationTest, AStaleCommitDoesNotOverwriteANewerOne) {
  auto older = publishCommit(kCommit1, threeBundles(), {"apps/*"});
  auto files = threeBundles();
  files["apps/web/cm.yaml"] = configMap("web-a", "newer");
  auto newer = publishCommit(kCommit2, files, {"apps/*"});
  BundlerMetrics m(metrics_);
  CommitHandler handler(handlerBus(), std::make_shared<const render::RendererSet>(), m, options().handler);
  // The newer event (stream sequence 2) is handled first, then the older one (1) arrives late.
  EXPECT_EQ(handler.handleEvent(newer, Delivery{2, 1}).result, "rendered");
  EXPECT_EQ(handler.handleEvent(older, Delivery{1, 2}).result, "stale");
  auto events = readEvents(3);
  ASSERT_EQ(events.size(), 3u);
  for (const auto& e : events) {
    EXPECT_EQ(e.commit, kCommit2);
  }
  expectNoMoreEvents();
  EXPECT_EQ(record("repo-apps-web")->commit, kCommit2);
}

TEST_F(BundlerIntegrationTest, ABundleLargerThanOneMiBGoesThroughTheObjectStore) {
  startBundler();
  publishCommit(kCommit1, bulkyBundle("big", 50, 100 * 1024, 'x'), {"big"});
  auto events = readEvents(1, 60s);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_FALSE(events[0].error) << events[0].error->message;
  auto manifest = hub_.manifests->get(events[0].manifest_id);
  ASSERT_TRUE(manifest.ok()) << manifest.error().describe();
  EXPECT_GT(manifest->size(), 5u * 1000 * 1000);
  EXPECT_EQ(model::manifestID(*manifest), events[0].manifest_id);
  EXPECT_EQ(Json::parse(*manifest)->size(), 50u);
  auto info = hub_.manifests->info(events[0].manifest_id);
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->chunks, 1u);
}

TEST_F(BundlerIntegrationTest, AMissingGitRepoIsSkippedAndAMissingSourceRejected) {
  BundlerMetrics m(metrics_);
  CommitHandler handler(handlerBus(), std::make_shared<const render::RendererSet>(), m, options().handler);
  auto event = publishCommit(kCommit1, threeBundles(), {"apps/*"});
  auto missing_repo = event;
  missing_repo.gitrepo = "gone";
  EXPECT_EQ(handler.handleEvent(missing_repo, Delivery{1, 1}).result, "gitrepo_missing");
  auto missing_source = event;
  missing_source.source_object = std::string(64, '0');
  auto outcome = handler.handleEvent(missing_source, Delivery{1, 1});
  EXPECT_EQ(outcome.action, Outcome::Action::kReject);
  EXPECT_EQ(handler.handle("{not json", Delivery{1, 1}).action, Outcome::Action::kReject);
  expectNoMoreEvents(500ms);
}

TEST_F(BundlerIntegrationTest, AMalformedCommitMessageIsTerminated) {
  startBundler();
  ASSERT_TRUE(hub_.js->publish(events::commitSubject(ws_, gitrepo_), "{\"kind\":\"nonsense\"}", "bad-1").ok());
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "invalid"}}) == 1; }));
  // term'd: not redelivered, nothing pending.
  EXPECT_TRUE(eventually([&] {
    auto info = hub_.js->consumerInfo(service::kCommitsStream, std::string(kConsumerName));
    return info.ok() && info->num_ack_pending == 0 && info->num_pending == 0;
  }));
  expectNoMoreEvents(500ms);
  EXPECT_EQ(metrics_.value("commits_handled_total", {{"outcome", "invalid"}}), 1);
}

TEST_F(BundlerIntegrationTest, ATransientFailureIsRetriedWithBackoffUntilItSucceeds) {
  // The work dir turns into a file, so checkouts fail (not the commit's fault): nak with a delay, redeliver.
  startBundler();
  removeAll(work_dir_);
  ASSERT_TRUE(writeFile(work_dir_, "not a directory").ok());
  publishCommit(kCommit1, threeBundles(), {"apps/*"});
  EXPECT_TRUE(eventually([&] { return metrics_.value("step_failures_total", {{"step", "checkout"}}) >= 2; }));
  EXPECT_GE(metrics_.value("commits_handled_total", {{"outcome", "retry"}}), 2);
  EXPECT_EQ(bundleMessages(), 0u);
  // The disk is back: the next redelivery renders the commit.
  removeAll(work_dir_);
  std::filesystem::create_directories(work_dir_);
  auto events = readEvents(3);
  EXPECT_EQ(events.size(), 3u);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 1; }));
}

TEST_F(BundlerIntegrationTest, KeepsWorkingAcrossANatsRestart) {
  ASSERT_EQ(renderFirstCommit().size(), 3u);
  ASSERT_TRUE(nats_->restart().ok()) << nats_->logTail();
  auto files = threeBundles();
  files["apps/web/cm.yaml"] = configMap("web-a", "after-restart");
  EXPECT_TRUE(eventually([&] { return hub_.js->streamInfo(service::kCommitsStream).ok(); }, 20s));
  publishCommit(kCommit2, files, {"apps/*"});
  auto events = readEvents(3, 40s);
  ASSERT_EQ(events.size(), 3u);
  for (const auto& e : events) {
    EXPECT_EQ(e.commit, kCommit2);
  }
}

TEST_F(BundlerIntegrationTest, AnUnusableWorkDirFailsTheStart) {
  removeAll(work_dir_);
  ASSERT_TRUE(writeFile(work_dir_, "not a directory").ok());
  Bundler bundler(handlerBus(), std::make_shared<const render::RendererSet>(), metrics_, options());
  auto started = bundler.start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().kind, ErrorKind::kPermanent);
  std::string why;
  EXPECT_FALSE(bundler.ready(why));
  removeAll(work_dir_);
  std::filesystem::create_directories(work_dir_);
}

TEST_F(BundlerIntegrationTest, TheBinaryRendersAndExitsCleanlyOnSigterm) {
  auto log_dir = makeTempDir("bundler-bin");
  ASSERT_TRUE(log_dir.ok());
  auto process = Process::start({.argv = {FLOTILLA_BUNDLER_BINARY, "--work-dir", work_dir_, "--nats-url", nats_->url(),
                                          "--http-addr", "127.0.0.1:0", "--log-level", "info"},
                                 .output_file = *log_dir + "/bundler.log",
                                 .kill_with_parent = true});
  ASSERT_TRUE(process.ok()) << process.error().describe();
  publishCommit(kCommit1, threeBundles(), {"apps/*"});
  auto events = readEvents(3);
  EXPECT_EQ(events.size(), 3u);
  process->signal(SIGTERM);
  auto code = process->wait(15s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << readFile(*log_dir + "/bundler.log").valueOr("");
  auto log_text = readFile(*log_dir + "/bundler.log").valueOr("");
  EXPECT_NE(log_text.find("\"msg\":\"bundle rendered\""), std::string::npos) << log_text;
  removeAll(*log_dir);
}

// Issue 5 (scale): a commit of 200 bundles renders with bounded parallelism; events, records and errors come out
// exactly as with sequential rendering, in discovery order, and one broken bundle does not hold the others back.
TEST_F(BundlerIntegrationTest, TwoHundredBundlesRenderInParallelAndPublishInDiscoveryOrder) {
  auto opts = options();
  opts.handler.render_parallelism = 4;
  bundler_ = std::make_unique<Bundler>(handlerBus(), std::make_shared<const render::RendererSet>(), metrics_, opts);
  ASSERT_TRUE(bundler_->start().ok());
  std::map<std::string, std::string> files;
  std::vector<std::string> paths;
  for (int i = 0; i < 200; ++i) {
    char name[8];
    std::snprintf(name, sizeof(name), "%03d", i);
    const std::string dir = std::string("many/b") + name;
    paths.push_back(dir);
    files[dir + "/cm.yaml"] = i == 117 ? std::string("- not an object\n") : configMap(std::string("cm") + name);
  }
  publishCommit(kCommit1, files, {"many/*"});
  auto events = readEvents(200, 120s);
  ASSERT_EQ(events.size(), 200u);
  std::sort(paths.begin(), paths.end());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].path, paths[i]) << "event " << i;
    EXPECT_EQ(events[i].error.has_value(), paths[i] == "many/b117") << paths[i];
  }
  ASSERT_TRUE(events[117].error);
  EXPECT_EQ(events[117].error->file, "many/b117/cm.yaml");
  // The last bundle is counted just after its event is published.
  EXPECT_TRUE(eventually([&] { return metrics_.value("bundles_rendered_total", {{"outcome", "ok"}}) == 199; }));
  EXPECT_EQ(metrics_.value("bundles_rendered_total", {{"outcome", "error"}}), 1);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 1; }));
  expectNoMoreEvents();
}

// Issue 5 (scale): a 50 MiB rendered bundle goes end to end — the source archive and the manifest through the
// object stores in chunks, only the manifest ID in the event (NATS max_payload is 1 MiB).
TEST_F(BundlerIntegrationTest, AFiftyMiBBundleGoesThroughTheObjectStoresEndToEnd) {
  startBundler();
  // 10 files of 5.5 MiB: over 50 MiB in total
  publishCommit(kCommit1, bulkyBundle("huge", 10, 5 * 1024 * 1024 + 512 * 1024, 'y'), {"huge"});
  auto events = readEvents(1, 300s);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_FALSE(events[0].error) << events[0].error->message;
  EXPECT_LT(events::encode(events[0]).dump().size(), 64u * 1024);
  auto manifest = hub_.manifests->get(events[0].manifest_id);
  ASSERT_TRUE(manifest.ok()) << manifest.error().describe();
  EXPECT_GT(manifest->size(), 50u * 1024 * 1024);
  EXPECT_EQ(model::manifestID(*manifest), events[0].manifest_id);
  auto info = hub_.manifests->info(events[0].manifest_id);
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->chunks, 50u);
}

// A commit that kills the bundler every time it is handled (each "process" takes it and dies without settling
// it) is not redelivered forever: the delivery after the maximum is terminated and reported without running the
// handler again (KV record, metric, public event), and the bundler keeps rendering other commits.
TEST_F(BundlerIntegrationTest, APoisonCommitIsTerminatedAndReportedWhileOthersRender) {
  auto opts = options();
  opts.max_deliveries = 2;
  opts.ack_wait = 1s;
  bus::PullConsumer crashing;
  ASSERT_NO_FATAL_FAILURE(bindDurable(service::kCommitsStream,
                                      {.durable = std::string(kConsumerName),
                                       .filter_subject = std::string(events::kCommitFilter),
                                       .ack_wait = opts.ack_wait,
                                       .max_deliver = opts.max_deliveries + 1},
                                      crashing));
  auto poison = publishCommit(kCommit1, threeBundles(), {"apps/*"});
  uint64_t sequence = 0;
  ASSERT_NO_FATAL_FAILURE(harness::deliverUnsettled(crashing, 2, sequence));
  crashing = bus::PullConsumer();
  bundler_ = std::make_unique<Bundler>(handlerBus(), std::make_shared<const render::RendererSet>(), metrics_, opts);
  ASSERT_TRUE(bundler_->start().ok());
  auto key = events::terminatedKey(service::kCommitsStream, kConsumerName, sequence);
  ASSERT_TRUE(eventually([&] { return hub_.status->get(key).ok(); }, 20s));
  auto record = events::decodeMessageTerminated(Json::parse(hub_.status->get(key)->value).value());
  ASSERT_TRUE(record.ok()) << record.error().describe();
  EXPECT_EQ(record->reason, events::kTerminatedExhausted);
  EXPECT_EQ(record->msg_id, poison.id);
  EXPECT_EQ(record->subject, events::commitSubject(poison.workspace, poison.gitrepo));
  EXPECT_EQ(metrics_.value("messages_terminated_total",
                           {{"consumer", "commits"}, {"reason", std::string(events::kTerminatedExhausted)}}),
            1);
  // The event follows the KV record.
  EXPECT_TRUE(eventually([&] {
    return hub_.js
        ->getLastMessage(service::kEventsStream, events::terminatedSubject(service::kCommitsStream, kConsumerName))
        .ok();
  }));
  EXPECT_EQ(bundleMessages(), 0u);
  // The service keeps serving: the next commit renders.
  publishCommit(kCommit2, threeBundles(), {"apps/*"});
  EXPECT_EQ(readEvents(3).size(), 3u);
}

}  // namespace
}  // namespace flotilla::bundler
