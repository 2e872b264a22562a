#include <functional>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "bus_test_util.h"

namespace flotilla::bus {
namespace {

using namespace std::chrono_literals;

class BusJetStreamTest : public testing::BusTest {
 protected:
  void setUpBus() override {
    stream_ = harness::uniqueName("S");
    prefix_ = harness::uniqueName("js");
    auto info = js_->ensureStream({.name = stream_, .subjects = {prefix_ + ".>"}, .storage = StorageType::kMemory});
    ASSERT_TRUE(info.ok()) << info.error().describe();
  }
  void tearDownBus() override { (void)js_->deleteStream(stream_); }

  std::string subject(std::string_view leaf) const { return prefix_ + "." + std::string(leaf); }

  // Publishes `data` on subject(leaf), makes the durable pull consumer `config` filtered to that subject, binds
  // it into `consumer` and fetches the one message into `first`.
  void deliverOne(std::string_view leaf, std::string_view data, ConsumerConfig config, PullConsumer& consumer,
                  std::vector<Message>& first) {
    ASSERT_TRUE(js_->publish(subject(leaf), data).ok());
    config.filter_subject = subject(leaf);
    ASSERT_TRUE(js_->ensureConsumer(stream_, config).ok());
    auto bound = js_->bindPull(stream_, config.durable);
    ASSERT_TRUE(bound.ok());
    consumer = std::move(*bound);
    auto fetched = consumer.fetch(1, 5s);
    ASSERT_TRUE(fetched.ok());
    ASSERT_EQ(fetched->size(), 1u);
    first = std::move(*fetched);
  }

  //! What `consumer.fetch(16, 30s)` returns when `meanwhile` runs 300 ms into its wait, and in `took` how long the
  //! fetch took.
  static Result<std::vector<Message>> fetchWhile(PullConsumer& consumer, const std::function<void()>& meanwhile,
                                                 std::chrono::steady_clock::duration& took) {
    Result<std::vector<Message>> batch = std::vector<Message>{};
    auto start = std::chrono::steady_clock::now();
    std::thread fetcher([&] { batch = consumer.fetch(16, 30s); });
    std::this_thread::sleep_for(300ms);
    meanwhile();
    fetcher.join();
    took = std::chrono::steady_clock::now() - start;
    return batch;
  }

  std::string stream_;
  std::string prefix_;
};

TEST_F(BusJetStreamTest, EnsureStreamIsIdempotentAndUpdates) {
  StreamConfig config{.name = stream_, .subjects = {prefix_ + ".>"}, .storage = StorageType::kMemory};
  ASSERT_TRUE(js_->ensureStream(config).ok());
  config.max_msgs_per_subject = 1;
  auto updated = js_->ensureStream(config);
  ASSERT_TRUE(updated.ok()) << updated.error().describe();
  ASSERT_TRUE(js_->publish(subject("a"), "1").ok());
  ASSERT_TRUE(js_->publish(subject("a"), "2").ok());
  auto info = js_->streamInfo(stream_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, 1u);  // the update took effect

  // The server cannot move a stream between storage types: a configuration error for the caller.
  config.storage = StorageType::kFile;
  auto refused = js_->ensureStream(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalid) << refused.error().describe();
}

TEST_F(BusJetStreamTest, StreamInfoOfMissingStreamIsNotFound) {
  auto info = js_->streamInfo(harness::uniqueName("MISSING"));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().kind, ErrorKind::kNotFound) << info.error().describe();
}

// The same Nats-Msg-Id twice stores one message; the second ack says duplicate.
TEST_F(BusJetStreamTest, PublishDeduplicatesByMsgId) {
  auto first = js_->publish(subject("commit"), "payload", "commit-abc");
  ASSERT_TRUE(first.ok()) << first.error().describe();
  EXPECT_FALSE(first->duplicate);
  EXPECT_EQ(first->stream, stream_);
  auto second = js_->publish(subject("commit"), "payload", "commit-abc");
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->duplicate);
  EXPECT_EQ(second->sequence, first->sequence);
  auto third = js_->publish(subject("commit"), "payload", "commit-def");
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->duplicate);
  auto info = js_->streamInfo(stream_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, 2u);
}

