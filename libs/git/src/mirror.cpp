#include "flotilla/git/mirror.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "libgit2_util.h"
#include "session.h"

namespace flotilla::git {
namespace fs = std::filesystem;
using detail::GitPtr;
using detail::localError;
using detail::oidHex;

namespace {

constexpr const char* kOrigin = "origin";
constexpr const char* kHeadsSpec = "+refs/heads/*:refs/heads/*";
constexpr const char* kTagsSpec = "+refs/tags/*:refs/tags/*";
constexpr int kMaxSymlinkHops = 16;
constexpr int kMaxTreeDepth = 256;

bool isHex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// A caller-given repository path: "" and "." mean the root; absolute paths and ".." are refused.
Result<std::vector<std::string>> pathParts(std::string_view path) {
  std::vector<std::string> parts;
  if (!path.empty() && path.front() == '/') {
    return fail(ErrorKind::kInvalid, "path '" + std::string(path) + "' must be relative to the repository root",
                "Mirror");
  }
  for (auto& part : split(path, '/')) {
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == "..") {
      return fail(ErrorKind::kInvalid, "path '" + std::string(path) + "' must not contain '..'", "Mirror");
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

std::string joinParts(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : "/") + part;
  }
  return out;
}

// Names git itself refuses to check out; a tree carrying them is hostile.
bool unsafeEntryName(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    return true;
  }
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower == ".git";
}

Status writeAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail(ErrorKind::kInternal, "cannot write " + path + ": " + std::strerror(errno), "Mirror::exportTree");
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return okStatus();
}

}  // namespace

struct Mirror::Impl {
  std::string path;
  std::string url;
  bool allow_local = false;
  GitPtr<git_repository> repo;

  // A tree entry found by path, with the path after following symlinks.
  struct Found {
    GitPtr<git_tree_entry> entry;  // null for the root
    std::vector<std::string> parts;
  };

  Result<git_oid> resolveOid(std::string_view ref) const;
  Result<GitPtr<git_commit>> commitOf(std::string_view ref) const;
  Result<GitPtr<git_tree>> rootTree(std::string_view ref) const;
  Result<Found> walk(git_tree* root, std::vector<std::string> parts, bool follow_last) const;
  Result<GitPtr<git_tree>> treeAt(std::string_view ref, std::string_view subdir) const;
  Result<std::string> blobText(const git_oid& oid, uint64_t max_bytes, const std::string& shown) const;
  Status collect(git_tree* tree, const std::string& prefix, int depth, std::vector<TreeEntry>& out) const;
  Status exportDir(git_tree* tree, const std::string& dest, int depth, const ExportOptions& options,
                   ExportStats& stats) const;
  Result<git_oid> peelToCommit(git_object* object, std::string_view shown) const;
};

