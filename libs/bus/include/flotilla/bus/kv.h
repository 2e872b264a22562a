// flotilla/bus/kv.h
//
// NATS Key-Value buckets (libnats kvStore): get/put with revisions, optimistic create/update, delete markers
// and watchers. Flotilla keeps its state (gitrepos, bundles, clusters, deployments, status) in KV buckets.
//
// Keys may contain only [-/_=.a-zA-Z0-9] and must not start or end with '.'; callers escape names first (the
// events library does). '.' separates tokens, so watch patterns can use '*' (one token) and '>' (the rest).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flotilla/bus/jetstream.h"

namespace flotilla::bus {

//! Settings of a bucket created by KeyValue::ensure (an existing bucket keeps its own).
struct KvConfig {
  std::string bucket;
  int history = 1;                   //!< revisions kept per key (1..64)
  std::chrono::milliseconds ttl{0};  //!< 0 = entries never expire
  int32_t max_value_size = -1;       //!< -1 = server limit (max_payload)
  int64_t max_bytes = -1;            //!< -1 = unlimited
  StorageType storage = StorageType::kFile;
  int replicas = 1;
  std::string description;
};

//! What an entry records: a value, a delete marker or a purge marker.
enum class KvOperation { kPut, kDelete, kPurge };

//! One revision of a key.
struct KvEntry {
  std::string key;
  std::string value;
  uint64_t revision = 0;  //!< the stream sequence; pass to update() for optimistic concurrency
  KvOperation operation = KvOperation::kPut;
  std::chrono::system_clock::time_point created;
  uint64_t delta = 0;  //!< for watchers: entries still pending behind this one
};

//! What a watcher delivers.
struct KvWatchOptions {
  bool include_history = false;  //!< initial values are every kept revision, not only the latest
  bool updates_only = false;     //!< skip the initial values; only changes after the watch started
  bool ignore_deletes = false;   //!< do not deliver delete/purge markers
  bool meta_only = false;        //!< entries without values
};

namespace detail {
struct KvWatcherImpl;
}  // namespace detail

//! A watcher over a key pattern. It first delivers the current values (unless updates_only), then marks the end
//! of the initial values, then delivers live changes (puts, deletes and purges) as they happen. Move-only;
//! next() may be called from one thread at a time; on a default-constructed one (not watching) it fails with kInvalid.
class KvWatcher : public detail::OwnedImpl<detail::KvWatcherImpl, std::unique_ptr<detail::KvWatcherImpl>> {
 public:
  using Impl = detail::KvWatcherImpl;
  using OwnedImpl::OwnedImpl;

  //! The next entry, waiting up to `timeout`. nullopt when nothing arrived in time, or when the end-of-initial-
  //! values marker was just reached (initialDone() turns true at that moment).
  Result<std::optional<KvEntry>> next(std::chrono::milliseconds timeout);
  //! True once every initial value has been returned by next().
  [[nodiscard]] bool initialDone() const;
  //! Reads until the end of the initial values (waiting at most `timeout` in all) and returns them.
  Result<std::vector<KvEntry>> initialValues(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  //! Stops the watcher; next() then fails.
  void stop();
};

//! A bound KV bucket, shared through shared_ptr and safe to use from many threads.
class KeyValue {
 public:
  struct Impl;
  //! Binds the bucket, creating it with `config` if it does not exist. An existing bucket keeps its settings.
  static Result<std::shared_ptr<KeyValue>> ensure(std::shared_ptr<JetStream> js, const KvConfig& config);
  //! Binds an existing bucket; missing -> kNotFound.
  static Result<std::shared_ptr<KeyValue>> open(std::shared_ptr<JetStream> js, std::string_view bucket);
  //! Deletes the bucket and everything in it.
  static Status destroy(const std::shared_ptr<JetStream>& js, std::string_view bucket);

  //! Internal: objects are made by the bus library (connect, create, subscribe, ...).
  explicit KeyValue(std::unique_ptr<Impl> impl);
  KeyValue(const KeyValue&) = delete;
  KeyValue& operator=(const KeyValue&) = delete;
  ~KeyValue();

  //! The bucket name.
  [[nodiscard]] const std::string& bucket() const;

  //! The latest value; a missing, deleted or purged key -> kNotFound.
  Result<KvEntry> get(std::string_view key);
  //! The latest value of `key`, or nullopt when there is none: for readers to whom a missing key is an answer (any
  //! other failure stays one).
  Result<std::optional<KvEntry>> find(std::string_view key);
  //! A specific revision of the key (needs history); missing -> kNotFound.
  Result<KvEntry> getRevision(std::string_view key, uint64_t revision);
  //! Writes unconditionally; returns the new revision.
  Result<uint64_t> put(std::string_view key, std::string_view value);
  //! Writes every (key, value) unconditionally, in order, waiting for the acks of all at once
  //! (JetStream::publishAll): one round trip, not one per key. Returns the new revisions in the same order; on a
  //! failure some of the writes may have been stored (puts are idempotent: write the batch again).
  Result<std::vector<uint64_t>> putAll(const std::vector<std::pair<std::string, std::string>>& entries);
  //! Writes only if the key does not exist (or was deleted); exists -> kConflict.
  Result<uint64_t> create(std::string_view key, std::string_view value);
  //! Writes only if the key's latest revision is `expected_revision`; otherwise kConflict.
  Result<uint64_t> update(std::string_view key, std::string_view value, uint64_t expected_revision);
  //! Places a delete marker (history is kept; watchers see a kDelete entry).
  Status remove(std::string_view key);
  //! Places a purge marker and removes the key's history.
  Status purge(std::string_view key);
  //! Keys with a current value, matching `filter` (a key pattern, ">" = all), sorted.
  Result<std::vector<std::string>> keys(std::string_view filter = ">");
  //! Every kept revision of the key, oldest first; missing -> kNotFound.
  Result<std::vector<KvEntry>> history(std::string_view key);
  //! Watches keys matching `key_pattern` (">" = all).
  Result<KvWatcher> watch(std::string_view key_pattern, const KvWatchOptions& options = {});

 private:
  std::unique_ptr<Impl> impl_;
};

//! True if `key` is a valid KV key (see the file comment).
bool isValidKvKey(std::string_view key);

}  // namespace flotilla::bus
