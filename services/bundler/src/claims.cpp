// Bundle names another GitRepo of the workspace holds (docs/pipeline.md "BundleClaim"): a commit that has such a
// bundle skips it and records a claim; when the holder's bundle is deleted (by its commit or a cascade) the claim is
// rendered from the claimant's commit at once, so the waiting GitRepo never needs a new commit or a force-sync.
#include <algorithm>

#include "flotilla/bundler/commit_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"
#include "flotilla/service/kv_entries.h"

namespace flotilla::bundler {
namespace {

std::string claimKey(const events::BundleClaim& claim) {
  return events::bundleClaimKey(claim.workspace, claim.bundle, claim.gitrepo);
}

std::string claimantOf(const events::BundleClaim& claim) {
  return claim.workspace + "/" + claim.gitrepo;
}

//! The CommitEvent a claim was recorded from, as far as rendering needs it.
events::CommitEvent commitOf(const events::BundleClaim& claim) {
  events::CommitEvent commit;
  commit.workspace = claim.workspace;
  commit.gitrepo = claim.gitrepo;
  commit.commit = claim.commit;
  commit.source_object = claim.source_object;
  commit.force_sync_generation = claim.force_sync_generation;
  return commit;
}

}  // namespace

Status CommitHandler::recordClaim(const events::BundleClaim& claim) {
  FLOTILLA_TRY(bus_.status->put(claimKey(claim), events::encode(claim).dump()));
  metrics_.claim("recorded");
  return {};
}

Status CommitHandler::removeClaim(const events::BundleClaim& claim) {
  Status removed = bus_.status->remove(claimKey(claim));
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return removed;
  }
  return {};
}

Result<std::vector<events::BundleClaim>> CommitHandler::claimsIn(std::string_view filter) {
  std::vector<events::BundleClaim> claims;
  FLOTILLA_TRY(service::forEachEntry(*bus_.status, filter, [&](const bus::KvEntry& entry) {
    auto claim = events::parseRecord<events::BundleClaim>(entry.value);
    if (!claim.ok()) {
      metrics_.claim("invalid");
      log::warn("ignoring an unreadable bundle claim", {{"key", entry.key}, {"error", claim.error().describe()}});
    } else {
      claims.push_back(std::move(claim).value());
    }
    return okStatus();
  }));
  return claims;
}

Status CommitHandler::dropClaims(std::string_view workspace, std::string_view gitrepo,
                                 const std::set<std::string>& keep) {
  auto claims = claimsIn("bundle-claim." + events::escapeToken(workspace) + ".*." + events::escapeToken(gitrepo));
  FLOTILLA_TRY(claims);
  for (const auto& claim : *claims) {
    if (keep.contains(claim.bundle)) {
      continue;
    }
    FLOTILLA_TRY(removeClaim(claim));
    metrics_.claim("dropped");
    log::info("bundle claim dropped: the GitRepo no longer has that bundle, or has it now",
              {{"gitrepo", claimantOf(claim)}, {"bundle", claim.bundle}});
  }
  return {};
}

Status CommitHandler::renderFreedClaims(std::string_view workspace) {
  auto claims = claimsIn("bundle-claim." + events::escapeToken(workspace) + ".>");
  FLOTILLA_TRY(claims);
  // The claim of the oldest commit first: when two GitRepos wait for one name, the one that waited longer gets it
  // (the other keeps waiting, now for that one).
  std::stable_sort(claims->begin(), claims->end(),
                   [](const auto& a, const auto& b) { return a.commit_sequence < b.commit_sequence; });
  std::set<std::string> taken;
  for (const auto& claim : *claims) {
    if (taken.contains(claim.bundle)) {
      continue;
    }
    bool rendered = false;
    FLOTILLA_TRY(renderClaim(claim, rendered));
    if (rendered) {
      taken.insert(claim.bundle);
    }
  }
  return {};
}

