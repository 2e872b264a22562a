// flotilla/bundler/commit_handler.h
//
// What the bundler does with one CommitEvent (docs/pipeline.md stage 3), as short ordered steps:
//   1. decode         the event (strict); bad input is rejected (term) after a log line
//   2. gitrepo        read the GitRepo from KV `gitrepos` (targets, labels, option overrides); gone -> ack, skip
//   3. records        the GitRepo's bundle records from KV `bundles`; one written from a newer CommitEvent (higher
//                     stream sequence) means this event is stale -> ack, skip
//   4. source         load the source archive named by the event from the `sources` object store and decode it
//   5. checkout       extract it into a fresh directory under the work dir (removed when the handler returns)
//   6. discover       the bundle directories under the event's paths (discovery.h)
//   7. per bundle     render (renderBundle: fleet.yaml, renderer, canonical manifest per distinct customization),
//                     store new manifests in `manifests`, write the BundleRecord and the render status, publish
//                     the BundleEvent. A bundle whose files are bad gets an error event and status; its record keeps
//                     the last good render, and the other bundles still publish. A bundle whose render key
//                     (render_key.h) is its record's is not rendered: its last good render is published for this
//                     commit (the render cache).
//   8. deletions      bundles recorded for this GitRepo that the commit no longer has: publish deleted=true, then
//                     drop their record and render status. Always after every live bundle of the commit (fault
//                     point `bundler.commit.published` between the two when there are deletions).
//   9. claims         a bundle skipped because another GitRepo of the workspace holds its name is remembered as a
//                     BundleClaim (KV status); claims this commit no longer makes are dropped
//  10. freed names    when the commit deleted bundles (or is a redelivery), waiting claims whose name is now free are
//                     rendered from the claimant's commit, so a name released by one GitRepo never leaves the other
//                     stuck until its next commit
//  11. ack            only now; any transient failure before this naks the event (backoff by delivery count) and
//                     the whole commit is redone — every step is idempotent (same manifestIDs, same Msg-Ids).
// A CommitEvent with `deleted` (the GitRepo was deleted: a cascade) runs only the records step, then publishes a
// deleted BundleEvent for every bundle of the GitRepo, drops the GitRepo's claims, and renders freed names.
// Every BundleEvent carries `commitSequence`: the FLOTILLA_COMMITS sequence of the commit it comes from.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bundler/cluster_directory.h"
#include "flotilla/bundler/metrics.h"
#include "flotilla/bundler/records.h"
#include "flotilla/bundler/render_key.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/core/clock.h"
#include "flotilla/core/log.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/variants.h"
#include "flotilla/model/resources.h"
#include "flotilla/render/render_bundle.h"
#include "flotilla/service/background_thread.h"
#include "flotilla/service/consumer.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/object_gc.h"
#include "flotilla/service/public_events.h"
#include "flotilla/service/store_full.h"
#include "flotilla/source/archive.h"

namespace flotilla::bundler {

// The consumer runtime's types (libs/service/consumer.h), under the names the handler has always used.
using Outcome = service::Outcome;
using Delivery = service::Delivery;

//! The hub handles the handler uses: js, sources, manifests, gitrepos, bundles, status and clusters. KV `clusters`
//! (the scheduler's cluster and group records) is watched for per-cluster variants; nullptr = the bundler renders no
//! variants for any cluster (tables stay empty).
using HandlerBus = service::Hub;

struct HandlerOptions {
  std::string work_dir = "/var/lib/flotilla/bundler";
  render::RenderLimits limits;
  std::chrono::milliseconds retry_base{1000};  //!< first nak delay; doubles per delivery
  std::chrono::milliseconds retry_max{60000};  //!< cap of the nak delay
  //! Bundles of one commit rendered at the same time (--render-parallelism). Results are still stored and
  //! published one by one in discovery order, so events and errors come out in the same order as with 1.
  int render_parallelism = 4;
  //! Wall-clock time one commit may spend, from its start to the start of its last bundle's render. Every
  //! Delivery::progress() call renews the consumer's own budget, so without this a commit with many slow bundles
  //! (each bounded by limits.timeout) could hold a worker for hours. A bundle that would start after it is not
  //! rendered: the commit is rejected ("time_budget") with an error naming that bundle, and bundles rendered
  //! before it stay published. 20 minutes is far above a real commit (seconds; minutes for hundreds of charts).
  //! 0 = no budget.
  std::chrono::milliseconds commit_budget{std::chrono::minutes(20)};
  //! The clock the commit budget is measured with; null = systemClock() (tests step their own).
  Clock* clock = nullptr;
};

//! Creates `work_dir` if needed, checks that it is writable, and removes checkouts a killed process left behind
//! (commit-* directories). The work dir must belong to one bundler process.
Status prepareWorkDir(const std::string& work_dir);

//! Extracts `archive` into a fresh directory under `work_dir` (created if missing).
Result<render::Checkout> extractCheckout(const source::Archive& archive, const std::string& work_dir);

//! The bundle directory of `path` in a checkout rooted at `root`, with its fleet.yaml if it has one.
render::BundleDir bundleDirAt(const std::string& root, const std::string& path);

//! The fault point between a commit's live bundles and its deletions (docs/pipeline.md "Ownership handover").
inline constexpr std::string_view kFaultCommitPublished = "bundler.commit.published";
//! The CloudEvents source of the bundler's public events.
inline constexpr std::string_view kBundlerEventSource = "/flotilla/bundler";

class CommitHandler {
 public:
  CommitHandler(HandlerBus bus, std::shared_ptr<const render::RendererSet> renderers, BundlerMetrics& metrics,
                HandlerOptions options);

