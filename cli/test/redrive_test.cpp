// `flotilla redrive` against a real nats-server: messages the consumer runtime terminated are listed,
// republished (or found superseded), and their records removed.
#include "flotilla/cli/redrive.h"

#include <atomic>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/hub.h"

namespace flotilla::cli {
namespace {

using namespace std::chrono_literals;

TEST(RedriveTest, ListsRepublishesAndDropsSupersededTerminatedMessages) {
  auto server = harness::NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  bus::ConnectOptions options;
  options.servers = {(*server)->url()};
  auto hub = service::connectHub(options, service::HubAccess::kProvision, nullptr);
  ASSERT_TRUE(hub.ok()) << hub.error().describe();

  service::ConsumerOptions consumer_options;
  consumer_options.service = "test";
  consumer_options.label = "commits";
  consumer_options.stream = service::kCommitsStream;
  consumer_options.config.durable = "redrive-test";
  consumer_options.config.filter_subject = "flotilla.commit.>";
  consumer_options.fetch_timeout = 200ms;
  Metrics metrics("test");
  std::atomic<int> poison_runs{0};
  {
    service::Consumer consumer(
        hub->js, consumer_options,
        [&](const bus::Message& message, const service::Delivery&) -> service::Outcome {
          if (message.data().find("poison") != std::string_view::npos) {
            ++poison_runs;
            throw std::runtime_error("poison");
          }
          return service::Outcome::ack("ok");
        },
        metrics, service::TerminationReports{.status = hub->status});
    ASSERT_TRUE(consumer.start().ok());
    ASSERT_TRUE(hub->js->publish("flotilla.commit.ws.a", "poison-a", "a-1").ok());
    ASSERT_TRUE(hub->js->publish("flotilla.commit.ws.b", "poison-b", "b-1").ok());
    for (int i = 0; i < 200 && poison_runs < 2; ++i) {
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(poison_runs, 2);
    std::this_thread::sleep_for(200ms);
    consumer.stop();
  }
  // A newer message on b's subject supersedes the terminated one.
  ASSERT_TRUE(hub->js->publish("flotilla.commit.ws.b", "fixed-b", "b-2").ok());

  RedriveArgs args;
  args.connect.url = (*server)->url();
  std::ostringstream out;
  std::ostringstream err;
  ASSERT_EQ(runRedrive(args, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("FLOTILLA_COMMITS/redrive-test/1  flotilla.commit.ws.a  HandlerThrew"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("FLOTILLA_COMMITS/redrive-test/2"), std::string::npos) << out.str();

  // Through the CLI's dispatcher, as a user runs it.
  std::istringstream in;
  out.str("");
  ASSERT_EQ(runCli({"--nats-url", (*server)->url(), "redrive", "all"}, in, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("FLOTILLA_COMMITS/redrive-test/1: republished on flotilla.commit.ws.a as sequence 4"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("FLOTILLA_COMMITS/redrive-test/2: superseded by sequence 3"), std::string::npos)
      << out.str();
  auto republished = hub->js->getMessage(service::kCommitsStream, 4);
  ASSERT_TRUE(republished.ok());
  EXPECT_EQ(republished->data(), "poison-a");
  EXPECT_EQ(republished->subject(), "flotilla.commit.ws.a");
  EXPECT_TRUE(hub->status->keys(events::kTerminatedFilter).value().empty());

  out.str("");
  ASSERT_EQ(runRedrive(args, out, err), 0);
  EXPECT_EQ(out.str(), "no terminated messages\n");
}

}  // namespace
}  // namespace flotilla::cli
