#include "flotilla/poller/sync.h"

#include <chrono>
#include <map>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/git/remote.h"
#include "flotilla/git/url.h"
#include "flotilla/poller/credentials_store.h"
#include "flotilla/poller/gitrepo.h"
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

bool needsPublish(const Item& item, std::string_view commit) {
  const RepoWork& w = *item.work;
  return commit != w.last.commit || w.gitrepo.spec.force_sync_generation != w.last.force_sync_generation ||
         w.spec_hash != w.last.spec_hash;
}

bool mirrorHas(const git::Mirror& mirror, const std::string& commit) {
  auto resolved = mirror.resolve(commit);
  return resolved.ok() && *resolved == commit;
}

//! Builds, stores and publishes the CommitEvent for one GitRepo whose commit is in the mirror.
void publishItem(Item& item, const SyncSettings& settings, const SyncBus& bus, PollerMetrics& metrics,
                 const git::Mirror& mirror, const std::string& display_url) {
  const RepoWork& w = *item.work;
  const auto& meta = w.gitrepo.metadata;
  const auto& spec = w.gitrepo.spec;
  const PathSelector selector = PathSelector::forSpec(spec);

  auto changed = selectionChanged(mirror, w.last.commit, item.commit, selector);
  if (!changed.ok()) {
    return failItem(item, "archive", changed.error());
  }
  const bool is_changed = *changed || w.spec_hash != w.last.spec_hash;

  auto built = buildSource(mirror, item.commit, selector, settings.max_source_bytes, settings.scratch_dir);
  if (!built.ok()) {
    return failItem(item, "archive", built.error());
  }
  auto info = bus.sources->info(built->object_name);
  if (info.ok()) {
    metrics.source(false);
  } else if (info.error().kind == ErrorKind::kNotFound) {
    auto stored = bus.sources->put(built->object_name, built->encoded);
    if (!stored.ok()) {
      return failItem(item, "store", stored.error());
    }
    metrics.source(true);
  } else {
    return failItem(item, "store", info.error());
  }

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
  event.source_object = built->object_name;
  const std::string msg_id = commitMsgId(meta.ns, meta.name, item.commit, spec.force_sync_generation, w.spec_hash);
  event.id = msg_id;
  event.time = log::nowRfc3339();
  auto ack = bus.js->publish(events::commitSubject(meta.ns, meta.name), events::encode(event).dump(), msg_id);
  if (!ack.ok()) {
    return failItem(item, "publish", ack.error());
  }
  metrics.published(ack->duplicate);
  log::info(ack->duplicate ? "commit event was already published (duplicate dropped)" : "commit event published",
            {{"gitrepo", meta.ns + "/" + meta.name},
             {"commit", item.commit},
             {"previous_commit", w.last.commit},
             {"changed", is_changed},
             {"force_sync_generation", spec.force_sync_generation},
             {"source_object", built->object_name},
             {"files", static_cast<int64_t>(built->files)},
             {"sequence", static_cast<int64_t>(ack->sequence)}});
  item.result.published = true;
  item.result.duplicate = ack->duplicate;
  item.result.commit = item.commit;
  item.result.source_object = built->object_name;
  item.result.changed = is_changed;
  item.result.force_sync_generation = spec.force_sync_generation;
  item.result.spec_hash = w.spec_hash;
  item.active = false;
}

}  // namespace