  //! Decodes and handles one message payload.
  Outcome handle(std::string_view data, const Delivery& delivery);
  //! Handles a decoded event.
  Outcome handleEvent(const events::CommitEvent& event, const Delivery& delivery);

  //! The nak delay for the n-th delivery: retry_base * 2^(n-1), capped at retry_max.
  [[nodiscard]] std::chrono::milliseconds backoff(uint64_t delivery_count) const;

  // Steps, public so tests can drive them one by one.

  //! The GitRepo from KV `gitrepos`; nullopt when it is gone.
  Result<std::optional<model::GitRepo>> loadGitRepo(std::string_view workspace, std::string_view name);
  //! Every BundleRecord of the GitRepo (records of other GitRepos in the workspace are skipped).
  Result<std::vector<BundleRecord>> recordsOf(std::string_view workspace, std::string_view gitrepo);
  //! The source archive named by the event.
  Result<source::Archive> loadSource(const events::CommitEvent& event);
  //! Stores a manifest unless the object store already has it (content-addressed).
  Status storeManifest(const render::CanonicalManifest& manifest);
  //! Stores a bundle's BundleVariants table (per-cluster rendering) unless present (content-addressed); call after
  //! its manifests are stored (the variant cache then learns them).
  Status storeVariants(const render::RenderedBundle& rendered);
  //! Writes the record and status of a rendered (or failed) bundle and publishes its event. `replaced_revision`
  //! (re-renders only): the KV revision of the record being replaced; the event gets rerenderMsgId and is published
  //! before the record is written, so a retry after a failed write repeats the same id (a duplicate JetStream
  //! drops) instead of finding the table unchanged and publishing nothing.
  Status commitBundle(render::RenderedBundle& rendered, const std::optional<BundleRecord>& previous, uint64_t sequence,
                      std::optional<uint64_t> replaced_revision = std::nullopt);
  //! Publishes deleted=true for a bundle the commit no longer has (or of a deleted GitRepo), then drops its record
  //! and status. `sequence`: the FLOTILLA_COMMITS sequence of the commit (the event's commitSequence).
  Status deleteBundle(const BundleRecord& record, const events::CommitEvent& event, uint64_t sequence);

  // Bundle names held by another GitRepo (claims.cpp).

  //! Remembers that `claim.gitrepo` has a bundle named `claim.bundle` that another GitRepo holds.
  Status recordClaim(const events::BundleClaim& claim);
  //! Drops the claims of `gitrepo` except those for the bundles in `keep`.
  Status dropClaims(std::string_view workspace, std::string_view gitrepo, const std::set<std::string>& keep);
  //! Renders every claim of `workspace` whose bundle name is free now (no bundle record), from the claimant's
  //! commit, under the claimant's lock. Call without holding a GitRepo lock. Transient failures are returned.
  Status renderFreedClaims(std::string_view workspace);

  // Per-cluster variants (variants.h).

