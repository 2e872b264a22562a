#include "flotilla/poller/sync.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "flotilla/bus/errors.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/git/remote.h"
#include "flotilla/git/url.h"
#include "flotilla/poller/credentials_store.h"
#include "flotilla/poller/gitrepo.h"
#include "flotilla/poller/poll_status.h"
#include "flotilla/poller/source_builder.h"

namespace flotilla::poller {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

//! Per-GitRepo state while a sync runs.
struct Item {
  const RepoWork* work = nullptr;
  RepoResult result;
  git::Credentials credentials;
  WantedCommit wanted;
  std::string commit;  //!< the commit to publish, once known
  bool active = true;  //!< false once it failed or turned out unchanged
  bool needs_fetch = false;
};

//! One sync on its way through the steps of syncMirror (see sync.h).
struct SyncContext {
  const SyncSettings& settings;
  const SyncBus& bus;
  PollerMetrics& metrics;
  GitOpGuard& guard;
  MirrorSlot& slot;
  const std::string& url;
  std::string display_url;
  std::vector<Item> items;
  Item* fetch_for = nullptr;  //!< whose credentials the one fetch uses; nullptr when nothing needs a fetch
};

//! What syncMirror does after a step.
enum class Next {
  kContinue,   //!< on to the next step
  kFinish,     //!< report what the items say now (nothing left to do, or the poller is stopping)
  kAbandoned,  //!< the watchdog left a git call behind: touch nothing, report nothing
};

void failItem(Item& item, std::string_view stage, Error error) {
  const auto& meta = item.work->gitrepo.metadata;
  const std::string& secret = item.work->gitrepo.spec.client_secret_name;
  if (error.kind == ErrorKind::kPermanent && !secret.empty() && (stage == "ls_remote" || stage == "fetch")) {
    // Rejected credentials: say whose and which secret (never its content; libs/git scrubs the values).
    error.message = "GitRepo " + meta.ns + "/" + meta.name + " (clientSecretName \"" + secret + "\"): " + error.message;
  }
  log::warn("gitrepo sync failed", {{"gitrepo", meta.ns + "/" + meta.name},
                                    {"stage", std::string(stage)},
                                    {"kind", std::string(errorKindName(error.kind))},
                                    {"error", error.describe()}});
  item.result.error = std::move(error);
  item.result.error_stage = std::string(stage);
  item.active = false;
}

//! The identity under which ls-remote answers can be shared: same secret, CA and TLS setting.
std::string credentialIdentity(const model::GitRepoSpec& spec) {
  return spec.client_secret_name + '\n' + spec.ca_bundle + '\n' + (spec.insecure_skip_tls_verify ? "1" : "0");
}

//! True when `published` records the event this GitRepo would publish for `commit`: the same commit,
//! forceSyncGeneration and spec hash.
bool recordsPublishOf(const PollStatus& published, const RepoWork& w, std::string_view commit) {
  return commit == published.commit && w.gitrepo.spec.force_sync_generation == published.force_sync_generation &&
         w.spec_hash == published.spec_hash;
}

bool needsPublish(const Item& item, std::string_view commit) {
  return !recordsPublishOf(item.work->last, *item.work, commit);
}

bool mirrorHas(const git::Mirror& mirror, const std::string& commit) {
  auto resolved = mirror.resolve(commit);
  return resolved.ok() && *resolved == commit;
}

//! A write the store refused because it is full: counted and logged (once per interval), and an early garbage
//! collection pass asked for when it is `sources`. The GitRepo's status shows the error; it retries with backoff.
void storeFull(SyncContext& ctx, const Item& item, const Error& error) {
  if (ctx.bus.store_full == nullptr) {
    return;
  }
  const auto& meta = item.work->gitrepo.metadata;
  if (ctx.bus.store_full->report(error, "commit", meta.ns + "/" + meta.name) && ctx.bus.gc != nullptr &&
      bus::fullStoreName(error) == ctx.bus.sources->bucket()) {
    ctx.bus.gc->requestPass();
  }
}

//! Stores the source archive in `sources` unless it is already there; false (the item failed) on an error.
bool storeSource(SyncContext& ctx, Item& item, const BuiltSource& built) {
  if (ctx.bus.gc != nullptr) {
    ctx.bus.gc->touch(built.object_name);  // before looking: garbage collection now keeps it or has removed it
  }
  auto info = ctx.bus.sources->info(built.object_name);
  if (info.ok()) {
    ctx.metrics.source(false);
    return true;
  }
  if (info.error().kind != ErrorKind::kNotFound) {
    failItem(item, "store", info.error());
    return false;
  }
  auto stored = ctx.bus.sources->put(built.object_name, built.encoded);
  if (!stored.ok()) {
    storeFull(ctx, item, stored.error());
    failItem(item, "store", stored.error());
    return false;
  }
  ctx.metrics.source(true);
  return true;
}

events::CommitEvent commitEventFor(const Item& item, const std::string& display_url, const BuiltSource& built,
                                   bool is_changed) {
  const RepoWork& w = *item.work;
  const auto& meta = w.gitrepo.metadata;
  const auto& spec = w.gitrepo.spec;
  events::CommitEvent event;
  event.workspace = meta.ns;
  event.gitrepo = meta.name;
  event.repo = display_url;
  event.branch = startsWith(item.wanted.ref, "refs/heads/") ? item.wanted.ref.substr(11) : spec.branch;
  event.revision = spec.revision;
  event.commit = item.commit;
  event.previous_commit = w.last.commit;
  event.paths = spec.paths;
  event.force_sync_generation = spec.force_sync_generation;
  event.gitrepo_generation = meta.generation;
  event.changed = is_changed;
  event.source_object = built.object_name;
  event.id = commitMsgId(meta.ns, meta.name, item.commit, spec.force_sync_generation, w.spec_hash);
  event.time = log::nowRfc3339();
  return event;
}

//! The GitRepo's event for `item.commit` is in the stream (published now, or found there): its result says what
//! the status records as the last publish, and the GitRepo is done.
void notePublished(Item& item, bool duplicate, std::string source_object, bool changed) {
  const RepoWork& w = *item.work;
  item.result.published = true;
  item.result.duplicate = duplicate;
  item.result.commit = item.commit;
  item.result.source_object = std::move(source_object);
  item.result.changed = changed;
  item.result.force_sync_generation = w.gitrepo.spec.force_sync_generation;
  item.result.spec_hash = w.spec_hash;
  item.active = false;
}

//! Builds, stores and publishes the CommitEvent for one GitRepo whose commit is in the mirror.
void publishItem(SyncContext& ctx, Item& item, const git::Mirror& mirror) {
  const RepoWork& w = *item.work;
  const PathSelector selector = PathSelector::forSpec(w.gitrepo.spec);
  auto changed = selectionChanged(mirror, w.last.commit, item.commit, selector);
  if (!changed.ok()) {
    return failItem(item, "archive", changed.error());
  }
  const bool is_changed = *changed || w.spec_hash != w.last.spec_hash;
  auto built = buildSource(mirror, item.commit, selector, ctx.settings.max_source_bytes, ctx.settings.scratch_dir);
  if (!built.ok()) {
    return failItem(item, "archive", built.error());
  }
  if (!storeSource(ctx, item, *built)) {
    return;
  }
  const events::CommitEvent event = commitEventFor(item, ctx.display_url, *built, is_changed);
  auto ack = ctx.bus.js->publish(events::commitSubject(event.workspace, event.gitrepo), events::encode(event).dump(),
                                 event.id);
  if (!ack.ok()) {
    storeFull(ctx, item, ack.error());
    return failItem(item, "publish", ack.error());
  }
  ctx.metrics.published(ack->duplicate);
  announceCommit(ctx.bus.public_events, event);  // also for a duplicate: a crash may have come between the two
  if (!ack->duplicate) {
    ctx.metrics.commitStage(w.by_webhook, w.triggered);
  }
  log::info(ack->duplicate ? "commit event was already published (duplicate dropped)" : "commit event published",
            {{"gitrepo", event.workspace + "/" + event.gitrepo},
             {"commit", item.commit},
             {"previous_commit", w.last.commit},
             {"changed", is_changed},
             {"force_sync_generation", event.force_sync_generation},
             {"source_object", built->object_name},
             {"files", static_cast<int64_t>(built->files)},
             {"sequence", static_cast<int64_t>(ack->sequence)}});
  notePublished(item, ack->duplicate, built->object_name, is_changed);
}

//! True when another replica of the poller published this very event already: its status record, written after
//! JetStream's ack, names the commit, forceSyncGeneration and spec hash. The result then records that publish as
//! this replica's last one, and nothing is sent. A replica that saw the commit seconds later would be harmless
//! (the same Nats-Msg-Id, dropped as a duplicate), but one that lagged behind longer than the commit stream's
//! 10-minute dedup window would send the commit again. A record that cannot be read is no answer: publish.
bool publishedByPeer(SyncContext& ctx, Item& item) {
  if (!ctx.bus.status) {
    return false;
  }
  const RepoWork& w = *item.work;
  const auto& meta = w.gitrepo.metadata;
  auto entry = ctx.bus.status->get(pollStatusKey(meta.ns, meta.name));
  if (!entry.ok()) {
    return false;
  }
  auto record = decodePollStatus(entry->value);
  if (!record.ok() || !recordsPublishOf(*record, w, item.commit)) {
    return false;
  }
  ctx.metrics.publishedByPeer();
  log::info("commit event was already published by another poller",
            {{"gitrepo", meta.ns + "/" + meta.name}, {"commit", item.commit}});
  notePublished(item, true, record->source_object, record->changed);
  return true;
}

// ---- the steps of a sync, in order ----

//! Each GitRepo's clientSecretName / caBundle / insecureSkipTLSVerify.
Next loadCredentials(SyncContext& ctx) {
  for (auto& item : ctx.items) {
    auto credentials = credentialsFor(item.work->gitrepo, ctx.settings.credentials_dir);
    if (!credentials.ok()) {
      failItem(item, "credentials", credentials.error());
      continue;
    }
    item.credentials = std::move(credentials).value();
  }
  return Next::kContinue;
}

//! ls-remote once per credential identity (each GitRepo proves its own access), then each GitRepo's wanted commit.
Next askRemote(SyncContext& ctx) {
  std::map<std::string, Result<git::RemoteHeads>> answers;
  for (auto& item : ctx.items) {
    if (!item.active) {
      continue;
    }
    const std::string identity = credentialIdentity(item.work->gitrepo.spec);
    auto it = answers.find(identity);
    if (it == answers.end()) {
      if (!ctx.guard.begin("ls-remote", ctx.settings.git_timeout)) {
        return Next::kFinish;
      }
      const auto started = Clock::now();
      auto heads = git::lsRemote(
          ctx.url, item.credentials,
          git::RemoteOptions{.timeout = ctx.settings.git_timeout, .allow_local = ctx.settings.allow_local});
      if (!ctx.guard.end()) {
        return Next::kAbandoned;
      }
      ctx.metrics.lsRemote(secondsSince(started), heads.ok());
      it = answers.emplace(identity, std::move(heads)).first;
    }
    if (!it->second.ok()) {
      failItem(item, "ls_remote", it->second.error());
      continue;
    }
    item.result.polled = true;
    auto wanted = wantedCommit(item.work->gitrepo.spec, *it->second, ctx.display_url);
    if (!wanted.ok()) {
      failItem(item, "resolve", wanted.error());
      continue;
    }
    item.wanted = std::move(wanted).value();
    item.result.polling_commit = item.wanted.commit;
  }
  return Next::kContinue;
}

//! Opens the mirror when some GitRepo may publish (recreating a directory that is not a usable repository).
Next openMirror(SyncContext& ctx) {
  if (std::none_of(ctx.items.begin(), ctx.items.end(), [](const Item& item) { return item.active; })) {
    return Next::kFinish;
  }
  if (ctx.slot.mirror) {
    return Next::kContinue;
  }
  auto opened = git::Mirror::open(ctx.slot.path, ctx.url, ctx.settings.allow_local);
  if (!opened.ok() && opened.error().kind == ErrorKind::kInternal) {
    // Not a git repository (a crash during the first clone, a stray directory): start it afresh.
    log::warn("mirror directory is unusable; recreating it",
              {{"url", ctx.display_url}, {"path", ctx.slot.path}, {"error", opened.error().describe()}});
    ctx.metrics.error("mirror", ErrorKind::kInternal);
    removeAll(ctx.slot.path);
    opened = git::Mirror::open(ctx.slot.path, ctx.url, ctx.settings.allow_local);
  }
  if (!opened.ok()) {
    for (auto& item : ctx.items) {
      if (item.active) {
        failItem(item, "mirror", opened.error());
      }
    }
    return Next::kFinish;
  }
  ctx.slot.mirror.emplace(std::move(opened).value());
  return Next::kContinue;
}

//! Decides what to publish (commit, forceSyncGeneration or spec hash moved) and whether the mirror must fetch.
Next planFetch(SyncContext& ctx) {
  const git::Mirror& mirror = *ctx.slot.mirror;
  for (auto& item : ctx.items) {
    if (!item.active) {
      continue;
    }
    if (item.wanted.needs_mirror) {
      auto resolved = mirror.resolve(item.wanted.ref);
      if (resolved.ok()) {
        item.commit = *resolved;
      } else {
        item.needs_fetch = true;
      }
    } else {
      item.commit = item.wanted.commit;
      if (!needsPublish(item, item.commit)) {
        item.active = false;
        continue;
      }
      item.needs_fetch = !mirrorHas(mirror, item.commit);
    }
    if (item.needs_fetch && ctx.fetch_for == nullptr) {
      ctx.fetch_for = &item;
    }
  }
  return Next::kContinue;
}

//! After the fetch: the commit each GitRepo that needed it now has (or its failure).
void resolveFetched(SyncContext& ctx, const Result<git::FetchResult>& fetched) {
  const git::Mirror& mirror = *ctx.slot.mirror;
  for (auto& item : ctx.items) {
    if (!item.active || !item.needs_fetch) {
      continue;
    }
    if (!fetched.ok()) {
      failItem(item, "fetch", fetched.error());
      continue;
    }
    if (item.wanted.needs_mirror) {
      auto resolved = mirror.resolve(item.wanted.ref);
      if (!resolved.ok()) {
        Error error = resolved.error();
        error.message = "revision \"" + item.work->gitrepo.spec.revision + "\" not found in " + ctx.display_url +
                        " after fetching: " + error.message;
        failItem(item, "resolve", std::move(error));
        continue;
      }
      item.commit = *resolved;
    } else if (!mirrorHas(mirror, item.commit)) {
      failItem(item, "fetch",
               makeError(ErrorKind::kTransient,
                         "the remote advertised " + item.wanted.describe + " at " + item.commit +
                             " but the fetch from " + ctx.display_url + " did not bring it (moved meanwhile?)",
                         "syncMirror"));
    }
  }
}

//! At most one fetch, serving every GitRepo of the sync.
Next fetchOnce(SyncContext& ctx) {
  if (ctx.fetch_for == nullptr) {
    return Next::kContinue;
  }
  if (!ctx.guard.begin("fetch", ctx.settings.git_timeout)) {
    return Next::kFinish;
  }
  const auto started = Clock::now();
  auto fetched = ctx.slot.mirror->fetch(
      ctx.fetch_for->credentials,
      git::FetchOptions{.timeout = ctx.settings.git_timeout, .allow_local = ctx.settings.allow_local});
  if (!ctx.guard.end()) {
    return Next::kAbandoned;
  }
  ctx.metrics.fetch(secondsSince(started), fetched.ok());
  if (fetched.ok()) {
    log::info("mirror fetched", {{"url", ctx.display_url},
                                 {"received_objects", static_cast<int64_t>(fetched->stats.received_objects)},
                                 {"received_bytes", static_cast<int64_t>(fetched->stats.received_bytes)},
                                 {"ms", static_cast<int64_t>(fetched->stats.duration.count())}});
  }
  resolveFetched(ctx, fetched);
  return Next::kContinue;
}

//! Per GitRepo still active: archive, store, publish (none new once the poller is stopping).
Next publishAll(SyncContext& ctx) {
  for (auto& item : ctx.items) {
    if (!item.active || ctx.guard.cancelled()) {
      continue;
    }
    if (item.wanted.needs_mirror) {
      item.result.polling_commit = item.commit;
      if (!needsPublish(item, item.commit)) {
        item.active = false;
        continue;
      }
    }
    if (!publishedByPeer(ctx, item)) {
      publishItem(ctx, item, *ctx.slot.mirror);
    }
  }
  return Next::kContinue;
}

std::vector<RepoResult> finish(SyncContext& ctx) {
  std::vector<RepoResult> results;
  for (auto& item : ctx.items) {
    item.result.skipped = item.active;  // neither failed, unchanged nor published: the poller is stopping
    results.push_back(std::move(item.result));
  }
  return results;
}

}  // namespace

