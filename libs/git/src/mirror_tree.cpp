// Mirror's read side below a commit: walking paths (symlinks followed inside the repository), reading files,
// listing and exporting trees.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/errno_text.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "mirror_impl.h"

namespace flotilla::git {
namespace fs = std::filesystem;
using detail::GitPtr;
using detail::joinParts;
using detail::localError;
using detail::oidHex;
using detail::pathParts;

namespace {

constexpr int kMaxSymlinkHops = 16;
constexpr int kMaxTreeDepth = 256;

// Names git itself refuses to check out; a tree carrying them is hostile.
bool unsafeEntryName(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    return true;
  }
  return equalsIgnoreCase(name, ".git");
}

Status writeAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail(ErrorKind::kInternal, "cannot write " + path + ": " + errnoText(errno), "Mirror::exportTree");
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return okStatus();
}

EntryKind entryKindOf(git_filemode_t mode) {
  switch (mode) {
    case GIT_FILEMODE_BLOB_EXECUTABLE:
      return EntryKind::kExecutable;
    case GIT_FILEMODE_LINK:
      return EntryKind::kSymlink;
    case GIT_FILEMODE_COMMIT:
      return EntryKind::kSubmodule;
    default:
      return EntryKind::kFile;
  }
}

// The path after replacing parts[0..i] (the symlink `link`) by its `target`, resolved against the link's directory.
Result<std::vector<std::string>> followLink(const std::vector<std::string>& parts, size_t i, const std::string& target,
                                            const std::string& link) {
  if (target.empty() || target.front() == '/') {
    return fail(ErrorKind::kInvalid, "symlink '" + link + "' points outside the repository", "Mirror");
  }
  std::vector<std::string> next(parts.begin(), parts.begin() + static_cast<long>(i));
  for (auto& piece : split(target, '/')) {
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
  return next;
}

}  // namespace

namespace detail {

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
  return join(parts, "/");
}

}  // namespace detail

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
        auto next = followLink(parts, i, *target, link);
        FLOTILLA_TRY(next);
        parts = std::move(*next);
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
    const git_filemode_t mode = git_tree_entry_filemode(entry);
    if (mode == GIT_FILEMODE_TREE) {
      git_tree* sub = nullptr;
      if (int rc = git_tree_lookup(&sub, repo.get(), git_tree_entry_id(entry)); rc < 0) {
        return fail(localError(rc, "git_tree_lookup", "cannot read directory " + entry_path));
      }
      GitPtr<git_tree> owned(sub);
      FLOTILLA_TRY(collect(sub, entry_path, depth + 1, out));
      continue;
    }
    item.kind = entryKindOf(mode);
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
    std::string target = dest;
    target += '/';
    target += name;
    const git_filemode_t mode = git_tree_entry_filemode(entry);
    if (mode == GIT_FILEMODE_TREE) {
      if (::mkdir(target.c_str(), 0755) != 0) {
        return fail(ErrorKind::kInternal, "cannot create " + target + ": " + errnoText(errno), kWhere);
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
        return fail(ErrorKind::kInternal, "cannot create symlink " + target + ": " + errnoText(errno), kWhere);
      }
      ++stats.symlinks;
      continue;
    }
    const mode_t file_mode = mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644;
    // O_EXCL|O_NOFOLLOW: never write through something that already exists, such as a planted symlink.
    int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode);
    if (fd < 0) {
      return fail(ErrorKind::kInternal, "cannot create " + target + ": " + errnoText(errno), kWhere);
    }
    Status written = writeAll(fd, content->data(), content->size(), target);
    if (written.ok() && ::fchmod(fd, file_mode) != 0) {  // the umask must not drop the executable bit
      written = fail(ErrorKind::kInternal, "cannot chmod " + target + ": " + errnoText(errno), kWhere);
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

}  // namespace flotilla::git
