#include "flotilla/bundler/commit_handler.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "flotilla/bus/errors.h"
#include "flotilla/core/fault.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/render/discovery.h"
#include "flotilla/render/render_pool.h"

namespace flotilla::bundler {
using render::BundleDir;
using render::Checkout;
using render::ClusterFacts;
using render::RenderContext;
using render::RenderedBundle;

namespace {

std::string gitrepoName(const events::CommitEvent& event) {
  return event.workspace + "/" + event.gitrepo;
}

//! Error::where of the error that says the commit's time budget ran out before a bundle.
constexpr std::string_view kCommitBudgetWhere = "commit_budget";

}  // namespace

CommitHandler::CommitHandler(HandlerBus bus, std::shared_ptr<const render::RendererSet> renderers,
                             BundlerMetrics& metrics, HandlerOptions options)
    : bus_(std::move(bus)),
      renderers_(std::move(renderers)),
      metrics_(metrics),
      options_(std::move(options)),
      renderer_identity_(rendererIdentity(renderers_->executables(), options_.limits)),
      store_full_(metrics.raw()),
      public_events_(bus_.js, metrics.raw()) {}

std::chrono::milliseconds CommitHandler::backoff(uint64_t delivery_count) const {
  return service::Backoff(options_.retry_base, options_.retry_max).delay(delivery_count);
}

Outcome CommitHandler::handle(std::string_view data, const Delivery& delivery) {
  auto event = events::parsePayload<events::CommitEvent>(data);
  if (!event.ok()) {
    log::warn("rejecting a malformed CommitEvent",
              {{"error", event.error().describe()}, {"sequence", static_cast<int64_t>(delivery.stream_sequence)}});
    return Outcome::reject("invalid");
  }
  return handleEvent(*event, delivery);
}

Outcome CommitHandler::transient(const events::CommitEvent& event, const Delivery& delivery, std::string_view step,
                                 const Error& error) {
  if (error.kind == ErrorKind::kStoreFull) {
    // Not a failure of the commit: it waits (parked, using no delivery) until space is freed, never terminated.
    auto delay = backoff(delivery.attempt);
    metrics_.stepFailure(step);
    store_full_.report(error, "commit", gitrepoName(event) + "@" + event.commit);
    if (gc_ != nullptr && bus::fullStoreName(error) == bus_.manifests->bucket()) {
      gc_->requestPass();
    }
    return Outcome::wait(delay);
  }
  auto delay = backoff(delivery.delivery_count);
  metrics_.stepFailure(step);
  log::warn("commit handling failed, will retry", {{"gitrepo", gitrepoName(event)},
                                                   {"commit", event.commit},
                                                   {"step", step},
                                                   {"error", error.describe()},
                                                   {"delivery", static_cast<int64_t>(delivery.delivery_count)},
                                                   {"retry_in_ms", static_cast<int64_t>(delay.count())}});
  return Outcome::retry(delay);
}

//! What the steps of one commit share.
struct CommitHandler::CommitRun {
  const events::CommitEvent& event;
  const Delivery& delivery;
  model::GitRepo gitrepo;
  std::vector<BundleRecord> records;                //!< this GitRepo's, before the commit
  std::map<std::string, std::string> previous_ids;  //!< bundle ID by path
  std::map<std::string, const BundleRecord*> by_bundle;
  source::Archive archive;  //!< the commit's files, until the render keys are computed from them
  Checkout checkout;
  std::string root;  //!< the checkout's files
  std::vector<BundleDir> dirs;
  std::vector<RenderKey> keys;    //!< the render cache's key of each of `dirs`
  std::set<std::string> present;  //!< bundles this commit has
  std::set<std::string> claimed;  //!< bundles it has whose name another GitRepo holds (claims recorded)
  //! New Helm bundles whose release name follows the bundle name: bundle -> release name.
  std::map<std::string, std::string> new_helm;
  bool freed = false;             //!< bundles were deleted: names other GitRepos wait for may be free
  std::optional<Outcome> failed;  //!< set by the store step that failed
  Clock::SteadyTime started;      //!< HandlerOptions::commit_budget counts from here
  std::atomic<size_t> stored{0};  //!< bundles rendered and stored so far (read by render threads)
};

Outcome CommitHandler::rejectOrRetry(const CommitRun& run, std::string_view step, const Error& error, bool reject,
                                     log::Level level, std::string_view message, log::Fields fields) {
  if (reject) {
    log::write(level, message, fields);
    return Outcome::reject("invalid");
  }
  return transient(run.event, run.delivery, step, error);
}

Outcome CommitHandler::handleEvent(const events::CommitEvent& event, const Delivery& delivery) {
  log::info("commit received", {{"gitrepo", gitrepoName(event)},
                                {"commit", event.commit},
                                {"deleted", event.deleted},
                                {"changed", event.changed},
                                {"source_object", event.source_object},
                                {"delivery", static_cast<int64_t>(delivery.delivery_count)}});
  if (event.source_object.empty() && !event.deleted) {
    log::warn("rejecting a CommitEvent without a source object",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}});
    return Outcome::reject("invalid");
  }
  CommitRun run{.event = event, .delivery = delivery};
  run.started = clock().steadyNow();
  Outcome outcome = runSteps(run);
  retire(std::move(run.checkout));
  if (outcome.action != Outcome::Action::kAck || (!run.freed && delivery.delivery_count <= 1)) {
    return outcome;
  }
  // Names this commit freed (or, on a redelivery, may have freed before a crash): other GitRepos' bundles waiting
  // for them are rendered now, outside this GitRepo's lock (each under its own).
  if (auto rendered = renderFreedClaims(event.workspace); !rendered.ok()) {
    return transient(event, delivery, "claims", rendered.error());
  }
  return outcome;
}

