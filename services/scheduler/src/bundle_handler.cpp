// BundleEvents (FLOTILLA_BUNDLES, durable "scheduler"): decode -> superseded? -> deleted: remove everywhere |
// render error: keep the last good deployments | otherwise: place on every cluster -> summaries -> outcome.
#include "flotilla/bus/errors.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/labels.h"
#include "flotilla/scheduler/scheduler.h"
#include "times.h"

namespace flotilla::scheduler {

namespace {

Result<events::BundleEvent> decodeBundleEvent(std::string_view data) {
  auto event = events::parsePayload<events::BundleEvent>(data);
  FLOTILLA_TRY(event);
  if (!model::isDns1123Subdomain(event->bundle) || event->workspace.empty()) {
    return fail(ErrorKind::kInvalid,
                "bundle \"" + event->bundle + "\" in workspace \"" + event->workspace + "\" is not a valid name");
  }
  return event;
}

}  // namespace

Outcome Scheduler::handleBundle(std::string_view data, int64_t clock_ms, uint64_t delivery_count) {
  auto event = decodeBundleEvent(data);
  if (!event.ok()) {
    return rejectBundle(event.error().describe());
  }
  std::lock_guard lock(mutex_);
  gitrepo_gone_.clear();  // GitRepo specs are read afresh by each handler (retiring.cpp)
  BundleContext context{.event = *event,
                        .clock_ms = clock_ms > 0 ? clock_ms : detail::nowMs(),
                        .delivery_count = delivery_count,
                        .id = events::bundleKey(event->workspace, event->bundle)};
  context.affected.bundle_event = true;
  if (auto other = otherPartitionsBundle(context)) {
    return *other;
  }
  auto existing = bundles_.find(context.id);
  context.existing = existing == bundles_.end() ? nullptr : &existing->second;
  if (superseded(context)) {
    return Outcome::ack("superseded");
  }
  if (event->deleted) {
    return removeBundle(context);
  }
  // The DeployEvents this handling stores measure bundle_to_deploy from the event's time (noteDeployStored).
  struct HandlingTime {
    std::string& slot;
    ~HandlingTime() { slot.clear(); }
  } handling{handling_bundle_time_ = event->time};
  return scheduleBundle(context);
}

std::optional<Outcome> Scheduler::otherPartitionsBundle(const BundleContext& context) {
  if (options_.partition.whole()) {
    return std::nullopt;
  }
  const events::BundleEvent& event = context.event;
  // A delete may come without its GitRepo: the one last seen for the bundle decides.
  const std::string gitrepo = event.gitrepo.empty() ? gitRepoOfBundle(event.workspace, event.bundle) : event.gitrepo;
  noteBundleGitRepo(event.workspace, event.bundle, gitrepo);
  if (ownsBundle(event.workspace, gitrepo)) {
    return std::nullopt;
  }
  if (bundles_.erase(context.id) > 0) {
    // The name moved to another partition's GitRepo (freed by one, claimed by another). Its deployments here go
    // as that partition writes their records (applyOtherRecord) or as their deletes are answered.
    rollouts_.erase(context.id);
    log::info("a bundle passed to another partition's GitRepo",
              {{"bundle", event.bundle}, {"gitrepo", gitrepo}, {"partition", options_.partition.name()}});
    updateGauges();
  }
  return Outcome::ack("other-partition");
}

Outcome Scheduler::rejectBundle(const std::string& problem) {
  metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "bundles"}})
      .Increment();
  log::error("dropping an invalid bundle event", {{"error", problem}});
  return Outcome::reject("invalid");
}

bool Scheduler::superseded(const BundleContext& context) const {
  const events::BundleEvent& event = context.event;
  if (context.existing == nullptr || !detail::olderThan(event.time, context.existing->time)) {
    return false;
  }
  // A newer rendering of this bundle was handled already (e.g. loaded from KV at start).
  log::info("ignoring a superseded bundle event", {{"bundle", event.bundle},
                                                   {"gitrepo", event.gitrepo},
                                                   {"commit", event.commit},
                                                   {"time", event.time},
                                                   {"newest", context.existing->time}});
  return true;
}

