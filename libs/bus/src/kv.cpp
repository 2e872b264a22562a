#include "flotilla/bus/kv.h"

#include <algorithm>
#include <set>

#include "flotilla/core/log.h"
#include "nats_handles.h"

namespace flotilla::bus {

struct detail::KvWatcherImpl {
  std::shared_ptr<JetStream> js;
  KvWatcherPtr watcher;
  bool initial_done = false;
  bool updates_only = false;
};

struct KeyValue::Impl {
  std::shared_ptr<JetStream> js;
  KvStorePtr kv;
  std::string bucket;
};

namespace {

using Clock = std::chrono::steady_clock;

Status check(natsStatus s, std::string_view where) {
  if (s != NATS_OK) {
    return fail(lastNatsError(s, where));
  }
  return {};
}

//! check() for a write: a full bucket's error names it ("KV bucket status is full: ...").
Status checkWrite(natsStatus s, std::string_view where, const std::string& bucket) {
  if (s == NATS_OK) {
    return {};
  }
  Error error = lastNatsError(s, where);
  if (error.kind == ErrorKind::kStoreFull) {
    error = storeFullError(std::move(error), "KV bucket", bucket);
  }
  return fail(std::move(error));
}

Status checkKey(std::string_view key, std::string_view where) {
  if (!isValidKvKey(key)) {
    return fail(ErrorKind::kInvalid,
                "invalid KV key '" + std::string(key) + "' (allowed: [-/_=.a-zA-Z0-9], no leading/trailing '.')",
                std::string(where));
  }
  return {};
}

KvEntry toEntry(kvEntry* e) {
  KvEntry out;
  const char* key = kvEntry_Key(e);
  out.key = key != nullptr ? key : "";
  const void* value = kvEntry_Value(e);
  if (value != nullptr) {
    out.value.assign(static_cast<const char*>(value), static_cast<size_t>(kvEntry_ValueLen(e)));
  }
  out.revision = kvEntry_Revision(e);
  switch (kvEntry_Operation(e)) {
    case kvOp_Delete:
      out.operation = KvOperation::kDelete;
      break;
    case kvOp_Purge:
      out.operation = KvOperation::kPurge;
      break;
    default:
      out.operation = KvOperation::kPut;
      break;
  }
  out.created = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(kvEntry_Created(e))));
  out.delta = kvEntry_Delta(e);
  return out;
}

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

}  // namespace

bool isValidKvKey(std::string_view key) {
  if (key.empty() || key.front() == '.' || key.back() == '.') {
    return false;
  }
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '/' ||
           c == '_' || c == '=' || c == '.';
  });
}

// ---------------------------------------------------------------------------------------------------------------
// KvWatcher

template class detail::OwnedImpl<KvWatcher::Impl, std::unique_ptr<KvWatcher::Impl>>;

Result<std::optional<KvEntry>> KvWatcher::next(std::chrono::milliseconds timeout) {
  if (!impl_) {
    return fail(ErrorKind::kInvalid, "next on an empty watcher", "kvWatcher_Next");
  }
  auto deadline = Clock::now() + timeout;
  while (true) {
    kvEntry* raw = nullptr;
    natsStatus s = kvWatcher_Next(&raw, impl_->watcher.get(), toMillis(remaining(deadline)));
    if (s == NATS_TIMEOUT) {
      return std::optional<KvEntry>();
    }
    FLOTILLA_TRY(check(s, "kvWatcher_Next"));
    if (raw == nullptr) {
      // libnats' marker: every value that existed when the watch started has been delivered.
      impl_->initial_done = true;
      return std::optional<KvEntry>();
    }
    KvEntryPtr entry(raw);
    if (impl_->updates_only && !impl_->initial_done) {
      // libnats 3.4 has no "updates only" watch; skip the initial values here instead.
      if (Clock::now() >= deadline) {
        return std::optional<KvEntry>();
      }
      continue;
    }
    return std::optional<KvEntry>(toEntry(entry.get()));
  }
}

bool KvWatcher::initialDone() const {
  return impl_ && impl_->initial_done;
}

