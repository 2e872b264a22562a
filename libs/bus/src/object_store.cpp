#include "flotilla/bus/object_store.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>

#include <openssl/evp.h>

#include "flotilla/core/json.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "nats_handles.h"

namespace flotilla::bus {
namespace {

constexpr jsErrCode kNoJsError = static_cast<jsErrCode>(0);
// Chunk publishes in flight at once: bounds memory (64 x 128 KiB = 8 MiB) while keeping the pipe full.
constexpr int64_t kMaxPendingChunks = 64;

Status check(natsStatus s, std::string_view where, jsErrCode jerr = kNoJsError) {
  if (s != NATS_OK) {
    return fail(lastNatsError(s, where, jerr));
  }
  return {};
}

// Incremental SHA-256 (objects can be far larger than memory).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void update(std::string_view data) { EVP_DigestUpdate(ctx_.get(), data.data(), data.size()); }
  std::string finish() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &len);
    return std::string(reinterpret_cast<const char*>(digest), len);
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

// Counts the acks of the async chunk publishes of one put (puts are serialized per store).
struct AckTracker {
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> failed{0};
  std::mutex mutex;
  std::optional<Error> first_error;

  void reset() {
    acked = 0;
    failed = 0;
    std::lock_guard lock(mutex);
    first_error.reset();
  }
};

void onChunkAck(jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  auto* tracker = static_cast<AckTracker*>(closure);
  if (pa != nullptr && pae == nullptr) {
    ++tracker->acked;
  } else {
    ++tracker->failed;
    std::lock_guard lock(tracker->mutex);
    if (!tracker->first_error && pae != nullptr) {
      tracker->first_error =
          natsError(pae->Err, "js_PublishAsync", pae->ErrCode, pae->ErrText != nullptr ? pae->ErrText : "");
    }
  }
  natsMsg_Destroy(msg);  // the ack handler owns the published message
}

}  // namespace

struct ObjectStore::Impl {
  std::shared_ptr<JetStream> js;
  std::string bucket;
  std::string stream;
  // Declared before async_js: libnats may call into the tracker until the context is destroyed.
  std::unique_ptr<AckTracker> tracker = std::make_unique<AckTracker>();
  JsCtxPtr async_js;
  std::mutex put_mutex;

  Result<ObjectInfo> readMeta(std::string_view name);
  Status writeMeta(const ObjectInfo& info);
  Result<ObjectInfo> putChunks(std::string_view name, const ObjectReader& reader);
  void discardChunks(const std::string& nuid);
};

// ---------------------------------------------------------------------------------------------------------------
// Wire layout helpers

std::string objectStreamName(std::string_view bucket) {
  return "OBJ_" + std::string(bucket);
}

std::string objectChunkSubject(std::string_view bucket, std::string_view nuid) {
  return "$O." + std::string(bucket) + ".C." + std::string(nuid);
}

std::string objectMetaSubject(std::string_view bucket, std::string_view name) {
  return "$O." + std::string(bucket) + ".M." + base64UrlEncode(name);
}

std::string objectDigest(std::string_view raw_sha256) {
  return "SHA-256=" + base64UrlEncode(raw_sha256);
}

