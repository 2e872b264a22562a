// The KV record contract (records.h): every record round-trips, and its strict decoder names an unknown field and
// a missing required one by path.
#include "flotilla/events/records.h"

#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/state.h"
#include "sample_events.h"
#include "test_support.h"

namespace flotilla::events {
namespace {

constexpr const char* kTime = "2026-12-02T10:00:00.123Z";

DeploymentRecord sampleDeployment() {
  return DeploymentRecord{.cluster = "c1",
                          .workspace = "ws",
                          .bundle = "repo-app",
                          .gitrepo = "repo",
                          .commit = "abc",
                          .deployment_id = "m:o",
                          .manifest_id = "m",
                          .options = Json::obj({{"namespace", "app"}}),
                          .target = "prod",
                          .generation = 3,
                          .updated = kTime,
                          .commit_sequence = 12,
                          .labels = {{"team", "web"}}};
}

BdStatus sampleBdStatus() {
  return BdStatus{.cluster = "c1",
                  .workspace = "ws",
                  .bundle = "repo-app",
                  .deployment_id = "m:o",
                  .generation = 3,
                  .state = "NotReady",
                  .reason = "Progressing",
                  .message = "1 of 3 replicas",
                  .resources = {ObjectResult{.api_version = "apps/v1",
                                             .kind = "Deployment",
                                             .ns = "app",
                                             .name = "web",
                                             .state = "NotReady",
                                             .message = "1 of 3 replicas"}},
                  .agent_version = "0.1.0",
                  .reported = kTime,
                  .event_id = "status/c1/repo-app/m:o/NotReady/1",
                  .updated = kTime};
}

BundleRecord sampleBundleRecord() {
  return BundleRecord{.workspace = "ws",
                      .gitrepo = "repo",
                      .bundle = "repo-app",
                      .path = "app",
                      .commit = "def",
                      .commit_sequence = 7,
                      .last_good = test::sampleBundleEvent(),
                      .error = RenderError{.file = "fleet.yaml", .line = 4, .message = "bad"},
                      .source_object = std::string(64, 's'),
                      .release_name = "repo-app",
                      .render_key = std::string(64, 'k')};
}

RenderStatus sampleRenderStatus() {
  return RenderStatus{.workspace = "ws",
                      .gitrepo = "repo",
                      .bundle = "repo-app",
                      .path = "app",
                      .commit = "def",
                      .last_good_manifest_id = "m",
                      .error = RenderError{.file = "fleet.yaml", .line = 4, .message = "bad"},
                      .time = kTime,
                      .chart = "oci://charts/web",
                      .chart_version = "1.2.3",
                      .chart_digest = std::string(64, 'd'),
                      .notes = {"objects named from .Release.Name are created anew"}};
}

BundleClaim sampleClaim() {
  return BundleClaim{.workspace = "ws",
                     .bundle = "shared",
                     .gitrepo = "second",
                     .owner = "first",
                     .path = "app",
                     .commit = std::string(40, 'c'),
                     .commit_sequence = 9,
                     .source_object = std::string(64, 's'),
                     .force_sync_generation = 1,
                     .time = kTime};
}

PollStatus samplePollStatus() {
  return PollStatus{.workspace = "ws",
                    .gitrepo = "repo",
                    .repo = "https://git.example/repo",
                    .commit = std::string(40, 'a'),
                    .polling_commit = std::string(40, 'b'),
                    .changed = true,
                    .force_sync_generation = 2,
                    .observed_generation = 5,
                    .last_poll_time = kTime,
                    .last_error = "boom",
                    .last_error_kind = "transient",
                    .failures = 3};
}

RenderErrorSummary sampleRenderError() {
  return RenderErrorSummary{
      .bundle = "repo-app", .file = "fleet.yaml", .line = 4, .message = "bad", .commit = "def", .time = kTime};
}

BundleSummary sampleBundleSummary() {
  return BundleSummary{.workspace = "ws",
                       .bundle = "repo-app",
                       .summary = Json::obj({{"ready", 1}, {"desiredReady", 2}}),
                       .state = "WaitApplied",
                       .message = "WaitApplied(1)",
                       .ready_clusters = "1/2",
                       .gitrepo = "repo",
                       .commit = "abc",
                       .manifest_id = "m",
                       .error = true,
                       .render_error = sampleRenderError(),
                       .updated = kTime};
}

GitRepoSummary sampleGitRepoSummary() {
  return GitRepoSummary{.workspace = "ws",
                        .gitrepo = "repo",
                        .summary = Json::obj({{"ready", 1}, {"desiredReady", 2}}),
                        .state = "ErrApplied",
                        .ready_bundle_deployments = "1/2",
                        .ready_clusters = 1,
                        .desired_ready_clusters = 2,
                        .bundles = {GitRepoSummaryBundle{.bundle = "repo-app",
                                                         .state = "ErrApplied",
                                                         .ready = 1,
                                                         .desired_ready = 2,
                                                         .render_error = sampleRenderError()}},
                        .render_errors = {sampleRenderError()},
                        .error = true};
}

ClusterSummary sampleClusterSummary() {
  return ClusterSummary{.cluster = "c1",
                        .summary = Json::obj({{"ready", 2}, {"desiredReady", 2}}),
                        .state = "Ready",
                        .ready_bundles = "2/2",
                        .ready_git_repos = 1,
                        .desired_ready_git_repos = 1,
                        .last_heartbeat = kTime,
                        .registered = true,
                        .workspace = "ws",
                        .agent_version = "0.1.0",
                        .kubernetes_version = "v1.31.2",
                        .last_seen = kTime};
}

// One typed test per record: round trip through the JSON text, an unknown field, a missing required field.
template <typename T>
struct RecordCase {
  T sample;
  std::string required;  //!< a required field to remove
};

template <typename T>
void checkRecord(const RecordCase<T>& c) {
  SCOPED_TRACE(std::string(T::kKind));
  auto round = parseRecord<T>(encode(c.sample).dump());
  ASSERT_TRUE(round.ok()) << round.error().describe();
  EXPECT_EQ(*round, c.sample);

  Json unknown = encode(c.sample);
  unknown["surprise"] = 1;
  auto rejected = decodeRecord<T>(unknown);
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(rejected.error().message.find(std::string(T::kKind) + ".surprise: unknown field"), std::string::npos)
      << rejected.error().message;

  Json missing = encode(c.sample);
  missing.erase(c.required);
  auto incomplete = decodeRecord<T>(missing);
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.error().message.find(std::string(T::kKind) + "." + c.required + ": required field is missing"),
            std::string::npos)
      << incomplete.error().message;