Result<std::vector<KvEntry>> KvWatcher::initialValues(std::chrono::milliseconds timeout) {
  std::vector<KvEntry> out;
  auto deadline = Clock::now() + timeout;
  while (!initialDone()) {
    if (Clock::now() >= deadline) {
      return fail(ErrorKind::kTransient, "initial KV values not complete in time", "KvWatcher::initialValues");
    }
    auto entry = next(remaining(deadline));
    if (!entry.ok()) {
      return fail(entry.error());
    }
    if (entry->has_value()) {
      out.push_back(std::move(**entry));
    }
  }
  return out;
}

void KvWatcher::stop() {
  if (impl_) {
    kvWatcher_Stop(impl_->watcher.get());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// KeyValue

Result<std::shared_ptr<KeyValue>> KeyValue::open(std::shared_ptr<JetStream> js, std::string_view bucket) {
  std::string name(bucket);
  kvStore* raw = nullptr;
  natsStatus s = js_KeyValue(&raw, js->impl().js.get(), name.c_str());
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "js_KeyValue");
    error.message += " [bucket " + name + "]";
    return fail(std::move(error));
  }
  auto impl = std::make_unique<Impl>();
  impl->js = std::move(js);
  impl->kv.reset(raw);
  impl->bucket = name;
  return std::make_shared<KeyValue>(std::move(impl));
}

Result<std::shared_ptr<KeyValue>> KeyValue::ensure(std::shared_ptr<JetStream> js, const KvConfig& config) {
  auto existing = open(js, config.bucket);
  if (existing.ok()) {
    // A bucket made by an earlier version (or with another cap): bring its size cap to ours.
    FLOTILLA_TRY(js->applyLimits("KV_" + config.bucket, config.max_bytes, /*discard_new=*/true, config.replicas));
    return existing;
  }
  if (existing.error().kind != ErrorKind::kNotFound) {
    return existing;
  }
  if (config.history < 1 || config.history > 64) {
    return fail(ErrorKind::kInvalid, "KV history must be 1..64", "js_CreateKeyValue");
  }
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = config.bucket.c_str();
  cfg.Description = config.description.empty() ? nullptr : config.description.c_str();
  cfg.History = static_cast<uint8_t>(config.history);
  cfg.TTL = toNanos(config.ttl);
  cfg.MaxValueSize = config.max_value_size;
  cfg.MaxBytes = config.max_bytes;
  cfg.StorageType = config.storage == StorageType::kMemory ? js_MemoryStorage : js_FileStorage;
  cfg.Replicas = config.replicas;
  kvStore* raw = nullptr;
  natsStatus s = js_CreateKeyValue(&raw, js->impl().js.get(), &cfg);
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "js_CreateKeyValue");
    // Another replica may have created it between our lookup and create.
    auto raced = open(js, config.bucket);
    if (raced.ok()) {
      return raced;
    }
    error.message += " [bucket " + config.bucket + "]";
    return fail(std::move(error));
  }
  log::info("kv bucket created", {{"bucket", config.bucket}});
  // A full bucket must refuse new writes, never drop the oldest keys (libnats does not set the discard policy).
  if (auto limited = js->applyLimits("KV_" + config.bucket, config.max_bytes, /*discard_new=*/true); !limited.ok()) {
    kvStore_Destroy(raw);
    return fail(limited.error());
  }
  auto impl = std::make_unique<Impl>();
  impl->js = std::move(js);
  impl->kv.reset(raw);
  impl->bucket = config.bucket;
  return std::make_shared<KeyValue>(std::move(impl));
}

Status KeyValue::destroy(const std::shared_ptr<JetStream>& js, std::string_view bucket) {
  std::string name(bucket);
  return check(js_DeleteKeyValue(js->impl().js.get(), name.c_str()), "js_DeleteKeyValue");
}

KeyValue::KeyValue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KeyValue::~KeyValue() = default;

const std::string& KeyValue::bucket() const {
  return impl_->bucket;
}

