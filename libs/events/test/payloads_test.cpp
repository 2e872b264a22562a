#include "flotilla/events/payloads.h"

#include <gtest/gtest.h>

#include "flotilla/events/subjects.h"
#include "flotilla/model/state.h"
#include "sample_events.h"
#include "test_support.h"

namespace flotilla::events {
namespace {

constexpr const char* kTime = "2026-12-02T10:00:00.123Z";

CommitEvent sampleCommit() {
  return CommitEvent{.id = commitMsgId("ws", "repo", "abc", 1),
                     .time = kTime,
                     .workspace = "ws",
                     .gitrepo = "repo",
                     .repo = "https://git.example.com/repo.git",
                     .branch = "main",
                     .commit = "abc",
                     .previous_commit = "abb",
                     .paths = {"apps/*"},
                     .force_sync_generation = 1,
                     .gitrepo_generation = 2,
                     .changed = false,
                     .source_object = std::string(64, 'e')};
}

DeployEvent sampleDeploy() {
  return DeployEvent{.id = "d1",
                     .time = kTime,
                     .cluster = "eu-1",
                     .workspace = "ws",
                     .bundle = "repo-apps-web",
                     .deployment_id = std::string(64, 'b') + ":" + std::string(64, 'c'),
                     .manifest_id = std::string(64, 'b'),
                     .options = Json::obj({{"namespace", "web-prod"}}),
                     .depends_on = Json(Json::Array{Json::obj({{"name", "repo-infra"}})}),
                     .commit = "abc",
                     .generation = 9};
}

//! The agent's report on sampleDeploy().
StatusEvent sampleStatus() {
  const DeployEvent deployed = sampleDeploy();
  return StatusEvent{.id = "s1",
                     .time = kTime,
                     .cluster = deployed.cluster,
                     .workspace = deployed.workspace,
                     .bundle = deployed.bundle,
                     .deployment_id = deployed.deployment_id,
                     .generation = deployed.generation,
                     .sequence = 4,
                     .state = "ErrApplied",
                     .reason = "ApplyFailed",
                     .message = "forbidden",
                     .resources = {ObjectResult{"v1", "ConfigMap", "web", "cfg", "ErrApplied", "forbidden"}},
                     .agent_version = "0.1.0"};
}

template <typename T>
void expectRoundTrip(const T& value) {
  Json json = encode(value);
  EXPECT_EQ(json.getString("apiVersion"), "events.flotilla.io/v1");
  EXPECT_EQ(json.getString("kind"), T::kKind);
  auto decoded = decodePayload<T>(json);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe() << "\n" << json.pretty();
  EXPECT_EQ(*decoded, value);
  auto parsed = parsePayload<T>(json.dump());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, value);
  auto kind = payloadKind(json);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, T::kKind);
}

TEST(PayloadsTest, EveryKindRoundTrips) {
  expectRoundTrip(sampleCommit());
  expectRoundTrip(test::sampleBundleEvent());
  BundleEvent failed = test::sampleBundleEvent();
  failed.manifest_id.clear();
  failed.rollout_strategy = Json();
  failed.error = RenderError{"apps/web/fleet.yaml", 12, "helm.chart: expected a string"};
  expectRoundTrip(failed);
  BundleEvent gone{.id = "g",
                   .time = kTime,
                   .workspace = "ws",
                   .gitrepo = "repo",
                   .bundle = "old",
                   .commit = "abc",
                   .deleted = true};
  expectRoundTrip(gone);
  // Rendered per cluster: the variants table replaces the manifestID, which is then not required.
  BundleEvent per_cluster = test::sampleBundleEvent();
  per_cluster.manifest_id.clear();
  per_cluster.variants_object = "variants-" + std::string(64, 'e');
  expectRoundTrip(per_cluster);
  per_cluster.variants_object.clear();
  EXPECT_FALSE(decodePayload<BundleEvent>(encode(per_cluster)).ok());
  expectRoundTrip(sampleDeploy());
  DeployEvent removal{
      .id = "d2", .time = kTime, .cluster = "eu-1", .workspace = "ws", .bundle = "b", .remove = true, .generation = 10};
  expectRoundTrip(removal);
  expectRoundTrip(sampleStatus());
  expectRoundTrip(RegisterRequest{.id = "r1",
                                  .time = kTime,
                                  .cluster = "eu-1",
                                  .workspace = "ws",
                                  .labels = {{"env", "prod"}},
                                  .kubernetes_version = "v1.31.2",
                                  .agent_version = "0.1.0",
                                  .api_versions = {"apps/v1", "apps/v1/Deployment", "v1", "v1/ConfigMap"}});
  expectRoundTrip(RegisterReply{.id = "r2", .time = kTime, .accepted = true, .cluster_id = "eu-1"});
  expectRoundTrip(RegisterReply{.id = "r3", .time = kTime, .accepted = false, .message = "unknown cluster"});
  expectRoundTrip(Heartbeat{.id = "h1", .time = kTime, .cluster = "eu-1", .agent_version = "0.1.0"});
}

