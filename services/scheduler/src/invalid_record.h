// services/scheduler/src/invalid_record.h
//
// One report for a KV record a part of the scheduler skips because it cannot read it, so every part counts it under
// the same metric family (one help text) and logs it the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/bus/kv.h"
#include "flotilla/core/log.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/events/subjects.h"

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

//! An entry of the clusters bucket once read: the names its key holds after the prefix ("group.ws.eu": {"ws",
//! "eu"}) and, for a put, its value (nullopt for a delete or purge).
template <typename T>
struct ClustersEntry {
  std::vector<std::string> names;
  std::optional<T> value;
};

//! Reads `entry`, keyed "<prefix>.<name>..." with `count` names, and a put's value with `decode` (Result<T> of a
//! bus::KvEntry). nullopt when the key or the value cannot be read: then counted and logged as an invalid record of
//! the clusters bucket, and the caller skips the entry (what it had stays in force).
template <typename T, typename Decode>
std::optional<ClustersEntry<T>> readClustersEntry(Metrics& metrics, const bus::KvEntry& entry, std::string_view prefix,
                                                  size_t count, const Decode& decode) {
  auto names = events::keyNames(entry.key, prefix, count);
  if (!names.ok()) {
    countInvalidRecord(metrics, events::kClustersBucket, entry.key, names.error());
    return std::nullopt;
  }
  ClustersEntry<T> read{.names = std::move(names).value(), .value = std::nullopt};
  if (entry.operation == bus::KvOperation::kPut) {
    auto decoded = decode(entry);
    if (!decoded.ok()) {
      countInvalidRecord(metrics, events::kClustersBucket, entry.key, decoded.error());
      return std::nullopt;
    }
    read.value = std::move(decoded).value();
  }
  return read;
}

}  // namespace flotilla::scheduler
