// flotilla/poller/poll_status.h
//
// The poller's record for one GitRepo in the `status` KV bucket (key "gitrepo.<ws>.<name>", docs/pipeline.md):
// what it last saw and published, and how polling goes. Only pollers write these keys (each replica its own view,
// and a replica reads them before a publish: services/poller/README.md "Replicas"); the CLI
// and the scheduler read them. The record is also the poller's memory across restarts: `commit`,
// `forceSyncGeneration`, `specHash` say what was last published, so a new instance does not publish it again.
// It never holds a credential. The record and its strict codec are the KV contract of libs/events (records.h).
#pragma once

#include <string_view>

#include "flotilla/core/result.h"
#include "flotilla/events/records.h"

namespace flotilla::poller {

using PollStatus = events::PollStatus;

//! Strict decode (events::parseRecord): unknown fields, wrong types and a missing workspace or gitrepo are kInvalid
//! naming the field. encode(status) is events::encode.
Result<PollStatus> decodePollStatus(std::string_view json);

}  // namespace flotilla::poller