Outcome Scheduler::removeBundle(BundleContext& context) {
  const events::BundleEvent& event = context.event;
  std::string gitrepo = !event.gitrepo.empty()
                            ? event.gitrepo
                            : (context.existing != nullptr ? context.existing->gitrepo : std::string());
  auto deleted = deleteBundle(event.workspace, event.bundle, gitrepo, context.clock_ms, context.affected);
  if (!deleted.ok()) {
    log::warn("cannot remove a deleted bundle's deployments yet",
              {{"bundle", event.bundle}, {"gitrepo", gitrepo}, {"error", deleted.error().describe()}});
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  bundles_.erase(context.id);
  rollouts_.erase(context.id);
  context.existing = nullptr;
  if (!writeSummaries(context.affected).ok()) {
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  updateGauges();
  log::info("bundle deleted", {{"bundle", event.bundle}, {"gitrepo", gitrepo}, {"commit", event.commit}});
  return Outcome::ack("deleted");
}

std::optional<Outcome> Scheduler::resolveBundle(BundleContext& context, BundleInfo& out) {
  const events::BundleEvent& event = context.event;
  auto info = bundleFromEvent(event, context.existing);
  if (info.ok()) {
    if (auto loaded = loadVariants(*info); !loaded.ok()) {
      if (loaded.error().kind != ErrorKind::kInvalid && loaded.error().kind != ErrorKind::kNotFound) {
        log::warn("cannot read a bundle's variants table yet, retrying", {{"bundle", event.bundle},
                                                                          {"variants_object", event.variants_object},
                                                                          {"error", loaded.error().describe()}});
        return Outcome::retry(backoff(context.delivery_count), "retry");
      }
      info = Result<BundleInfo>(
          fail(ErrorKind::kInvalid, "variants table " + event.variants_object + ": " + loaded.error().message));
    }
  }
  if (info.ok()) {
    out = std::move(info).value();
    return std::nullopt;
  }
  // The bundler checked fleet.yaml, so this is a contract problem; report it like a render error (the last good
  // deployments keep running) and do not retry.
  context.invalid_targets = true;
  out = context.existing != nullptr ? *context.existing : BundleInfo{};
  out.workspace = event.workspace;
  out.gitrepo = event.gitrepo;
  out.bundle = event.bundle;
  out.time = event.time;
  out.error = events::RenderError{.message = "invalid targeting: " + info.error().message};
  out.error_commit = event.commit;
  out.error_time = event.time;
  return std::nullopt;
}

void Scheduler::noteBundleAffected(BundleContext& context) const {
  const events::BundleEvent& event = context.event;
  context.affected.bundles.emplace(event.workspace, event.bundle);
  context.affected.gitrepos.emplace(event.workspace, event.gitrepo);
  for (auto& cluster : clustersOfBundle(event.workspace, event.bundle)) {
    context.affected.clusters.insert(std::move(cluster));
  }
}

Outcome Scheduler::scheduleBundle(BundleContext& context) {
  const events::BundleEvent& event = context.event;
  BundleInfo info;
  if (auto retry = resolveBundle(context, info)) {
    return *retry;
  }
  const BundleInfo& bundle = bundles_[context.id] = std::move(info);
  context.existing = nullptr;  // replaced
  noteBundleAffected(context);
  if (event.error || context.invalid_targets) {
    metrics_.counter("render_errors_total", "Bundle events reporting a render failure").Increment();
    log::warn("bundle failed to render; its last good deployments stay", {{"bundle", event.bundle},
                                                                          {"gitrepo", event.gitrepo},
                                                                          {"commit", event.commit},
                                                                          {"error", bundle.error->message}});
    return finishBundle(context, context.invalid_targets ? "invalid" : "render-error");
  }
  bool published = false;
  auto reconciled = reconcileBundle(bundle, context.clock_ms, context.affected, published);
  if (!reconciled.ok()) {
    log::warn("cannot schedule the bundle yet, retrying", {{"bundle", event.bundle},
                                                           {"gitrepo", event.gitrepo},
                                                           {"commit", event.commit},
                                                           {"error", reconciled.error().describe()}});
    if (reconciled.error().kind == ErrorKind::kStoreFull) {
      // A full FLOTILLA_DEPLOY or KV bucket (docs/pipeline.md "Size caps"): wait without using deliveries, so the
      // bundle is scheduled once space is freed instead of being terminated.
      metrics_
          .counter("store_full_total", "Writes refused because a store was at its size cap",
                   {{"store", bus::fullStoreName(reconciled.error())}})
          .Increment();
      return Outcome::wait(backoff(context.delivery_count), "store_full");
    }
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  return finishBundle(context, published ? "scheduled" : "unchanged");
}

Outcome Scheduler::finishBundle(BundleContext& context, const std::string& result) {
  auto written = writeSummaries(context.affected);
  if (!written.ok()) {
    log::warn("cannot write summaries yet, retrying",
              {{"bundle", context.event.bundle}, {"error", written.error().describe()}});
    return Outcome::retry(backoff(context.delivery_count), "retry");
  }
  updateGauges();
  if (context.invalid_targets) {
    metrics_.counter("invalid_messages_total", "Messages that could not be decoded (term'd)", {{"consumer", "bundles"}})
        .Increment();
    return Outcome::reject(result);
  }
  return Outcome::ack(result);
}

}  // namespace flotilla::scheduler
