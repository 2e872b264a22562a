// flotilla/bus/kv_follow.h
//
// Following a KV watch for as long as a component runs: every entry handed on, a failed watch re-opened. What the
// scheduler's manifest index and its view of the other partitions' records both do.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include "flotilla/bus/kv.h"
#include "flotilla/core/result.h"

namespace flotilla::bus {

//! Follows `watcher` until `stopping()` is true: `on_entry` gets each entry, or nullopt when none came within
//! `wait` (so the caller can do periodic work). After an error `on_error` runs (log, count, sleep; false ends the
//! loop) and the watch is re-opened on `filter` of `bucket`; its initial values replay every entry, so `on_entry`
//! must be idempotent.
void followWatch(KvWatcher& watcher, KeyValue& bucket, std::string_view filter, std::chrono::milliseconds wait,
                 const std::function<bool()>& stopping,
                 const std::function<void(const std::optional<KvEntry>&)>& on_entry,
                 const std::function<bool(const Error&)>& on_error);

}  // namespace flotilla::bus
