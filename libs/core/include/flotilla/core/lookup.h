// flotilla/core/lookup.h
//
// Reading one value out of an associative container by copy (for accessors that hand out a snapshot of state
// guarded by a lock).
#pragma once

#include <optional>

namespace flotilla {

//! A copy of the value under `key` in `map`, or nullopt when there is none.
template <typename Map, typename Key>
std::optional<typename Map::mapped_type> valueAt(const Map& map, const Key& key) {
  auto it = map.find(key);
  if (it == map.end()) {
    return std::nullopt;
  }
  return it->second;
}

}  // namespace flotilla