bool isValidBucketName(std::string_view bucket) {
  return !bucket.empty() && std::all_of(bucket.begin(), bucket.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

std::string encodeObjectMeta(const ObjectInfo& info) {
  Json meta = Json::obj({
      {"name", info.name},
      {"options", Json::obj({{"max_chunk_size", static_cast<int64_t>(info.max_chunk_size)}})},
      {"bucket", info.bucket},
      {"nuid", info.nuid},
      {"size", info.size},
      {"mtime", info.mtime},
      {"chunks", info.chunks},
  });
  // Other clients omit these when empty/false; so do we.
  if (!info.digest.empty()) {
    meta["digest"] = info.digest;
  }
  if (info.deleted) {
    meta["deleted"] = true;
  }
  return meta.dump();
}

Result<ObjectInfo> decodeObjectMeta(std::string_view json) {
  auto parsed = Json::parse(json);
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, "object meta is not JSON: " + parsed.error().message, "decodeObjectMeta");
  }
  const Json& meta = *parsed;
  const Json* name = meta.find("name");
  if (!meta.isObject() || name == nullptr || !name->isString()) {
    return fail(ErrorKind::kInvalid, "object meta has no name", "decodeObjectMeta");
  }
  for (const char* field : {"size", "chunks"}) {
    const Json* value = meta.find(field);
    if (value != nullptr && (!value->isInt() || value->asInt() < 0)) {
      return fail(ErrorKind::kInvalid, std::string("object meta field ") + field + " is not a count",
                  "decodeObjectMeta");
    }
  }
  ObjectInfo info;
  info.name = name->asString();
  info.bucket = meta.getString("bucket");
  info.nuid = meta.getString("nuid");
  info.size = static_cast<uint64_t>(meta.getInt("size"));
  info.chunks = static_cast<uint64_t>(meta.getInt("chunks"));
  info.digest = meta.getString("digest");
  info.mtime = meta.getString("mtime");
  info.deleted = meta.getBool("deleted");
  if (const Json* options = meta.find("options")) {
    int64_t chunk = options->getInt("max_chunk_size", kObjectChunkSize);
    info.max_chunk_size = chunk > 0 ? static_cast<uint32_t>(chunk) : kObjectChunkSize;
  }
  return info;
}

// ---------------------------------------------------------------------------------------------------------------
// ObjectStore

Result<std::shared_ptr<ObjectStore>> ObjectStore::open(std::shared_ptr<JetStream> js, std::string_view bucket,
                                                       bool create_if_missing, StorageType storage, int64_t max_bytes,
                                                       int replicas) {
  if (!isValidBucketName(bucket)) {
    return fail(ErrorKind::kInvalid, "invalid object store bucket name '" + std::string(bucket) + "'",
                "ObjectStore::open");
  }
  std::string stream = objectStreamName(bucket);
  auto existing = js->streamInfo(stream);
  if (!existing.ok()) {
    if (existing.error().kind != ErrorKind::kNotFound || !create_if_missing) {
      Error error = existing.error();
      error.message = "object store " + std::string(bucket) + ": " + error.message;
      return fail(std::move(error));
    }
    std::string b(bucket);
    auto created = js->ensureStream({.name = stream,
                                     .subjects = {"$O." + b + ".C.>", "$O." + b + ".M.>"},
                                     .storage = storage,
                                     .max_bytes = max_bytes,
                                     .replicas = replicas,
                                     .allow_rollup = true,
                                     .allow_direct = true,
                                     .discard_new = true});
    if (!created.ok()) {
      return fail(created.error());
    }
    log::info("object store bucket created", {{"bucket", b}, {"max_bytes", max_bytes}});
  } else if (create_if_missing) {
    FLOTILLA_TRY(js->applyLimits(stream, max_bytes, /*discard_new=*/true, replicas));
  }
  auto impl = std::make_unique<Impl>();
  impl->js = std::move(js);
  impl->bucket = std::string(bucket);
  impl->stream = std::move(stream);
  jsOptions opts = impl->js->impl().options();
  opts.PublishAsync.MaxPending = kMaxPendingChunks;
  opts.PublishAsync.AckHandler = onChunkAck;
  opts.PublishAsync.AckHandlerClosure = impl->tracker.get();
  opts.PublishAsync.StallWait = toMillis(impl->js->apiTimeout());
  jsCtx* raw = nullptr;
  FLOTILLA_TRY(check(natsConnection_JetStream(&raw, impl->js->connection()->impl().conn.get(), &opts),
                     "natsConnection_JetStream"));
  impl->async_js.reset(raw);
  return std::make_shared<ObjectStore>(std::move(impl));
}

ObjectStore::ObjectStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ObjectStore::~ObjectStore() = default;

const std::string& ObjectStore::bucket() const {
  return impl_->bucket;
}

Result<ObjectInfo> ObjectStore::Impl::readMeta(std::string_view name) {
  auto msg = js->getLastMessage(stream, objectMetaSubject(bucket, name));
  if (!msg.ok()) {
    Error error = msg.error();
    if (error.kind == ErrorKind::kNotFound) {
      error.message = "object " + std::string(name) + " not found in bucket " + bucket;
    }
    return fail(std::move(error));
  }
  auto info = decodeObjectMeta(msg->data());
  if (!info.ok()) {
    Error error = info.error();
    error.kind = ErrorKind::kInternal;  // someone wrote a bad meta into our bucket
    error.message = "object " + std::string(name) + ": " + error.message;
    return fail(std::move(error));
  }
  return info;
}

