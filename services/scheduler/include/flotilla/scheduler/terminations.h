// flotilla/scheduler/terminations.h
//
// Agents may write no KV and publish only under flotilla.status.<cluster>.>, so an agent reports a deploy it
// terminated (events/terminated.h) on its status subject, and the scheduler stores the record in KV `status` and
// publishes the public event on its behalf, like every other fact an agent reports.
#pragma once

#include <optional>
#include <string_view>

#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/scheduler/partition.h"
#include "flotilla/service/consumer.h"

namespace flotilla::scheduler {

//! nullopt when `data` is not a MessageTerminated (the caller handles it as a status message). Otherwise the
//! record is checked against the subject (the cluster's own agent consumer on FLOTILLA_DEPLOY; anything else is
//! rejected as spoofed), stored and published — by the partition of the subject's cluster; the others ack it.
std::optional<service::Outcome> forwardAgentTermination(std::string_view subject, std::string_view data,
                                                        bus::KeyValue& status, bus::JetStream& js, bool public_events,
                                                        const Partition& partition = {});

}  // namespace flotilla::scheduler
