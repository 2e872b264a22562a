// flotilla/source/archive.h
//
// A source archive is the set of files of one commit under a GitRepo's paths, as the poller stores it in the
// `sources` object store for the bundler (docs/pipeline.md). Git credentials stay with the poller; the bundler
// only ever sees archives. The format is JSON so any NATS client can read it:
//   {"apiVersion":"sources.flotilla.io/v1","commit":"<sha>","paths":[...],
//    "files":[{"path":"a/b.yaml","mode":"100644","content":"<base64>"}],
//    "symlinks":[{"path":"a/link","target":"../x"}]}
// Paths are relative, '/'-separated, and never contain "." or ".." segments (decode rejects them), so
// extracting an archive cannot write outside its target directory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::source {

struct File {
  std::string path;
  std::string mode = "100644";  //!< git file mode: 100644 or 100755
  std::string content;
};

struct Symlink {
  std::string path;
  std::string target;  //!< as stored in git; may point anywhere — consumers decide whether to follow it
};

struct Archive {
  std::string commit;
  std::vector<std::string> paths;  //!< the GitRepo paths this archive covers ("" or "." = whole repo)
  std::vector<File> files;
  std::vector<Symlink> symlinks;

  [[nodiscard]] size_t contentBytes() const;
};

//! Canonical JSON (files sorted by path), so equal content gives an equal object name.
std::string encode(const Archive& archive);
//! Strict decode: unknown apiVersion, bad base64, an unsafe path, two entries (files or symlinks) for one path or a
//! mode other than 100644/100755 is kInvalid naming the entry.
Result<Archive> decode(std::string_view json);
//! Object name in the `sources` bucket: sha256 of the encoded archive.
std::string objectName(std::string_view encoded);

//! True for a relative path with no empty, "." or ".." segments and no leading '/'.
bool isSafeRelativePath(std::string_view path);

//! Writes every file and symlink under `dir` (created if missing). Symlinks are written as links; callers that
//! render must not follow links that leave `dir` (see resolveInside).
Status extract(const Archive& archive, const std::string& dir);

//! Resolves `relative` against `root` following symlinks, and fails (kInvalid, naming the path) if the result
//! is outside `root`. The bundler calls this before reading any file a user named (valuesFiles, overlays).
Result<std::string> resolveInside(const std::string& root, std::string_view relative);

}  // namespace flotilla::source