void CommitHandler::retire(render::Checkout checkout) {
  if (checkout.root().empty()) {
    return;
  }
  {
    std::lock_guard lock(retired_mutex_);
    retired_.push_back(std::move(checkout));
  }
  remover_.start([this] {
    while (remover_.sleepFor(std::chrono::seconds(1))) {
      std::vector<render::Checkout> done;
      {
        std::lock_guard lock(retired_mutex_);
        done.swap(retired_);
      }
      done.clear();  // each Checkout removes its directory
    }
  });
  remover_.wake();
}

Outcome CommitHandler::runSteps(CommitRun& run) {
  const auto& event = run.event;
  // A cluster-triggered re-render of this GitRepo's bundles must not interleave with its commits.
  auto gitrepo_lock = gitrepoLock(event.workspace, event.gitrepo);
  std::lock_guard gitrepo_guard(*gitrepo_lock);
  using Step = std::optional<Outcome> (CommitHandler::*)(CommitRun&);
  if (event.deleted) {
    for (Step step : {&CommitHandler::recordsStep, &CommitHandler::cascadeStep}) {
      if (auto outcome = (this->*step)(run)) {
        return *outcome;
      }
    }
    log::info("deleted GitRepo's bundles deleted",
              {{"gitrepo", gitrepoName(event)}, {"bundles", static_cast<int64_t>(run.records.size())}});
    return Outcome::ack("deleted");
  }
  for (Step step : {&CommitHandler::gitRepoStep, &CommitHandler::recordsStep, &CommitHandler::checkoutStep,
                    &CommitHandler::discoverStep, &CommitHandler::renderStep, &CommitHandler::deletionsStep,
                    &CommitHandler::claimsStep}) {
    if (auto outcome = (this->*step)(run)) {
      return *outcome;
    }
  }
  log::info("commit rendered", {{"gitrepo", gitrepoName(event)},
                                {"commit", event.commit},
                                {"bundles", static_cast<int64_t>(run.present.size())}});
  return Outcome::ack("rendered");
}

std::optional<Outcome> CommitHandler::gitRepoStep(CommitRun& run) {
  const auto& event = run.event;
  auto gitrepo = loadGitRepo(event.workspace, event.gitrepo);
  if (!gitrepo.ok()) {
    return rejectOrRetry(
        run, "gitrepo", gitrepo.error(), gitrepo.error().kind == ErrorKind::kInvalid, log::Level::kWarn,
        "rejecting a commit: its GitRepo in KV does not decode",
        {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"error", gitrepo.error().describe()}});
  }
  if (!gitrepo->has_value()) {
    log::warn("skipping a commit: its GitRepo no longer exists",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}});
    return Outcome::ack("gitrepo_missing");
  }
  run.gitrepo = std::move(**gitrepo);
  return std::nullopt;
}

std::optional<Outcome> CommitHandler::recordsStep(CommitRun& run) {
  const auto& event = run.event;
  auto records = recordsOf(event.workspace, event.gitrepo);
  if (!records.ok()) {
    return transient(event, run.delivery, "records", records.error());
  }
  run.records = std::move(records).value();
  for (const auto& record : run.records) {
    if (record.commit_sequence > run.delivery.stream_sequence) {
      log::info("skipping a stale commit: a newer one was already rendered",
                {{"gitrepo", gitrepoName(event)},
                 {"commit", event.commit},
                 {"newer_commit", record.commit},
                 {"sequence", static_cast<int64_t>(run.delivery.stream_sequence)},
                 {"newer_sequence", static_cast<int64_t>(record.commit_sequence)}});
      return Outcome::ack("stale");
    }
  }
  for (const auto& record : run.records) {
    run.previous_ids[record.path] = record.bundle;
    run.by_bundle[record.bundle] = &record;
  }
  return std::nullopt;
}