Status ObjectStore::Impl::writeMeta(const ObjectInfo& info) {
  // Rollup replaces every earlier meta message of this object, so the subject holds one message.
  auto ack = js->publish(objectMetaSubject(bucket, info.name), encodeObjectMeta(info), {}, {{"Nats-Rollup", "sub"}});
  if (!ack.ok()) {
    return fail(ack.error());
  }
  return {};
}

void ObjectStore::Impl::discardChunks(const std::string& nuid) {
  Status purged = js->purgeSubject(stream, objectChunkSubject(bucket, nuid));
  if (!purged.ok()) {
    // Orphaned chunks waste space but hurt nothing: no meta points at them.
    log::warn("object store could not purge chunks",
              {{"bucket", bucket}, {"nuid", nuid}, {"error", purged.error().describe()}});
  }
}

Result<ObjectInfo> ObjectStore::Impl::putChunks(std::string_view name, const ObjectReader& reader) {
  ObjectInfo info;
  info.name = std::string(name);
  info.bucket = bucket;
  info.nuid = randomHex(11);
  const std::string subject = objectChunkSubject(bucket, info.nuid);
  Sha256 sha;
  std::string buffer(kObjectChunkSize, '\0');
  tracker->reset();
  auto abandon = [&](Error error) -> Result<ObjectInfo> {
    // Wait out what is in flight so the next put starts clean, then drop what did land.
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = toMillis(js->apiTimeout());
    if (js_PublishAsyncComplete(async_js.get(), &po) != NATS_OK) {
      natsMsgList pending{};
      if (js_PublishAsyncGetPendingList(&pending, async_js.get()) == NATS_OK) {
        natsMsgList_Destroy(&pending);
      }
    }
    discardChunks(info.nuid);
    error.message = "put of object " + info.name + " failed: " + error.message;
    if (error.kind == ErrorKind::kStoreFull) {
      error = storeFullError(std::move(error), "object store", bucket);
    }
    return fail(std::move(error));
  };
  while (true) {
    size_t filled = 0;
    while (filled < buffer.size()) {
      auto got = reader(buffer.data() + filled, buffer.size() - filled);
      if (!got.ok()) {
        return abandon(got.error());
      }
      if (*got == 0) {
        break;
      }
      filled += *got;
    }
    if (filled == 0) {
      break;
    }
    std::string_view chunk(buffer.data(), filled);
    natsStatus s =
        js_PublishAsync(async_js.get(), subject.c_str(), chunk.data(), static_cast<int>(chunk.size()), nullptr);
    if (s != NATS_OK) {
      return abandon(lastNatsError(s, "js_PublishAsync"));
    }
    sha.update(chunk);
    info.size += filled;
    ++info.chunks;
    if (filled < buffer.size()) {
      break;
    }
  }
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = toMillis(js->apiTimeout());
  natsStatus s = js_PublishAsyncComplete(async_js.get(), &po);
  if (s != NATS_OK) {
    return abandon(lastNatsError(s, "js_PublishAsyncComplete"));
  }
  if (tracker->failed > 0 || tracker->acked != info.chunks) {
    std::optional<Error> first;
    {
      std::lock_guard lock(tracker->mutex);
      first = tracker->first_error;
    }
    return abandon(makeError(first ? first->kind : ErrorKind::kTransient,
                             std::to_string(tracker->acked.load()) + " of " + std::to_string(info.chunks) +
                                 " chunks acknowledged; " + (first ? first->describe() : std::string()),
                             "js_PublishAsync"));
  }
  info.digest = objectDigest(sha.finish());
  info.mtime = log::nowRfc3339();
  return info;
}

