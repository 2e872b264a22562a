// bus::StreamReader against a real nats-server: an ordered consumer replays a stream from its start or from a time,
// reads only the subjects asked for, says when nothing matched, and keeps delivering what is published later.
#include "flotilla/bus/stream_reader.h"

#include <gtest/gtest.h>

#include "bus_test_util.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;

class StreamReaderTest : public testing::BusTest {
 protected:
  void setUpBus() override {
    stream_ = harness::uniqueName("R");
    prefix_ = harness::uniqueName("rd");
    auto info = js_->ensureStream({.name = stream_, .subjects = {prefix_ + ".>"}, .storage = StorageType::kMemory});
    ASSERT_TRUE(info.ok()) << info.error().describe();
  }
  void tearDownBus() override { (void)js_->deleteStream(stream_); }

  std::string subject(std::string_view leaf) const { return prefix_ + "." + std::string(leaf); }

  //! The data of every message `reader` delivers until one says nothing is pending behind it.
  static std::vector<std::string> readToTheEnd(StreamReader& reader) {
    std::vector<std::string> out;
    while (true) {
      auto next = reader.next(5s);
      EXPECT_TRUE(next.ok() && next->has_value()) << (next.ok() ? "nothing in time" : next.error().describe());
      if (!next.ok() || !next->has_value()) {
        return out;
      }
      out.emplace_back((*next)->data());
      auto meta = (*next)->metadata();
      if (!meta.ok() || meta->num_pending == 0) {
        return out;
      }
    }
  }

  std::string stream_;
  std::string prefix_;
};

TEST_F(StreamReaderTest, ReplaysFromTheStartOnlyTheSubjectsAskedForAndFollows) {
  for (const char* leaf : {"a.1", "b.1", "a.2"}) {
    ASSERT_TRUE(js_->publish(subject(leaf), leaf).ok());
  }
  auto reader = StreamReader::open(js_, {.stream = stream_, .subject = subject("a.>")});
  ASSERT_TRUE(reader.ok()) << reader.error().describe();
  EXPECT_FALSE(reader->startedEmpty());
  EXPECT_EQ(readToTheEnd(*reader), (std::vector<std::string>{"a.1", "a.2"}));
  // Published after the replay: delivered to the same reader.
  ASSERT_TRUE(js_->publish(subject("b.2"), "b.2").ok());
  ASSERT_TRUE(js_->publish(subject("a.3"), "a.3").ok());
  auto next = reader->next(5s);
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->data(), "a.3");
}

TEST_F(StreamReaderTest, StartsAtATimeAndSaysWhenNothingMatches) {
  ASSERT_TRUE(js_->publish(subject("a.old"), "old").ok());
  // A start after every stored message: nothing to replay.
  const int64_t later =
      std::chrono::duration_cast<std::chrono::nanoseconds>((std::chrono::system_clock::now() + 1h).time_since_epoch())
          .count();
  auto empty = StreamReader::open(js_, {.stream = stream_, .subject = subject(">"), .start_time_ns = later});
  ASSERT_TRUE(empty.ok()) << empty.error().describe();
  EXPECT_TRUE(empty->startedEmpty());
  auto none = StreamReader::open(js_, {.stream = stream_, .subject = subject("c.>")});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->startedEmpty()) << "no message on the filter";
  // A start before it: the message is replayed.
  const int64_t earlier =
      std::chrono::duration_cast<std::chrono::nanoseconds>((std::chrono::system_clock::now() - 1h).time_since_epoch())
          .count();
  auto since = StreamReader::open(js_, {.stream = stream_, .subject = subject(">"), .start_time_ns = earlier});
  ASSERT_TRUE(since.ok());
  EXPECT_FALSE(since->startedEmpty());
  EXPECT_EQ(readToTheEnd(*since), std::vector<std::string>{"old"});
}

TEST_F(StreamReaderTest, AMissingStreamIsNotFound) {
  auto reader = StreamReader::open(js_, {.stream = "NO_SUCH_STREAM", .subject = "nowhere.>"});
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.error().kind, ErrorKind::kNotFound) << reader.error().describe();
}

}  // namespace
}  // namespace flotilla::bus
