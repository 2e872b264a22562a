#include "flotilla/bus/errors.h"

#include <optional>
#include <string>

#include <nats/nats.h>

namespace flotilla::bus {
namespace {

bool contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// JetStream API error codes that decide the kind on their own, whatever the natsStatus.
std::optional<ErrorKind> classifyJsCode(int js_code) {
  switch (js_code) {
    case JSStreamNotFoundErr:
    case JSConsumerNotFoundErr:
    case JSNoMessageFoundErr:
    case JSSequenceNotFoundErr:
      return ErrorKind::kNotFound;
    case JSStreamWrongLastSequenceErr:
    case JSStreamWrongLastMsgIDErr:
    case JSStreamNameExistErr:
    case JSConsumerNameExistErr:
    case JSConsumerExistingActiveErr:
    case JSConsumerReplacementWithDifferentNameErr:
    case JSStreamSubjectOverlapErr:
      return ErrorKind::kConflict;
    case JSBadRequestErr:
    case JSInvalidJSONErr:
    case JSStreamInvalidConfig:
    case JSStreamUpdateErr:
    case JSStreamMessageExceedsMaximumErr:
    case JSConsumerBadDurableNameErr:
    case JSConsumerNameTooLongErr:
    case JSConsumerFilterNotSubsetErr:
    case JSConsumerMaxDeliverBackoffErr:
    case JSConsumerInvalidPolicyErr:
    case JSStreamReplicasNotSupportedErr:
    case JSStreamMaxBytesRequiredErr:
      return ErrorKind::kInvalid;
    case JSInsufficientResourcesErr:
    case JSStorageResourcesExceededErr:
    case JSMemoryResourcesExceededErr:
      return ErrorKind::kStoreFull;
    case JSClusterNotAvailErr:
    case JSClusterNotLeaderErr:
    case JSClusterNoPeersErr:
    case JSStreamOfflineErr:
    case JSConsumerOfflineErr:
      return ErrorKind::kTransient;
    case JSNotEnabledErr:
    case JSNotEnabledForAccountErr:
    case JSNoAccountErr:
    case JSMaximumStreamsLimitErr:
    case JSMaximumConsumersLimitErr:
    case JSAccountResourcesExceededErr:
    case JSStreamSealedErr:
      return ErrorKind::kPermanent;
    default:
      return std::nullopt;
  }
}

}  // namespace

ErrorKind classifyNatsError(int status, int js_code, std::string_view text) {
  // libnats reports "no responders" to a JetStream call as JSNotEnabledErr, but it mostly means that no stream
  // captures the subject yet or JetStream is restarting: worth retrying.
  if (status == NATS_NO_RESPONDERS) {
    return ErrorKind::kTransient;
  }
  // A stream at its max_bytes (discard new) answers a publish with the generic "store failed" code and this text.
  if (contains(text, "maximum bytes exceeded") || contains(text, "maximum messages exceeded") ||
      contains(text, "insufficient resources") || contains(text, "insufficient storage")) {
    return ErrorKind::kStoreFull;
  }
  if (auto kind = classifyJsCode(js_code)) {
    return *kind;
  }
  // The KV API reports a failed compare-and-set as a plain NATS_ERR whose text carries the server's message.
  if (contains(text, "wrong last sequence") || contains(text, "wrong last msg ID")) {
    return ErrorKind::kConflict;
  }
  switch (static_cast<natsStatus>(status)) {
    case NATS_TIMEOUT:
    case NATS_NO_SERVER:
    case NATS_CONNECTION_CLOSED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_IO_ERROR:
    case NATS_STALE_CONNECTION:
    case NATS_NOT_YET_CONNECTED:
    case NATS_NO_RESPONDERS:
    case NATS_DRAINING:
    case NATS_SLOW_CONSUMER:
    case NATS_MISSED_HEARTBEAT:
    case NATS_MISMATCH:
      return ErrorKind::kTransient;
    case NATS_NOT_FOUND:
      return ErrorKind::kNotFound;
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_TIMEOUT:
    case NATS_INVALID_QUEUE_NAME:
    case NATS_ADDRESS_MISSING:
    case NATS_MAX_PAYLOAD:
    case NATS_LINE_TOO_LONG:
      return ErrorKind::kInvalid;
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED:
    case NATS_SECURE_CONNECTION_WANTED:
    case NATS_SECURE_CONNECTION_REQUIRED:
    case NATS_NO_SERVER_SUPPORT:
      return ErrorKind::kPermanent;
    case NATS_SSL_ERROR:
      // A handshake the server closed half-way (its TLS timeout passed while thousands of clients connected at once)
      // succeeds when tried again; a certificate that does not verify does not.
      if (contains(text, "unexpected eof") || contains(text, "Connection reset")) {
        return ErrorKind::kTransient;
      }
      return ErrorKind::kPermanent;
    case NATS_ERR:
      if (contains(text, "timeout") || contains(text, "timed out")) {
        return ErrorKind::kTransient;
      }
      if (contains(text, "Permissions Violation") || contains(text, "Authorization Violation")) {
        return ErrorKind::kPermanent;
      }
      return ErrorKind::kInternal;
    default:
      return ErrorKind::kInternal;
  }
}

Error natsError(int status, std::string_view where, int js_code, std::string_view detail) {
  std::string message = natsStatus_GetText(static_cast<natsStatus>(status));
  if (!detail.empty() && detail != message) {
    message += ": ";
    message += detail;
  }
  if (js_code != 0) {
    message += " (jetstream error " + std::to_string(js_code) + ")";
  }
  return makeError(classifyNatsError(status, js_code, detail), std::move(message), std::string(where));
}

Error storeFullError(Error error, std::string_view what, std::string_view name) {
  error.kind = ErrorKind::kStoreFull;
  error.message = std::string(what) + " " + std::string(name) + std::string(kStoreFullMarker) + error.message;
  return error;
}

Error storeFullInStream(Error error, std::string_view stream) {
  if (stream.substr(0, 3) == "KV_") {
    return storeFullError(std::move(error), "KV bucket", stream.substr(3));
  }
  if (stream.substr(0, 4) == "OBJ_") {
    return storeFullError(std::move(error), "object store", stream.substr(4));
  }
  return storeFullError(std::move(error), "stream", stream.empty() ? std::string_view("unknown") : stream);
}

std::string fullStoreName(const Error& error) {
  if (error.kind != ErrorKind::kStoreFull) {
    return {};
  }
  const size_t marker = error.message.find(kStoreFullMarker);
  if (marker == std::string::npos) {
    return "unknown";
  }
  const size_t space = error.message.rfind(' ', marker == 0 ? 0 : marker - 1);
  return error.message.substr(space == std::string::npos ? 0 : space + 1,
                              marker - (space == std::string::npos ? 0 : space + 1));
}

Error lastNatsError(int status, std::string_view where, int js_code) {
  natsStatus last_status = NATS_OK;
  const char* text = nats_GetLastError(&last_status);
  // The thread's last error may belong to an earlier call if this one failed without recording text.
  std::string_view detail = (text != nullptr && last_status == static_cast<natsStatus>(status)) ? text : "";
  return natsError(status, where, js_code, detail);
}

}  // namespace flotilla::bus