  EXPECT_FALSE(parseRecord<T>("[1]").ok());
  EXPECT_FALSE(parseRecord<T>("{").ok());
}

TEST(RecordsTest, DeploymentRecord) {
  checkRecord(RecordCase<DeploymentRecord>{sampleDeployment(), "bundle"});
  Json wrong = encode(sampleDeployment());
  wrong["generation"] = "3";
  auto decoded = decodeRecord<DeploymentRecord>(wrong);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.error().message.find("DeploymentRecord.generation: expected an integer, got a string"),
            std::string::npos)
      << decoded.error().message;
}

TEST(RecordsTest, BdStatus) {
  checkRecord(RecordCase<BdStatus>{sampleBdStatus(), "cluster"});
  Json bad_state = encode(sampleBdStatus());
  bad_state["state"] = "Fine";
  EXPECT_FALSE(decodeRecord<BdStatus>(bad_state).ok());
  Json bad_resource = encode(sampleBdStatus());
  (*bad_resource.find("resources")).asArray()[0]["extra"] = true;
  test::expectProblem(decodeRecord<BdStatus>(bad_resource), "BdStatus.resources[0].extra: unknown field");
}

TEST(RecordsTest, BdStatusFromStatusEvent) {
  StatusEvent event{.id = "e1", .time = kTime, .cluster = "c1", .workspace = "ws", .bundle = "b", .state = "Ready"};
  event.resources.push_back(ObjectResult{.kind = "ConfigMap", .name = "x", .state = "Ready"});
  BdStatus status = bdStatusFrom(event);
  EXPECT_EQ(status.reported, kTime);
  EXPECT_EQ(status.event_id, "e1");
  EXPECT_EQ(status.resources, event.resources);
}