void announceCommit(service::PublicEvents* announcer, const events::CommitEvent& event) {
  if (announcer != nullptr) {
    announcer->send(events::toCloudEvent(event, kPollerEventSource),
                    events::eventsSubject("gitrepo", {event.workspace, event.gitrepo}));
  }
}

std::optional<std::vector<RepoResult>> syncMirror(const SyncSettings& settings, const SyncBus& bus,
                                                  PollerMetrics& metrics, GitOpGuard& guard, MirrorSlot& slot,
                                                  const std::string& url, const std::vector<RepoWork>& work) {
  SyncContext ctx{settings, bus, metrics, guard, slot, url, git::redactUrl(url), std::vector<Item>(work.size())};
  for (size_t i = 0; i < work.size(); ++i) {
    ctx.items[i].work = &work[i];
    ctx.items[i].result.key = work[i].key;
    ctx.items[i].result.epoch = work[i].epoch;
  }
  for (Next (*step)(SyncContext&) : {loadCredentials, askRemote, openMirror, planFetch, fetchOnce, publishAll}) {
    const Next next = step(ctx);
    if (next == Next::kAbandoned) {
      return std::nullopt;
    }
    if (next == Next::kFinish) {
      break;
    }
  }
  return finish(ctx);
}

}  // namespace flotilla::poller