Result<KvEntry> KeyValue::get(std::string_view key) {
  FLOTILLA_TRY(checkKey(key, "kvStore_Get"));
  std::string k(key);
  kvEntry* raw = nullptr;
  natsStatus s = kvStore_Get(&raw, impl_->kv.get(), k.c_str());
  if (s == NATS_NOT_FOUND) {
    return fail(ErrorKind::kNotFound, "key " + k + " not found in bucket " + impl_->bucket, "kvStore_Get");
  }
  FLOTILLA_TRY(check(s, "kvStore_Get"));
  KvEntryPtr entry(raw);
  return toEntry(entry.get());
}

Result<std::optional<KvEntry>> KeyValue::find(std::string_view key) {
  auto entry = get(key);
  if (!entry.ok()) {
    if (entry.error().kind == ErrorKind::kNotFound) {
      return std::optional<KvEntry>();
    }
    return fail(entry.error());
  }
  return std::optional<KvEntry>(std::move(entry).value());
}

Result<KvEntry> KeyValue::getRevision(std::string_view key, uint64_t revision) {
  FLOTILLA_TRY(checkKey(key, "kvStore_GetRevision"));
  std::string k(key);
  kvEntry* raw = nullptr;
  natsStatus s = kvStore_GetRevision(&raw, impl_->kv.get(), k.c_str(), revision);
  if (s == NATS_NOT_FOUND) {
    return fail(ErrorKind::kNotFound,
                "key " + k + " has no revision " + std::to_string(revision) + " in bucket " + impl_->bucket,
                "kvStore_GetRevision");
  }
  FLOTILLA_TRY(check(s, "kvStore_GetRevision"));
  KvEntryPtr entry(raw);
  return toEntry(entry.get());
}

Result<uint64_t> KeyValue::put(std::string_view key, std::string_view value) {
  FLOTILLA_TRY(checkKey(key, "kvStore_Put"));
  std::string k(key);
  uint64_t revision = 0;
  FLOTILLA_TRY(
      checkWrite(kvStore_Put(&revision, impl_->kv.get(), k.c_str(), value.data(), static_cast<int>(value.size())),
                 "kvStore_Put", impl_->bucket));
  return revision;
}

Result<std::vector<uint64_t>> KeyValue::putAll(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<JetStream::Outgoing> messages;
  messages.reserve(entries.size());
  for (const auto& [key, value] : entries) {
    FLOTILLA_TRY(checkKey(key, "kvStore_Put"));
    // A KV put is a publish to the bucket's stream on $KV.<bucket>.<key> (what kvStore_Put sends).
    messages.push_back(JetStream::Outgoing{.subject = "$KV." + impl_->bucket + "." + key, .data = value});
  }
  auto acks = impl_->js->publishAll(messages);  // a full bucket is named there (storeFullInStream)
  FLOTILLA_TRY(acks);
  std::vector<uint64_t> revisions;
  revisions.reserve(acks->size());
  for (const auto& ack : *acks) {
    revisions.push_back(ack.sequence);
  }
  return revisions;
}

Result<uint64_t> KeyValue::create(std::string_view key, std::string_view value) {
  FLOTILLA_TRY(checkKey(key, "kvStore_Create"));
  std::string k(key);
  uint64_t revision = 0;
  natsStatus s = kvStore_Create(&revision, impl_->kv.get(), k.c_str(), value.data(), static_cast<int>(value.size()));
  if (s == NATS_OK) {
    return revision;
  }
  Error error = lastNatsError(s, "kvStore_Create");
  if (error.kind == ErrorKind::kStoreFull) {
    return fail(storeFullError(std::move(error), "KV bucket", impl_->bucket));
  }
  if (error.kind == ErrorKind::kInternal && s == NATS_ERR) {
    // libnats may lose the server's text while it checks for a delete marker; look for ourselves.
    auto current = get(key);
    if (current.ok()) {
      error.kind = ErrorKind::kConflict;
    }
  }
  if (error.kind == ErrorKind::kConflict) {
    error.message = "key " + k + " already exists in bucket " + impl_->bucket + ": " + error.message;
  }
  return fail(std::move(error));
}

