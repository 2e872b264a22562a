#include "flotilla/agent/locks.h"

#include <functional>
#include <set>

namespace flotilla::agent {

std::mutex& KeyedLocks::mutexOf(const std::string& key) {
  std::lock_guard lock(map_mutex_);
  auto& slot = mutexes_[key];
  if (!slot) {
    slot = std::make_unique<std::mutex>();
  }
  return *slot;  // stable: entries are never erased
}

std::unique_lock<std::mutex> KeyedLocks::lock(const std::string& key) {
  return std::unique_lock(mutexOf(key));
}

std::unique_lock<std::mutex> KeyedLocks::tryLock(const std::string& key) {
  return std::unique_lock(mutexOf(key), std::try_to_lock);
}

size_t ObjectLocks::stripeOf(const ObjectRef& ref) {
  return std::hash<std::string>{}(ref.identity()) % kStripes;
}

std::unique_lock<std::mutex> ObjectLocks::lock(const ObjectRef& ref) {
  return std::unique_lock(stripes_.at(stripeOf(ref)));
}

std::vector<std::unique_lock<std::mutex>> ObjectLocks::lockAll(const std::vector<ObjectRef>& refs) {
  std::set<size_t> wanted;  // ascending: the one order every holder of several stripes uses
  for (const auto& ref : refs) {
    wanted.insert(stripeOf(ref));
  }
  std::vector<std::unique_lock<std::mutex>> held;
  held.reserve(wanted.size());
  for (size_t stripe : wanted) {
    held.emplace_back(stripes_.at(stripe));
  }
  return held;
}

}  // namespace flotilla::agent
