// flotilla/service/kv_entries.h
//
// Reading the hub's KV buckets where a missing key (or a bucket without keys) is an answer, not a failure.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

#include "flotilla/bus/kv.h"
#include "flotilla/core/result.h"

namespace flotilla::service {

//! Calls `each` with every entry of `bucket` under `filter`: none when no key matches, and none for a key removed
//! since the listing. The first failure (listing, reading, or of `each`) ends the scan and is returned.
Status forEachEntry(bus::KeyValue& bucket, std::string_view filter,
                    const std::function<Status(const bus::KvEntry& entry)>& each);

}  // namespace flotilla::service
