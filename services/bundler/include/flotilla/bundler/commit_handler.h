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
//                     the last good render, and the other bundles still publish.
//   8. deletions      bundles recorded for this GitRepo that the commit no longer has: publish deleted=true, then
//                     drop their record and render status
//   9. ack            only now; any transient failure before this naks the event (backoff by delivery count) and
//                     the whole commit is redone — every step is idempotent (same manifestIDs, same Msg-Ids).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bundler/bundle_spec.h"
#include "flotilla/bundler/cluster_directory.h"
#include "flotilla/bundler/discovery.h"
#include "flotilla/bundler/manifest.h"
#include "flotilla/bundler/metrics.h"
#include "flotilla/bundler/records.h"
#include "flotilla/bundler/render.h"
#include "flotilla/bundler/variants.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/variants.h"
#include "flotilla/model/resources.h"
#include "flotilla/service/consumer.h"
#include "flotilla/source/archive.h"

namespace flotilla::bundler {

// The consumer runtime's types (libs/service/consumer.h), under the names the handler has always used.
using Outcome = service::Outcome;
using Delivery = service::Delivery;

//! The hub handles the handler uses.
struct HandlerBus {
  std::shared_ptr<bus::JetStream> js;
  std::shared_ptr<bus::ObjectStore> sources;
  std::shared_ptr<bus::ObjectStore> manifests;
  std::shared_ptr<bus::KeyValue> gitrepos;
  std::shared_ptr<bus::KeyValue> bundles;
  std::shared_ptr<bus::KeyValue> status;
  //! KV `clusters` (the scheduler's cluster and group records), watched for per-cluster variants; nullptr = the
  //! bundler renders no variants for any cluster (tables stay empty).
  std::shared_ptr<bus::KeyValue> clusters;
};

struct HandlerOptions {
  std::string work_dir = "/var/lib/flotilla/bundler";
  RenderLimits limits;
  std::chrono::milliseconds retry_base{1000};  //!< first nak delay; doubles per delivery
  std::chrono::milliseconds retry_max{60000};  //!< cap of the nak delay
  //! Bundles of one commit rendered at the same time (--render-parallelism). Results are still stored and
  //! published one by one in discovery order, so events and errors come out in the same order as with 1.
  int render_parallelism = 4;
};

//! An extracted source archive; the directory is removed when this is destroyed.
class Checkout {
 public:
  Checkout() = default;
  explicit Checkout(std::string root) : root_(std::move(root)) {}
  Checkout(Checkout&& other) noexcept : root_(std::exchange(other.root_, {})) {}
  Checkout& operator=(Checkout&& other) noexcept;
  Checkout(const Checkout&) = delete;
  Checkout& operator=(const Checkout&) = delete;
  ~Checkout();

  [[nodiscard]] const std::string& root() const { return root_; }

 private:
  std::string root_;
};

//! Creates `work_dir` if needed, checks that it is writable, and removes checkouts a killed process left behind
//! (commit-* directories). The work dir must belong to one bundler process.
Status prepareWorkDir(const std::string& work_dir);

//! Extracts `archive` into a fresh directory under `work_dir` (created if missing).
Result<Checkout> extractCheckout(const source::Archive& archive, const std::string& work_dir);

//! The result of rendering one bundle directory.
struct RenderedBundle {
  std::string bundle;  //!< the bundle ID
  std::string path;    //!< the directory ("." for the root)
  std::string renderer;
  //! Set when the bundle's files are bad (fleet.yaml, YAML, not an object, size limits...). `event` then carries
  //! only the identity fields.
  std::optional<events::RenderError> error;
  events::BundleEvent event;                           //!< complete except id and time
  std::map<std::string, CanonicalManifest> manifests;  //!< by manifestID: the default and each distinct customization
  RenderNotes notes;  //!< of the default render: a remote chart's resolved version and digest
  double seconds = 0;
  //! Per-cluster rendering (variants.h): the table (event.variantsObject names it; `variants_text` is what to store
  //! under that name) and every cluster's targeting decision.
  std::optional<events::BundleVariants> variants;
  std::string variants_text;
  std::map<std::string, BundlePlacement> placements;
  std::string source_object;  //!< the commit's source archive (kept in the record for re-renders)
  //! (cache key, manifestID) of the variants rendered here, for VariantCache once their manifests are stored.
  std::vector<std::pair<std::string, std::string>> cache_entries;
  size_t variant_renders = 0;     //!< renderer runs for variants (cache misses)
  size_t variant_cache_hits = 0;  //!< variants whose manifest came from the cache
};

//! Everything renderBundle needs besides the directory.
struct RenderContext {
  const std::string& root;
  const events::CommitEvent& commit;
  const model::GitRepo& gitrepo;
  const RendererSet& renderers;
  const RenderLimits& limits;
  //! Bundle IDs recorded for this GitRepo, by path: keeps a bundle's identity when its fleet.yaml (and with it a
  //! `name:` override) cannot be read, so a typo does not delete the deployed bundle.
  const std::map<std::string, std::string>& previous_ids;
  //! Per-cluster variants (variants.h): the clusters of the commit's workspace (nullptr = none known), a cache of
  //! earlier variant renders (optional), and `force_variants` to render every bundle per cluster (renderForCluster).
  const std::vector<ClusterFacts>* clusters = nullptr;
  VariantCache* cache = nullptr;
  bool force_variants = false;
};

//! Renders one bundle directory. Bad user input is not a failure: it comes back as RenderedBundle::error. Only
//! failures that are not the commit's fault (file system, renderer binaries) are returned as errors.
Result<RenderedBundle> renderBundle(const RenderContext& context, const BundleDir& dir);

//! A RenderError from a kInvalid Error (where = "file:line"); `fallback_file` when the error names no file.
events::RenderError renderErrorOf(const Error& error, std::string_view fallback_file);

class CommitHandler {
 public:
  CommitHandler(HandlerBus bus, std::shared_ptr<const RendererSet> renderers, BundlerMetrics& metrics,
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
  Status storeManifest(const CanonicalManifest& manifest);
  //! Stores a bundle's BundleVariants table (per-cluster rendering) unless present (content-addressed); call after
  //! its manifests are stored (the variant cache then learns them).
  Status storeVariants(const RenderedBundle& rendered);
  //! Writes the record and status of a rendered (or failed) bundle and publishes its event.
  Status commitBundle(RenderedBundle& rendered, const std::optional<BundleRecord>& previous, uint64_t sequence);
  //! Publishes deleted=true for a bundle the commit no longer has, then drops its record and status.
  Status deleteBundle(const BundleRecord& record, const events::CommitEvent& event);

  // Per-cluster variants (variants.h).

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
  Status publish(events::BundleEvent& event);

  //! The lock serialising a GitRepo's commits and re-renders in this process.
  std::shared_ptr<std::mutex> gitrepoLock(std::string_view workspace, std::string_view gitrepo);

  HandlerBus bus_;
  std::shared_ptr<const RendererSet> renderers_;
  BundlerMetrics& metrics_;
  HandlerOptions options_;
  std::shared_ptr<const ClusterDirectory> clusters_;
  VariantCache variant_cache_;
  std::mutex locks_mutex_;
  std::map<std::string, std::shared_ptr<std::mutex>> gitrepo_locks_;
};

}  // namespace flotilla::bundler
