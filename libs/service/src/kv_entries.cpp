#include "flotilla/service/kv_entries.h"

namespace flotilla::service {

Result<std::optional<bus::KvEntry>> getIfPresent(bus::KeyValue& bucket, std::string_view key) {
  auto entry = bucket.get(key);
  if (!entry.ok()) {
    if (entry.error().kind == ErrorKind::kNotFound) {
      return std::optional<bus::KvEntry>();
    }
    return fail(entry.error());
  }
  return std::optional<bus::KvEntry>(std::move(entry).value());
}

Status forEachEntry(bus::KeyValue& bucket, std::string_view filter,
                    const std::function<Status(const bus::KvEntry& entry)>& each) {
  auto keys = bucket.keys(filter);
  if (!keys.ok()) {
    return keys.error().kind == ErrorKind::kNotFound ? Status() : Status(fail(keys.error()));
  }
  for (const auto& key : *keys) {
    auto entry = getIfPresent(bucket, key);
    FLOTILLA_TRY(entry);
    if (*entry) {
      FLOTILLA_TRY(each(**entry));
    }
  }
  return {};
}

}  // namespace flotilla::service
