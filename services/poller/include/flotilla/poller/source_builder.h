// flotilla/poller/source_builder.h
//
// Turning a commit of a mirror into the source archive the bundler renders from (libs/source): the files and
// symlinks a GitRepo selects (PathSelector), read from the bare mirror without a checkout. Also decides whether
// anything under the selection changed between two commits, by comparing the selected entries' blob ids (the
// same answer as comparing tree ids, but it also works for glob patterns).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/git/mirror.h"
#include "flotilla/poller/gitrepo.h"
#include "flotilla/source/archive.h"

namespace flotilla::poller {

//! A built archive, encoded, with its object name in the `sources` bucket.
struct BuiltSource {
  std::string encoded;      //!< source::encode(archive)
  std::string object_name;  //!< source::objectName(encoded)
  uint64_t files = 0;
  uint64_t symlinks = 0;
  uint64_t skipped_submodules = 0;
  uint64_t content_bytes = 0;
};

//! The entries of `commit` the selector keeps, sorted by path.
Result<std::vector<git::TreeEntry>> selectedEntries(const git::Mirror& mirror, std::string_view commit,
                                                    const PathSelector& selector);

//! sha256 over the selected entries' (path, kind, blob id): equal digests mean nothing under the selection
//! changed.
std::string entriesDigest(const std::vector<git::TreeEntry>& entries);

//! Whether the selection differs between `previous` and `commit`. True when `previous` is empty or the mirror
//! no longer has it (a force-push pruned it): the bundler must then render from scratch anyway.
Result<bool> selectionChanged(const git::Mirror& mirror, std::string_view previous, std::string_view commit,
                              const PathSelector& selector);

//! Builds the archive of `commit` for `selector`. Symlink targets are read by exporting the link's directory
//! into `scratch_dir` (libs/git reads files through links, not the links themselves). kInvalid when the content
//! exceeds `max_bytes`.
Result<BuiltSource> buildSource(const git::Mirror& mirror, std::string_view commit, const PathSelector& selector,
                                uint64_t max_bytes, const std::string& scratch_dir);

}  // namespace flotilla::poller
