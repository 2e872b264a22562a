// Manifest delivery (manifest_server.h, docs/pipeline.md "Manifest delivery"): the index of what each cluster may
// read, and the server against a real nats-server -js: a manifest in many chunks, the refusals (another cluster's
// manifest, a missing object, a bad request), the previous and the last applied manifest of a rollout, and in
// operator mode (the config `flotilla auth init` writes) an agent's credentials reaching only its own subject.
#include "flotilla/scheduler/manifest_server.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nats/nats.h>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/manifest.h"
#include "flotilla/events/records.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/identity/auth_dir.h"
#include "flotilla/identity/permissions.h"
#include "flotilla/identity/secret_file.h"
#include "flotilla/service/hub.h"
#include "flotilla/testing/temp_dir.h"

namespace flotilla::scheduler {
namespace {

using namespace std::chrono_literals;

const std::string kWs = "fleet-default";

// ---- the index ------------------------------------------------------------------------------------------------

TEST(ManifestIndexTest, AClusterMayReadOnlyWhatItsOwnRecordsReference) {
  ManifestIndex index;
  index.put("c1.ws.app", "c1", "aaa");
  index.put("c2.ws.app", "c2", "bbb");
  EXPECT_TRUE(index.allows("c1", "aaa"));
  EXPECT_FALSE(index.allows("c1", "bbb"));
  EXPECT_FALSE(index.allows("c2", "aaa"));
  EXPECT_FALSE(index.allows("c1", ""));
  index.remove("c1.ws.app");
  EXPECT_FALSE(index.allows("c1", "aaa"));
  EXPECT_TRUE(index.allows("c2", "bbb"));
}

// A record that moved on to a newer generation supersedes the DeployEvents before it (the agent skips them on the
// Superseded answer); the generation only grows, also when the same manifest is sent again (a commit followed).
TEST(ManifestIndexTest, ANewerGenerationSupersedesOlderDeploys) {
  ManifestIndex index;
  EXPECT_FALSE(index.supersedes("c1.ws.app", 1)) << "no record";
  index.put("c1.ws.app", "c1", "a", 3);
  EXPECT_TRUE(index.supersedes("c1.ws.app", 2));
  EXPECT_FALSE(index.supersedes("c1.ws.app", 3));
  EXPECT_FALSE(index.supersedes("c1.ws.app", 0)) << "a request without a deploy";
  index.put("c1.ws.app", "c1", "a", 5);
  EXPECT_TRUE(index.supersedes("c1.ws.app", 4));
  index.put("c1.ws.app", "c1", "b", 4);  // an older record read late does not move it back
  EXPECT_TRUE(index.supersedes("c1.ws.app", 4));
  index.remove("c1.ws.app");
  EXPECT_FALSE(index.supersedes("c1.ws.app", 4));
}

TEST(ManifestIndexTest, ARolloutKeepsThePreviousAndTheLastAppliedManifest) {
  ManifestIndex index;
  index.put("c1.ws.app", "c1", "a");
  index.applied("c1.ws.app", "a");
  index.put("c1.ws.app", "c1", "b");
  EXPECT_TRUE(index.allows("c1", "a"));  // the agent may still be applying the previous DeployEvent
  EXPECT_TRUE(index.allows("c1", "b"));
  index.put("c1.ws.app", "c1", "b");  // the same release again changes nothing
  index.put("c1.ws.app", "c1", "c");
  EXPECT_TRUE(index.allows("c1", "a")) << "the last applied manifest (helm.atomic reverts to it)";
  EXPECT_TRUE(index.allows("c1", "b"));
  index.applied("c1.ws.app", "c");
  index.put("c1.ws.app", "c1", "d");
  EXPECT_FALSE(index.allows("c1", "a"));
  EXPECT_FALSE(index.allows("c1", "b"));
  EXPECT_TRUE(index.allows("c1", "c"));
  EXPECT_TRUE(index.allows("c1", "d"));
  index.applied("c1.ws.app", "zzz");  // a report cannot widen what the cluster may read
  EXPECT_FALSE(index.allows("c1", "zzz"));
  // Two bundles of one cluster sharing a manifest: one leaving does not take it from the other.
  index.put("c1.ws.other", "c1", "d");
  index.remove("c1.ws.app");
  EXPECT_TRUE(index.allows("c1", "d"));
  EXPECT_FALSE(index.allows("c1", "c"));
}

// The reports and the records come through two watches: a report read after the record moved on still counts, as
// long as the record referenced the manifest lately.
TEST(ManifestIndexTest, AReportReadLateStillCounts) {
  ManifestIndex index;
  index.put("c1.ws.app", "c1", "m0");
  for (size_t i = 1; i <= ManifestIndex::kRecentManifests; ++i) {
    index.put("c1.ws.app", "c1", "m" + std::to_string(i));
  }
  index.applied("c1.ws.app", "m0");  // older than the last kRecentManifests
  EXPECT_FALSE(index.allows("c1", "m0"));
  index.applied("c1.ws.app", "m1");
  EXPECT_TRUE(index.allows("c1", "m1"));
}

// ---- the server -----------------------------------------------------------------------------------------------

std::string record(const std::string& cluster, const std::string& bundle, const std::string& manifest) {
  events::DeploymentRecord out{.cluster = cluster,
                               .workspace = kWs,
                               .bundle = bundle,
                               .deployment_id = manifest + ":oooo",
                               .manifest_id = manifest,
                               .generation = 1,
                               .updated = log::nowRfc3339()};
  return events::encode(out).dump();
}

std::string request(const std::string& manifest, int64_t offset) {
  return events::encode(
             events::ManifestRequest{
                 .id = events::newEventId(), .time = log::nowRfc3339(), .manifest_id = manifest, .offset = offset})
      .dump();
}

class ManifestServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = harness::NatsServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    server_ = std::move(server).value();
    auto hub = service::connectHub({.servers = {server_->url()}, .name = "manifest-test"},
                                   service::HubAccess::kProvision, nullptr);
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    hub_ = std::move(hub).value();
  }
  void TearDown() override {
    if (manifest_server_) {
      manifest_server_->stop();
    }
  }

