// The handler's storage steps: KV records, the object stores, publishing, and the work dir's checkouts.
#include <filesystem>
#include <system_error>

#include <stdlib.h>

#include "flotilla/bundler/commit_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/cloudevents.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "flotilla/service/kv_entries.h"

namespace flotilla::bundler {
namespace fs = std::filesystem;
using render::Checkout;
using render::RenderedBundle;

namespace {

//! Copies which bundle of which commit `from` is about (workspace, GitRepo, bundle, path, commit) to `to`.
template <typename To, typename From>
void copyBundleSource(To& to, const From& from) {
  to.workspace = from.workspace;
  to.gitrepo = from.gitrepo;
  to.bundle = from.bundle;
  to.path = from.path;
  to.commit = from.commit;
}

}  // namespace

Status prepareWorkDir(const std::string& work_dir) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot create the work dir " + work_dir + ": " + ec.message(),
                "create_directories");
  }
  size_t removed = 0;
  for (fs::directory_iterator it(work_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (startsWith(it->path().filename().string(), "commit-")) {
      removeAll(it->path().string());
      ++removed;
    }
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot list the work dir " + work_dir + ": " + ec.message(),
                "directory_iterator");
  }
  const std::string probe = work_dir + "/.write-probe-" + randomHex(4);
  if (auto written = writeFile(probe, "ok"); !written.ok()) {
    return fail(ErrorKind::kPermanent, "the work dir " + work_dir + " is not writable: " + written.error().message,
                "writeFile");
  }
  removeAll(probe);
  if (removed > 0) {
    log::info("removed checkouts left by an earlier run",
              {{"work_dir", work_dir}, {"count", static_cast<int64_t>(removed)}});
  }
  return {};
}

Result<Checkout> extractCheckout(const source::Archive& archive, const std::string& work_dir) {
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot create the work dir " + work_dir + ": " + ec.message(),
                "create_directories");
  }
  std::string pattern = work_dir + "/commit-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return fail(ErrorKind::kInternal,
                "cannot create a directory in " + work_dir + ": " + std::generic_category().message(errno), "mkdtemp");
  }
  Checkout checkout(pattern);
  const std::string root = pattern + "/src";
  if (auto status = source::extract(archive, root); !status.ok()) {
    return fail(status.error().kind == ErrorKind::kInvalid ? ErrorKind::kInvalid : ErrorKind::kInternal,
                "cannot extract the source archive: " + status.error().message, "extract");
  }
  return checkout;
}

Result<std::optional<model::GitRepo>> CommitHandler::loadGitRepo(std::string_view workspace, std::string_view name) {
  auto entry = bus_.gitrepos->get(events::gitRepoKey(workspace, name));
  if (!entry.ok()) {
    if (entry.error().kind == ErrorKind::kNotFound) {
      return std::optional<model::GitRepo>();
    }
    return fail(entry.error());
  }
  auto json = Json::parse(entry->value);
  if (!json.ok()) {
    return fail(ErrorKind::kInvalid, "gitrepos/" + entry->key + ": " + json.error().message);
  }
  auto gitrepo = model::decodeGitRepo(*json, "gitrepos/" + entry->key);
  if (!gitrepo.ok()) {
    return fail(gitrepo.error());
  }
  return std::optional<model::GitRepo>(std::move(gitrepo).value());
}

Result<std::vector<BundleRecord>> CommitHandler::recordsOf(std::string_view workspace, std::string_view gitrepo) {
  std::vector<BundleRecord> records;
  FLOTILLA_TRY(service::forEachEntry(*bus_.bundles, events::keyFilter({workspace}), [&](const bus::KvEntry& entry) {
    auto record = parseBundleRecord(entry.value);
    if (!record.ok()) {
      log::warn("ignoring an unreadable bundle record", {{"key", entry.key}, {"error", record.error().describe()}});
    } else if (record->gitrepo == gitrepo && record->workspace == workspace) {
      records.push_back(std::move(record).value());
    }
    return okStatus();
  }));
  return records;
}

