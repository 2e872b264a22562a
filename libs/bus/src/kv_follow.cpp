// Following a KV watch (kv_follow.h).
#include "flotilla/bus/kv_follow.h"

namespace flotilla::bus {

void followWatch(KvWatcher& watcher, KeyValue& bucket, std::string_view filter, std::chrono::milliseconds wait,
                 const std::function<bool()>& stopping,
                 const std::function<void(const std::optional<KvEntry>&)>& on_entry,
                 const std::function<bool(const Error&)>& on_error) {
  while (!stopping()) {
    auto next = watcher.next(wait);
    if (next.ok()) {
      on_entry(*next);
      continue;
    }
    if (stopping() || !on_error(next.error())) {
      return;
    }
    if (auto reopened = bucket.watch(filter); reopened.ok()) {
      watcher = std::move(reopened).value();
    }
  }
}

}  // namespace flotilla::bus