Status CommitHandler::renderClaim(const events::BundleClaim& seen, bool& rendered) {
  rendered = false;
  auto lock = gitrepoLock(seen.workspace, seen.gitrepo);
  std::lock_guard guard(*lock);
  auto waiting = currentClaim(seen);
  FLOTILLA_TRY(waiting);
  if (!waiting->has_value()) {
    return {};
  }
  const events::BundleClaim& claim = **waiting;
  auto gitrepo = loadGitRepo(claim.workspace, claim.gitrepo);
  FLOTILLA_TRY(gitrepo);
  if (!gitrepo->has_value()) {
    metrics_.claim("dropped");
    return removeClaim(claim);  // the claimant is gone (its cascade drops its claims too)
  }
  const events::CommitEvent commit = commitOf(claim);
  auto archive = loadSource(commit);
  if (!archive.ok()) {
    if (archive.error().kind != ErrorKind::kNotFound && archive.error().kind != ErrorKind::kInvalid) {
      return fail(archive.error());
    }
    metrics_.claim("dropped");
    log::warn("cannot render a bundle claim: its source archive is gone; the GitRepo's next commit will",
              {{"gitrepo", claimantOf(claim)}, {"bundle", claim.bundle}, {"error", archive.error().describe()}});
    return removeClaim(claim);
  }
  auto checkout = extractCheckout(*archive, options_.work_dir);
  FLOTILLA_TRY(checkout);
  const std::string root = checkout->root() + "/src";
  const std::map<std::string, std::string> previous_ids = {{claim.path, claim.bundle}};
  const std::vector<render::ClusterFacts> workspace_clusters =
      clusters_ ? clusters_->snapshot(claim.workspace) : std::vector<render::ClusterFacts>{};
  render::RenderContext context{root, commit, **gitrepo, *renderers_, options_.limits, previous_ids};
  context.clusters = &workspace_clusters;
  context.cache = &variant_cache_;
  auto bundle = render::renderBundle(context, bundleDirAt(root, claim.path));
  FLOTILLA_TRY(bundle);
  FLOTILLA_TRY(publishClaim(claim, *bundle, rendered));
  return {};
}

Result<std::optional<events::BundleClaim>> CommitHandler::currentClaim(const events::BundleClaim& seen) {
  using Waiting = std::optional<events::BundleClaim>;
  // Read again under the claimant's lock: its own commit may have replaced or dropped the claim meanwhile.
  auto entry = bus_.status->get(claimKey(seen));
  if (!entry.ok()) {
    return entry.error().kind == ErrorKind::kNotFound ? Result<Waiting>(Waiting()) : fail(entry.error());
  }
  auto claim = events::parseRecord<events::BundleClaim>(entry->value);
  if (!claim.ok()) {
    return Waiting();
  }
  auto holder = bus_.bundles->get(events::bundleKey(claim->workspace, claim->bundle));
  if (holder.ok()) {
    auto record = parseBundleRecord(holder->value);
    if (record.ok() && record->gitrepo == claim->gitrepo) {
      FLOTILLA_TRY(removeClaim(*claim));  // the claimant has the bundle already
    }
    return Waiting();  // still held (by another GitRepo, maybe another claimant that waited longer)
  }
  if (holder.error().kind != ErrorKind::kNotFound) {
    return fail(holder.error());
  }
  return Waiting(std::move(claim).value());
}

Status CommitHandler::publishClaim(const events::BundleClaim& claim, render::RenderedBundle& bundle, bool& rendered) {
  metrics_.renderDuration(bundle.renderer, bundle.seconds);
  if (bundle.bundle != claim.bundle) {
    metrics_.claim("dropped");
    log::warn("bundle claim dropped: the directory renders another bundle now",
              {{"gitrepo", claimantOf(claim)}, {"bundle", claim.bundle}, {"rendered", bundle.bundle}});
    return removeClaim(claim);
  }
  FLOTILLA_TRY(storeAll(bundle));
  FLOTILLA_TRY(commitBundle(bundle, std::nullopt, claim.commit_sequence));
  FLOTILLA_TRY(removeClaim(claim));
  metrics_.claim("rendered");
  log::info("bundle name released by another GitRepo; the waiting bundle is rendered", {{"gitrepo", claimantOf(claim)},
                                                                                        {"bundle", claim.bundle},
                                                                                        {"previous_owner", claim.owner},
                                                                                        {"commit", claim.commit},
                                                                                        {"path", claim.path}});
  rendered = true;
  return {};
}

}  // namespace flotilla::bundler
