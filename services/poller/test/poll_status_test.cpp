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

TEST(PollerStatusTest, DecodesOlderRecordsLeniently) {
  auto decoded = decodePollStatus(R"({"commit":"abc"})");
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->commit, "abc");
  EXPECT_EQ(decoded->failures, 0);
  EXPECT_FALSE(decodePollStatus("[1]").ok());
  EXPECT_FALSE(decodePollStatus("{").ok());
}

}  // namespace
}  // namespace flotilla::poller
