// services/scheduler/src/invalid_record.h
//
// One report for a KV record a part of the scheduler skips because it cannot read it, so every part counts it under
// the same metric family (one help text) and logs it the same way.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/log.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::scheduler {

//! invalid_records_total{bucket} and a warning naming the bucket, the key and the error.
inline void countInvalidRecord(Metrics& metrics, std::string_view bucket, const std::string& key, const Error& error) {
  metrics
      .counter("invalid_records_total", "KV records that could not be read (skipped)",
               {{"bucket", std::string(bucket)}})
      .Increment();
  log::warn("skipping an unreadable record",
            {{"bucket", std::string(bucket)}, {"key", key}, {"error", error.describe()}});
}

}  // namespace flotilla::scheduler
