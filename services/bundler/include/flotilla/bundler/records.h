// flotilla/bundler/records.h
//
// What the bundler keeps in KV and the ids it publishes with (docs/pipeline.md; the bundler is the only writer of
// these keys).
//
//   bundles/<ws>.<bundle>              BundleRecord: the bundle's last good render (the BundleEvent the scheduler
//                                      deploys), the current render error if the latest commit failed, and the
//                                      stream sequence of the CommitEvent last applied (so an older commit that is
//                                      redelivered late cannot overwrite a newer one).
//   status/bundle-render.<ws>.<bundle> RenderStatus: the latest render's commit and manifestID, or its error.
//
// Nats-Msg-Id of a BundleEvent: bundle/<ws>/<bundle>/<commit>/<manifestID | "error" | "deleted">/<digest>, where
// digest is 16 hex chars of sha256 over the event without id and time. docs/pipeline.md has no digest; without it
// a force-sync or a GitRepo target change (same commit, same manifest, new options or targets) published within
// the 10-minute duplicate window would be dropped as a duplicate. A redelivered commit renders the same event, so
// it still gets the same id and JetStream drops the copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"

namespace flotilla::bundler {

//! Value of bundles/<ws>.<bundle>.
struct BundleRecord {
  static constexpr std::string_view kKind = "BundleRecord";
  std::string workspace;
  std::string gitrepo;
  std::string bundle;
  std::string path;
  std::string commit;            //!< the commit last handled (rendered, or failed to render)
  uint64_t commit_sequence = 0;  //!< FLOTILLA_COMMITS stream sequence of that commit's event
  //! The last successful render, as published (what the scheduler deploys); nullopt if none ever succeeded.
  std::optional<events::BundleEvent> last_good;
  //! Set while `commit` fails to render (cleared by the next good render).
  std::optional<events::RenderError> error;
  //! The `sources` object of that commit: a bundle rendered per cluster is rendered again from it when a cluster
  //! of the workspace changes (variants.h).
  std::string source_object;

  bool operator==(const BundleRecord&) const = default;
};

//! {"apiVersion":"bundler.flotilla.io/v1","kind":"BundleRecord","workspace","gitrepo","bundle","path","commit",
//!  "commitSequence","sourceObject" (when known),"manifestID" (last good, "" if none),"lastGood": BundleEvent|absent,
//!  "error": {...}|absent}.
Json encode(const BundleRecord& record);
//! Strict: unknown fields and wrong types are kInvalid naming the field.
Result<BundleRecord> decodeBundleRecord(const Json& json);
//! A KV value: JSON, then decodeBundleRecord.
Result<BundleRecord> parseBundleRecord(std::string_view text);

//! Value of status/bundle-render.<ws>.<bundle>.
struct RenderStatus {
  static constexpr std::string_view kKind = "BundleRenderStatus";
  std::string workspace;
  std::string gitrepo;
  std::string bundle;
  std::string path;
  std::string commit;                 //!< the commit this status is about
  std::string manifest_id;            //!< its manifest ("" when it failed)
  std::string last_good_manifest_id;  //!< what stays deployed when it failed
  std::optional<events::RenderError> error;
  std::string time;  //!< RFC 3339, when it was written
  //! A remote Helm chart (helm.repo / URL / oci://) as rendered: its reference, resolved version and archive
  //! sha256. Written only for remote charts.
  std::string chart;
  std::string chart_version;
  std::string chart_digest;

  bool operator==(const RenderStatus&) const = default;
};

Json encode(const RenderStatus& status);
Result<RenderStatus> decodeRenderStatus(const Json& json);

inline constexpr std::string_view kRecordApiVersion = "bundler.flotilla.io/v1";

//! status bucket key: bundle-render.<ws>.<bundle> (events::bundleRenderStatusKey).
std::string renderStatusKey(std::string_view workspace, std::string_view bundle);

//! 16 hex chars of sha256 over `event` encoded with id and time cleared.
std::string eventDigest(const events::BundleEvent& event);

//! "manifestID" (or the variantsObject of a bundle rendered per cluster) for a good render, "error", or "deleted":
//! the fourth part of the Msg-Id.
std::string eventState(const events::BundleEvent& event);

//! events::bundleMsgId(ws, bundle, commit, state) + "/" + eventDigest(event).
std::string bundleMsgId(const events::BundleEvent& event);

//! Fills event.id (= its Nats-Msg-Id, as docs/events asks) and event.time.
void stampEvent(events::BundleEvent& event);

}  // namespace flotilla::bundler