Mirror::Mirror(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Mirror::Mirror(Mirror&& other) noexcept = default;
Mirror& Mirror::operator=(Mirror&& other) noexcept = default;
Mirror::~Mirror() = default;

const std::string& Mirror::path() const {
  return impl_->path;
}
const std::string& Mirror::url() const {
  return impl_->url;
}

Result<Mirror> Mirror::open(const std::string& path, const std::string& url, bool allow_local) {
  detail::ensureInit();
  auto parsed = parseGitUrl(url, allow_local);
  if (!parsed.ok()) {
    return fail(parsed.error());
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->url = url;
  impl->allow_local = allow_local;
  std::error_code ec;
  const bool exists = fs::exists(path, ec) && !fs::is_empty(path, ec);
  git_repository* repo = nullptr;
  if (!exists) {
    git_repository_init_options init = GIT_REPOSITORY_INIT_OPTIONS_INIT;
    init.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH;
    if (int rc = git_repository_init_ext(&repo, path.c_str(), &init); rc < 0) {
      return fail(localError(rc, "git_repository_init_ext", "cannot create mirror at " + path));
    }
  } else if (int rc = git_repository_open_bare(&repo, path.c_str()); rc < 0) {
    Error error = localError(rc, "git_repository_open_bare", path + " exists but is not a git mirror");
    error.kind = ErrorKind::kInternal;
    return fail(std::move(error));
  }
  impl->repo.reset(repo);

  git_remote* raw = nullptr;
  int rc = git_remote_lookup(&raw, repo, kOrigin);
  if (rc == GIT_ENOTFOUND) {
    if ((rc = git_remote_create_with_fetchspec(&raw, repo, kOrigin, url.c_str(), kHeadsSpec)) < 0 ||
        (rc = git_remote_add_fetch(repo, kOrigin, kTagsSpec)) < 0) {
      git_remote_free(raw);
      return fail(localError(rc, "git_remote_create_with_fetchspec", "cannot configure mirror " + path));
    }
  } else if (rc < 0) {
    return fail(localError(rc, "git_remote_lookup", "cannot read mirror " + path));
  }
  GitPtr<git_remote> remote(raw);
  if (const char* current = git_remote_url(remote.get()); current == nullptr || url != current) {
    if ((rc = git_remote_set_url(repo, kOrigin, url.c_str())) < 0) {
      return fail(localError(rc, "git_remote_set_url", "cannot update mirror " + path));
    }
    log::info("git mirror now follows a new URL",
              {{"path", path}, {"old_url", redactUrl(current != nullptr ? current : "")}, {"url", redactUrl(url)}});
  }
  return Mirror(std::move(impl));
}

Result<FetchResult> Mirror::fetch(const Credentials& credentials, const FetchOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto session = detail::RemoteSession::create(impl_->url, credentials, options.timeout,
                                               options.allow_local || impl_->allow_local);
  if (!session.ok()) {
    return fail(session.error());
  }
  auto& s = **session;
  git_remote* raw = nullptr;
  if (int rc = git_remote_lookup(&raw, impl_->repo.get(), kOrigin); rc < 0) {
    return fail(localError(rc, "git_remote_lookup", "mirror " + impl_->path + " lost its origin"));
  }
  GitPtr<git_remote> remote(raw);
  git_remote_callbacks callbacks = s.callbacks();
  git_proxy_options proxy = GIT_PROXY_OPTIONS_INIT;
  auto failed = [&](int rc, const char* function) {
    Error error = s.failure(rc, function);
    git_remote_disconnect(remote.get());
    log::debug("git fetch failed",
               {{"url", s.displayUrl()}, {"kind", std::string(errorKindName(error.kind))}, {"error", error.message}});
    return fail(std::move(error));
  };
  // Connect once, read the advertisement, then download on the same connection: one round of negotiation.
  if (int rc = git_remote_connect(remote.get(), GIT_DIRECTION_FETCH, &callbacks, &proxy, nullptr); rc < 0) {
    return failed(rc, "git_remote_connect");
  }
  FetchResult result;
  auto heads = s.heads(remote.get());
  if (!heads.ok()) {
    git_remote_disconnect(remote.get());
    return fail(heads.error());
  }
  result.heads = std::move(*heads);

  std::vector<char*> specs;
  for (const auto& spec : options.refspecs) {
    specs.push_back(const_cast<char*>(spec.c_str()));
  }
  git_strarray refspecs{specs.data(), specs.size()};
  git_fetch_options fetch = GIT_FETCH_OPTIONS_INIT;
  fetch.callbacks = callbacks;
  fetch.proxy_opts = proxy;
  fetch.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;  // the refspecs name the tags we want
  fetch.update_fetchhead = 0;
  if (int rc = git_remote_download(remote.get(), specs.empty() ? nullptr : &refspecs, &fetch); rc < 0) {
    return failed(rc, "git_remote_download");
  }
  if (int rc = git_remote_update_tips(remote.get(), &callbacks, 0, GIT_REMOTE_DOWNLOAD_TAGS_NONE, "flotilla fetch");
      rc < 0) {
    return failed(rc, "git_remote_update_tips");
  }
  if (options.prune) {
    if (int rc = git_remote_prune(remote.get(), &callbacks); rc < 0) {
      return failed(rc, "git_remote_prune");
    }
  }
  const git_indexer_progress* stats = git_remote_stats(remote.get());
  result.stats.received_objects = stats->received_objects;
  result.stats.received_bytes = stats->received_bytes;
  result.stats.indexed_objects = stats->indexed_objects;
  result.stats.local_objects = stats->local_objects;
  result.stats.total_objects = stats->total_objects;
  git_remote_disconnect(remote.get());

  // HEAD follows the remote's default branch so resolve("HEAD") means what it means on the server.
  if (!result.heads.default_branch.empty()) {
    const std::string head = "refs/heads/" + result.heads.default_branch;
    git_reference* ref = nullptr;
    if (git_reference_lookup(&ref, impl_->repo.get(), head.c_str()) == 0) {
      git_reference_free(ref);
      if (int rc = git_repository_set_head(impl_->repo.get(), head.c_str()); rc < 0) {
        log::warn("cannot point mirror HEAD at the default branch",
                  {{"path", impl_->path}, {"branch", result.heads.default_branch}});
      }
    }
    git_error_clear();
  }
  result.stats.duration =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  log::debug("git fetch done", {{"url", s.displayUrl()},
                                {"received_objects", static_cast<int64_t>(result.stats.received_objects)},
                                {"received_bytes", static_cast<int64_t>(result.stats.received_bytes)},
                                {"ms", static_cast<int64_t>(result.stats.duration.count())}});
  return result;
}

Result<git_oid> Mirror::Impl::peelToCommit(git_object* object, std::string_view shown) const {
  git_object* peeled = nullptr;
  if (int rc = git_object_peel(&peeled, object, GIT_OBJECT_COMMIT); rc < 0) {
    git_error_clear();
    return fail(ErrorKind::kInvalid, "'" + std::string(shown) + "' does not point at a commit", "git_object_peel");
  }
  git_oid oid = *git_object_id(peeled);
  git_object_free(peeled);
  return oid;
}

Result<git_oid> Mirror::Impl::resolveOid(std::string_view ref) const {
  const std::string name(ref);
  if (name.empty()) {
    return fail(ErrorKind::kInvalid, "empty ref", "Mirror::resolve");
  }
  const bool hex = isHex(name);
  if (hex && name.size() == GIT_OID_HEXSZ) {
    git_oid oid;
    git_object* object = nullptr;
    if (git_oid_fromstr(&oid, name.c_str()) == 0 && git_object_lookup(&object, repo.get(), &oid, GIT_OBJECT_ANY) == 0) {
      GitPtr<git_object> owned(object);
      return peelToCommit(object, name);
    }
    git_error_clear();
    return fail(ErrorKind::kNotFound, "commit " + name + " is not in the mirror of " + redactUrl(url),
                "Mirror::resolve");
  }
  std::vector<std::string> candidates;
  if (name == "HEAD" || name.rfind("refs/", 0) == 0) {
    candidates.push_back(name);
  } else {
    candidates = {"refs/heads/" + name, "refs/tags/" + name};
  }
  bool any_valid = false;
  for (const auto& candidate : candidates) {
    int valid = 0;
    if (candidate != "HEAD" && (git_reference_name_is_valid(&valid, candidate.c_str()) < 0 || valid == 0)) {
      continue;
    }
    any_valid = true;
    git_reference* raw = nullptr;
    int rc = git_reference_lookup(&raw, repo.get(), candidate.c_str());
    if (rc == GIT_ENOTFOUND) {
      continue;
    }
    if (rc < 0) {
      return fail(localError(rc, "git_reference_lookup", "cannot read ref " + candidate));
    }
    GitPtr<git_reference> reference(raw);
    git_object* object = nullptr;
    if ((rc = git_reference_peel(&object, reference.get(), GIT_OBJECT_ANY)) < 0) {
      if (rc == GIT_ENOTFOUND || rc == GIT_EUNBORNBRANCH) {
        git_error_clear();
        continue;  // HEAD of a mirror that was never fetched
      }
      return fail(localError(rc, "git_reference_peel", "cannot read ref " + candidate));
    }
    GitPtr<git_object> owned(object);
    return peelToCommit(object, name);
  }
  git_error_clear();
  if (hex && name.size() >= GIT_OID_MINPREFIXLEN) {
    git_oid oid;
    git_object* object = nullptr;
    if (git_oid_fromstrn(&oid, name.c_str(), name.size()) == 0) {
      int rc = git_object_lookup_prefix(&object, repo.get(), &oid, name.size(), GIT_OBJECT_ANY);
      if (rc == 0) {
        GitPtr<git_object> owned(object);
        return peelToCommit(object, name);
      }
      git_error_clear();
      if (rc == GIT_EAMBIGUOUS) {
        return fail(ErrorKind::kInvalid, "short sha " + name + " is ambiguous; use more digits", "Mirror::resolve");
      }
    }
  } else if (!any_valid) {
    return fail(ErrorKind::kInvalid, "'" + name + "' is not a valid branch, tag or commit name", "Mirror::resolve");
  }
  return fail(ErrorKind::kNotFound, "'" + name + "' is not a branch, tag or commit in the mirror of " + redactUrl(url),
              "Mirror::resolve");
}

Result<std::string> Mirror::resolve(std::string_view ref) const {
  auto oid = impl_->resolveOid(ref);
  if (!oid.ok()) {
    return fail(oid.error());
  }
  return oidHex(*oid);
}

Result<GitPtr<git_commit>> Mirror::Impl::commitOf(std::string_view ref) const {
  auto oid = resolveOid(ref);
  if (!oid.ok()) {
    return fail(oid.error());
  }
  git_commit* commit = nullptr;
  if (int rc = git_commit_lookup(&commit, repo.get(), &*oid); rc < 0) {
    return fail(localError(rc, "git_commit_lookup", "cannot read commit " + oidHex(*oid)));
  }
  return GitPtr<git_commit>(commit);
}

Result<GitPtr<git_tree>> Mirror::Impl::rootTree(std::string_view ref) const {
  auto commit = commitOf(ref);
  if (!commit.ok()) {
    return fail(commit.error());
  }
  git_tree* tree = nullptr;
  if (int rc = git_commit_tree(&tree, commit->get()); rc < 0) {
    return fail(localError(rc, "git_commit_tree", "cannot read the tree of " + std::string(ref)));
  }
  return GitPtr<git_tree>(tree);
}

Result<Mirror::Impl::Found> Mirror::Impl::walk(git_tree* root, std::vector<std::string> parts, bool follow_last) const {
  const std::string shown = joinParts(parts);
  int hops = 0;
  while (true) {
    if (parts.empty()) {
      return Found{nullptr, {}};
    }
    GitPtr<git_tree> owned;
    git_tree* tree = root;
    bool restarted = false;
    for (size_t i = 0; i < parts.size() && !restarted; ++i) {
      const git_tree_entry* entry = git_tree_entry_byname(tree, parts[i].c_str());
      if (entry == nullptr) {
        return fail(ErrorKind::kNotFound, "path '" + shown + "' does not exist", "Mirror");
      }
      const git_filemode_t mode = git_tree_entry_filemode(entry);
      const bool last = i + 1 == parts.size();
      if (mode == GIT_FILEMODE_LINK && (!last || follow_last)) {
        if (++hops > kMaxSymlinkHops) {
          return fail(ErrorKind::kInvalid, "too many symbolic links resolving '" + shown + "'", "Mirror");
        }
        const std::string link = joinParts({parts.begin(), parts.begin() + static_cast<long>(i) + 1});
        auto target = blobText(*git_tree_entry_id(entry), 4096, link);
        if (!target.ok()) {
          return fail(target.error());
        }
        if (target->empty() || target->front() == '/') {
          return fail(ErrorKind::kInvalid, "symlink '" + link + "' points outside the repository", "Mirror");
        }
        // Resolve the target relative to the link's directory, then continue with the rest of the path.
        std::vector<std::string> next(parts.begin(), parts.begin() + static_cast<long>(i));
        for (auto& piece : split(*target, '/')) {
          if (piece.empty() || piece == ".") {
            continue;
          }
          if (piece == "..") {
            if (next.empty()) {
              return fail(ErrorKind::kInvalid, "symlink '" + link + "' points outside the repository", "Mirror");
            }
            next.pop_back();
            continue;
          }
          next.push_back(std::move(piece));
        }
        next.insert(next.end(), parts.begin() + static_cast<long>(i) + 1, parts.end());
        parts = std::move(next);
        restarted = true;
        continue;
      }
      if (last) {
        git_tree_entry* copy = nullptr;
        if (int rc = git_tree_entry_dup(&copy, entry); rc < 0) {
          return fail(localError(rc, "git_tree_entry_dup"));
        }
        return Found{GitPtr<git_tree_entry>(copy), parts};
      }
      if (mode != GIT_FILEMODE_TREE) {
        return fail(ErrorKind::kNotFound, "path '" + shown + "' does not exist ('" + parts[i] + "' is not a directory)",
                    "Mirror");
      }
      git_tree* sub = nullptr;
      if (int rc = git_tree_lookup(&sub, repo.get(), git_tree_entry_id(entry)); rc < 0) {
        return fail(localError(rc, "git_tree_lookup", "cannot read directory " + parts[i]));
      }
      owned.reset(sub);  // `entry` belonged to the previous tree and is not used any more
      tree = sub;
    }
  }
}

Result<GitPtr<git_tree>> Mirror::Impl::treeAt(std::string_view ref, std::string_view subdir) const {
  auto parts = pathParts(subdir);
  if (!parts.ok()) {
    return fail(parts.error());
  }
  auto root = rootTree(ref);
  if (!root.ok()) {
    return fail(root.error());
  }
  if (parts->empty()) {
    return std::move(*root);
  }
  auto found = walk(root->get(), std::move(*parts), true);
  if (!found.ok()) {
    return fail(found.error());
  }
  if (git_tree_entry_type(found->entry.get()) != GIT_OBJECT_TREE) {
    return fail(ErrorKind::kInvalid, "'" + std::string(subdir) + "' is not a directory", "Mirror");
  }
  git_tree* tree = nullptr;
  if (int rc = git_tree_lookup(&tree, repo.get(), git_tree_entry_id(found->entry.get())); rc < 0) {
    return fail(localError(rc, "git_tree_lookup", "cannot read directory " + std::string(subdir)));
  }
  return GitPtr<git_tree>(tree);
}

Result<std::string> Mirror::Impl::blobText(const git_oid& oid, uint64_t max_bytes, const std::string& shown) const {
  git_blob* raw = nullptr;
  if (int rc = git_blob_lookup(&raw, repo.get(), &oid); rc < 0) {
    return fail(localError(rc, "git_blob_lookup", "cannot read " + shown));
  }
  GitPtr<git_blob> blob(raw);
  const auto size = static_cast<uint64_t>(git_blob_rawsize(blob.get()));
  if (size > max_bytes) {
    return fail(ErrorKind::kInvalid,
                "'" + shown + "' is " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes),
                "Mirror");
  }
  return std::string(static_cast<const char*>(git_blob_rawcontent(blob.get())), size);
}

Result<std::string> Mirror::readFile(std::string_view commit, std::string_view path, uint64_t max_bytes) const {
  auto parts = pathParts(path);
  if (!parts.ok()) {
    return fail(parts.error());
  }
  if (parts->empty()) {
    return fail(ErrorKind::kInvalid, "'" + std::string(path) + "' is a directory", "Mirror::readFile");
  }
  auto root = impl_->rootTree(commit);
  if (!root.ok()) {
    return fail(root.error());
  }
  auto found = impl_->walk(root->get(), std::move(*parts), true);
  if (!found.ok()) {
    return fail(found.error());
  }
  const git_tree_entry* entry = found->entry.get();
  switch (git_tree_entry_filemode(entry)) {
    case GIT_FILEMODE_BLOB:
    case GIT_FILEMODE_BLOB_EXECUTABLE:
      return impl_->blobText(*git_tree_entry_id(entry), max_bytes, joinParts(found->parts));
    case GIT_FILEMODE_TREE:
      return fail(ErrorKind::kInvalid, "'" + std::string(path) + "' is a directory", "Mirror::readFile");
    default:
      return fail(ErrorKind::kInvalid, "'" + std::string(path) + "' is a submodule, not a file", "Mirror::readFile");
  }
}

Result<std::string> Mirror::treeId(std::string_view commit, std::string_view subdir) const {
  auto tree = impl_->treeAt(commit, subdir);
  if (!tree.ok()) {
    return fail(tree.error());
  }
  return oidHex(*git_tree_id(tree->get()));
}

Status Mirror::Impl::collect(git_tree* tree, const std::string& prefix, int depth, std::vector<TreeEntry>& out) const {
  if (depth > kMaxTreeDepth) {
    return fail(ErrorKind::kInvalid, "directory nesting deeper than " + std::to_string(kMaxTreeDepth), "Mirror");
  }
  const size_t count = git_tree_entrycount(tree);
  for (size_t i = 0; i < count; ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
    const std::string entry_path =
        prefix.empty() ? git_tree_entry_name(entry) : prefix + "/" + git_tree_entry_name(entry);
    TreeEntry item{.path = entry_path, .oid = oidHex(*git_tree_entry_id(entry))};
    switch (git_tree_entry_filemode(entry)) {
      case GIT_FILEMODE_TREE: {
        git_tree* sub = nullptr;
        if (int rc = git_tree_lookup(&sub, repo.get(), git_tree_entry_id(entry)); rc < 0) {
          return fail(localError(rc, "git_tree_lookup", "cannot read directory " + entry_path));
        }
        GitPtr<git_tree> owned(sub);
        FLOTILLA_TRY(collect(sub, entry_path, depth + 1, out));
        continue;
      }
      case GIT_FILEMODE_BLOB_EXECUTABLE:
        item.kind = EntryKind::kExecutable;
        break;
      case GIT_FILEMODE_LINK:
        item.kind = EntryKind::kSymlink;
        break;
      case GIT_FILEMODE_COMMIT:
        item.kind = EntryKind::kSubmodule;
        break;
      default:
        item.kind = EntryKind::kFile;
        break;
    }
    out.push_back(std::move(item));
  }
  return okStatus();
}

Result<std::vector<TreeEntry>> Mirror::listFiles(std::string_view commit, std::string_view subdir) const {
  auto tree = impl_->treeAt(commit, subdir);
  if (!tree.ok()) {
    return fail(tree.error());
  }
  auto parts = pathParts(subdir);
  std::vector<TreeEntry> out;
  FLOTILLA_TRY(impl_->collect(tree->get(), joinParts(*parts), 0, out));
  std::sort(out.begin(), out.end(), [](const TreeEntry& a, const TreeEntry& b) { return a.path < b.path; });
  return out;
}

Status Mirror::Impl::exportDir(git_tree* tree, const std::string& dest, int depth, const ExportOptions& options,
                               ExportStats& stats) const {
  constexpr const char* kWhere = "Mirror::exportTree";
  if (depth > kMaxTreeDepth) {
    return fail(ErrorKind::kInvalid, "directory nesting deeper than " + std::to_string(kMaxTreeDepth), kWhere);
  }
  const size_t count = git_tree_entrycount(tree);
  for (size_t i = 0; i < count; ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
    const std::string name = git_tree_entry_name(entry);
    if (unsafeEntryName(name)) {
      return fail(ErrorKind::kInvalid, "the tree holds an unsafe entry name '" + name + "'", kWhere);
    }
    if (stats.files + stats.symlinks + stats.directories >= options.max_entries) {
      return fail(ErrorKind::kInvalid, "the tree has more than " + std::to_string(options.max_entries) + " entries",
                  kWhere);
    }
    const std::string target = dest + "/" + name;
    const git_filemode_t mode = git_tree_entry_filemode(entry);
    if (mode == GIT_FILEMODE_TREE) {
      if (::mkdir(target.c_str(), 0755) != 0) {
        return fail(ErrorKind::kInternal, "cannot create " + target + ": " + std::strerror(errno), kWhere);
      }
      ++stats.directories;
      git_tree* sub = nullptr;
      if (int rc = git_tree_lookup(&sub, repo.get(), git_tree_entry_id(entry)); rc < 0) {
        return fail(localError(rc, "git_tree_lookup", "cannot read directory " + name));
      }
      GitPtr<git_tree> owned(sub);
      FLOTILLA_TRY(exportDir(sub, target, depth + 1, options, stats));
      continue;
    }
    if (mode == GIT_FILEMODE_COMMIT) {
      ++stats.skipped_submodules;
      log::debug("skipping submodule while exporting", {{"path", target}});
      continue;
    }
    const uint64_t budget = options.max_total_bytes - std::min(options.max_total_bytes, stats.bytes);
    auto content = blobText(*git_tree_entry_id(entry), budget, name);
    if (!content.ok()) {
      if (content.error().kind == ErrorKind::kInvalid) {
        return fail(ErrorKind::kInvalid,
                    "the tree is larger than the export limit of " + std::to_string(options.max_total_bytes) + " bytes",
                    kWhere);
      }
      return fail(content.error());
    }
    stats.bytes += content->size();
    if (mode == GIT_FILEMODE_LINK) {
      // Written as a link, never followed here; the caller decides whether a target is acceptable.
      if (::symlink(content->c_str(), target.c_str()) != 0) {
        return fail(ErrorKind::kInternal, "cannot create symlink " + target + ": " + std::strerror(errno), kWhere);
      }
      ++stats.symlinks;
      continue;
    }
    const mode_t file_mode = mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644;
    // O_EXCL|O_NOFOLLOW: never write through something that already exists, such as a planted symlink.
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode);
    if (fd < 0) {
      return fail(ErrorKind::kInternal, "cannot create " + target + ": " + std::strerror(errno), kWhere);
    }
    Status written = writeAll(fd, content->data(), content->size(), target);
    if (written.ok() && ::fchmod(fd, file_mode) != 0) {  // the umask must not drop the executable bit
      written = fail(ErrorKind::kInternal, "cannot chmod " + target + ": " + std::strerror(errno), kWhere);
    }
    ::close(fd);
    FLOTILLA_TRY(written);
    ++stats.files;
  }
  return okStatus();
}