std::optional<std::vector<RepoResult>> syncMirror(const SyncSettings& settings, const SyncBus& bus,
                                                  PollerMetrics& metrics, GitOpGuard& guard, MirrorSlot& slot,
                                                  const std::string& url, const std::vector<RepoWork>& work) {
  const std::string display_url = git::redactUrl(url);
  std::vector<Item> items(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    items[i].work = &work[i];
    items[i].result.key = work[i].key;
    items[i].result.epoch = work[i].epoch;
  }
  auto finish = [&]() {
    std::vector<RepoResult> results;
    for (auto& item : items) {
      item.result.skipped = item.active;  // neither failed, unchanged nor published: the poller is stopping
      results.push_back(std::move(item.result));
    }
    return results;
  };

  // 1. Credentials.
  for (auto& item : items) {
    auto credentials = credentialsFor(item.work->gitrepo, settings.credentials_dir);
    if (!credentials.ok()) {
      failItem(item, "credentials", credentials.error());
      continue;
    }
    item.credentials = std::move(credentials).value();
  }

  // 2. ls-remote, once per credential identity.
  std::map<std::string, Result<git::RemoteHeads>> answers;
  for (auto& item : items) {
    if (!item.active) {
      continue;
    }
    const std::string identity = credentialIdentity(item.work->gitrepo.spec);
    auto it = answers.find(identity);
    if (it == answers.end()) {
      if (!guard.begin("ls-remote", settings.git_timeout)) {
        return finish();
      }
      const auto started = Clock::now();
      auto heads =
          git::lsRemote(url, item.credentials,
                        git::RemoteOptions{.timeout = settings.git_timeout, .allow_local = settings.allow_local});
      if (!guard.end()) {
        return std::nullopt;
      }
      metrics.lsRemote(secondsSince(started), heads.ok());
      it = answers.emplace(identity, std::move(heads)).first;
    }
    if (!it->second.ok()) {
      failItem(item, "ls_remote", it->second.error());
      continue;
    }
    item.result.polled = true;
    auto wanted = wantedCommit(item.work->gitrepo.spec, *it->second, display_url);
    if (!wanted.ok()) {
      failItem(item, "resolve", wanted.error());
      continue;
    }
    item.wanted = std::move(wanted).value();
    item.result.polling_commit = item.wanted.commit;
  }

  // 3. Decide what to publish and whether the mirror must fetch.
  bool any_active = false;
  for (const auto& item : items) {
    any_active = any_active || item.active;
  }
  if (!any_active) {
    return finish();
  }
  if (!slot.mirror) {
    auto opened = git::Mirror::open(slot.path, url, settings.allow_local);
    if (!opened.ok() && opened.error().kind == ErrorKind::kInternal) {
      // Not a git repository (a crash during the first clone, a stray directory): start it afresh.
      log::warn("mirror directory is unusable; recreating it",
                {{"url", display_url}, {"path", slot.path}, {"error", opened.error().describe()}});
      metrics.error("mirror", ErrorKind::kInternal);
      removeAll(slot.path);
      opened = git::Mirror::open(slot.path, url, settings.allow_local);
    }
    if (!opened.ok()) {
      for (auto& item : items) {
        if (item.active) {
          failItem(item, "mirror", opened.error());
        }
      }
      return finish();
    }
    slot.mirror.emplace(std::move(opened).value());
  }
  git::Mirror& mirror = *slot.mirror;
  const Item* fetch_for = nullptr;
  for (auto& item : items) {
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
    if (item.needs_fetch && fetch_for == nullptr) {
      fetch_for = &item;
    }
  }

  // 4. One fetch for everyone who needs it.
  if (fetch_for != nullptr) {
    if (!guard.begin("fetch", settings.git_timeout)) {
      return finish();
    }
    const auto started = Clock::now();
    auto fetched = mirror.fetch(fetch_for->credentials, git::FetchOptions{.timeout = settings.git_timeout,
                                                                          .allow_local = settings.allow_local});
    if (!guard.end()) {
      return std::nullopt;
    }
    metrics.fetch(secondsSince(started), fetched.ok());
    if (fetched.ok()) {
      log::info("mirror fetched", {{"url", display_url},
                                   {"received_objects", static_cast<int64_t>(fetched->stats.received_objects)},
                                   {"received_bytes", static_cast<int64_t>(fetched->stats.received_bytes)},
                                   {"ms", static_cast<int64_t>(fetched->stats.duration.count())}});
    }
    for (auto& item : items) {
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
          error.message = "revision \"" + item.work->gitrepo.spec.revision + "\" not found in " + display_url +
                          " after fetching: " + error.message;
          failItem(item, "resolve", std::move(error));
          continue;
        }
        item.commit = *resolved;
      } else if (!mirrorHas(mirror, item.commit)) {
        failItem(item, "fetch",
                 makeError(ErrorKind::kTransient,
                           "the remote advertised " + item.wanted.describe + " at " + item.commit +
                               " but the fetch from " + display_url + " did not bring it (moved meanwhile?)",
                           "syncMirror"));
      }
    }
  }

  // 5. Publish.
  for (auto& item : items) {
    if (!item.active || guard.cancelled()) {
      continue;
    }
    if (item.wanted.needs_mirror) {
      item.result.polling_commit = item.commit;
      if (!needsPublish(item, item.commit)) {
        item.active = false;
        continue;
      }
    }
    publishItem(item, settings, bus, metrics, mirror, display_url);
  }
  return finish();
}

}  // namespace flotilla::poller