  //! Garbage collection of `manifests`: touched for every manifest and table stored or reused (may be null).
  void setGarbageCollector(service::ObjectGc* gc) { gc_ = gc; }
  //! The manifests the variant cache names (garbage collection keeps them).
  [[nodiscard]] std::set<std::string> cachedManifests() const { return variant_cache_.manifestIds(); }

  //! The clusters the handler renders variants for (nullptr: none known, variant tables stay empty).
  void setClusters(std::shared_ptr<const ClusterDirectory> clusters) { clusters_ = std::move(clusters); }
  //! Re-renders the per-cluster bundles of `workspace` from their last commit (its source archive, recorded in the
  //! BundleRecord) after a cluster changed, and publishes a new BundleEvent for each bundle whose variants table
  //! changed. Bundles not rendered per cluster, or whose last commit failed to render, are left alone. Runs under
  //! the GitRepo's lock, so it never interleaves with a commit of the same GitRepo in this process. Transient
  //! failures are returned (the caller retries); bad input becomes an error event like a commit's.
  Status rerenderWorkspace(std::string_view workspace);
  //! Re-renders one bundle (see rerenderWorkspace); `changed` tells whether a new event was published.
  Status rerenderBundle(std::string_view workspace, std::string_view bundle, bool& changed);

 private:
  Outcome transient(const events::CommitEvent& event, const Delivery& delivery, std::string_view step,
                    const Error& error);
  //! When `reject`: logs `message` with `fields` at `level` and rejects the commit (a retry cannot fix it);
  //! otherwise transient().
  struct CommitRun;
  Outcome rejectOrRetry(const CommitRun& run, std::string_view step, const Error& error, bool reject, log::Level level,
                        std::string_view message, log::Fields fields);
  //! Publishes an event stamped before (stampEvent) with its id as the Nats-Msg-Id.
  Status publish(const events::BundleEvent& event);

  //! The steps of one commit under its GitRepo's lock (handleEvent then renders freed names without it).
  Outcome runSteps(CommitRun& run);
  // The steps of handleEvent, in order; each returns the outcome when the commit ends there.
  std::optional<Outcome> gitRepoStep(CommitRun& run);    //!< 2. the GitRepo (gone: ack)
  std::optional<Outcome> recordsStep(CommitRun& run);    //!< 3. its records (a newer commit rendered: ack)
  std::optional<Outcome> checkoutStep(CommitRun& run);   //!< 4-5. source archive and checkout
  std::optional<Outcome> discoverStep(CommitRun& run);   //!< 6. bundle directories
  std::optional<Outcome> renderStep(CommitRun& run);     //!< 7. render, store, record, publish
  std::optional<Outcome> deletionsStep(CommitRun& run);  //!< 8. bundles the commit no longer has
  std::optional<Outcome> claimsStep(CommitRun& run);     //!< 9. claims it makes now; the others dropped
  std::optional<Outcome> cascadeStep(CommitRun& run);    //!< the GitRepo was deleted: every bundle, every claim
  //! Helm bundles new in this commit whose release name follows the bundle name, while the commit deletes a Helm
  //! bundle of another release name: their RenderStatus says that objects named from .Release.Name are new.
  Status noteHelmRenames(const CommitRun& run, const std::vector<const BundleRecord*>& deleted);
  //! Stores, records and publishes one rendered bundle (renderStep's in-order consumer).
  Status storeRendered(CommitRun& run, const render::BundleDir& dir, const RenderKey& key,
                       Result<render::RenderedBundle>& rendered);

  // The render cache (render_cache.cpp).