TEST(PayloadsTest, EncodingIsCanonicalAndComplete) {
  Json json = encode(Heartbeat{.id = "h1", .time = kTime, .cluster = "eu-1"});
  EXPECT_EQ(json.dump(),
            R"({"agentVersion":"","apiVersion":"events.flotilla.io/v1","cluster":"eu-1","id":"h1","kind":"Heartbeat",)"
            R"("time":"2026-12-02T10:00:00.123Z"})");
}

TEST(PayloadsTest, DecodingIsStrict) {
  Json json = encode(sampleDeploy());
  json["extra"] = 1;
  json["options"] = "x";
  json.erase("generation");
  auto r = decodePayload<DeployEvent>(json);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalid);
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("DeployEvent.options: expected a map, got a string"), std::string::npos) << m;
  EXPECT_NE(m.find("DeployEvent.generation: required field is missing"), std::string::npos) << m;
  EXPECT_NE(m.find("DeployEvent.extra: unknown field"), std::string::npos) << m;
}

TEST(PayloadsTest, EnvelopeIsChecked) {
  Json json = encode(sampleCommit());
  json["apiVersion"] = "events.flotilla.io/v2";
  test::expectProblem(decodePayload<CommitEvent>(json), "unsupported apiVersion \"events.flotilla.io/v2\"");
  EXPECT_FALSE(payloadKind(json).ok());

  test::expectProblem(decodePayload<BundleEvent>(encode(sampleCommit())),
                      "BundleEvent.kind: expected BundleEvent, got \"CommitEvent\"");

  Json timed = encode(sampleCommit());
  timed["time"] = "yesterday";
  test::expectProblem(decodePayload<CommitEvent>(timed), "CommitEvent.time: expected an RFC 3339 time");

  Json no_id = encode(sampleCommit());
  no_id.erase("id");
  EXPECT_FALSE(decodePayload<CommitEvent>(no_id).ok());
  EXPECT_FALSE(parsePayload<CommitEvent>("{not json").ok());
  EXPECT_FALSE(decodePayload<CommitEvent>(Json("string")).ok());
}

TEST(PayloadsTest, KindSpecificRules) {
  Json bundle = encode(test::sampleBundleEvent());
  bundle["manifestID"] = "";
  auto missing = decodePayload<BundleEvent>(bundle);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("BundleEvent.manifestID: must not be empty"), std::string::npos);

  Json status = encode(sampleStatus());
  status["state"] = "Broken";
  status["resources"].asArray()[0]["state"] = "Meh";
  auto state = decodePayload<StatusEvent>(status);
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.error().message.find("StatusEvent.state: unknown bundle state \"Broken\""), std::string::npos);
  EXPECT_NE(state.error().message.find("StatusEvent.resources[0].state: unknown bundle state \"Meh\""),
            std::string::npos)
      << state.error().message;

  Json deploy = encode(sampleDeploy());
  deploy.erase("deploymentID");
  test::expectProblem(decodePayload<DeployEvent>(deploy), "DeployEvent.deploymentID: required field is missing");
  deploy["delete"] = true;
  EXPECT_TRUE(decodePayload<DeployEvent>(deploy).ok());

  Json reply = encode(RegisterReply{.id = "r", .time = kTime, .accepted = true});
  test::expectProblem(decodePayload<RegisterReply>(reply), "RegisterReply.clusterID: required when accepted is true");

  Json labels = encode(RegisterRequest{.id = "r", .time = kTime, .cluster = "c"});
  labels["labels"] = Json::obj({{"env", 1}});
  test::expectProblem(decodePayload<RegisterRequest>(labels),
                      "RegisterRequest.labels.env: expected a string, got a number");
}

