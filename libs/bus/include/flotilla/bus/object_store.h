// flotilla/bus/object_store.h
//
// A NATS Object Store written on plain JetStream, because libnats 3.4.1 has no Object Store API (G2). It uses
// the standard wire layout, so any official NATS client (nats.go, the nats CLI) can read and write the same
// buckets:
//   stream    OBJ_<bucket>, subjects $O.<bucket>.C.> and $O.<bucket>.M.>, rollup + direct get, discard new
//   chunks    $O.<bucket>.C.<nuid>, 128 KiB each, where nuid is fresh for every put
//   meta      $O.<bucket>.M.<base64url-padded(name)>, header Nats-Rollup: sub, JSON body
//             {name, options{max_chunk_size}, bucket, nuid, size, mtime (RFC 3339), chunks,
//              digest "SHA-256=<base64url-padded>", deleted (only when true)}
// A put writes every chunk (acks checked), then the meta, then purges the chunks of the previous version. A
// get reads the meta, streams the chunks through an ordered consumer and checks size and SHA-256. Objects have
// no size limit short of the disk; the *File variants stream without holding the object in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/jetstream.h"

namespace flotilla::bus {

//! Chunk size of every object we write (the value nats.go uses too).
inline constexpr uint32_t kObjectChunkSize = 128 * 1024;

//! The meta record of one object (the JSON body of its meta message).
struct ObjectInfo {
  std::string name;
  std::string bucket;
  std::string nuid;  //!< names the chunk subject of this version
  uint64_t size = 0;
  uint64_t chunks = 0;
  std::string digest;  //!< "SHA-256=<base64url-padded digest>"; empty for a deleted object
  std::string mtime;   //!< RFC 3339
  bool deleted = false;
  uint32_t max_chunk_size = kObjectChunkSize;
};

//! Reads a chunk of an object being put into `buffer` (capacity `capacity`); returns the bytes read, 0 at the end.
using ObjectReader = std::function<Result<size_t>(char* buffer, size_t capacity)>;
//! Receives the chunks of an object being read, in order.
using ObjectWriter = std::function<Status(std::string_view chunk)>;

//! A bound object store bucket, shared through shared_ptr; safe from many threads (puts and removes on one store
//! are serialized, reads run in parallel).
class ObjectStore {
 public:
  struct Impl;
  //! Binds bucket `bucket` (stream OBJ_<bucket>); creates it when missing and `create_if_missing`, else kNotFound.
  //! With `create_if_missing` the bucket's size cap is set to `max_bytes` (-1 = none), also on an existing bucket;
  //! a put that does not fit fails with kStoreFull naming the bucket.
  static Result<std::shared_ptr<ObjectStore>> open(std::shared_ptr<JetStream> js, std::string_view bucket,
                                                   bool create_if_missing = true,
                                                   StorageType storage = StorageType::kFile, int64_t max_bytes = -1,
                                                   int replicas = 1);

  //! Internal: objects are made by the bus library (connect, create, subscribe, ...).
  explicit ObjectStore(std::unique_ptr<Impl> impl);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;
  ~ObjectStore();

  //! The bucket name.
  [[nodiscard]] const std::string& bucket() const;

  //! Stores `data` under `name`, replacing any previous version.
  Result<ObjectInfo> put(std::string_view name, std::string_view data);
  //! Stores what `reader` yields (streaming: at most one chunk plus the in-flight publishes in memory).
  Result<ObjectInfo> put(std::string_view name, const ObjectReader& reader);
  //! Stores the file at `path`.
  Result<ObjectInfo> putFile(std::string_view name, const std::string& path);

  //! The whole object. Missing or deleted -> kNotFound; size or digest mismatch -> kInternal.
  Result<std::string> get(std::string_view name);
  //! Streams the object to `writer`, verifying size and digest at the end (the writer has then seen the bytes:
  //! callers writing somewhere durable must discard them on error, as getToFile does).
  Result<ObjectInfo> get(std::string_view name, const ObjectWriter& writer);
  //! Writes the object to `path` atomically (temp file + rename), only if size and digest match.
  Result<ObjectInfo> getToFile(std::string_view name, const std::string& path);

  //! The meta record; missing or deleted -> kNotFound.
  Result<ObjectInfo> info(std::string_view name);
  //! Removes the chunks and leaves a meta with deleted=true (what other clients expect); missing -> kNotFound.
  Status remove(std::string_view name);
  //! Removes the object and its meta without a tombstone (purges both subjects), freeing all its space also when the
  //! bucket is full (a purge is not a message). For garbage collection of content-addressed objects; missing ->
  //! kNotFound.
  Status purge(std::string_view name);
  //! Every object's meta, sorted by name; deleted ones only with `include_deleted`.
  Result<std::vector<ObjectInfo>> list(bool include_deleted = false);

 private:
  std::unique_ptr<Impl> impl_;
};

// Pure helpers of the wire layout (exposed for tests and for tools that read buckets directly).

//! "OBJ_<bucket>".
std::string objectStreamName(std::string_view bucket);
//! "$O.<bucket>.C.<nuid>".
std::string objectChunkSubject(std::string_view bucket, std::string_view nuid);
//! "$O.<bucket>.M.<base64url-padded(name)>".
std::string objectMetaSubject(std::string_view bucket, std::string_view name);
//! "SHA-256=<base64url-padded(raw digest)>".
std::string objectDigest(std::string_view raw_sha256);
//! The JSON body of a meta message.
std::string encodeObjectMeta(const ObjectInfo& info);
//! Parses a meta body; malformed -> kInvalid.
Result<ObjectInfo> decodeObjectMeta(std::string_view json);
//! True if `bucket` is a valid bucket name ([-_a-zA-Z0-9]+).
bool isValidBucketName(std::string_view bucket);

}  // namespace flotilla::bus