TEST(RecordsTest, BundleRecord) {
  checkRecord(RecordCase<BundleRecord>{sampleBundleRecord(), "gitrepo"});
  BundleRecord never_good = sampleBundleRecord();
  never_good.last_good.reset();
  never_good.source_object.clear();
  auto round = decodeRecord<BundleRecord>(encode(never_good));
  ASSERT_TRUE(round.ok()) << round.error().describe();
  EXPECT_EQ(*round, never_good);
  // A record written before the render cache has no renderKey: it decodes with an empty key (a cache miss).
  Json before_cache = encode(sampleBundleRecord());
  ASSERT_NE(before_cache.find("renderKey"), nullptr);
  before_cache.erase("renderKey");
  auto old_record = decodeRecord<BundleRecord>(before_cache);
  ASSERT_TRUE(old_record.ok()) << old_record.error().describe();
  EXPECT_TRUE(old_record->render_key.empty());
  Json bad_event = encode(sampleBundleRecord());
  (*bad_event.find("lastGood"))["workspace"] = 1;
  test::expectProblem(decodeRecord<BundleRecord>(bad_event), "BundleRecord.lastGood");
  Json wrong_kind = encode(sampleBundleRecord());
  wrong_kind["kind"] = "BundleEvent";
  EXPECT_FALSE(decodeRecord<BundleRecord>(wrong_kind).ok());
}

TEST(RecordsTest, RenderStatus) {
  checkRecord(RecordCase<RenderStatus>{sampleRenderStatus(), "bundle"});
  RenderStatus good = sampleRenderStatus();
  good.error.reset();
  good.chart.clear();
  good.chart_version.clear();
  good.chart_digest.clear();
  EXPECT_TRUE(encode(good).find("error")->isNull());
  EXPECT_EQ(parseRecord<RenderStatus>(encode(good).dump()).value(), good);
}

TEST(RecordsTest, BundleClaim) {
  checkRecord(RecordCase<BundleClaim>{sampleClaim(), "gitrepo"});
  Json negative = encode(sampleClaim());
  negative["commitSequence"] = -1;
  EXPECT_FALSE(decodeRecord<BundleClaim>(negative).ok());
}

TEST(RecordsTest, PollStatus) {
  checkRecord(RecordCase<PollStatus>{samplePollStatus(), "workspace"});
}

TEST(RecordsTest, Summaries) {
  checkRecord(RecordCase<BundleSummary>{sampleBundleSummary(), "bundle"});
  checkRecord(RecordCase<GitRepoSummary>{sampleGitRepoSummary(), "gitrepo"});
  checkRecord(RecordCase<ClusterSummary>{sampleClusterSummary(), "cluster"});
  Json bad_bundle = encode(sampleGitRepoSummary());
  (*bad_bundle.find("bundles")).asArray()[0]["ready"] = "1";
  test::expectProblem(decodeRecord<GitRepoSummary>(bad_bundle), "GitRepoSummary.bundles[0].ready");
  // Only a GitRepo summary can be Deleting; other states stay the seven bundle states.
  GitRepoSummary deleting = sampleGitRepoSummary();
  deleting.state = std::string(kDeletingState);
  EXPECT_EQ(decodeRecord<GitRepoSummary>(encode(deleting)).value(), deleting);
  deleting.state = "Gone";
  test::expectProblem(decodeRecord<GitRepoSummary>(encode(deleting)), "GitRepoSummary.state");
  BundleSummary bundle = sampleBundleSummary();
  bundle.state = std::string(kDeletingState);
  EXPECT_FALSE(decodeRecord<BundleSummary>(encode(bundle)).ok());
}

// Only a cluster summary can be Offline, and only with `offline: true`.
TEST(RecordsTest, ClusterSummaryOffline) {
  ClusterSummary offline = sampleClusterSummary();
  offline.state = std::string(kOfflineState);
  offline.offline = true;
  EXPECT_EQ(decodeRecord<ClusterSummary>(encode(offline)).value(), offline);
  offline.offline = false;
  test::expectProblem(decodeRecord<ClusterSummary>(encode(offline)), "ClusterSummary.state");
  BundleSummary bundle = sampleBundleSummary();
  bundle.state = std::string(kOfflineState);
  EXPECT_FALSE(decodeRecord<BundleSummary>(encode(bundle)).ok());
}

