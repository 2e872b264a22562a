// flotilla/poller/gitrepo.h
//
// What the poller derives from one GitRepo spec, as pure functions: its identity from the KV key, its status
// key, which mirror serves it (one per normalized repository URL), which files of a commit belong to it (`paths`
// globs plus `bundles[]`), which commit it wants from an ls-remote answer (`branch`, the remote's default
// branch, or `revision`), the hash of the spec fields that shape its sources and bundles, and the Nats-Msg-Id of
// its commit events.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/git/remote.h"
#include "flotilla/model/resources.h"

namespace flotilla::poller {

//! A GitRepo's identity: workspace (metadata.namespace) and name.
struct GitRepoId {
  std::string workspace;
  std::string name;

  bool operator==(const GitRepoId&) const = default;
};

//! Parses a `gitrepos` key "<escaped ws>.<escaped name>". kInvalid for any other shape or a bad escape.
Result<GitRepoId> parseGitRepoKey(std::string_view key);

//! The poller's key in the `status` bucket: "gitrepo.<escaped ws>.<escaped name>" (events::gitRepoStatusKey).
std::string pollStatusKey(std::string_view workspace, std::string_view name);

//! The URL form that decides which GitRepos share a mirror: scheme and host lower-cased, default port, trailing
//! "/" and ".git" dropped ("https://GitHub.com/a/b.git/" and "https://github.com/a/b" are one repository).
std::string normalizeRepoUrl(std::string_view url);

//! The mirror directory name for a URL: sha256 hex of normalizeRepoUrl(url).
std::string mirrorId(std::string_view url);

//! Which files of a commit a GitRepo uses: everything under a directory (or file) that matches one of the
//! `paths` globs (fnmatch with '/' matched only literally, like Go's filepath.Match) or a `bundles[].base`, plus
//! each `bundles[].options` file. No paths and no bundles selects the whole repository.
class PathSelector {
 public:
  //! Patterns with "./", leading "/" and trailing "/" removed; "", "." or "/" selects everything.
  explicit PathSelector(const std::vector<std::string>& patterns);
  //! The selection for a GitRepo spec (paths + bundles).
  static PathSelector forSpec(const model::GitRepoSpec& spec);

  //! True if the repository-relative file `path` is selected.
  [[nodiscard]] bool selects(std::string_view path) const;
  [[nodiscard]] bool selectsAll() const { return all_; }
  //! The normalized patterns (what the source archive lists as its `paths`; empty when selectsAll()).
  [[nodiscard]] const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
  bool all_ = false;
};

//! The commit a GitRepo wants, as far as the remote's advertisement tells.
struct WantedCommit {
  std::string ref;            //!< "refs/heads/main", "refs/tags/v1", or the revision itself for a commit sha
  std::string commit;         //!< full sha; empty when `revision` is a sha that only the mirror can resolve
  bool needs_mirror = false;  //!< revision is a (possibly short) commit sha: fetch, then resolve in the mirror
  std::string describe;       //!< "branch main", "tag v1", "commit 1a2b3c4"
};

//! Picks the wanted commit: `revision` (a tag, a full ref or branch, else a 4-40 digit hex commit sha), else
//! `branch`, else the remote's default branch. kNotFound names the branch/tag and the URL when the remote lacks
//! it (or the repository is empty); kInvalid for a revision that is neither a ref nor hex.
Result<WantedCommit> wantedCommit(const model::GitRepoSpec& spec, const git::RemoteHeads& heads,
                                  std::string_view display_url);

//! True for 4 to 40 hex digits.
bool looksLikeSha(std::string_view text);

//! sha256 hex over the canonical JSON of the spec fields that shape the sources and the bundles: everything but
//! forceSyncGeneration (tracked on its own) and the fields that only affect how and when the poller talks to
//! git (pollingInterval, disablePolling, webhookSecret, clientSecretName, caBundle, insecureSkipTLSVerify,
//! imageScanInterval, imageScanCommit), plus metadata.labels and metadata.uid (a GitRepo deleted and created again
//! under the same name is a new one). A change re-publishes the current commit.
std::string sourceSpecHash(const model::GitRepo& gitrepo);

//! Nats-Msg-Id (and payload id) of a commit event: events::commitMsgId
//! ("commit/<ws>/<gitrepo>/<commit>/<forceSyncGeneration>") + "/<first 12 hex of the spec hash>". The last token
//! is the poller's addition to docs/pipeline.md, so that a spec change at the same commit (new paths, targets)
//! is not dropped by JetStream as a duplicate of the previous publish.
std::string commitMsgId(std::string_view workspace, std::string_view name, std::string_view commit,
                        int64_t force_sync_generation, std::string_view spec_hash);

}  // namespace flotilla::poller