Result<ExportStats> Mirror::exportTree(std::string_view commit, std::string_view subdir, const std::string& dest_dir,
                                       const ExportOptions& options) const {
  auto tree = impl_->treeAt(commit, subdir);
  if (!tree.ok()) {
    return fail(tree.error());
  }
  std::error_code ec;
  fs::create_directories(dest_dir, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot create " + dest_dir + ": " + ec.message(), "Mirror::exportTree");
  }
  if (!fs::is_empty(dest_dir, ec)) {
    return fail(ErrorKind::kInvalid, "export destination " + dest_dir + " is not empty", "Mirror::exportTree");
  }
  ExportStats stats;
  FLOTILLA_TRY(impl_->exportDir(tree->get(), dest_dir, 0, options, stats));
  return stats;
}

Result<CommitInfo> Mirror::commitInfo(std::string_view commit) const {
  auto found = impl_->commitOf(commit);
  if (!found.ok()) {
    return fail(found.error());
  }
  git_commit* c = found->get();
  CommitInfo info;
  info.oid = oidHex(*git_commit_id(c));
  info.message = git_commit_message(c) != nullptr ? git_commit_message(c) : "";
  info.summary = git_commit_summary(c) != nullptr ? git_commit_summary(c) : "";
  if (const git_signature* author = git_commit_author(c); author != nullptr) {
    info.author_name = author->name;
    info.author_email = author->email;
    info.author_time = author->when.time;
  }
  if (const git_signature* committer = git_commit_committer(c); committer != nullptr) {
    info.committer_name = committer->name;
    info.committer_email = committer->email;
  }
  info.commit_time = git_commit_time(c);
  for (unsigned int i = 0; i < git_commit_parentcount(c); ++i) {
    info.parents.push_back(oidHex(*git_commit_parent_id(c, i)));
  }
  return info;
}