Result<source::Archive> CommitHandler::loadSource(const events::CommitEvent& event) {
  if (event.source_object.empty()) {
    return fail(ErrorKind::kInvalid, "the CommitEvent names no source object");
  }
  auto data = bus_.sources->get(event.source_object);
  if (!data.ok()) {
    return fail(data.error());
  }
  auto archive = source::decode(*data);
  if (!archive.ok()) {
    return fail(ErrorKind::kInvalid, "source object " + event.source_object + ": " + archive.error().message);
  }
  if (archive->commit != event.commit) {
    log::warn("source archive names another commit than its event", {{"gitrepo", event.workspace + "/" + event.gitrepo},
                                                                     {"commit", event.commit},
                                                                     {"archive_commit", archive->commit}});
  }
  return archive;
}

Result<bool> CommitHandler::storeObject(const std::string& name, const std::string& text) {
  if (gc_ != nullptr) {
    gc_->touch(name);  // before looking: garbage collection now keeps it or has removed it (then it is put anew)
  }
  auto info = bus_.manifests->info(name);
  if (info.ok()) {
    return false;
  }
  if (info.error().kind != ErrorKind::kNotFound) {
    return fail(info.error());
  }
  auto stored = bus_.manifests->put(name, text);
  FLOTILLA_TRY(stored);
  return true;
}

void CommitHandler::noteStoreFull(const RenderedBundle& rendered, const Error& error) {
  if (error.kind != ErrorKind::kStoreFull) {
    return;
  }
  const auto& event = rendered.event;
  const std::string key = renderStatusKey(event.workspace, event.bundle);
  RenderStatus status;
  if (auto entry = bus_.status->get(key); entry.ok()) {
    if (auto stored = events::parseRecord<RenderStatus>(entry->value); stored.ok()) {
      status = std::move(stored).value();
    }
  }
  copyBundleSource(status, event);
  status.time = log::nowRfc3339();
  status.error = events::RenderError{
      .file = "",
      .line = 0,
      .message = "rendered, but not stored or published yet: " + error.message +
                 " (retried with backoff until space is freed; the last good version stays deployed)"};
  if (auto put = bus_.status->put(key, encode(status).dump()); !put.ok()) {
    log::warn("could not write the render status of a bundle waiting for a full store",
              {{"bundle", event.workspace + "/" + event.bundle}, {"error", put.error().describe()}});
  }
}

Status CommitHandler::storeVariants(const RenderedBundle& rendered) {
  if (rendered.variants_text.empty() || rendered.error) {
    return {};
  }
  if (gc_ != nullptr && rendered.variants) {
    // Variants taken from the cache reuse a manifest this render did not store: in use again from now on.
    for (const auto& variant : rendered.variants->variants) {
      gc_->touch(events::manifestObjectName(variant.manifest_id));
    }
  }
  // Called after the bundle's manifests were stored: only now may later renders take them from the cache.
  for (const auto& [key, manifest_id] : rendered.cache_entries) {
    variant_cache_.put(key, manifest_id);
  }
  FLOTILLA_TRY(storeObject(rendered.event.variants_object, rendered.variants_text));
  return {};
}

Status CommitHandler::storeManifest(const render::CanonicalManifest& manifest) {
  auto stored = storeObject(events::manifestObjectName(manifest.manifest_id), manifest.text);
  FLOTILLA_TRY(stored);
  metrics_.manifest(manifest.text.size(), *stored);
  return {};
}

Status CommitHandler::publish(const events::BundleEvent& event) {
  auto ack =
      bus_.js->publish(events::bundleSubject(event.workspace, event.bundle), events::encode(event).dump(), event.id);
  if (!ack.ok()) {
    return fail(ack.error());
  }
  metrics_.published(ack->duplicate);
  // Also for a duplicate: a bundler killed between the two publishes announces it now (the same Msg-Id).
  public_events_.send(events::toCloudEvent(event, kBundlerEventSource),
                      events::eventsSubject("bundle", {event.workspace, event.bundle}));
  if (ack->duplicate) {
    log::info("bundle event was already published (duplicate dropped)",
              {{"gitrepo", event.workspace + "/" + event.gitrepo},
               {"bundle", event.bundle},
               {"commit", event.commit},
               {"state", eventState(event)}});
  }
  return {};
}