std::optional<Outcome> CommitHandler::checkoutStep(CommitRun& run) {
  const auto& event = run.event;
  auto archive = loadSource(event);
  if (!archive.ok()) {
    const ErrorKind kind = archive.error().kind;
    return rejectOrRetry(run, "source", archive.error(), kind == ErrorKind::kInvalid || kind == ErrorKind::kNotFound,
                         log::Level::kError, "rejecting a commit: its source archive is missing or unreadable",
                         {{"gitrepo", gitrepoName(event)},
                          {"commit", event.commit},
                          {"source_object", event.source_object},
                          {"error", archive.error().describe()}});
  }
  auto checkout = extractCheckout(*archive, options_.work_dir);
  if (!checkout.ok()) {
    return rejectOrRetry(
        run, "checkout", checkout.error(), checkout.error().kind == ErrorKind::kInvalid, log::Level::kError,
        "rejecting a commit: its source archive cannot be extracted",
        {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"error", checkout.error().describe()}});
  }
  run.checkout = std::move(checkout).value();
  run.root = run.checkout.root() + "/src";
  run.archive = std::move(archive).value();
  return std::nullopt;
}

std::optional<Outcome> CommitHandler::discoverStep(CommitRun& run) {
  const auto& event = run.event;
  auto dirs = render::discoverBundles(run.root, event.paths);
  if (!dirs.ok()) {
    return transient(event, run.delivery, "discover", dirs.error());
  }
  run.dirs = std::move(dirs).value();
  if (run.dirs.empty()) {
    Json paths = Json::array();
    for (const auto& path : event.paths) {
      paths.push(path);
    }
    log::warn("no bundles found under the GitRepo's paths",
              {{"gitrepo", gitrepoName(event)}, {"commit", event.commit}, {"paths", paths}});
  }
  return std::nullopt;
}

std::optional<Outcome> CommitHandler::renderStep(CommitRun& run) {
  // The render cache's keys come from the archive, before anything renders (render_key.h); then it can go.
  run.keys = renderKeys(run.archive, run.dirs, commitRenderInputs(renderer_identity_, run.event, run.gitrepo));
  run.archive = {};
  auto previousAt = [&run](const std::string& path) -> const BundleRecord* {
    auto id = run.previous_ids.find(path);
    auto record = id == run.previous_ids.end() ? run.by_bundle.end() : run.by_bundle.find(id->second);
    return record == run.by_bundle.end() ? nullptr : record->second;
  };
  // Render with bounded parallelism (unless the cache has the bundle), then store, record and publish bundle by
  // bundle in discovery order.
  RenderContext context{run.root, run.event, run.gitrepo, *renderers_, options_.limits, run.previous_ids};
  const std::vector<ClusterFacts> workspace_clusters =
      clusters_ ? clusters_->snapshot(run.event.workspace) : std::vector<ClusterFacts>{};
  context.clusters = &workspace_clusters;
  context.cache = &variant_cache_;
  auto rendered_all = render::renderInOrder(
      run.dirs.size(), render::RenderPoolOptions{.parallelism = options_.render_parallelism},
      [&](size_t index) -> Result<RenderedBundle> {
        const BundleDir& dir = run.dirs[index];
        FLOTILLA_TRY(withinBudget(run, dir));
        // Each task owns its key; storeRendered reads it after the pool hands the result over.
        run.keys[index] = withRemoteInputs(context, dir, std::move(run.keys[index]));
        if (auto cached = cachedRender(run.event, run.root, dir, run.keys[index], previousAt(dir.path))) {
          return std::move(cached).value();
        }
        return render::renderBundle(context, dir);
      },
      [&](size_t index, Result<RenderedBundle>& rendered) {
        return storeRendered(run, run.dirs[index], run.keys[index], rendered);
      },
      [&] { run.delivery.progress(); });
  if (!rendered_all.ok()) {
    return run.failed ? *run.failed : transient(run.event, run.delivery, "render", rendered_all.error());
  }
  return std::nullopt;
}