Result<ObjectInfo> ObjectStore::put(std::string_view name, const ObjectReader& reader) {
  if (name.empty()) {
    return fail(ErrorKind::kInvalid, "object name is empty", "ObjectStore::put");
  }
  std::lock_guard lock(impl_->put_mutex);
  std::string previous_nuid;
  auto previous = impl_->readMeta(name);
  if (previous.ok()) {
    previous_nuid = previous->nuid;
  } else if (previous.error().kind != ErrorKind::kNotFound) {
    return fail(previous.error());
  }
  auto info = impl_->putChunks(name, reader);
  if (!info.ok()) {
    return info;
  }
  Status meta = impl_->writeMeta(*info);
  if (!meta.ok()) {
    impl_->discardChunks(info->nuid);
    return fail(meta.error());
  }
  // Only now that the new meta points elsewhere may the old version's chunks go.
  if (!previous_nuid.empty() && previous_nuid != info->nuid) {
    impl_->discardChunks(previous_nuid);
  }
  return info;
}

Result<ObjectInfo> ObjectStore::put(std::string_view name, std::string_view data) {
  size_t offset = 0;
  return put(name, [&](char* buffer, size_t capacity) -> Result<size_t> {
    size_t n = std::min(capacity, data.size() - offset);
    std::copy_n(data.data() + offset, n, buffer);
    offset += n;
    return n;
  });
}

Result<ObjectInfo> ObjectStore::putFile(std::string_view name, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(ErrorKind::kNotFound, "cannot open " + path, "ObjectStore::putFile");
  }
  return put(name, [&](char* buffer, size_t capacity) -> Result<size_t> {
    in.read(buffer, static_cast<std::streamsize>(capacity));
    if (in.bad()) {
      return fail(ErrorKind::kPermanent, "read error on " + path, "ObjectStore::putFile");
    }
    return static_cast<size_t>(in.gcount());
  });
}

Result<ObjectInfo> ObjectStore::get(std::string_view name, const ObjectWriter& writer) {
  auto info = impl_->readMeta(name);
  if (!info.ok()) {
    return info;
  }
  if (info->deleted) {
    return fail(ErrorKind::kNotFound, "object " + std::string(name) + " was deleted from bucket " + impl_->bucket,
                "ObjectStore::get");
  }
  Sha256 sha;
  uint64_t size = 0;
  if (info->chunks > 0) {
    std::string subject = objectChunkSubject(impl_->bucket, info->nuid);
    jsOptions opts = impl_->js->impl().options();
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = impl_->stream.c_str();
    so.Ordered = true;  // an ephemeral, flow-controlled consumer that restarts itself on gaps
    natsSubscription* raw = nullptr;
    jsErrCode jerr = kNoJsError;
    FLOTILLA_TRY(check(js_SubscribeSync(&raw, impl_->js->impl().js.get(), subject.c_str(), &opts, &so, &jerr),
                       "js_SubscribeSync", jerr));
    NatsSubscriptionPtr sub(raw);
    // Unsubscribe (not just destroy) so the server drops the ephemeral consumer right away.
    struct Unsubscribe {
      natsSubscription* sub;
      ~Unsubscribe() { natsSubscription_Unsubscribe(sub); }
    } unsubscribe{sub.get()};
    for (uint64_t i = 0; i < info->chunks; ++i) {
      natsMsg* raw_msg = nullptr;
      natsStatus s = natsSubscription_NextMsg(&raw_msg, sub.get(), toMillis(impl_->js->apiTimeout()));
      if (s != NATS_OK) {
        Error error = lastNatsError(s, "natsSubscription_NextMsg");
        error.message = "reading chunk " + std::to_string(i + 1) + "/" + std::to_string(info->chunks) + " of object " +
                        info->name + ": " + error.message;
        return fail(std::move(error));
      }
      NatsMsgPtr msg(raw_msg);
      std::string_view chunk(natsMsg_GetData(msg.get()) != nullptr ? natsMsg_GetData(msg.get()) : "",
                             static_cast<size_t>(natsMsg_GetDataLength(msg.get())));
      sha.update(chunk);
      size += chunk.size();
      FLOTILLA_TRY(writer(chunk));
    }
  }
  std::string digest = objectDigest(sha.finish());
  if (size != info->size || digest != info->digest) {
    return fail(ErrorKind::kInternal,
                "object " + info->name + " is corrupt: got " + std::to_string(size) + " bytes " + digest +
                    ", meta says " + std::to_string(info->size) + " bytes " + info->digest,
                "ObjectStore::get");
  }
  return info;
}

