#include "flotilla/bus/errors.h"

#include <gtest/gtest.h>
#include <nats/nats.h>

namespace flotilla::bus {
namespace {

// Connectivity failures are retried later.
TEST(BusNatsErrorTest, ConnectivityFailuresAreTransient) {
  for (natsStatus s : {NATS_TIMEOUT, NATS_NO_SERVER, NATS_CONNECTION_CLOSED, NATS_CONNECTION_DISCONNECTED,
                       NATS_IO_ERROR, NATS_NO_RESPONDERS, NATS_STALE_CONNECTION}) {
    EXPECT_EQ(classifyNatsError(s, 0, ""), ErrorKind::kTransient) << natsStatus_GetText(s);
  }
}

// libnats tags "no responders" on a JetStream call with JSNotEnabledErr; no stream for the subject yet or
// JetStream restarting are the usual causes, so it is retried.
TEST(BusNatsErrorTest, NoRespondersIsTransientEvenWithJetStreamCode) {
  EXPECT_EQ(classifyNatsError(NATS_NO_RESPONDERS, JSNotEnabledErr, ""), ErrorKind::kTransient);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSNotEnabledErr, "jetstream not enabled"), ErrorKind::kPermanent);
}

TEST(BusNatsErrorTest, NotFoundByStatusAndByJetStreamCode) {
  EXPECT_EQ(classifyNatsError(NATS_NOT_FOUND, 0, ""), ErrorKind::kNotFound);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStreamNotFoundErr, "stream not found"), ErrorKind::kNotFound);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSConsumerNotFoundErr, "consumer not found"), ErrorKind::kNotFound);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSNoMessageFoundErr, "no message found"), ErrorKind::kNotFound);
}

// Optimistic concurrency failures are conflicts, whether the code or only the text survives.
TEST(BusNatsErrorTest, WrongLastSequenceIsConflict) {
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStreamWrongLastSequenceErr, "wrong last sequence: 5"), ErrorKind::kConflict);
  EXPECT_EQ(classifyNatsError(NATS_ERR, 0, "wrong last sequence: 5"), ErrorKind::kConflict);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStreamNameExistErr, ""), ErrorKind::kConflict);
}

TEST(BusNatsErrorTest, BadArgumentsAreInvalid) {
  EXPECT_EQ(classifyNatsError(NATS_INVALID_ARG, 0, ""), ErrorKind::kInvalid);
  EXPECT_EQ(classifyNatsError(NATS_INVALID_SUBJECT, 0, ""), ErrorKind::kInvalid);
  EXPECT_EQ(classifyNatsError(NATS_MAX_PAYLOAD, 0, ""), ErrorKind::kInvalid);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStreamInvalidConfig, "bad config"), ErrorKind::kInvalid);
}

TEST(BusNatsErrorTest, AuthAndTlsArePermanent) {
  EXPECT_EQ(classifyNatsError(NATS_CONNECTION_AUTH_FAILED, 0, ""), ErrorKind::kPermanent);
  EXPECT_EQ(classifyNatsError(NATS_NOT_PERMITTED, 0, ""), ErrorKind::kPermanent);
  EXPECT_EQ(classifyNatsError(NATS_SSL_ERROR, 0, ""), ErrorKind::kPermanent);
  EXPECT_EQ(classifyNatsError(NATS_ERR, 0, "Permissions Violation for Publish to \"x\""), ErrorKind::kPermanent);
}

// Seen with 10,000 TLS clients connecting at once (bench_fleet_scale 10000x1): the server gave up on a slow handshake.
TEST(BusNatsErrorTest, AHandshakeTheServerClosedIsTransientAndABadCertificateIsNot) {
  EXPECT_EQ(classifyNatsError(NATS_SSL_ERROR, 0, "SSL handshake error: unexpected eof while reading"),
            ErrorKind::kTransient);
  EXPECT_EQ(classifyNatsError(NATS_SSL_ERROR, 0, "SSL handshake error: certificate verify failed"),
            ErrorKind::kPermanent);
}

TEST(BusNatsErrorTest, UnknownFailuresAreInternal) {
  EXPECT_EQ(classifyNatsError(NATS_ERR, 0, "something odd"), ErrorKind::kInternal);
  EXPECT_EQ(classifyNatsError(NATS_NO_MEMORY, 0, ""), ErrorKind::kInternal);
}

// The Error keeps the libnats function, the status text, the detail and the JetStream code.
TEST(BusNatsErrorTest, ErrorCarriesWhereTextAndCode) {
  Error error = natsError(NATS_ERR, "js_PublishMsg", JSStreamWrongLastSequenceErr, "wrong last sequence: 7");
  EXPECT_EQ(error.kind, ErrorKind::kConflict);
  EXPECT_EQ(error.where, "js_PublishMsg");
  EXPECT_NE(error.message.find("wrong last sequence: 7"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("10071"), std::string::npos) << error.message;
  EXPECT_NE(error.describe().find("js_PublishMsg"), std::string::npos);
}

TEST(BusNatsErrorTest, LastErrorTextIsIgnoredWhenItBelongsToAnotherStatus) {
  Error error = lastNatsError(NATS_TIMEOUT, "natsConnection_Request");
  EXPECT_EQ(error.kind, ErrorKind::kTransient);
  EXPECT_EQ(error.where, "natsConnection_Request");
}

// A stream at its max_bytes answers with the generic store-failed code and "maximum bytes exceeded"; the server
// out of storage with its own codes. All are kStoreFull: retried with backoff, never given up.
TEST(BusNatsErrorTest, FullStoresAreStoreFull) {
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStreamStoreFailedErr, "maximum bytes exceeded"), ErrorKind::kStoreFull);
  EXPECT_EQ(classifyNatsError(NATS_ERR, 0, "nats: maximum bytes exceeded"), ErrorKind::kStoreFull);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStreamStoreFailedErr, "maximum messages exceeded"), ErrorKind::kStoreFull);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSInsufficientResourcesErr, ""), ErrorKind::kStoreFull);
  EXPECT_EQ(classifyNatsError(NATS_ERR, JSStorageResourcesExceededErr, ""), ErrorKind::kStoreFull);
  EXPECT_TRUE(makeError(ErrorKind::kStoreFull, "x").retryable());
}

TEST(BusNatsErrorTest, StoreFullErrorsNameTheStore) {
  Error cause = natsError(NATS_ERR, "js_PublishMsg", JSStreamStoreFailedErr, "maximum bytes exceeded");
  Error object = storeFullInStream(cause, "OBJ_sources");
  EXPECT_EQ(object.kind, ErrorKind::kStoreFull);
  EXPECT_EQ(object.message.rfind("object store sources is full: ", 0), 0u) << object.message;
  EXPECT_EQ(fullStoreName(object), "sources");
  EXPECT_EQ(fullStoreName(storeFullInStream(cause, "KV_status")), "status");
  EXPECT_EQ(storeFullInStream(cause, "KV_status").message.rfind("KV bucket status is full: ", 0), 0u);
  EXPECT_EQ(fullStoreName(storeFullInStream(cause, "FLOTILLA_COMMITS")), "FLOTILLA_COMMITS");
  EXPECT_EQ(fullStoreName(makeError(ErrorKind::kTransient, "timeout")), "");
  EXPECT_EQ(fullStoreName(makeError(ErrorKind::kStoreFull, "no name")), "unknown");
}

}  // namespace
}  // namespace flotilla::bus