// publishAll: every message stored, acks in the batch's order, Nats-Msg-Id deduplication as for one publish, and
// more messages than it keeps in flight at once.
TEST_F(BusJetStreamTest, PublishAllStoresEveryMessageAndAcksInOrder) {
  const size_t count = static_cast<size_t>(JetStream::kPublishAllInFlight) + 904;
  std::vector<JetStream::Outgoing> batch;
  for (size_t i = 0; i < count; ++i) {
    batch.push_back({.subject = subject("d" + std::to_string(i % 7)),
                     .data = std::to_string(i),
                     .msg_id = "m-" + std::to_string(i)});
  }
  auto acks = js_->publishAll(batch);
  ASSERT_TRUE(acks.ok()) << acks.error().describe();
  ASSERT_EQ(acks->size(), count);
  std::set<uint64_t> sequences;
  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ((*acks)[i].stream, stream_);
    EXPECT_FALSE((*acks)[i].duplicate) << i;
    sequences.insert((*acks)[i].sequence);
  }
  EXPECT_EQ(sequences.size(), count) << "each message its own sequence";
  auto stored = js_->getMessage(stream_, (*acks)[4321].sequence);
  ASSERT_TRUE(stored.ok()) << stored.error().describe();
  EXPECT_EQ(stored->data(), "4321") << "the ack at a place is the message at that place";

  // The redo of a batch (after a failure) stores nothing twice.
  batch.resize(10);
  auto again = js_->publishAll(batch);
  ASSERT_TRUE(again.ok()) << again.error().describe();
  for (size_t i = 0; i < again->size(); ++i) {
    EXPECT_TRUE((*again)[i].duplicate) << i;
    EXPECT_EQ((*again)[i].sequence, (*acks)[i].sequence);
  }
  auto info = js_->streamInfo(stream_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, count);
  auto none = js_->publishAll({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// A message of a batch that no stream takes fails the batch (kTransient, naming its subject); the others are
// stored all the same.
TEST_F(BusJetStreamTest, PublishAllFailsOnAMessageNoStreamTakes) {
  const std::string nowhere = harness::uniqueName("nostream") + ".x";
  auto acks = js_->publishAll({{.subject = subject("a"), .data = "1"},
                               {.subject = nowhere, .data = "2"},
                               {.subject = subject("b"), .data = "3"}});
  ASSERT_FALSE(acks.ok());
  EXPECT_EQ(acks.error().kind, ErrorKind::kTransient) << acks.error().describe();
  EXPECT_NE(acks.error().message.find(nowhere), std::string::npos) << acks.error().message;
  auto info = js_->streamInfo(stream_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, 2u);

  // publishEach says which: the caller records what was stored and redoes only the rest.
  auto each = js_->publishEach({{.subject = subject("c"), .data = "4", .msg_id = "c-4"},
                                {.subject = nowhere, .data = "5"},
                                {.subject = subject("d"), .data = "6", .msg_id = "d-6"}});
  ASSERT_EQ(each.size(), 3u);
  EXPECT_TRUE(each[0].ok());
  ASSERT_FALSE(each[1].ok());
  EXPECT_EQ(each[1].error().kind, ErrorKind::kTransient) << each[1].error().describe();
  ASSERT_TRUE(each[2].ok()) << each[2].error().describe();
  EXPECT_EQ(each[2]->stream, stream_);
}

TEST_F(BusJetStreamTest, PublishToSubjectWithoutStreamIsTransient) {
  auto ack = js_->publish(harness::uniqueName("nostream") + ".x", "data");
  ASSERT_FALSE(ack.ok());
  EXPECT_EQ(ack.error().kind, ErrorKind::kTransient) << ack.error().describe();
}

// A durable consumer keeps every unacked message across a client restart: publish N, take some, ack some,
// drop the whole client, come back, bind the same durable, and get exactly the ones not acked.
TEST_F(BusJetStreamTest, DurableConsumerKeepsUnackedMessagesAcrossClientRestart) {
  constexpr int kMessages = 10;
  std::set<uint64_t> all;
  for (int i = 0; i < kMessages; ++i) {
    auto ack = js_->publish(subject("work"), "job-" + std::to_string(i), "job-" + std::to_string(i));
    ASSERT_TRUE(ack.ok());
    all.insert(ack->sequence);
  }
  ASSERT_TRUE(
      js_->ensureConsumer(stream_, {.durable = "worker", .filter_subject = subject("work"), .ack_wait = 1s}).ok());
  std::set<uint64_t> acked;
  {
    auto conn = Connection::connect({.servers = {server_->url()}, .name = "first-life"});
    ASSERT_TRUE(conn.ok());
    auto js = JetStream::create(*conn);
    ASSERT_TRUE(js.ok());
    auto consumer = (*js)->bindPull(stream_, "worker");
    ASSERT_TRUE(consumer.ok()) << consumer.error().describe();
    auto batch = consumer->fetch(6, 5s);
    ASSERT_TRUE(batch.ok()) << batch.error().describe();
    ASSERT_EQ(batch->size(), 6u);
    for (size_t i = 0; i < 3; ++i) {
      auto meta = (*batch)[i].metadata();
      ASSERT_TRUE(meta.ok());
      EXPECT_EQ(meta->num_delivered, 1u);
      ASSERT_TRUE((*batch)[i].ackSync().ok());
      acked.insert(meta->stream_sequence);
    }
    // The other three stay unacked; the client then goes away (subscription, context, connection).
  }

  auto conn = Connection::connect({.servers = {server_->url()}, .name = "second-life"});
  ASSERT_TRUE(conn.ok());
  auto js = JetStream::create(*conn);
  ASSERT_TRUE(js.ok());
  auto consumer = (*js)->bindPull(stream_, "worker");
  ASSERT_TRUE(consumer.ok()) << consumer.error().describe();  // the durable survived (G3)
  std::multiset<uint64_t> received;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (received.size() < all.size() - acked.size() && std::chrono::steady_clock::now() < deadline) {
    auto batch = consumer->fetch(10, 2s);
    ASSERT_TRUE(batch.ok()) << batch.error().describe();
    for (auto& msg : *batch) {
      received.insert(msg.metadata()->stream_sequence);
      ASSERT_TRUE(msg.ackSync().ok());
    }
  }
  std::set<uint64_t> expected;
  std::set_difference(all.begin(), all.end(), acked.begin(), acked.end(), std::inserter(expected, expected.end()));
  EXPECT_EQ(std::set<uint64_t>(received.begin(), received.end()), expected);
  EXPECT_EQ(received.size(), expected.size()) << "a message came twice";
  auto extra = consumer->fetch(10, 1500ms);
  ASSERT_TRUE(extra.ok());
  EXPECT_TRUE(extra->empty());
  auto info = consumer->info();
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->num_pending, 0u);
  EXPECT_EQ(info->num_ack_pending, 0);
}

TEST_F(BusJetStreamTest, FetchWithNothingPendingIsEmptyNotAnError) {
  ASSERT_TRUE(js_->ensureConsumer(stream_, {.durable = "idle"}).ok());
  auto consumer = js_->bindPull(stream_, "idle");
  ASSERT_TRUE(consumer.ok());
  auto start = std::chrono::steady_clock::now();
  auto batch = consumer->fetch(5, 300ms);
  ASSERT_TRUE(batch.ok()) << batch.error().describe();
  EXPECT_TRUE(batch->empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
}

// A fetch of a batch returns with the first message that arrives during its wait, not when the batch is full or
// the wait is over (libnats' own batch fetch holds it): a long wait costs the agents no latency.
TEST_F(BusJetStreamTest, AFetchReturnsWithTheFirstMessageThatArrivesDuringItsWait) {
  ASSERT_TRUE(js_->ensureConsumer(stream_, {.durable = "waiting", .filter_subject = subject("w")}).ok());
  auto consumer = js_->bindPull(stream_, "waiting");
  ASSERT_TRUE(consumer.ok());
  std::chrono::steady_clock::duration took{};
  auto batch = fetchWhile(
      *consumer, [&] { EXPECT_TRUE(js_->publish(subject("w"), "one").ok()); }, took);
  ASSERT_TRUE(batch.ok()) << batch.error().describe();
  ASSERT_EQ(batch->size(), 1u);
  EXPECT_EQ((*batch)[0].data(), "one");
  EXPECT_LT(took, 15s) << "the fetch waited out its 30 s";
  ASSERT_TRUE((*batch)[0].ack().ok());

  // Messages already there come at once, up to the batch.
  for (const char* data : {"a", "b", "c"}) {
    ASSERT_TRUE(js_->publish(subject("w"), data).ok());
  }
  auto ready = consumer->fetch(2, 30s);
  ASSERT_TRUE(ready.ok()) << ready.error().describe();
  EXPECT_EQ(ready->size(), 2u);
  auto rest = consumer->fetch(16, 30s);
  ASSERT_TRUE(rest.ok()) << rest.error().describe();
  EXPECT_EQ(rest->size(), 1u);
}

// interrupt() wakes a fetch waiting on another thread; the durable stays and a new binding reads it.
TEST_F(BusJetStreamTest, InterruptWakesAWaitingFetchAndKeepsTheDurable) {
  ASSERT_TRUE(js_->ensureConsumer(stream_, {.durable = "stopping", .filter_subject = subject("s")}).ok());
  auto consumer = js_->bindPull(stream_, "stopping");
  ASSERT_TRUE(consumer.ok());
  std::chrono::steady_clock::duration took{};
  auto batch = fetchWhile(
      *consumer, [&] { consumer->interrupt(); }, took);
  EXPECT_LT(took, 15s) << "the fetch waited out its 30 s";
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.error().kind, ErrorKind::kTransient) << batch.error().describe();
  EXPECT_FALSE(consumer->fetch(1, 100ms).ok()) << "an interrupted consumer fetches nothing more";

  ASSERT_TRUE(js_->publish(subject("s"), "kept").ok());
  auto again = js_->bindPull(stream_, "stopping");
  ASSERT_TRUE(again.ok()) << again.error().describe();
  auto fetched = again->fetch(1, 5s);
  ASSERT_TRUE(fetched.ok()) << fetched.error().describe();
  ASSERT_EQ(fetched->size(), 1u);
  EXPECT_EQ((*fetched)[0].data(), "kept");
}

TEST_F(BusJetStreamTest, NakWithDelayRedeliversAfterTheDelay) {
  PullConsumer consumer;
  std::vector<Message> first;
  ASSERT_NO_FATAL_FAILURE(deliverOne("retry", "flaky", {.durable = "retrier"}, consumer, first));
  EXPECT_EQ(first[0].deliveryCount(), 1u);
  auto nak_time = std::chrono::steady_clock::now();
  ASSERT_TRUE(first[0].nakWithDelay(1s).ok());

  auto early = consumer.fetch(1, 300ms);
  ASSERT_TRUE(early.ok());
  EXPECT_TRUE(early->empty()) << "redelivered before the delay";
  auto again = consumer.fetch(1, 5s);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - nak_time, 900ms);
  EXPECT_EQ((*again)[0].deliveryCount(), 2u);
  EXPECT_EQ((*again)[0].data(), "flaky");
  EXPECT_TRUE((*again)[0].ack().ok());
}

