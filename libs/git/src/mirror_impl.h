// Mirror::Impl and the helpers mirror.cpp (open, fetch, refs, commits) and mirror_tree.cpp (trees, files,
// export) share. Private to libs/git.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/git/mirror.h"
#include "libgit2_util.h"

namespace flotilla::git {

struct Mirror::Impl {
  std::string path;
  std::string url;
  bool allow_local = false;
  detail::GitPtr<git_repository> repo;

  // A tree entry found by path, with the path after following symlinks.
  struct Found {
    detail::GitPtr<git_tree_entry> entry;  // null for the root
    std::vector<std::string> parts;
  };

  Result<git_oid> resolveOid(std::string_view ref) const;
  Result<detail::GitPtr<git_commit>> commitOf(std::string_view ref) const;
  Result<detail::GitPtr<git_tree>> rootTree(std::string_view ref) const;
  Result<Found> walk(git_tree* root, std::vector<std::string> parts, bool follow_last) const;
  Result<detail::GitPtr<git_tree>> treeAt(std::string_view ref, std::string_view subdir) const;
  Result<std::string> blobText(const git_oid& oid, uint64_t max_bytes, const std::string& shown) const;
  Status collect(git_tree* tree, const std::string& prefix, int depth, std::vector<TreeEntry>& out) const;
  Status exportDir(git_tree* tree, const std::string& dest, int depth, const ExportOptions& options,
                   ExportStats& stats) const;
  Result<git_oid> peelToCommit(git_object* object, std::string_view shown) const;
  //! The commit a ref points at; nullopt when the ref does not exist or is unborn.
  Result<std::optional<git_oid>> peelReference(const std::string& candidate, std::string_view shown) const;
  //! The commit an abbreviated object id names; nullopt when none does, kInvalid when several do.
  Result<std::optional<git_oid>> lookupShortOid(const std::string& name) const;
};

namespace detail {

//! A caller-given repository path as its parts: "" and "." mean the root; absolute paths and ".." are refused.
Result<std::vector<std::string>> pathParts(std::string_view path);
//! The parts joined with '/'.
std::string joinParts(const std::vector<std::string>& parts);

}  // namespace detail
}  // namespace flotilla::git