  void startServer(ManifestServerOptions options = {}) {
    manifest_server_ = std::make_unique<ManifestServer>(hub_.connection, hub_.deployments, hub_.status, hub_.manifests,
                                                        metrics_, options);
    ASSERT_TRUE(manifest_server_->start().ok());
  }
  //! Stores `data` as a manifest; returns its id.
  std::string store(const std::string& data) {
    std::string id = sha256Hex(data);
    EXPECT_TRUE(hub_.manifests->put(events::manifestObjectName(id), data).ok());
    return id;
  }
  void deploy(const std::string& cluster, const std::string& bundle, const std::string& manifest) {
    ASSERT_TRUE(
        hub_.deployments->put(events::deploymentKey(cluster, kWs, bundle), record(cluster, bundle, manifest)).ok());
  }
  //! Asks on the cluster's subject through NATS, as an agent does.
  bus::Message ask(const std::string& cluster, const std::string& body) {
    auto reply = hub_.connection->request(events::manifestSubject(cluster), body, 5s);
    EXPECT_TRUE(reply.ok()) << reply.error().describe();
    return reply.ok() ? std::move(reply).value() : bus::Message();
  }
  //! Waits until `cluster` may read `manifest` (the watch has seen the record).
  bool allowed(const std::string& cluster, const std::string& manifest) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto reply = manifest_server_->answer(events::manifestSubject(cluster), request(manifest, 0));
      if (!reply.headers.contains(std::string(events::kManifestErrorHeader)) ||
          reply.headers.at(std::string(events::kManifestErrorHeader)) != events::kManifestNotDeployed) {
        return true;
      }
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  double requests(const std::string& result) { return metrics_.value("manifest_requests_total", {{"result", result}}); }

  std::unique_ptr<harness::NatsServer> server_;
  service::Hub hub_;
  Metrics metrics_{"scheduler"};
  std::unique_ptr<ManifestServer> manifest_server_;
};