// apiVersions: Helm's .Capabilities.APIVersions entries, sorted and unique, so equal sets encode equally.
TEST(PayloadsTest, RegisterRequestApiVersionsAreCheckedEntries) {
  RegisterRequest request{.id = "r", .time = kTime, .cluster = "c"};
  EXPECT_EQ(encode(request).at({"apiVersions"})->dump(), "[]") << "an empty set is encoded (not reported)";
  auto decoded = decodePayload<RegisterRequest>(encode(request));
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->api_versions.empty());

  request.api_versions = {"example.com/v1", "example.com/v1/Widget", "v1", "v1/Pod"};
  EXPECT_TRUE(decodePayload<RegisterRequest>(encode(request)).ok());

  request.api_versions = {"v1/Pod", "v1"};
  test::expectProblem(decodePayload<RegisterRequest>(encode(request)),
                      "RegisterRequest.apiVersions[1]: entries must be sorted and unique");
  request.api_versions = {"v1", "v1"};
  test::expectProblem(decodePayload<RegisterRequest>(encode(request)),
                      "RegisterRequest.apiVersions[1]: entries must be sorted and unique");
  request.api_versions = {"apps/v1,example.com/v1"};
  test::expectProblem(decodePayload<RegisterRequest>(encode(request)),
                      "RegisterRequest.apiVersions[0]: \"apps/v1,example.com/v1\" contains a comma");
  request.api_versions = {"a/b/c/d"};
  test::expectProblem(decodePayload<RegisterRequest>(encode(request)),
                      "RegisterRequest.apiVersions[0]: \"a/b/c/d\" is not group/version or group/version/Kind");
  for (const char* bad : {"", "/v1", "apps//Deployment", "apps/v1/", "v1 Pod"}) {
    request.api_versions = {bad};
    EXPECT_FALSE(decodePayload<RegisterRequest>(encode(request)).ok()) << bad;
  }
  Json wrong_type = encode(RegisterRequest{.id = "r", .time = kTime, .cluster = "c"});
  wrong_type["apiVersions"] = Json(Json::Array{Json(1)});
  test::expectProblem(decodePayload<RegisterRequest>(wrong_type),
                      "RegisterRequest.apiVersions[0]: expected a string, got a number");
}

TEST(PayloadsTest, RandomIds) {
  EXPECT_NE(newEventId(), newEventId());
  EXPECT_EQ(newEventId().size(), 32u);
}

TEST(PayloadsTest, Rfc3339) {
  for (const char* ok : {"2026-12-02T10:00:00Z", "2026-12-02T10:00:00.123Z", "2026-12-02T10:00:00+02:00",
                         "2026-12-02t10:00:00.5-05:30"}) {
    EXPECT_TRUE(isRfc3339(ok)) << ok;
  }
  for (const char* bad : {"", "2026-12-02", "2026-12-02 10:00:00Z", "2026-12-02T10:00:00", "2026-12-02T10:00:00.Z",
                          "2026-12-02T10:00:00+0200", "x026-12-02T10:00:00Z"}) {
    EXPECT_FALSE(isRfc3339(bad)) << bad;
  }
}

// The events library keeps its own copy of the state names to stay a leaf; it must match libs/model.
TEST(PayloadsTest, StateNamesMatchTheModel) {
  for (model::BundleState state : model::kAllStates) {
    StatusEvent s = sampleStatus();
    s.state = std::string(model::stateName(state));
    EXPECT_TRUE(decodePayload<StatusEvent>(encode(s)).ok()) << s.state;
  }
}

}  // namespace
}  // namespace flotilla::events