TEST_F(BusJetStreamTest, PlainNakRedeliversAtOnce) {
  PullConsumer consumer;
  std::vector<Message> first;
  ASSERT_NO_FATAL_FAILURE(deliverOne("nak", "x", {.durable = "naker"}, consumer, first));
  ASSERT_TRUE(first[0].nak().ok());
  auto again = consumer.fetch(1, 2s);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].deliveryCount(), 2u);
}

TEST_F(BusJetStreamTest, TermStopsRedelivery) {
  PullConsumer consumer;
  std::vector<Message> first;
  ASSERT_NO_FATAL_FAILURE(deliverOne("poison", "bad", {.durable = "terminator", .ack_wait = 500ms}, consumer, first));
  ASSERT_TRUE(first[0].term().ok());
  // Well past ack_wait: an unacked message would be back by now.
  auto again = consumer.fetch(1, 1500ms);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  auto info = consumer.info();
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->num_ack_pending, 0);
}

TEST_F(BusJetStreamTest, InProgressExtendsTheAckDeadline) {
  PullConsumer consumer;
  std::vector<Message> first;
  ASSERT_NO_FATAL_FAILURE(deliverOne("slow", "x", {.durable = "slowpoke", .ack_wait = 800ms}, consumer, first));
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(400ms);
    ASSERT_TRUE(first[0].inProgress().ok());
  }
  // 1.2 s after delivery, beyond ack_wait, the message has not come back.
  auto again = consumer.fetch(1, 300ms);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(first[0].ackSync().ok());
}

