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
//
// A re-render (a cluster changed, the commit did not) appends "/rerender-<revision>": the KV revision of the
// BundleRecord it replaces. Its event can equal one published earlier for the same commit (cluster facts A -> B ->
// A, e.g. a CRD installed and deleted again), which the digest alone would repeat and JetStream would drop; the
// revision changes with every record written, so each genuine change publishes, while a retry of the same
// re-render (the record not written yet) repeats the id and is dropped as a duplicate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/records.h"

namespace flotilla::bundler {

//! The records and their strict codecs are the KV contract of libs/events (records.h); the names here keep the
//! bundler's call sites short.
using BundleRecord = events::BundleRecord;
using RenderStatus = events::RenderStatus;
inline constexpr std::string_view kRecordApiVersion = events::kBundlerRecordApiVersion;

//! Strict: unknown fields and wrong types are kInvalid naming the field.
inline Result<BundleRecord> decodeBundleRecord(const Json& json) {
  return events::decodeRecord<BundleRecord>(json);
}
inline Result<RenderStatus> decodeRenderStatus(const Json& json) {
  return events::decodeRecord<RenderStatus>(json);
}
//! A KV value: JSON, then decodeBundleRecord.
inline Result<BundleRecord> parseBundleRecord(std::string_view text) {
  return events::parseRecord<BundleRecord>(text);
}

//! status bucket key: bundle-render.<ws>.<bundle> (events::bundleRenderStatusKey).
std::string renderStatusKey(std::string_view workspace, std::string_view bundle);

//! 16 hex chars of sha256 over `event` encoded with id and time cleared.
std::string eventDigest(const events::BundleEvent& event);

//! "manifestID" (or the variantsObject of a bundle rendered per cluster) for a good render, "error", or "deleted":
//! the fourth part of the Msg-Id.
std::string eventState(const events::BundleEvent& event);

//! events::bundleMsgId(ws, bundle, commit, state) + "/" + eventDigest(event).
std::string bundleMsgId(const events::BundleEvent& event);
//! A re-render's id: bundleMsgId(event) + "/rerender-" + the KV revision of the BundleRecord it replaces.
std::string rerenderMsgId(const events::BundleEvent& event, uint64_t replaced_revision);

//! Fills event.id (= its Nats-Msg-Id, as docs/events asks: rerenderMsgId when `replaced_revision` is set, else
//! bundleMsgId) and event.time.
void stampEvent(events::BundleEvent& event, std::optional<uint64_t> replaced_revision = std::nullopt);

//! The Helm release a render of `renderer` used: fleet.yaml's helm.releaseName (`pinned`), else the bundle ID (as
//! the Helm renderer does); "" when the bundle is not a Helm chart.
struct HelmRelease {
  std::string name;
  bool pinned = false;
};
HelmRelease helmReleaseOf(const events::BundleEvent& event, std::string_view renderer);

}  // namespace flotilla::bundler