  //! The bundle of `dir` taken from `previous` (its record) when the record's render key is `key` and its last good
  //! render is usable; nullopt: render it. Runs on the render threads.
  std::optional<render::RenderedBundle> cachedRender(const events::CommitEvent& event, const std::string& root,
                                                     const render::BundleDir& dir, const RenderKey& key,
                                                     const BundleRecord* previous);
  //! Every manifest `event` names that no record protects from garbage collection is still stored (touched first).
  bool customizationManifestsStored(const events::BundleEvent& event);
  //! `key` completed with the remote inputs it names (RenderKey::resolve): the charts resolved to digests and folded
  //! in; a key that cannot be completed so becomes uncacheable ("unresolved").
  static RenderKey withRemoteInputs(const render::RenderContext& context, const render::BundleDir& dir, RenderKey key);
  //! Keeps `key` in a cacheable render (rendered.render_key) and counts render_cache_total.
  void noteRenderCache(const RenderKey& key, render::RenderedBundle& rendered);
  //! A bundle whose name `owner` (another GitRepo) holds: skipped, and a BundleClaim recorded.
  Status claimName(CommitRun& run, const render::RenderedBundle& rendered, const std::string& owner);
  //! kInvalid (where "commit_budget") naming `dir` when the commit has used up HandlerOptions::commit_budget.
  Status withinBudget(const CommitRun& run, const render::BundleDir& dir);
  [[nodiscard]] Clock& clock() const;
  //! The other GitRepo of the workspace whose record owns `bundle` ("" = none).
  Result<std::string> otherOwner(const events::CommitEvent& event, const std::string& bundle);
  //! Stores a bundle's manifests, then its variants table.
  Status storeAll(const render::RenderedBundle& rendered);
  //! Puts a content-addressed object into `manifests` unless present (touched first); true when stored now.
  Result<bool> storeObject(const std::string& name, const std::string& text);
  //! A bundle that could not be stored or published because a store is full: its render status says so (the
  //! commit waits and is retried; the status of its next success replaces this).
  void noteStoreFull(const render::RenderedBundle& rendered, const Error& error);

  // The steps of rerenderBundle.
  struct Rerender;
  //! A record to re-render and the KV revision it was read at (the re-render's Msg-Id names it).
  struct RecordAt {
    BundleRecord record;
    uint64_t revision = 0;
  };
  //! The record to re-render (read under the GitRepo's lock); nullopt: nothing to do.
  Result<std::optional<RecordAt>> rerenderRecord(std::string_view workspace, std::string_view bundle);
  //! The record's commit checked out again, with its GitRepo; nullopt: skipped (logged).
  Result<std::optional<Rerender>> rerenderCheckout(const BundleRecord& record);
  //! Stores and publishes a re-render whose table or error changed; `changed` tells whether it did.
  Status publishRerender(const RecordAt& current, render::RenderedBundle& rendered, bool& changed);

  // The steps of rendering a claim whose name was freed (claims.cpp).
  Result<std::vector<events::BundleClaim>> claimsIn(std::string_view filter);
  //! Renders one claim if its name is still free and the claim still current; `rendered` tells whether it did.
  Status renderClaim(const events::BundleClaim& seen, bool& rendered);
  //! The claim as stored now, if its bundle name is free (a claim whose claimant has the bundle is removed).
  Result<std::optional<events::BundleClaim>> currentClaim(const events::BundleClaim& seen);
  //! Stores, records and publishes the rendered claim, then removes it.
  Status publishClaim(const events::BundleClaim& claim, render::RenderedBundle& bundle, bool& rendered);
  Status removeClaim(const events::BundleClaim& claim);

  //! The lock serialising a GitRepo's commits and re-renders in this process.
  std::shared_ptr<std::mutex> gitrepoLock(std::string_view workspace, std::string_view gitrepo);

  HandlerBus bus_;
  std::shared_ptr<const render::RendererSet> renderers_;
  BundlerMetrics& metrics_;
  HandlerOptions options_;
  std::string renderer_identity_;  //!< rendererIdentity() of renderers_, once: part of every render key
  std::shared_ptr<const ClusterDirectory> clusters_;
  render::VariantCache variant_cache_;
  service::ObjectGc* gc_ = nullptr;
  service::StoreFullReporter store_full_;
  //! io.flotilla.bundle.rendered/.failed/.deleted for every bundle event in the stream (docs/events/cloudevents.md).
  service::PublicEvents public_events_;
  std::mutex locks_mutex_;
  std::map<std::string, std::shared_ptr<std::mutex>> gitrepo_locks_;

  //! Hands a finished commit's checkout to remover_: the commit's ack (and the next commit) do not wait for its
  //! files to be removed — hundreds of milliseconds for 120 bundles on a busy disk, more than a mostly cached
  //! commit takes otherwise. A bundler killed before they are removed removes them at its next start
  //! (prepareWorkDir).
  void retire(render::Checkout checkout);
  std::mutex retired_mutex_;
  std::vector<render::Checkout> retired_;  //!< waiting for remover_ (removed synchronously on destruction)
  service::BackgroundThread remover_;      //!< declared last: stopped before retired_ is destroyed
};

}  // namespace flotilla::bundler
