// flotilla/agent/locks.h
//
// The locks that let the agent apply several bundles at once (--parallel-bundles) while each bundle's deploys, and
// every change to one object's owner, stay one at a time (lock order: deploy_handler.h).
//   KeyedLocks   one mutex per key ("<workspace>/<bundle>"), created on first use; a key's mutex lives as long as
//                the KeyedLocks (one small entry per bundle this process has seen)
//   ObjectLocks  a fixed set of mutexes striped by object identity: deciding who owns an object and acting on it
//                (apply with an owner annotation, hold, delete) happen under its stripe; several stripes are always
//                taken in ascending order, so two holders of several stripes never deadlock
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flotilla/agent/objects.h"

namespace flotilla::agent {

class KeyedLocks {
 public:
  //! Waits for `key`'s mutex.
  std::unique_lock<std::mutex> lock(const std::string& key);
  //! `key`'s mutex if it is free now, else an unlocked lock (owns_lock() false).
  std::unique_lock<std::mutex> tryLock(const std::string& key);

 private:
  std::mutex& mutexOf(const std::string& key);

  std::mutex map_mutex_;
  std::map<std::string, std::unique_ptr<std::mutex>> mutexes_;
};

class ObjectLocks {
 public:
  static constexpr size_t kStripes = 64;

  //! The stripe of one object.
  std::unique_lock<std::mutex> lock(const ObjectRef& ref);
  //! The stripes of `refs`, each once, taken in ascending order.
  std::vector<std::unique_lock<std::mutex>> lockAll(const std::vector<ObjectRef>& refs);

 private:
  static size_t stripeOf(const ObjectRef& ref);

  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace flotilla::agent