// A manifest larger than one reply comes in chunks of at most max_chunk, each naming the object's size and digest;
// the chunks put together are the object.
TEST_F(ManifestServerTest, ServesAManifestInChunksWithItsSizeAndDigest) {
  std::string data;
  for (int i = 0; data.size() < (3u << 20); ++i) {
    data += "{\"object\":" + std::to_string(i) + ",\"padding\":\"" + std::string(200, 'x') + "\"},";
  }
  std::string id = store(data);
  deploy("c1", "app", id);
  ASSERT_NO_FATAL_FAILURE(startServer({.max_chunk = 256 * 1024}));
  std::string received;
  int chunks = 0;
  while (received.size() < data.size() || chunks == 0) {
    bus::Message reply = ask("c1", request(id, static_cast<int64_t>(received.size())));
    ASSERT_TRUE(reply.valid());
    ASSERT_FALSE(reply.header(events::kManifestErrorHeader)) << reply.data();
    EXPECT_EQ(reply.header(events::kManifestSizeHeader).value_or(""), std::to_string(data.size()));
    EXPECT_EQ(reply.header(events::kManifestOffsetHeader).value_or(""), std::to_string(received.size()));
    EXPECT_EQ(reply.header(events::kManifestDigestHeader).value_or(""), bus::objectDigest(sha256Raw(data)));
    ASSERT_LE(reply.data().size(), 256u * 1024u);
    ASSERT_FALSE(reply.data().empty());
    received += reply.data();
    ++chunks;
  }
  EXPECT_EQ(received, data);
  EXPECT_EQ(chunks, static_cast<int>((data.size() + 256 * 1024 - 1) / (256 * 1024)));
  EXPECT_EQ(requests("ok"), chunks);
  // Without max_chunk a reply is as large as the server allows, less the headroom for headers.
  manifest_server_->stop();
  ASSERT_NO_FATAL_FAILURE(startServer());
  bus::Message first = ask("c1", request(id, 0));
  EXPECT_EQ(static_cast<int64_t>(first.data().size()), hub_.connection->maxPayload() - kChunkHeadroom);
}

// The cluster comes from the subject: a manifest deployed only to another cluster is refused (NotDeployed, the same
// answer as for one that exists nowhere), logged and counted; so are a missing object, an offset past the end and an
// unreadable request.
TEST_F(ManifestServerTest, RefusesWhatTheAskingClusterIsNotDeployed) {
  std::string theirs = store("[{\"kind\":\"Secret\"}]");
  std::string mine = store("[]");
  std::string gone(64, 'f');
  deploy("c2", "app", theirs);
  deploy("c1", "app", mine);
  deploy("c1", "lost", gone);
  ASSERT_NO_FATAL_FAILURE(startServer());
  auto refused = [&](const std::string& cluster, const std::string& body) {
    bus::Message reply = ask(cluster, body);
    EXPECT_FALSE(reply.header(events::kManifestSizeHeader));
    return std::pair{reply.header(events::kManifestErrorHeader).value_or(""), std::string(reply.data())};
  };
  auto [reason, message] = refused("c1", request(theirs, 0));
  EXPECT_EQ(reason, events::kManifestNotDeployed);
  EXPECT_NE(message.find("no deployment of cluster c1 references manifest " + theirs), std::string::npos) << message;
  EXPECT_EQ(refused("c1", request(std::string(64, 'e'), 0)).first, events::kManifestNotDeployed);
  EXPECT_EQ(refused("c1", request(gone, 0)).first, events::kManifestNotFound);
  EXPECT_EQ(refused("c1", request(mine, 2)).first, events::kManifestBadRequest);
  auto [bad, why] = refused("c1", R"({"apiVersion":"events.flotilla.io/v1","kind":"ManifestRequest","offset":-1})");
  EXPECT_EQ(bad, events::kManifestBadRequest);
  EXPECT_NE(why.find("manifestID"), std::string::npos) << why;
  EXPECT_EQ(requests("NotDeployed"), 2);
  EXPECT_EQ(requests("NotFound"), 1);
  EXPECT_EQ(requests("BadRequest"), 2);
  EXPECT_FALSE(ask("c1", request(mine, 0)).header(events::kManifestErrorHeader));
  EXPECT_FALSE(ask("c2", request(theirs, 0)).header(events::kManifestErrorHeader));
}