// Binding never creates a durable (G3): a missing one is kNotFound and stays missing.
TEST_F(BusJetStreamTest, BindPullToMissingDurableIsNotFound) {
  auto consumer = js_->bindPull(stream_, "ghost");
  ASSERT_FALSE(consumer.ok());
  EXPECT_EQ(consumer.error().kind, ErrorKind::kNotFound) << consumer.error().describe();
  auto info = js_->consumerInfo(stream_, "ghost");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().kind, ErrorKind::kNotFound);
}

TEST_F(BusJetStreamTest, EnsureConsumerUpdatesWhatItCanAndRefusesTheRest) {
  ConsumerConfig config{.durable = "evolving", .filter_subject = subject("a"), .ack_wait = 5s};
  ASSERT_TRUE(js_->ensureConsumer(stream_, config).ok());
  ASSERT_TRUE(js_->ensureConsumer(stream_, config).ok());  // idempotent
  config.ack_wait = 10s;
  config.max_deliver = 5;
  auto updated = js_->ensureConsumer(stream_, config);
  ASSERT_TRUE(updated.ok()) << updated.error().describe();
  config.deliver_policy = DeliverPolicy::kNew;
  auto refused = js_->ensureConsumer(stream_, config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kConflict) << refused.error().describe();
}

TEST_F(BusJetStreamTest, DeleteConsumer) {
  ASSERT_TRUE(js_->ensureConsumer(stream_, {.durable = "doomed"}).ok());
  ASSERT_TRUE(js_->deleteConsumer(stream_, "doomed").ok());
  auto again = js_->deleteConsumer(stream_, "doomed");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().kind, ErrorKind::kNotFound) << again.error().describe();
}

