// flotilla/service/public_events.h
//
// The public CloudEvents a stage announces on flotilla.events.> (stream FLOTILLA_EVENTS, docs/events/cloudevents.md)
// next to its real work. They are informational: send() only queues the event and returns, a background thread
// publishes the queue in batches (bus::JetStream::publishAll), and a batch the server does not take is dropped —
// counted in public_event_failures_total{reason="publish"} and logged — so an events stream that is missing, full
// or unreachable never blocks, slows or fails the commit, render or deploy that caused the event. A queue that
// grows past its bound (a server gone for long) drops the newest events the same way (reason="queue-full").
// Each event carries a Nats-Msg-Id built from the fact it announces, so a redelivered message announcing the same
// fact again is dropped by JetStream.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flotilla/bus/jetstream.h"
#include "flotilla/core/metrics.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/service/background_thread.h"

namespace flotilla::service {

//! Events queued at most; more are dropped and counted.
inline constexpr size_t kPublicEventsMaxQueued = 10'000;

class PublicEvents {
 public:
  //! Starts the thread that publishes on `js` (null: every event is dropped and counted).
  PublicEvents(std::shared_ptr<bus::JetStream> js, Metrics& metrics, size_t max_queued = kPublicEventsMaxQueued);
  //! Publishes what is still queued, once, then stops.
  ~PublicEvents();
  PublicEvents(const PublicEvents&) = delete;
  PublicEvents& operator=(const PublicEvents&) = delete;
  PublicEvents(PublicEvents&&) = delete;
  PublicEvents& operator=(PublicEvents&&) = delete;

  //! Queues `event` for `subject` (events::eventsSubject) with Nats-Msg-Id "event/<type>/<event.id>"; never blocks
  //! on the server and never fails (a drop is counted and logged).
  void send(const events::CloudEvent& event, std::string subject);
  //! Publishes everything queued now, on the caller's thread (stop and tests).
  void flush();

 private:
  void loop();

  std::shared_ptr<bus::JetStream> js_;
  Metrics& metrics_;
  size_t max_queued_;
  std::mutex mutex_;
  std::vector<bus::JetStream::Outgoing> queue_;
  std::vector<std::string> types_;  //!< the type of each queued event, for public_events_total{type}
  std::mutex publish_mutex_;        //!< one batch at a time (the thread and flush())
  BackgroundThread thread_;         //!< declared last: stopped before the queue is destroyed
};

}  // namespace flotilla::service