Result<uint64_t> KeyValue::update(std::string_view key, std::string_view value, uint64_t expected_revision) {
  FLOTILLA_TRY(checkKey(key, "kvStore_Update"));
  std::string k(key);
  uint64_t revision = 0;
  natsStatus s = kvStore_Update(&revision, impl_->kv.get(), k.c_str(), value.data(), static_cast<int>(value.size()),
                                expected_revision);
  if (s == NATS_OK) {
    return revision;
  }
  Error error = lastNatsError(s, "kvStore_Update");
  if (error.kind == ErrorKind::kStoreFull) {
    error = storeFullError(std::move(error), "KV bucket", impl_->bucket);
  }
  if (error.kind == ErrorKind::kConflict) {
    error.message = "key " + k + " is not at revision " + std::to_string(expected_revision) + ": " + error.message;
  }
  return fail(std::move(error));
}

Status KeyValue::remove(std::string_view key) {
  FLOTILLA_TRY(checkKey(key, "kvStore_Delete"));
  std::string k(key);
  return checkWrite(kvStore_Delete(impl_->kv.get(), k.c_str()), "kvStore_Delete", impl_->bucket);
}

Status KeyValue::purge(std::string_view key) {
  FLOTILLA_TRY(checkKey(key, "kvStore_Purge"));
  std::string k(key);
  return checkWrite(kvStore_Purge(impl_->kv.get(), k.c_str(), nullptr), "kvStore_Purge", impl_->bucket);
}

Result<std::vector<std::string>> KeyValue::keys(std::string_view filter) {
  // kvStore_Keys in libnats 3.4 takes no filter; a meta-only watcher gives the same answer for any pattern.
  auto watcher = watch(filter, {.ignore_deletes = true, .meta_only = true});
  if (!watcher.ok()) {
    return fail(watcher.error());
  }
  auto entries = watcher->initialValues(impl_->js->apiTimeout() * 2);
  if (!entries.ok()) {
    return fail(entries.error());
  }
  std::set<std::string> unique;
  for (const auto& entry : *entries) {
    unique.insert(entry.key);
  }
  return std::vector<std::string>(unique.begin(), unique.end());
}

Result<std::vector<KvEntry>> KeyValue::history(std::string_view key) {
  FLOTILLA_TRY(checkKey(key, "kvStore_History"));
  std::string k(key);
  kvEntryList list{};
  natsStatus s = kvStore_History(&list, impl_->kv.get(), k.c_str(), nullptr);
  if (s == NATS_NOT_FOUND) {
    return fail(ErrorKind::kNotFound, "key " + k + " has no history in bucket " + impl_->bucket, "kvStore_History");
  }
  FLOTILLA_TRY(check(s, "kvStore_History"));
  std::vector<KvEntry> out;
  out.reserve(static_cast<size_t>(list.Count));
  for (int i = 0; i < list.Count; ++i) {
    out.push_back(toEntry(list.Entries[i]));
  }
  kvEntryList_Destroy(&list);
  return out;
}

Result<KvWatcher> KeyValue::watch(std::string_view key_pattern, const KvWatchOptions& options) {
  std::string pattern(key_pattern);
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  // With updates_only the initial values are skipped in next(), so there is no point replaying their history.
  wo.IncludeHistory = options.include_history && !options.updates_only;
  wo.IgnoreDeletes = options.ignore_deletes;
  wo.MetaOnly = options.meta_only;
  wo.Timeout = toMillis(impl_->js->apiTimeout());
  kvWatcher* raw = nullptr;
  natsStatus s = kvStore_Watch(&raw, impl_->kv.get(), pattern.c_str(), &wo);
  if (s != NATS_OK) {
    Error error = lastNatsError(s, "kvStore_Watch");
    error.message += " [bucket " + impl_->bucket + ", keys " + pattern + "]";
    return fail(std::move(error));
  }
  auto impl = std::make_unique<KvWatcher::Impl>();
  impl->js = impl_->js;
  impl->watcher.reset(raw);
  impl->updates_only = options.updates_only;
  return KvWatcher(std::move(impl));
}

}  // namespace flotilla::bus
