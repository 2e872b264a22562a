// flotilla/git/mirror.h
//
// A persistent bare mirror of one remote URL on local disk (the poller keeps one per URL, shared by every
// GitRepo on that URL). `fetch` brings it up to date incrementally; everything else reads commits and trees from
// it without touching the network, which is what the bundler needs to render a commit.
//
// Layout: a bare repository whose remote "origin" fetches "+refs/heads/*:refs/heads/*" and
// "+refs/tags/*:refs/tags/*" (like `git clone --mirror`), with deleted remote refs pruned and HEAD following the
// remote's default branch. libgit2 1.5 cannot fetch shallow, so the first fetch downloads the full history.
// libgit2 never repacks: each fetch adds a pack file (run `git gc` on the mirror now and then if that matters).
//
// Thread-safety: one Mirror must not be used by two threads at once (the poller serializes per mirror).
// Different Mirror objects may be used concurrently, also on different paths for the same URL.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/git/credentials.h"
#include "flotilla/git/remote.h"

namespace flotilla::git {

struct FetchOptions {
  //! Refspecs to fetch; empty means the mirror's own (all heads and tags).
  std::vector<std::string> refspecs;
  //! Delete local refs whose remote ref is gone.
  bool prune = true;
  std::chrono::milliseconds timeout = std::chrono::minutes(10);  //!< see RemoteOptions::timeout
  bool allow_local = false;                                      //!< see RemoteOptions::allow_local
};

struct FetchStats {
  uint64_t received_objects = 0;  //!< objects downloaded (small on an incremental fetch)
  uint64_t received_bytes = 0;
  uint64_t indexed_objects = 0;
  uint64_t local_objects = 0;  //!< objects the pack referenced that the mirror already had
  uint64_t total_objects = 0;
  std::chrono::milliseconds duration{0};
};

struct FetchResult {
  FetchStats stats;
  RemoteHeads heads;  //!< what the remote advertised during this fetch
};

enum class EntryKind { kFile, kExecutable, kSymlink, kSubmodule };

//! A non-directory entry of a tree.
struct TreeEntry {
  std::string path;  //!< repository-relative, '/'-separated
  EntryKind kind = EntryKind::kFile;
  std::string oid;  //!< blob oid (commit oid for submodules)
};

struct CommitInfo {
  std::string oid;
  std::string message;  //!< full message
  std::string summary;  //!< first paragraph, on one line
  std::string author_name;
  std::string author_email;
  int64_t author_time = 0;  //!< seconds since the epoch
  std::string committer_name;
  std::string committer_email;
  int64_t commit_time = 0;
  std::vector<std::string> parents;
};

struct ExportOptions {
  uint64_t max_total_bytes = 512ull << 20;  //!< larger trees fail with kInvalid before the limit is crossed
  uint64_t max_entries = 100000;
};

struct ExportStats {
  uint64_t files = 0;
  uint64_t symlinks = 0;
  uint64_t directories = 0;
  uint64_t bytes = 0;
  uint64_t skipped_submodules = 0;
};

class Mirror {
 public:
  //! Opens the bare mirror at `path`, creating it (and parent directories) if missing. If it exists but its
  //! origin points at another URL, the URL is updated (refs from the old URL are pruned on the next fetch).
  //! kInvalid for a bad URL; kInternal if `path` exists but is not a git repository.
  static Result<Mirror> open(const std::string& path, const std::string& url, bool allow_local = false);

  Mirror(Mirror&& other) noexcept;
  Mirror& operator=(Mirror&& other) noexcept;
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  ~Mirror();

  //! Where the bare mirror lives.
  [[nodiscard]] const std::string& path() const;
  //! The remote URL it mirrors (may hold a user name; log it through redactUrl()).
  [[nodiscard]] const std::string& url() const;

  //! Fetches from the remote (incremental after the first fetch), prunes deleted refs, points HEAD at the
  //! remote's default branch, and returns transfer statistics and the advertised refs.
  Result<FetchResult> fetch(const Credentials& credentials, const FetchOptions& options = {});

  //! The commit oid that `ref` designates in the mirror: "HEAD", a full ref name ("refs/heads/x"), a branch
  //! ("main" -> refs/heads/main), a tag (peeled to its commit), or a full or abbreviated (4+ hex) commit sha.
  //! Branches win over tags of the same name. kNotFound if nothing matches; kInvalid for a malformed or
  //! ambiguous name or one that does not lead to a commit.
  Result<std::string> resolve(std::string_view ref) const;

  //! Every file, symlink and submodule under `subdir` ("" = whole tree) at `commit` (anything resolve()
  //! accepts), recursively, with repository-relative paths, sorted. kNotFound if `subdir` does not exist.
  Result<std::vector<TreeEntry>> listFiles(std::string_view commit, std::string_view subdir = {}) const;

  //! The content of the file at `path`. Symlinks inside the repository are followed (relative targets only;
  //! a link that leaves the repository or loops is kInvalid). kNotFound for a missing path, kInvalid for a
  //! directory, a submodule or a file larger than `max_bytes`.
  Result<std::string> readFile(std::string_view commit, std::string_view path, uint64_t max_bytes = 64ull << 20) const;

  //! The oid of the tree at `subdir` ("" = root tree) of `commit`. Equal tree ids at two commits mean nothing
  //! under that path changed. Symlinked directories are followed like in readFile.
  Result<std::string> treeId(std::string_view commit, std::string_view subdir = {}) const;

  //! Writes the tree at `subdir` of `commit` into `dest_dir` (created if missing; must be empty), so that
  //! dest_dir holds what subdir holds. Files get mode 0644, or 0755 when executable in git. Symlinks are
  //! written as symlinks with their target unchanged and never followed while writing, so the caller can refuse
  //! links that escape. Submodules are skipped (counted). Entry names "." / ".." / ".git" or with '/' are
  //! refused (kInvalid), as are trees over the ExportOptions limits.
  Result<ExportStats> exportTree(std::string_view commit, std::string_view subdir, const std::string& dest_dir,
                                 const ExportOptions& options = {}) const;

  //! Message, author and time of a commit (anything resolve() accepts).
  Result<CommitInfo> commitInfo(std::string_view commit) const;

  //! The refs the mirror holds (branches and tags; annotated tags with their peeled commit), sorted.
  Result<std::vector<RemoteRef>> refs() const;

 private:
  struct Impl;
  explicit Mirror(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::git