// A rollout: while the record moves on, the previous manifest and the last one the agent reported as applied stay
// readable; older ones and removed records do not. The watch follows the records live.
TEST_F(ManifestServerTest, FollowsTheRecordsOfARollout) {
  std::string a = store("[1]");
  std::string b = store("[2]");
  std::string c = store("[3]");
  deploy("c1", "app", a);
  ASSERT_NO_FATAL_FAILURE(startServer());
  EXPECT_FALSE(manifest_server_->answer(events::manifestSubject("c1"), request(a, 0))
                   .headers.contains(std::string(events::kManifestErrorHeader)));
  events::BdStatus report{.cluster = "c1",
                          .workspace = kWs,
                          .bundle = "app",
                          .deployment_id = a + ":oooo",
                          .generation = 1,
                          .state = "Ready"};
  ASSERT_TRUE(hub_.status->put("bd.c1." + kWs + ".app", events::encode(report).dump()).ok());
  deploy("c1", "app", b);
  ASSERT_TRUE(allowed("c1", b));
  deploy("c1", "app", c);
  ASSERT_TRUE(allowed("c1", c));
  EXPECT_TRUE(allowed("c1", a)) << "the last applied manifest";
  auto reply = manifest_server_->answer(events::manifestSubject("c1"), request(b, 0));
  EXPECT_FALSE(reply.headers.contains(std::string(events::kManifestErrorHeader))) << "the previous manifest";
  ASSERT_TRUE(hub_.deployments->remove(events::deploymentKey("c1", kWs, "app")).ok());
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         !manifest_server_->answer(events::manifestSubject("c1"), request(c, 0))
              .headers.contains(std::string(events::kManifestErrorHeader))) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(manifest_server_->answer(events::manifestSubject("c1"), request(c, 0))
                .headers.at(std::string(events::kManifestErrorHeader)),
            events::kManifestNotDeployed);
}

// ---- operator mode --------------------------------------------------------------------------------------------

//! A raw libnats client with an identity's creds and inbox prefix (bus::Connection has no inbox prefix option).
struct RawClient {
  natsConnection* connection = nullptr;
  std::mutex mutex;
  std::vector<std::string> errors;  //!< asynchronous errors (a "Permissions Violation" arrives that way)

  ~RawClient() { natsConnection_Destroy(connection); }
  static void onError(natsConnection* nc, natsSubscription* /*sub*/, natsStatus status, void* closure) {
    auto* self = static_cast<RawClient*>(closure);
    const char* last = nullptr;
    natsConnection_GetLastError(nc, &last);
    std::lock_guard lock(self->mutex);
    self->errors.push_back(std::string(natsStatus_GetText(status)) + ": " + (last != nullptr ? last : ""));
  }
  bool sawError(const std::string& needle) {
    std::lock_guard lock(mutex);
    return std::any_of(errors.begin(), errors.end(),
                       [&](const std::string& e) { return e.find(needle) != std::string::npos; });
  }
  Status connect(const std::string& url, const std::string& creds, const std::string& inbox_prefix) {
    natsOptions* options = nullptr;
    natsOptions_Create(&options);
    natsOptions_SetURL(options, url.c_str());
    natsOptions_SetErrorHandler(options, &RawClient::onError, this);
    natsOptions_SetUserCredentialsFromFiles(options, creds.c_str(), nullptr);
    natsOptions_SetCustomInboxPrefix(options, inbox_prefix.c_str());
    // libnats 3.4.1 has about one valid .creds login in 256 refused (see bus::Connection::connect): try again.
    natsStatus s = NATS_OK;
    for (int attempt = 0; attempt < 4; ++attempt) {
      s = natsConnection_Connect(&connection, options);
      const char* detail = nats_GetLastError(nullptr);
      if (s == NATS_OK || detail == nullptr ||
          std::string(detail).find("Authorization Violation") == std::string::npos) {
        break;
      }
    }
    natsOptions_Destroy(options);
    if (s != NATS_OK) {
      return fail(ErrorKind::kPermanent, std::string("connect: ") + natsStatus_GetText(s));
    }
    return {};
  }
  //! The reply's headers and body; kTransient when nothing answered in time.
  Result<std::pair<bus::Headers, std::string>> request(const std::string& subject, const std::string& body) {
    natsMsg* reply = nullptr;
    natsStatus s = natsConnection_RequestString(&reply, connection, subject.c_str(), body.c_str(), 3000);
    if (s != NATS_OK) {
      return fail(ErrorKind::kTransient, std::string("request: ") + natsStatus_GetText(s));
    }
    bus::Headers headers;
    for (const char* name : {events::kManifestErrorHeader.data(), events::kManifestSizeHeader.data()}) {
      const char* value = nullptr;
      if (natsMsgHeader_Get(reply, name, &value) == NATS_OK && value != nullptr) {
        headers[name] = value;
      }
    }
    std::string data(natsMsg_GetData(reply), static_cast<size_t>(natsMsg_GetDataLength(reply)));
    natsMsg_Destroy(reply);
    return std::pair{headers, data};
  }
};

