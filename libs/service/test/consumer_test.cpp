#include "flotilla/service/consumer.h"

#include <gtest/gtest.h>

namespace flotilla::service {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesPerAttemptUpToTheCap) {
  Backoff backoff(milliseconds(500), milliseconds(3000));
  EXPECT_EQ(backoff.delay(0), milliseconds(500));
  EXPECT_EQ(backoff.delay(1), milliseconds(500));
  EXPECT_EQ(backoff.delay(2), milliseconds(1000));
  EXPECT_EQ(backoff.delay(3), milliseconds(2000));
  EXPECT_EQ(backoff.delay(4), milliseconds(3000));
  EXPECT_EQ(backoff.delay(1000), milliseconds(3000));
}

TEST(OutcomeForTest, OneMappingFromErrorKindToSettlement) {
  Backoff backoff(milliseconds(100), milliseconds(1000));
  auto retry = outcomeFor(makeError(ErrorKind::kTransient, "down"), 3, 1, backoff);
  EXPECT_EQ(retry.action, Outcome::Action::kRetry);
  EXPECT_EQ(retry.delay, milliseconds(400));
  EXPECT_EQ(outcomeFor(makeError(ErrorKind::kConflict, "x"), 1, 1, backoff).action, Outcome::Action::kRetry);
  // Waiting backs off by attempt, not by delivery count (it uses no delivery).
  auto wait = outcomeFor(makeError(ErrorKind::kWait, "dependency"), 1, 2, backoff);
  EXPECT_EQ(wait.action, Outcome::Action::kWait);
  EXPECT_EQ(wait.delay, milliseconds(200));
  // A full store waits too: it must never use up the deliveries and get the work terminated.
  auto full = outcomeFor(makeError(ErrorKind::kStoreFull, "object store sources is full: ..."), 9, 3, backoff);
  EXPECT_EQ(full.action, Outcome::Action::kWait);
  EXPECT_EQ(full.delay, milliseconds(400));
  for (auto kind : {ErrorKind::kInvalid, ErrorKind::kNotFound, ErrorKind::kPermanent, ErrorKind::kInternal}) {
    auto outcome = outcomeFor(makeError(kind, "no"), 1, 1, backoff);
    EXPECT_EQ(outcome.action, Outcome::Action::kReject);
    EXPECT_EQ(outcome.result, errorKindName(kind));
  }
}

TEST(DeliveryTest, KeepsPositionalInitialisation) {
  Delivery delivery{7, 2};
  EXPECT_EQ(delivery.stream_sequence, 7u);
  EXPECT_EQ(delivery.delivery_count, 2u);
  EXPECT_EQ(delivery.attempt, 1u);
  delivery.progress();  // the default does nothing
}

}  // namespace
}  // namespace flotilla::service
