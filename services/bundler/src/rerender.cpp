// Re-rendering per-cluster bundles after a cluster changed (CommitHandler::rerenderWorkspace).
#include <filesystem>
#include <system_error>

#include "flotilla/bundler/commit_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/events/subjects.h"

namespace flotilla::bundler {
namespace fs = std::filesystem;
using render::Checkout;
using render::ClusterFacts;
using render::RenderContext;
using render::RenderedBundle;

Status CommitHandler::rerenderWorkspace(std::string_view workspace) {
  auto keys = bus_.bundles->keys(events::keyFilter({workspace}));
  if (!keys.ok()) {
    if (keys.error().kind == ErrorKind::kNotFound) {
      return {};
    }
    return fail(keys.error());
  }
  std::optional<Error> first_failure;
  size_t republished = 0;
  for (const auto& key : *keys) {
    auto entry = bus_.bundles->get(key);
    if (!entry.ok()) {
      if (entry.error().kind != ErrorKind::kNotFound && !first_failure) {
        first_failure = entry.error();
      }
      continue;
    }
    auto record = parseBundleRecord(entry->value);
    if (!record.ok() || !record->last_good || record->last_good->variants_object.empty()) {
      continue;  // unreadable (logged by the commit path) or not rendered per cluster
    }
    bool changed = false;
    if (auto status = rerenderBundle(record->workspace, record->bundle, changed); !status.ok()) {
      metrics_.rerender("retry");
      log::warn("cannot re-render a bundle for changed clusters yet",
                {{"workspace", record->workspace}, {"bundle", record->bundle}, {"error", status.error().describe()}});
      if (!first_failure) {
        first_failure = status.error();
      }
      continue;
    }
    republished += changed ? 1 : 0;
  }
  if (first_failure) {
    return fail(*first_failure);
  }
  if (republished > 0) {
    log::info("re-rendered per-cluster bundles after a cluster change",
              {{"workspace", std::string(workspace)}, {"bundles", static_cast<int64_t>(republished)}});
  }
  return {};
}

//! A record's commit checked out again for a re-render.
struct CommitHandler::Rerender {
  model::GitRepo gitrepo;
  events::CommitEvent commit;  //!< rebuilt from the record
  Checkout checkout;
  std::string root;
  render::BundleDir dir;
};

Status CommitHandler::rerenderBundle(std::string_view workspace, std::string_view bundle, bool& changed) {
  changed = false;
  auto peek = bus_.bundles->get(events::bundleKey(workspace, bundle));
  if (!peek.ok()) {
    return peek.error().kind == ErrorKind::kNotFound ? Status{} : Status(fail(peek.error()));
  }
  auto peeked = parseBundleRecord(peek->value);
  if (!peeked.ok()) {
    return {};
  }
  auto lock = gitrepoLock(peeked->workspace, peeked->gitrepo);
  std::lock_guard guard(*lock);
  auto record = rerenderRecord(workspace, bundle);
  if (!record.ok() || !record->has_value()) {
    return record.ok() ? Status{} : Status(fail(record.error()));
  }
  auto prepared = rerenderCheckout((*record)->record);
  if (!prepared.ok() || !prepared->has_value()) {
    return prepared.ok() ? Status{} : Status(fail(prepared.error()));
  }
  Rerender& run = **prepared;
  const std::map<std::string, std::string> previous_ids = {{run.dir.path, (*record)->record.bundle}};
  const std::vector<ClusterFacts> workspace_clusters =
      clusters_ ? clusters_->snapshot((*record)->record.workspace) : std::vector<ClusterFacts>{};
  RenderContext context{run.root, run.commit, run.gitrepo, *renderers_, options_.limits, previous_ids};
  context.clusters = &workspace_clusters;
  context.cache = &variant_cache_;
  auto rendered = render::renderBundle(context, run.dir);
  if (!rendered.ok()) {
    return fail(rendered.error());
  }
  return publishRerender(**record, *rendered, changed);
}

Result<std::optional<CommitHandler::RecordAt>> CommitHandler::rerenderRecord(std::string_view workspace,
                                                                             std::string_view bundle) {
  using Found = std::optional<RecordAt>;
  // Read again under the lock: a commit may have rendered the bundle meanwhile.
  auto entry = bus_.bundles->get(events::bundleKey(workspace, bundle));
  if (!entry.ok()) {
    return entry.error().kind == ErrorKind::kNotFound ? Result<Found>(std::nullopt) : fail(entry.error());
  }
  auto record = parseBundleRecord(entry->value);
  // A record whose latest render failed is re-rendered too: the change may be what fixes it (a label a template
  // needs); the same error again publishes nothing.
  if (!record.ok() || !record->last_good || record->last_good->variants_object.empty()) {
    metrics_.rerender("skipped");
    return Found();
  }
  if (record->source_object.empty()) {
    metrics_.rerender("skipped");
    log::warn(
        "cannot re-render a per-cluster bundle: its record names no source archive (rendered before this "
        "version); the next commit will",
        {{"workspace", record->workspace}, {"bundle", record->bundle}});
    return Found();
  }
  return Found(RecordAt{.record = std::move(record).value(), .revision = entry->revision});
}

render::BundleDir bundleDirAt(const std::string& root, const std::string& path) {
  render::BundleDir dir{.path = path};
  for (const char* name : {"fleet.yaml", "fleet.yml"}) {
    const std::string relative = path == "." ? std::string(name) : path + "/" + name;
    std::error_code ec;
    if (fs::is_regular_file(fs::path(root) / relative, ec)) {
      dir.fleet_yaml = relative;
      break;
    }
  }
  return dir;
}

Result<std::optional<CommitHandler::Rerender>> CommitHandler::rerenderCheckout(const BundleRecord& record) {
  using Prepared = std::optional<Rerender>;
  auto gitrepo = loadGitRepo(record.workspace, record.gitrepo);
  if (!gitrepo.ok()) {
    return fail(gitrepo.error());
  }
  if (!gitrepo->has_value()) {
    metrics_.rerender("skipped");
    return Prepared();
  }
  Rerender run{.gitrepo = std::move(**gitrepo)};
  run.commit.workspace = record.workspace;
  run.commit.gitrepo = record.gitrepo;
  run.commit.commit = record.commit;
  run.commit.source_object = record.source_object;
  run.commit.force_sync_generation = record.last_good->force_sync_generation;
  auto archive = loadSource(run.commit);
  if (!archive.ok()) {
    if (archive.error().kind == ErrorKind::kNotFound || archive.error().kind == ErrorKind::kInvalid) {
      metrics_.rerender("skipped");
      log::warn("cannot re-render a per-cluster bundle: its source archive is gone or unreadable",
                {{"workspace", record.workspace},
                 {"bundle", record.bundle},
                 {"source_object", record.source_object},
                 {"error", archive.error().describe()}});
      return Prepared();
    }
    return fail(archive.error());
  }
  auto checkout = extractCheckout(*archive, options_.work_dir);
  if (!checkout.ok()) {
    return fail(checkout.error());
  }
  run.checkout = std::move(checkout).value();
  run.root = run.checkout.root() + "/src";
  run.dir = bundleDirAt(run.root, record.path);
  return Prepared(std::move(run));
}

Status CommitHandler::publishRerender(const RecordAt& current, RenderedBundle& rendered, bool& changed) {
  const BundleRecord& record = current.record;
  metrics_.renderDuration(rendered.renderer, rendered.seconds);
  if (rendered.bundle != record.bundle) {
    metrics_.rerender("skipped");
    return {};
  }
  metrics_.variants(rendered.variant_renders, rendered.variant_cache_hits);
  const bool same_table =
      !rendered.error && !record.error && rendered.event.variants_object == record.last_good->variants_object;
  const bool same_error = rendered.error && record.error && *rendered.error == *record.error;
  if (same_table || same_error) {
    metrics_.rerender("unchanged");
    return {};
  }
  FLOTILLA_TRY(storeAll(rendered));
  // The revision makes the Msg-Id new for every genuine change, also when the table returns to one published
  // earlier for this commit (A -> B -> A); records.h.
  FLOTILLA_TRY(commitBundle(rendered, record, record.commit_sequence, current.revision));
  metrics_.rerender(rendered.error ? "error" : "published");
  log::info("bundle re-rendered for changed clusters",
            {{"workspace", record.workspace},
             {"bundle", record.bundle},
             {"commit", record.commit},
             {"variants_object", rendered.event.variants_object},
             {"msg_id", rendered.event.id},
             {"renders", static_cast<int64_t>(rendered.variant_renders)},
             {"cache_hits", static_cast<int64_t>(rendered.variant_cache_hits)}});
  changed = true;
  return {};
}

}  // namespace flotilla::bundler
