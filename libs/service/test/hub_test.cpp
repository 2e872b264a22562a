#include "flotilla/service/hub.h"

#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/harness/nats_server.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/store_usage.h"

namespace flotilla::service {
namespace {

bus::ConnectOptions optionsFor(const harness::NatsServer& server) {
  bus::ConnectOptions options;
  options.servers = {server.url()};
  options.name = "hub-test";
  return options;
}

TEST(HubTest, ProvisionCreatesTheWholeTopologyIdempotently) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  Metrics metrics("hubtest");
  auto hub = connectHub(optionsFor(**server), HubAccess::kProvision, &metrics);
  ASSERT_TRUE(hub.ok()) << hub.error().describe();
  for (const char* stream : {kCommitsStream, kBundlesStream, kDeployStream, kStatusStream, kEventsStream}) {
    EXPECT_TRUE(hub->js->streamInfo(stream).ok()) << stream;
  }
  ASSERT_TRUE(hub->gitrepos && hub->clusters && hub->bundles && hub->deployments && hub->status);
  ASSERT_TRUE(hub->manifests && hub->sources);
  // A second service provisioning the same hub changes nothing and succeeds.
  auto again = connectHub(optionsFor(**server), HubAccess::kProvision, &metrics);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_TRUE(again->js->publish("flotilla.commit.ws.repo", "{}", "id-1").ok());
}

// nats-server 2.15 allows 1,000 consumers per stream unless the stream says otherwise; FLOTILLA_DEPLOY holds one
// durable per registered cluster, so it says kMaxDeployConsumers, also on a stream provisioned before.
TEST(HubTest, TheDeployStreamTakesADurableForEachOfMoreThanAThousandClusters) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto hub = connectHub(optionsFor(**server), HubAccess::kProvision, nullptr);
  ASSERT_TRUE(hub.ok()) << hub.error().describe();
  auto info = hub->js->streamInfo(kDeployStream);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->max_consumers, kMaxDeployConsumers);
  for (int i = 0; i < 1005; ++i) {
    auto created = hub->js->ensureConsumer(kDeployStream, agentDeployConsumer("c" + std::to_string(i)));
    ASSERT_TRUE(created.ok()) << "cluster " << i << ": " << created.error().describe();
  }
  // A stream made without the setting (as before it existed) gets it when a service provisions the hub.
  bus::StreamConfig old{.name = "FLOTILLA_DEPLOY", .subjects = {"flotilla.deploy.>"}};
  ASSERT_TRUE(hub->js->deleteStream(kDeployStream).ok());
  ASSERT_TRUE(hub->js->ensureStream(old).ok());
  ASSERT_TRUE(connectHub(optionsFor(**server), HubAccess::kProvision, nullptr).ok());
  EXPECT_EQ(hub->js->streamInfo(kDeployStream)->max_consumers, kMaxDeployConsumers);
}

TEST(HubTest, AgentAccessOpensNoBucket) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok());
  auto agent = connectHub(optionsFor(**server), HubAccess::kAgent, nullptr);
  ASSERT_TRUE(agent.ok()) << agent.error().describe();
  EXPECT_TRUE(agent->js != nullptr);
  EXPECT_TRUE(agent->manifests == nullptr);
  EXPECT_TRUE(agent->gitrepos == nullptr);
}

TEST(HubTest, StartupWaitsForNatsAndCountsRetries) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok());
  auto options = optionsFor(**server);
  ASSERT_TRUE((*server)->stop().ok());
  Metrics metrics("hubtest");
  // The server is restarted from this thread (the harness ties a server's life to the thread that started it),
  // while the service connects from another.
  std::optional<Result<Hub>> hub;
  std::thread connector([&] { hub = connectHub(options, HubAccess::kProvision, &metrics, std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE((*server)->restart().ok());
  connector.join();
  ASSERT_TRUE(hub->ok()) << hub->error().describe();
  EXPECT_GE(metrics.value("hub_connect_retries_total"), 1);
}

TEST(HubTest, GivesUpAfterTheDeadline) {
  auto port = harness::freeTcpPort();
  ASSERT_TRUE(port.ok());
  bus::ConnectOptions options;
  options.servers = {"nats://127.0.0.1:" + std::to_string(*port)};
  auto hub = connectHub(options, HubAccess::kProvision, nullptr, std::chrono::milliseconds(800));
  ASSERT_FALSE(hub.ok());
  EXPECT_EQ(hub.error().kind, ErrorKind::kTransient);
}

TEST(HubTest, StoreUsageGaugesEveryStoreWithItsCapAndNothingOnceTheHubIsGone) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  Metrics metrics("hubtest");
  {
    auto hub = connectHub(optionsFor(**server), HubAccess::kProvision, &metrics);
    ASSERT_TRUE(hub.ok()) << hub.error().describe();
    exportStoreUsage(metrics, hub->js);
    ASSERT_TRUE(hub->gitrepos->put("a", std::string(1000, 'x')).ok());
    const std::string text = metrics.exposition();
    for (const auto& [store, share] : kStoreShares) {
      EXPECT_NE(text.find("flotilla_hubtest_store_bytes{store=\"" + std::string(store) + "\"}"), std::string::npos)
          << store << "\n"
          << text;
      const std::string cap = std::to_string(StoreLimits::fromBudget(kDefaultStoreBudget).of(store));
      EXPECT_NE(text.find("flotilla_hubtest_store_max_bytes{store=\"" + std::string(store) + "\"} " + cap),
                std::string::npos)
          << store << "\n"
          << text;
    }
    auto info = hub->js->streamInfo(streamOfStore(kGitReposBucket));
    ASSERT_TRUE(info.ok());
    EXPECT_GT(info->bytes, 1000u);
    EXPECT_NE(text.find("flotilla_hubtest_store_bytes{store=\"gitrepos\"} " + std::to_string(info->bytes)),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(metrics.exposition().find("store_bytes{"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::service