TEST_F(BusJetStreamTest, RedeliveryFollowsBackoff) {
  PullConsumer consumer;
  std::vector<Message> first;
  ASSERT_NO_FATAL_FAILURE(
      deliverOne("backoff", "x", {.durable = "backer", .max_deliver = 3, .backoff = {200ms, 1500ms}}, consumer, first));
  auto t0 = std::chrono::steady_clock::now();
  auto second = consumer.fetch(1, 3s);  // after ~200 ms
  ASSERT_EQ(second->size(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1200ms);
  EXPECT_EQ((*second)[0].deliveryCount(), 2u);
  auto early = consumer.fetch(1, 600ms);  // the next redelivery waits 1.5 s
  EXPECT_TRUE(early->empty());
}

TEST_F(BusJetStreamTest, LastMessagePerSubjectAndPurge) {
  ASSERT_TRUE(js_->publish(subject("state.a"), "v1").ok());
  ASSERT_TRUE(js_->publish(subject("state.a"), "v2", {}, {{"X-Kind", "state"}}).ok());
  ASSERT_TRUE(js_->publish(subject("state.b"), "w1").ok());
  auto last = js_->getLastMessage(stream_, subject("state.a"));
  ASSERT_TRUE(last.ok()) << last.error().describe();
  EXPECT_EQ(last->data(), "v2");
  EXPECT_EQ(last->header("X-Kind").value_or(""), "state");
  EXPECT_EQ(last->sequence(), 2u);
  auto by_sequence = js_->getMessage(stream_, 1);
  ASSERT_TRUE(by_sequence.ok());
  EXPECT_EQ(by_sequence->data(), "v1");

  auto counts = js_->streamInfo(stream_, subject("state.>"));
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->subjects[subject("state.a")], 2u);
  EXPECT_EQ(counts->subjects[subject("state.b")], 1u);

  ASSERT_TRUE(js_->purgeSubject(stream_, subject("state.a")).ok());
  auto gone = js_->getLastMessage(stream_, subject("state.a"));
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().kind, ErrorKind::kNotFound) << gone.error().describe();
  auto info = js_->streamInfo(stream_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->messages, 1u);
}

TEST_F(BusJetStreamTest, MetadataOfACoreMessageIsInvalid) {
  auto last = js_->publish(subject("m"), "x");
  ASSERT_TRUE(last.ok());
  auto msg = js_->getLastMessage(stream_, subject("m"));
  ASSERT_TRUE(msg.ok());
  EXPECT_EQ(msg->metadata().error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(msg->deliveryCount(), 0u);
}

}  // namespace
}  // namespace flotilla::bus
