// The render cache (services/bundler/README.md "Render cache"): a bundle whose render key (render_key.h) is the one
// its BundleRecord keeps is not rendered again; its last good render is published for the new commit through the
// same store -> record -> publish path as a fresh render (storeAll stores nothing new: the manifests are stored).
#include "flotilla/bundler/commit_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"

namespace flotilla::bundler {
using render::BundleDir;
using render::RenderedBundle;

std::optional<RenderedBundle> CommitHandler::cachedRender(const events::CommitEvent& event, const std::string& root,
                                                          const BundleDir& dir, const RenderKey& key,
                                                          const BundleRecord* previous) {
  // Only a record whose key describes its last good render: a failed render keeps an older lastGood without a key.
  if (key.key.empty() || key.resolve || previous == nullptr || previous->render_key != key.key ||
      !previous->last_good || previous->error) {
    return std::nullopt;
  }
  const events::BundleEvent& last_good = *previous->last_good;
  if (last_good.path != dir.path || last_good.manifest_id.empty() || !last_good.variants_object.empty()) {
    return std::nullopt;
  }
  // The renderer that made it (the same files pick the same one): the record's Helm release name follows from it.
  auto options = model::decodeOptions(last_good.options);
  if (!options.ok()) {
    return std::nullopt;
  }
  auto renderer = renderers_->choose(root, dir.path, *options);
  if (!renderer.ok() || !customizationManifestsStored(last_good)) {
    return std::nullopt;
  }
  RenderedBundle out;
  out.bundle = last_good.bundle;
  out.path = dir.path;
  out.renderer = std::string((*renderer)->name());
  out.source_object = event.source_object;
  out.render_key = key.key;
  out.from_cache = true;
  // The event of this commit: id, time and commitSequence are filled by commitBundle like a fresh render's.
  out.event = last_good;
  out.event.id.clear();
  out.event.time.clear();
  out.event.commit = event.commit;
  out.event.commit_sequence = 0;
  out.event.error.reset();
  log::debug("render cache hit: bundle not rendered again", {{"gitrepo", event.workspace + "/" + event.gitrepo},
                                                             {"bundle", out.bundle},
                                                             {"path", dir.path},
                                                             {"commit", event.commit},
                                                             {"rendered_at", last_good.commit},
                                                             {"manifest", last_good.manifest_id}});
  return out;
}

bool CommitHandler::customizationManifestsStored(const events::BundleEvent& event) {
  // The record protects lastGood's manifests, its own and each customization's (docs/pipeline.md "Garbage
  // collection"); they are touched because a collection pass may be deciding on them right now, and looked up because
  // a bundler from before customizations counted as references may have collected one.
  for (const auto& customization : event.customizations) {
    if (customization.manifest_id.empty() || customization.manifest_id == event.manifest_id) {
      continue;
    }
    const std::string name = events::manifestObjectName(customization.manifest_id);
    if (gc_ != nullptr) {
      gc_->touch(name);  // before looking, as storeObject does: collection now keeps it or has removed it
    }
    if (auto info = bus_.manifests->info(name); !info.ok()) {
      return false;  // gone (or unknown): render it, which stores it again
    }
  }
  if (gc_ != nullptr) {
    gc_->touch(events::manifestObjectName(event.manifest_id));  // reused, as a fresh render's put would touch it
  }
  return true;
}

RenderKey CommitHandler::withRemoteInputs(const render::RenderContext& context, const BundleDir& dir, RenderKey key) {
  if (!key.resolve) {
    return key;
  }
  auto identity = render::resolveRemoteInputs(context, dir);
  if (!identity.ok()) {
    // The render goes ahead: a user error is its to report; anything else only costs this bundle its cache.
    log::info("render cache: the bundle's remote charts could not be resolved to digests; rendering it",
              {{"gitrepo", context.commit.workspace + "/" + context.commit.gitrepo},
               {"path", dir.path},
               {"file", key.file},
               {"error", identity.error().message}});
    return RenderKey{.reason = "unresolved", .file = std::move(key.file)};
  }
  std::string encoded = key.key;
  encoded += '\n';
  encoded += *identity;
  key.key = sha256Hex(encoded);
  key.resolve = false;
  return key;
}

void CommitHandler::noteRenderCache(const RenderKey& key, RenderedBundle& rendered) {
  if (rendered.from_cache) {
    metrics_.renderCache("hit");
    return;
  }
  // Failed renders are tried again; per-cluster renders depend on cluster facts (they have the VariantCache); both
  // are what the render found, before what the key says ("remote", "unresolved").
  // Every branch a view (key.reason's own, or a literal): a std::string branch would make the whole expression a
  // temporary string the view outlives.
  const bool per_cluster = rendered.variants || !rendered.event.variants_object.empty();
  const std::string_view reason = rendered.error ? std::string_view("error")
                                  : per_cluster  ? std::string_view("per_cluster")
                                                 : std::string_view(key.reason);
  if (reason.empty()) {
    rendered.render_key = key.key;
    metrics_.renderCache("miss");
    return;
  }
  metrics_.renderCache("uncacheable", reason);
  log::debug("render cache: bundle not cacheable, rendered on every commit",
             {{"bundle", rendered.bundle}, {"path", rendered.path}, {"reason", reason}, {"file", key.file}});
}

}  // namespace flotilla::bundler