Result<std::vector<RemoteRef>> Mirror::refs() const {
  git_reference_iterator* raw = nullptr;
  if (int rc = git_reference_iterator_new(&raw, impl_->repo.get()); rc < 0) {
    return fail(localError(rc, "git_reference_iterator_new"));
  }
  GitPtr<git_reference_iterator> iterator(raw);
  std::vector<RemoteRef> out;
  git_reference* ref = nullptr;
  int rc = 0;
  while ((rc = git_reference_next(&ref, iterator.get())) == 0) {
    GitPtr<git_reference> owned(ref);
    if (git_reference_type(ref) != GIT_REFERENCE_DIRECT) {
      continue;
    }
    RemoteRef item{.name = git_reference_name(ref), .oid = oidHex(*git_reference_target(ref))};
    git_object* object = nullptr;
    if (git_reference_peel(&object, ref, GIT_OBJECT_COMMIT) == 0) {
      std::string commit = oidHex(*git_object_id(object));
      if (commit != item.oid) {
        item.peeled = std::move(commit);
      }
      git_object_free(object);
    }
    git_error_clear();
    out.push_back(std::move(item));
  }
  if (rc != GIT_ITEROVER) {
    return fail(localError(rc, "git_reference_next"));
  }
  std::sort(out.begin(), out.end(), [](const RemoteRef& a, const RemoteRef& b) { return a.name < b.name; });
  return out;
}

}  // namespace flotilla::git