// With the generated identities: the scheduler (its own creds) serves c1's agent, whose creds let it ask on
// flotilla.manifest.c1 only; its request on c2's subject is refused by the server itself, and nothing answers it.
TEST(ManifestServerOperatorModeTest, AnAgentReachesOnlyItsOwnClustersSubject) {
  flotilla::testing::TempDir dir("flotilla-manifest-auth");
  ASSERT_TRUE(identity::initAuthDir({.dir = dir.path()}).ok());
  auto config = readFile(dir.path() + "/nats-auth.conf");
  ASSERT_TRUE(config.ok());
  auto nats = harness::NatsServer::start({.config = *config});
  ASSERT_TRUE(nats.ok()) << nats.error().describe();
  auto connect = [&](const char* role) {
    return service::connectHub({.servers = {(*nats)->url()},
                                .name = role,
                                .creds_file = dir.path() + "/creds/" + role + ".creds",
                                .max_reconnect = 0},
                               service::HubAccess::kProvision, nullptr, 20s);
  };
  auto admin = connect("admin");
  ASSERT_TRUE(admin.ok()) << admin.error().describe();
  std::string mine = "[\"c1\"]";
  std::string theirs = "[\"c2\"]";
  for (const auto& [cluster, data] : {std::pair{"c1", mine}, std::pair{"c2", theirs}}) {
    ASSERT_TRUE(admin->manifests->put(events::manifestObjectName(sha256Hex(data)), data).ok());
    ASSERT_TRUE(
        admin->deployments->put(events::deploymentKey(cluster, kWs, "app"), record(cluster, "app", sha256Hex(data)))
            .ok());
  }
  auto scheduler = connect("scheduler");
  ASSERT_TRUE(scheduler.ok()) << scheduler.error().describe();
  Metrics metrics("scheduler");
  ManifestServer server(scheduler->connection, scheduler->deployments, scheduler->status, scheduler->manifests,
                        metrics);
  ASSERT_TRUE(server.start().ok()) << (*nats)->logTail();

  identity::Role role = identity::agentRole("c1").value();
  auto issued = identity::issueFromAuthDir(dir.path(), role, std::chrono::hours(1));
  ASSERT_TRUE(issued.ok()) << issued.error().describe();
  std::string creds = dir.path() + "/" + identity::credsFileName(role);
  ASSERT_TRUE(identity::writeSecretFile(creds, issued->creds).ok());
  RawClient agent;
  ASSERT_TRUE(agent.connect((*nats)->url(), creds, role.inbox_prefix).ok());

  auto own = agent.request(events::manifestSubject("c1"), request(sha256Hex(mine), 0));
  ASSERT_TRUE(own.ok()) << own.error().describe() << "\n" << (*nats)->logTail();
  EXPECT_EQ(own->second, mine);
  EXPECT_EQ(own->first.at(std::string(events::kManifestSizeHeader)), std::to_string(mine.size()));
  // Its own subject, another cluster's manifest: the hub refuses.
  auto foreign = agent.request(events::manifestSubject("c1"), request(sha256Hex(theirs), 0));
  ASSERT_TRUE(foreign.ok()) << foreign.error().describe();
  EXPECT_EQ(foreign->first.at(std::string(events::kManifestErrorHeader)), events::kManifestNotDeployed);
  // Another cluster's subject: the server refuses the publish, nothing answers.
  auto other = agent.request(events::manifestSubject("c2"), request(sha256Hex(theirs), 0));
  EXPECT_FALSE(other.ok());
  EXPECT_TRUE(agent.sawError("Permissions Violation for Publish to \"flotilla.manifest.c2\"")) << (*nats)->logTail();
  EXPECT_EQ(metrics.value("manifest_requests_total", {{"result", "ok"}}), 1);
  server.stop();
}

}  // namespace
}  // namespace flotilla::scheduler