// A bundle summary's rollout round-trips; unknown rollout and partition states are refused, as is an unknown
// stagedReason of a deployment record.
TEST(RecordsTest, RolloutStatusAndStagedReason) {
  BundleSummary bundle = sampleBundleSummary();
  bundle.rollout = RolloutStatus{
      .state = "Halted",
      .partition = "canary",
      .unavailable = 1,
      .max_unavailable = 3,
      .max_new = 50,
      .held = 2,
      .partitions = {{.name = "canary", .count = 2, .max_unavailable = 1, .unavailable = 2, .state = "Halted"}},
      .halted_by = {{.cluster = "c-1", .state = "ErrApplied", .message = "boom"}},
      .outside_partitions = {"x"},
      .outside_partitions_count = 1};
  EXPECT_EQ(decodeRecord<BundleSummary>(encode(bundle)).value(), bundle);
  bundle.rollout->state = "Done";
  test::expectProblem(decodeRecord<BundleSummary>(encode(bundle)), "BundleSummary.rollout.state");
  bundle.rollout->state = "Halted";
  bundle.rollout->partitions[0].state = "Stuck";
  test::expectProblem(decodeRecord<BundleSummary>(encode(bundle)), "BundleSummary.rollout.partitions[0].state");

  DeploymentRecord held = sampleDeployment();
  held.staged_deployment_id = "m2:o";
  held.staged_reason = std::string(kStagedByRollout);
  EXPECT_EQ(decodeRecord<DeploymentRecord>(encode(held)).value(), held);
  held.staged_reason = "Because";
  test::expectProblem(decodeRecord<DeploymentRecord>(encode(held)), "DeploymentRecord.stagedReason");
}

TEST(RecordsTest, ClusterDeregistration) {
  checkRecord(RecordCase<ClusterDeregistration>{
      ClusterDeregistration{.cluster = "prod.eu", .time = kTime, .keep_resources = true}, "cluster"});
  Json wrong = encode(ClusterDeregistration{.cluster = "c1", .time = kTime});
  wrong["keepResources"] = "yes";
  test::expectProblem(decodeRecord<ClusterDeregistration>(wrong), "ClusterDeregistration.keepResources");
}

// The one rule for the state a deployment counts as.
TEST(RecordsTest, DeploymentState) {
  DeploymentRecord record = sampleDeployment();
  EXPECT_EQ(deploymentState(record, nullptr).state, "WaitApplied");
  BdStatus status = sampleBdStatus();
  EXPECT_EQ(deploymentState(record, &status), (DeploymentState{"NotReady", "Progressing", "1 of 3 replicas"}));
  status.deployment_id = "old:o";
  EXPECT_EQ(deploymentState(record, &status).state, "WaitApplied");
  status.state = "ErrApplied";
  status.generation = 4;
  EXPECT_EQ(deploymentState(record, &status).state, "ErrApplied");
  status.generation = 2;
  EXPECT_EQ(deploymentState(record, &status).state, "WaitApplied");
  record.staged_deployment_id = "new:o";
  status = sampleBdStatus();
  status.state = "Ready";
  auto held = deploymentState(record, &status);
  EXPECT_EQ(held.state, "OutOfSync");
  EXPECT_EQ(held.reason, "Paused");
  record.deployment_id.clear();
  EXPECT_EQ(deploymentState(record, &status).state, "Pending");
  // A delete was sent: waiting for the agent, unless it reported that the delete failed.
  DeploymentRecord deleting = sampleDeployment();
  deleting.deleting = true;
  deleting.generation = 5;
  status = sampleBdStatus();
  EXPECT_EQ(deploymentState(deleting, &status), (DeploymentState{"WaitApplied", "Deleting",
                                                                 "delete sent; waiting for the agent to remove the "
                                                                 "bundle"}));
  status.deployment_id.clear();
  status.generation = 5;
  status.state = "ErrApplied";
  status.reason = "PruneFailed";
  EXPECT_EQ(deploymentState(deleting, &status).reason, "PruneFailed");
}

// The state names this leaf library knows agree with libs/model.
TEST(RecordsTest, StateNamesMatchModel) {
  for (model::BundleState state : model::kAllStates) {
    BdStatus status = sampleBdStatus();
    status.state = std::string(model::stateName(state));
    EXPECT_TRUE(decodeRecord<BdStatus>(encode(status)).ok()) << status.state;
  }
}