Status CommitHandler::commitBundle(RenderedBundle& rendered, const std::optional<BundleRecord>& previous,
                                   uint64_t sequence, std::optional<uint64_t> replaced_revision) {
  auto& event = rendered.event;
  event.commit_sequence = static_cast<int64_t>(sequence);
  BundleRecord record;
  copyBundleSource(record, event);
  record.commit_sequence = sequence;
  record.source_object = rendered.source_object;
  record.render_key = rendered.render_key;  // set only for a cacheable render (noteRenderCache, cachedRender)
  RenderStatus status;
  copyBundleSource(status, event);
  status.time = log::nowRfc3339();
  stampEvent(event, replaced_revision);
  if (rendered.error) {
    record.last_good = previous ? previous->last_good : std::nullopt;
    record.release_name = previous ? previous->release_name : std::string();
    record.error = rendered.error;
    status.error = rendered.error;
    status.last_good_manifest_id = !record.last_good                       ? std::string()
                                   : record.last_good->manifest_id.empty() ? record.last_good->variants_object
                                                                           : record.last_good->manifest_id;
  } else {
    record.last_good = event;
    record.release_name = helmReleaseOf(event, rendered.renderer).name;
    // A bundle rendered per cluster has no single manifest: its status names the variants table.
    status.manifest_id = event.manifest_id.empty() ? event.variants_object : event.manifest_id;
    status.last_good_manifest_id = status.manifest_id;
    status.chart = rendered.notes.chart;
    status.chart_version = rendered.notes.chart_version;
    status.chart_digest = rendered.notes.chart_digest;
  }
  if (replaced_revision) {
    FLOTILLA_TRY(publish(event));  // a re-render: before the record (see commitBundle in the header)
  }
  auto put = bus_.bundles->put(events::bundleKey(event.workspace, event.bundle), encode(record).dump());
  if (!put.ok()) {
    return fail(put.error());
  }
  auto status_put = bus_.status->put(renderStatusKey(event.workspace, event.bundle), encode(status).dump());
  if (!status_put.ok()) {
    return fail(status_put.error());
  }
  if (!replaced_revision) {
    FLOTILLA_TRY(publish(event));
  }
  if (rendered.error) {
    metrics_.bundle("error");
    log::warn("bundle failed to render; the last good deployment stays",
              {{"gitrepo", event.workspace + "/" + event.gitrepo},
               {"bundle", event.bundle},
               {"commit", event.commit},
               {"path", event.path},
               {"file", rendered.error->file},
               {"line", rendered.error->line},
               {"error", rendered.error->message},
               {"last_good_manifest", status.last_good_manifest_id}});
  } else {
    metrics_.bundle("ok");
    log::info("bundle rendered",
              {{"gitrepo", event.workspace + "/" + event.gitrepo},
               {"bundle", event.bundle},
               {"commit", event.commit},
               {"path", event.path},
               {"renderer", rendered.renderer},
               {"cached", rendered.from_cache},
               {"chart", rendered.notes.chart},
               {"chart_version", rendered.notes.chart_version},
               {"manifest", event.manifest_id},
               {"objects", static_cast<int64_t>(rendered.manifests.count(event.manifest_id) > 0
                                                    ? rendered.manifests.at(event.manifest_id).objects
                                                    : 0)},
               {"variants_object", event.variants_object},
               {"variant_clusters", static_cast<int64_t>(rendered.variants ? rendered.variants->clusters.size() : 0)},
               {"customizations", static_cast<int64_t>(event.customizations.size())}});
  }
  return {};
}

Status CommitHandler::deleteBundle(const BundleRecord& record, const events::CommitEvent& event, uint64_t sequence) {
  events::BundleEvent deleted;
  copyBundleSource(deleted, record);
  // A deleted GitRepo's event names no commit: the bundle's last one stands for it.
  deleted.commit = event.commit.empty() ? record.commit : event.commit;
  deleted.force_sync_generation = event.force_sync_generation;
  deleted.commit_sequence = static_cast<int64_t>(sequence);
  deleted.deleted = true;
  stampEvent(deleted);
  FLOTILLA_TRY(publish(deleted));
  if (auto removed = bus_.bundles->remove(events::bundleKey(record.workspace, record.bundle));
      !removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  if (auto removed = bus_.status->remove(renderStatusKey(record.workspace, record.bundle));
      !removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  metrics_.bundle("deleted");
  log::info(event.deleted ? "bundle of a deleted GitRepo; deletion published"
                          : "bundle removed from the repository; deletion published",
            {{"gitrepo", record.workspace + "/" + record.gitrepo},
             {"bundle", record.bundle},
             {"commit", deleted.commit},
             {"path", record.path}});
  return {};
}

}  // namespace flotilla::bundler
