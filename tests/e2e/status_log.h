// tests/e2e/status_log.h
//
// Every StatusEvent the agents published, in stream order, read back from the FLOTILLA_STATUS stream by sequence
// (the stream keeps each report; JetStream stored it once per Nats-Msg-Id). Tests assert on the whole history of
// a bundle on a cluster — "no ErrApplied or WaitApplied on the way", "the new bundle's first report is Ready" —
// not only on the last record the scheduler kept. Reading the stream instead of subscribing means nothing is
// missed between starting a recorder and the event, and reports from before a mark are still there when needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/core/time.h"
#include "flotilla/events/payloads.h"
#include "hub_fixture.h"

namespace flotilla::e2e {

//! One StatusEvent as stored, with its stream sequence.
struct RecordedStatus {
  uint64_t sequence = 0;
  events::StatusEvent event;
};

class StatusLog {
 public:
  explicit StatusLog(Hub& hub) : hub_(hub) {}

  //! The stream's last sequence now: pass it as `after` to see only what is reported from here on.
  uint64_t mark();
  //! Every StatusEvent for `bundle` on `cluster` with a sequence greater than `after`, in stream order.
  std::vector<RecordedStatus> of(const std::string& cluster, const std::string& bundle, uint64_t after = 0);
  //! The states of of(...) as "Ready, ErrApplied(OwnershipConflict: msg), ..." for failure messages.
  std::string describe(const std::string& cluster, const std::string& bundle, uint64_t after = 0);
  //! True when a report of `bundle` on `cluster` after `after` has `state`.
  bool saw(const std::string& cluster, const std::string& bundle, const std::string& state, uint64_t after = 0);
  //! The first report of `bundle` on `cluster` after `after` in `state`; kNotFound when there is none (yet).
  Result<RecordedStatus> first(const std::string& cluster, const std::string& bundle, const std::string& state,
                               uint64_t after = 0);

 private:
  //! Reads the messages stored since the last call.
  void refresh();

  Hub& hub_;
  uint64_t read_up_to_ = 0;
  std::vector<RecordedStatus> events_;
};

//! The event's `time` (when the agent reported), for measuring delays between two reports.
SystemTime reportedAt(const events::StatusEvent& event);

}  // namespace flotilla::e2e
