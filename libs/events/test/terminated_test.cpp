#include "flotilla/events/terminated.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"

namespace flotilla::events {
namespace {

MessageTerminated sample() {
  return MessageTerminated{.id = "0123456789abcdef0123456789abcdef",
                           .time = "2026-12-02T10:00:00.000Z",
                           .service = "scheduler",
                           .stream = "FLOTILLA_BUNDLES",
                           .consumer = "scheduler",
                           .subject = "flotilla.bundle.fleet-default.app",
                           .stream_sequence = 42,
                           .msg_id = "bundle/fleet-default/app/abc/deleted",
                           .deliveries = 10,
                           .reason = std::string(kTerminatedExhausted),
                           .message = "gave up after 10 deliveries; last result: retry"};
}

TEST(MessageTerminatedTest, RoundTripsStrictly) {
  auto json = encode(sample());
  auto decoded = decodeMessageTerminated(json);
  ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
  EXPECT_EQ(*decoded, sample());
  json["extra"] = 1;
  EXPECT_FALSE(decodeMessageTerminated(json).ok());
  auto missing = encode(sample());
  missing.erase("stream");
  EXPECT_FALSE(decodeMessageTerminated(missing).ok());
}

TEST(MessageTerminatedTest, KeySubjectAndCloudEvent) {
  EXPECT_EQ(terminatedKey("FLOTILLA_DEPLOY", "agent-c.1", 7), "terminated.FLOTILLA_DEPLOY.agent-c=2E1.7");
  EXPECT_EQ(terminatedSubject("FLOTILLA_DEPLOY", "agent-c"), "flotilla.events.message.FLOTILLA_DEPLOY.agent-c");
  auto event = toCloudEvent(sample(), "/flotilla/scheduler");
  EXPECT_EQ(event.type, "io.flotilla.message.terminated");
  EXPECT_EQ(event.subject, "FLOTILLA_BUNDLES/42");
  auto decoded = decodeMessageTerminated(event.data);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, sample());
}

// docs/events/terminated.md: both examples decode strictly and re-encode to exactly themselves.
TEST(MessageTerminatedTest, DocumentedExamplesDecodeAndReencodeExactly) {
  auto examples = test::jsonExamples("terminated.md");
  ASSERT_EQ(examples.size(), 2u);
  auto record = decodeMessageTerminated(examples[0]);
  ASSERT_TRUE(record.ok()) << record.error().describe();
  EXPECT_EQ(encode(*record), examples[0]);
  auto event = decodeCloudEvent(examples[1]);
  ASSERT_TRUE(event.ok()) << event.error().describe();
  EXPECT_EQ(encode(*event), examples[1]);
  EXPECT_EQ(event->type, cloudEventType("message", "terminated"));
  auto data = decodeMessageTerminated(event->data);
  ASSERT_TRUE(data.ok()) << data.error().describe();
  EXPECT_EQ(encode(*data), event->data);
  EXPECT_EQ(event->subject, data->stream + "/" + std::to_string(data->stream_sequence));
}

}  // namespace
}  // namespace flotilla::events