Status CommitHandler::storeRendered(CommitRun& run, const BundleDir& dir, const RenderKey& key,
                                    Result<RenderedBundle>& rendered) {
  const auto& event = run.event;
  auto failWith = [&](std::string_view step, const Error& error) -> Status {
    run.failed = transient(event, run.delivery, step, error);
    return fail(error);
  };
  if (!rendered.ok() && rendered.error().where == kCommitBudgetWhere) {
    log::error("commit used up its time budget; rejecting it, the bundles not rendered keep their last version",
               {{"gitrepo", gitrepoName(event)},
                {"commit", event.commit},
                {"bundle_path", dir.path},
                {"bundles_rendered", static_cast<int64_t>(run.stored.load())},
                {"error", rendered.error().message}});
    run.failed = Outcome::reject("time_budget");
    return fail(rendered.error());
  }
  if (!rendered.ok()) {
    return failWith("render", rendered.error());
  }
  ++run.stored;
  noteRenderCache(key, *rendered);
  if (!rendered->from_cache) {
    metrics_.renderDuration(rendered->renderer, rendered->seconds);
  }
  metrics_.variants(rendered->variant_renders, rendered->variant_cache_hits);
  if (!rendered->notes.chart_source.empty()) {
    metrics_.remoteChart(rendered->notes.chart_source);
  }
  if (!run.present.insert(rendered->bundle).second) {
    metrics_.bundle("conflict");
    log::warn(
        "two directories of one commit claim the same bundle name; ignoring the second",
        {{"gitrepo", gitrepoName(event)}, {"bundle", rendered->bundle}, {"commit", event.commit}, {"path", dir.path}});
    return {};
  }
  std::optional<BundleRecord> previous;
  if (auto it = run.by_bundle.find(rendered->bundle); it != run.by_bundle.end()) {
    previous = *it->second;
  } else if (auto owner = otherOwner(event, rendered->bundle); !owner.ok()) {
    return failWith("records", owner.error());
  } else if (!owner->empty()) {
    return claimName(run, *rendered, *owner);
  }
  if (auto stored = storeAll(*rendered); !stored.ok()) {
    noteStoreFull(*rendered, stored.error());
    return failWith("store", stored.error());
  }
  if (auto committed = commitBundle(*rendered, previous, run.delivery.stream_sequence); !committed.ok()) {
    noteStoreFull(*rendered, committed.error());
    return failWith("publish", committed.error());
  }
  metrics_.bundleStored(event.time);
  if (const HelmRelease release = helmReleaseOf(rendered->event, rendered->renderer);
      !previous && !rendered->error && !release.name.empty() && !release.pinned) {
    run.new_helm[rendered->bundle] = release.name;
  }
  return {};
}

Status CommitHandler::withinBudget(const CommitRun& run, const BundleDir& dir) {
  const auto budget = options_.commit_budget;
  if (budget.count() <= 0 || clock().steadyNow() - run.started <= budget) {
    return {};
  }
  return fail(ErrorKind::kInvalid,
              "bundle " + dir.path + " of commit " + run.event.commit + " (GitRepo " + gitrepoName(run.event) +
                  ") was not rendered: the commit used up its time budget of " + std::to_string(budget.count() / 1000) +
                  " s after " + std::to_string(run.stored.load()) + " bundles",
              std::string(kCommitBudgetWhere));
}

Clock& CommitHandler::clock() const {
  return options_.clock != nullptr ? *options_.clock : systemClock();
}

Status CommitHandler::claimName(CommitRun& run, const RenderedBundle& rendered, const std::string& owner) {
  const auto& event = run.event;
  metrics_.bundle("conflict");
  log::warn("bundle name is already used by another GitRepo of the workspace; skipping it until that one lets go",
            {{"gitrepo", gitrepoName(event)},
             {"bundle", rendered.bundle},
             {"commit", event.commit},
             {"path", rendered.event.path},
             {"owner", owner}});
  // Remembered, so the bundle is rendered the moment the owner's bundle is deleted (no new commit needed).
  events::BundleClaim claim{.workspace = event.workspace,
                            .bundle = rendered.bundle,
                            .gitrepo = event.gitrepo,
                            .owner = owner,
                            .path = rendered.event.path,
                            .commit = event.commit,
                            .commit_sequence = run.delivery.stream_sequence,
                            .source_object = event.source_object,
                            .force_sync_generation = event.force_sync_generation,
                            .time = log::nowRfc3339()};
  if (auto recorded = recordClaim(claim); !recorded.ok()) {
    run.failed = transient(event, run.delivery, "claims", recorded.error());
    return recorded;
  }
  run.claimed.insert(rendered.bundle);
  return {};
}

