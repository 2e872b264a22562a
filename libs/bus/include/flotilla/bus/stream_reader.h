// flotilla/bus/stream_reader.h
//
// Reading a stream from a point in time without a durable: an ordered consumer (ephemeral, no acks, flow controlled,
// recreated by the client on a gap), so a user who may create consumers but not durables or acks — the readonly
// role — can replay and follow a stream such as FLOTILLA_EVENTS. Messages arrive in stream order, each once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/owned_impl.h"

namespace flotilla::bus {

struct StreamReaderOptions {
  std::string stream;
  //! The subjects to read: the stream's own ("flotilla.events.>") for all of it, or a narrower filter.
  std::string subject;
  //! Start at the first message stored at or after this time (ns since the epoch); nullopt = the stream's first.
  std::optional<int64_t> start_time_ns;
};

namespace detail {
struct StreamReaderImpl;
}  // namespace detail

//! An ordered consumer on one stream. Move-only; destroying it removes the subscription, and the server drops the
//! ephemeral consumer once nobody listens. next() from one thread at a time.
class StreamReader : public detail::OwnedImpl<detail::StreamReaderImpl, std::unique_ptr<detail::StreamReaderImpl>> {
 public:
  using Impl = detail::StreamReaderImpl;
  using OwnedImpl::OwnedImpl;

  //! Creates the consumer. kNotFound when the stream does not exist.
  static Result<StreamReader> open(const std::shared_ptr<JetStream>& js, const StreamReaderOptions& options);

  //! The next message, waiting at most `timeout`; nullopt when none came in time. Message::metadata() tells its
  //! stream sequence and how many matching messages were stored behind it (num_pending).
  Result<std::optional<Message>> next(std::chrono::milliseconds timeout);
  //! Whether the consumer had nothing to deliver when it was created: no stored message matched (a reader that
  //! stops at the end of what is stored is then done at once).
  [[nodiscard]] bool startedEmpty() const;
};

}  // namespace flotilla::bus