//! The ```json examples under each "### `<record>`" heading of docs/pipeline.md, in order.
std::map<std::string, std::vector<std::string>> pipelineExamples() {
  std::ifstream in(std::string(FLOTILLA_EVENTS_DOCS_DIR) + "/../pipeline.md");
  std::map<std::string, std::vector<std::string>> out;
  std::string line;
  std::string section;
  bool in_json = false;
  while (std::getline(in, line)) {
    if (startsWith(line, "### `")) {
      section = line.substr(5, line.find('`', 5) - 5);
    } else if (line == "```json") {
      in_json = true;
      out[section].emplace_back();
    } else if (line == "```") {
      in_json = false;
    } else if (in_json) {
      out[section].back() += line;
    }
  }
  return out;
}

template <typename T>
void checkExample(const std::string& text) {
  SCOPED_TRACE(text);
  auto decoded = parseRecord<T>(text);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(encode(*decoded), Json::parse(text).value());
}

// The examples in docs/pipeline.md "KV records" decode strictly and re-encode to the same JSON.
TEST(RecordsTest, PipelineDocExamples) {
  auto examples = pipelineExamples();
  ASSERT_EQ(examples["DeploymentRecord"].size(), 1u);
  checkExample<DeploymentRecord>(examples["DeploymentRecord"][0]);
  ASSERT_EQ(examples["BdStatus"].size(), 1u);
  checkExample<BdStatus>(examples["BdStatus"][0]);
  ASSERT_EQ(examples["BundleRecord"].size(), 1u);
  checkExample<BundleRecord>(examples["BundleRecord"][0]);
  ASSERT_EQ(examples["RenderStatus"].size(), 1u);
  checkExample<RenderStatus>(examples["RenderStatus"][0]);
  ASSERT_EQ(examples["BundleClaim"].size(), 1u);
  checkExample<BundleClaim>(examples["BundleClaim"][0]);
  ASSERT_EQ(examples["PollStatus"].size(), 1u);
  checkExample<PollStatus>(examples["PollStatus"][0]);
  const auto& summaries = examples["BundleSummary"];
  ASSERT_EQ(summaries.size(), 3u);
  checkExample<BundleSummary>(summaries[0]);
  checkExample<GitRepoSummary>(summaries[1]);
  checkExample<ClusterSummary>(summaries[2]);
  ASSERT_EQ(examples["ClusterDeregistration"].size(), 1u);
  checkExample<ClusterDeregistration>(examples["ClusterDeregistration"][0]);
}

// The Cluster record (clusters/cluster.<name>) is a Fleet resource with libs/model's strict codec; its example in
// docs/pipeline.md decodes with it and re-encodes to the same JSON.
TEST(RecordsTest, PipelineDocClusterExample) {
  auto examples = pipelineExamples();
  ASSERT_EQ(examples["Cluster"].size(), 1u);
  const std::string& text = examples["Cluster"][0];
  auto json = Json::parse(text);
  ASSERT_TRUE(json.ok()) << json.error().describe();
  auto cluster = model::decodeCluster(*json, "docs/pipeline.md");
  ASSERT_TRUE(cluster.ok()) << cluster.error().describe();
  EXPECT_EQ(model::encode(*cluster), *json) << model::encode(*cluster).dump();
  auto unknown = *json;
  unknown["status"]["agent"]["lastSeenTime"] = "2026-12-02T10:05:00.000Z";
  auto rejected = model::decodeCluster(unknown, "docs/pipeline.md");
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.error().describe().find("status.agent.lastSeenTime"), std::string::npos)
      << rejected.error().describe();
}

TEST(RecordsTest, KeyNames) {
  EXPECT_EQ(keyNames("group.ws.eu", "group", 2).value(), (std::vector<std::string>{"ws", "eu"}));
  EXPECT_EQ(keyNames(bundleSummaryKey("ws", "a.b"), "summary.bundle", 2).value(),
            (std::vector<std::string>{"ws", "a.b"}));
  EXPECT_EQ(keyNames("ws.app", "", 2).value(), (std::vector<std::string>{"ws", "app"}));
  EXPECT_FALSE(keyNames("group.ws", "group", 2).ok());
  EXPECT_FALSE(keyNames("cluster.ws.eu", "group", 2).ok());
  EXPECT_FALSE(keyNames("group.ws.=zz", "group", 2).ok());
}

}  // namespace
}  // namespace flotilla::events
