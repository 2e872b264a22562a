// Unit tests of the poll status record.
#include "flotilla/poller/poll_status.h"

#include <gtest/gtest.h>

namespace flotilla::poller {
namespace {

TEST(PollerStatusTest, RoundTrips) {
  PollStatus status;
  status.workspace = "fleet-default";
  status.gitrepo = "app";
  status.repo = "https://h/r";
  status.commit = std::string(40, 'a');
  status.polling_commit = std::string(40, 'b');
  status.source_object = std::string(64, 'c');
  status.changed = true;
  status.force_sync_generation = 2;
  status.spec_hash = "h";
  status.observed_generation = 5;
  status.last_poll_time = "2026-12-02T10:00:00.000Z";
  status.last_error = "boom";
  status.last_error_kind = "Transient";
  status.failures = 3;
  auto decoded = decodePollStatus(encode(status).dump());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, status);
  const std::string json = encode(status).dump();
  for (const char* key : {"\"pollingCommit\"", "\"lastPollTime\"", "\"lastErrorTime\"", "\"nextPollTime\"",
                          "\"failures\"", "\"observedGeneration\"", "\"forceSyncGeneration\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
}

TEST(PollerStatusTest, DecodesStrictly) {
  auto missing = decodePollStatus(R"({"commit":"abc"})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("PollStatus.workspace: required field is missing"), std::string::npos);
  auto unknown = decodePollStatus(R"({"workspace":"ws","gitrepo":"app","colour":"red"})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("PollStatus.colour: unknown field"), std::string::npos);
  EXPECT_FALSE(decodePollStatus("[1]").ok());
  EXPECT_FALSE(decodePollStatus("{").ok());
}

}  // namespace
}  // namespace flotilla::poller
