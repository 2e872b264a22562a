#include "flotilla/service/kv_entries.h"

namespace flotilla::service {

Status forEachEntry(bus::KeyValue& bucket, std::string_view filter,
                    const std::function<Status(const bus::KvEntry& entry)>& each) {
  auto keys = bucket.keys(filter);
  if (!keys.ok()) {
    return keys.error().kind == ErrorKind::kNotFound ? Status() : Status(fail(keys.error()));
  }
  for (const auto& key : *keys) {
    auto entry = bucket.find(key);
    FLOTILLA_TRY(entry);
    if (*entry) {
      FLOTILLA_TRY(each(**entry));
    }
  }
  return {};
}

}  // namespace flotilla::service