Result<std::string> ObjectStore::get(std::string_view name) {
  std::string out;
  auto info = get(name, [&](std::string_view chunk) -> Status {
    if (out.empty()) {
      out.reserve(kObjectChunkSize);
    }
    out.append(chunk);
    return {};
  });
  if (!info.ok()) {
    return fail(info.error());
  }
  return out;
}

Result<ObjectInfo> ObjectStore::getToFile(std::string_view name, const std::string& path) {
  std::string temp = path + ".tmp-" + randomHex(4);
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!out) {
    return fail(ErrorKind::kPermanent, "cannot write " + temp, "ObjectStore::getToFile");
  }
  auto info = get(name, [&](std::string_view chunk) -> Status {
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (!out) {
      return fail(ErrorKind::kPermanent, "short write to " + temp, "ObjectStore::getToFile");
    }
    return {};
  });
  out.close();
  if (!info.ok() || !out) {
    std::remove(temp.c_str());
    if (info.ok()) {
      return fail(ErrorKind::kPermanent, "cannot finish writing " + temp, "ObjectStore::getToFile");
    }
    return info;
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return fail(ErrorKind::kPermanent, "cannot rename " + temp + " to " + path, "ObjectStore::getToFile");
  }
  return info;
}

Result<ObjectInfo> ObjectStore::info(std::string_view name) {
  auto info = impl_->readMeta(name);
  if (info.ok() && info->deleted) {
    return fail(ErrorKind::kNotFound, "object " + std::string(name) + " was deleted from bucket " + impl_->bucket,
                "ObjectStore::info");
  }
  return info;
}

Status ObjectStore::remove(std::string_view name) {
  std::lock_guard lock(impl_->put_mutex);
  auto info = impl_->readMeta(name);
  if (!info.ok()) {
    return fail(info.error());
  }
  if (info->deleted) {
    return fail(ErrorKind::kNotFound, "object " + std::string(name) + " was already deleted", "ObjectStore::remove");
  }
  ObjectInfo tombstone = *info;
  tombstone.deleted = true;
  tombstone.size = 0;
  tombstone.chunks = 0;
  tombstone.digest.clear();
  tombstone.mtime = log::nowRfc3339();
  FLOTILLA_TRY(impl_->writeMeta(tombstone));
  impl_->discardChunks(info->nuid);
  return {};
}

Status ObjectStore::purge(std::string_view name) {
  std::lock_guard lock(impl_->put_mutex);
  auto info = impl_->readMeta(name);
  if (!info.ok()) {
    return fail(info.error());
  }
  // The meta first: once it is gone no reader finds the object, so no one sees it half removed.
  FLOTILLA_TRY(impl_->js->purgeSubject(impl_->stream, objectMetaSubject(impl_->bucket, name)));
  if (!info->deleted) {
    FLOTILLA_TRY(impl_->js->purgeSubject(impl_->stream, objectChunkSubject(impl_->bucket, info->nuid)));
  }
  return {};
}

Result<std::vector<ObjectInfo>> ObjectStore::list(bool include_deleted) {
  // The stream's subject list names every meta subject; each holds exactly one message thanks to rollup.
  std::string prefix = "$O." + impl_->bucket + ".M.";
  auto stream = impl_->js->streamInfo(impl_->stream, prefix + ">");
  if (!stream.ok()) {
    return fail(stream.error());
  }
  std::vector<ObjectInfo> out;
  for (const auto& [subject, count] : stream->subjects) {
    auto msg = impl_->js->getLastMessage(impl_->stream, subject);
    if (!msg.ok()) {
      if (msg.error().kind == ErrorKind::kNotFound) {
        continue;  // purged since the listing
      }
      return fail(msg.error());
    }
    auto info = decodeObjectMeta(msg->data());
    if (!info.ok()) {
      log::warn("object store skipped a malformed meta",
                {{"bucket", impl_->bucket}, {"subject", subject}, {"error", info.error().message}});
      continue;
    }
    if (!info->deleted || include_deleted) {
      out.push_back(std::move(*info));
    }
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

}  // namespace flotilla::bus
