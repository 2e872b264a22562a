// flotilla/events/manifest.h
//
// How an agent gets a rendered manifest (docs/pipeline.md "Manifest delivery"): request/reply with the hub on
// flotilla.manifest.<cluster>, never a read of the shared object store. An agent's credentials allow it to publish
// only on its own cluster's subject, so the hub takes the cluster from the subject, answers only for a manifest one
// of that cluster's deployments references, and sends the object in chunks that fit the server's max_payload:
//
//   request  ManifestRequest {manifestID, offset, workspace, bundle, generation} (JSON, the usual envelope)
//   reply    the bytes [offset, offset + n) of the object as the body, with headers
//              Flotilla-Manifest-Size    the object's size in bytes
//              Flotilla-Manifest-Digest  "SHA-256=<base64url-padded>" of the whole object (the object store's)
//              Flotilla-Manifest-Offset  the offset of this chunk
//            a refusal has no size header: Flotilla-Error <reason> and a human message as the body.
// A leaf of libs/events: names, the request codec and the header names only; the hub side is in the scheduler
// (manifest_server.h), the agent side in services/agent (ManifestSource).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::events {

//! flotilla.manifest.<cluster>: where a cluster's agent asks for manifests (the only manifest subject it may use).
std::string manifestSubject(std::string_view cluster);
//! Every cluster's manifest subject (what the hub subscribes to).
inline constexpr std::string_view kManifestFilter = "flotilla.manifest.*";
//! The subject prefix, for subjectTokens().
inline constexpr std::string_view kManifestPrefix = "flotilla.manifest";

//! agent -> hub: one chunk of a manifest, starting at `offset`.
struct ManifestRequest {
  static constexpr std::string_view kKind = "ManifestRequest";
  std::string id;
  std::string time;
  std::string manifest_id;  //!< required: the DeployEvent's manifestID
  int64_t offset = 0;       //!< byte offset of the wanted chunk, 0 <= offset < size (0 for an empty object)
  //! The DeployEvent asking (optional, "" / 0 when not a deploy): lets the hub answer Superseded instead of
  //! NotDeployed when that bundle's record has moved on to a newer generation.
  std::string workspace;
  std::string bundle;
  int64_t generation = 0;

  bool operator==(const ManifestRequest&) const = default;
};

Json encode(const ManifestRequest& value);
//! Strict decoding (unknown fields, a missing manifestID, a negative offset are errors naming the field).
Result<ManifestRequest> parseManifestRequest(std::string_view data);

//! Reply headers (see the file comment).
inline constexpr std::string_view kManifestSizeHeader = "Flotilla-Manifest-Size";
inline constexpr std::string_view kManifestDigestHeader = "Flotilla-Manifest-Digest";
inline constexpr std::string_view kManifestOffsetHeader = "Flotilla-Manifest-Offset";
inline constexpr std::string_view kManifestErrorHeader = "Flotilla-Error";

//! Refusal reasons (the value of Flotilla-Error).
//! No deployment of the asking cluster references the manifest (also when it exists for another cluster).
inline constexpr std::string_view kManifestNotDeployed = "NotDeployed";
//! A deployment of the cluster references it, but the object is not in the store.
inline constexpr std::string_view kManifestNotFound = "NotFound";
//! The request cannot be read, or its offset is past the object's end.
inline constexpr std::string_view kManifestBadRequest = "BadRequest";
//! Not referenced any more because the bundle's deployment record of the asking cluster has a newer generation than
//! the request's: a newer DeployEvent for that bundle was published before the record moved on, so this one is stale.
inline constexpr std::string_view kManifestSuperseded = "Superseded";
//! The hub cannot answer now (its records are not loaded yet, the store cannot be read): try again.
inline constexpr std::string_view kManifestUnavailable = "Unavailable";

}  // namespace flotilla::events