Result<std::string> CommitHandler::otherOwner(const events::CommitEvent& event, const std::string& bundle) {
  // Not this GitRepo's yet: make sure no other GitRepo of the workspace owns the name.
  auto entry = bus_.bundles->get(events::bundleKey(event.workspace, bundle));
  if (!entry.ok()) {
    return entry.error().kind == ErrorKind::kNotFound ? Result<std::string>(std::string()) : fail(entry.error());
  }
  auto other = parseBundleRecord(entry->value);
  return other.ok() && other->gitrepo != event.gitrepo ? other->gitrepo : std::string();
}

Status CommitHandler::storeAll(const RenderedBundle& rendered) {
  for (const auto& [id, manifest] : rendered.manifests) {
    FLOTILLA_TRY(storeManifest(manifest));
  }
  return storeVariants(rendered);
}

std::optional<Outcome> CommitHandler::deletionsStep(CommitRun& run) {
  // Bundles that left the repository, after every live bundle of the commit was published: a claim of a new bundle
  // on objects of a removed one reaches the agents before the release.
  std::vector<const BundleRecord*> deleted;
  for (const auto& record : run.records) {
    if (run.present.count(record.bundle) == 0) {
      deleted.push_back(&record);
    }
  }
  if (deleted.empty()) {
    return std::nullopt;
  }
  if (auto noted = noteHelmRenames(run, deleted); !noted.ok()) {
    return transient(run.event, run.delivery, "store", noted.error());
  }
  fault::point(kFaultCommitPublished);
  for (const BundleRecord* record : deleted) {
    run.delivery.progress();
    if (auto removed = deleteBundle(*record, run.event, run.delivery.stream_sequence); !removed.ok()) {
      return transient(run.event, run.delivery, "delete", removed.error());
    }
    run.freed = true;
  }
  return std::nullopt;
}

std::optional<Outcome> CommitHandler::claimsStep(CommitRun& run) {
  if (auto dropped = dropClaims(run.event.workspace, run.event.gitrepo, run.claimed); !dropped.ok()) {
    return transient(run.event, run.delivery, "claims", dropped.error());
  }
  return std::nullopt;
}

std::optional<Outcome> CommitHandler::cascadeStep(CommitRun& run) {
  for (const auto& record : run.records) {
    run.delivery.progress();
    if (auto removed = deleteBundle(record, run.event, run.delivery.stream_sequence); !removed.ok()) {
      return transient(run.event, run.delivery, "delete", removed.error());
    }
    run.freed = true;
  }
  // A deleted GitRepo waits for no name any more.
  if (auto dropped = dropClaims(run.event.workspace, run.event.gitrepo, {}); !dropped.ok()) {
    return transient(run.event, run.delivery, "claims", dropped.error());
  }
  return std::nullopt;
}

Status CommitHandler::noteHelmRenames(const CommitRun& run, const std::vector<const BundleRecord*>& deleted) {
  for (const auto& [bundle, release] : run.new_helm) {
    std::vector<std::string> notes;
    for (const BundleRecord* gone : deleted) {
      if (!gone->release_name.empty() && gone->release_name != release) {
        notes.push_back("Helm release \"" + release + "\" (from the bundle name) replaces release \"" +
                        gone->release_name + "\" of bundle " + gone->bundle +
                        ", removed in this commit: objects the chart names from .Release.Name are created anew "
                        "(new UIDs) and the old ones are removed; set helm.releaseName: " +
                        gone->release_name + " in fleet.yaml to keep them");
      }
    }
    if (notes.empty()) {
      continue;
    }
    const std::string key = renderStatusKey(run.event.workspace, bundle);
    auto entry = bus_.status->get(key);
    FLOTILLA_TRY(entry);
    auto status = events::parseRecord<RenderStatus>(entry->value);
    if (!status.ok()) {
      continue;  // written by this commit a moment ago; unreadable only if someone else wrote it
    }
    status->notes = std::move(notes);
    FLOTILLA_TRY(bus_.status->put(key, encode(*status).dump()));
    log::info("Helm objects named from the release name will be re-created",
              {{"gitrepo", gitrepoName(run.event)}, {"bundle", bundle}, {"note", status->notes.front()}});
  }
  return {};
}

std::shared_ptr<std::mutex> CommitHandler::gitrepoLock(std::string_view workspace, std::string_view gitrepo) {
  std::lock_guard lock(locks_mutex_);
  auto& slot = gitrepo_locks_[std::string(workspace) + "/" + std::string(gitrepo)];
  if (!slot) {
    slot = std::make_shared<std::mutex>();
  }
  return slot;
}

}  // namespace flotilla::bundler
