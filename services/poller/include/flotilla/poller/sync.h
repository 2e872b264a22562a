// flotilla/poller/sync.h
//
// One sync of one mirror: the work a worker does for every due GitRepo that shares a repository URL. In order:
//   1. credentials  — each GitRepo's clientSecretName / caBundle / insecureSkipTLSVerify
//   2. ls-remote    — once per distinct set of credentials (each GitRepo proves its own access), pick the
//                     wanted commit (branch, default branch, tag or ref; a commit sha waits for the mirror)
//   3. decide       — publish when the commit, forceSyncGeneration or the spec's source hash differs from the
//                     last published one; fetch when such a commit is missing from the mirror
//   4. fetch        — at most once, serving every GitRepo of the sync
//   5. per GitRepo  — resolve, build the source archive of its paths, store it in `sources` (unless present),
//                     publish the CommitEvent with its Nats-Msg-Id and wait for JetStream's ack
// A failure affects only the GitRepos it concerns (a fetch failure: those that needed the fetch). Network git
// calls end at git_timeout at the socket (libs/git) and also run under a GitOpGuard, so the poller's watchdog can
// leave behind a call stuck where no socket is involved; after an abandoned call the sync returns at once without
// touching anything shared.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/core/result.h"
#include "flotilla/core/time.h"
#include "flotilla/events/payloads.h"
#include "flotilla/git/mirror.h"
#include "flotilla/model/resources.h"
#include "flotilla/poller/poll_status.h"
#include "flotilla/poller/poller_metrics.h"
#include "flotilla/poller/schedule.h"
#include "flotilla/service/object_gc.h"
#include "flotilla/service/public_events.h"
#include "flotilla/service/store_full.h"

namespace flotilla::poller {

//! Settings a sync needs (from PollerOptions).
struct SyncSettings {
  std::string credentials_dir;
  std::string scratch_dir;      //!< for symlink exports
  Millis git_timeout{120'000};  //!< per ls-remote / fetch (enforced at the socket by libs/git; watchdog backstop)
  uint64_t max_source_bytes = 256ull << 20;
  bool allow_local = false;  //!< file:// and local paths (tests, demos)
};

//! The bus handles a sync publishes to.
struct SyncBus {
  std::shared_ptr<bus::JetStream> js;
  std::shared_ptr<bus::ObjectStore> sources;
  //! KV `status`: read before a publish, to skip a commit another replica published (may be null: no check).
  std::shared_ptr<bus::KeyValue> status;
  service::ObjectGc* gc = nullptr;                   //!< touched for every source stored or reused; may be null
  service::StoreFullReporter* store_full = nullptr;  //!< counts and logs writes refused by a full store; may be null
  //! Announces each commit in the stream as io.flotilla.gitrepo.commit (docs/events/cloudevents.md); may be null.
  service::PublicEvents* public_events = nullptr;
};

//! The bare mirror of one URL, kept open between syncs. Only the sync holding the mirror uses it.
struct MirrorSlot {
  std::string path;
  std::optional<git::Mirror> mirror;
};

//! Lets the poller's watchdog bound each network git call.
class GitOpGuard {
 public:
  virtual ~GitOpGuard() = default;
  //! Before a network call of at most `timeout`; false when the poller is stopping (skip the call).
  virtual bool begin(std::string_view operation, Millis timeout) = 0;
  //! After the call returned; false when the watchdog abandoned it meanwhile: return at once.
  virtual bool end() = 0;
  //! True when the poller is stopping: finish the current GitRepo, start no new one.
  [[nodiscard]] virtual bool cancelled() const = 0;
};

//! One GitRepo's share of a sync: a snapshot of its spec and of what it last published.
struct RepoWork {
  std::string key;     //!< gitrepos key
  uint64_t epoch = 0;  //!< the poller's spec version, echoed in the result
  model::GitRepo gitrepo;
  std::string spec_hash;  //!< sourceSpecHash(gitrepo)
  PollStatus last;        //!< commit / forceSyncGeneration / specHash last published
  //! What started this sync, for the stage latency of its CommitEvent: a push (its receipt) or a poll (now).
  bool by_webhook = false;
  SystemTime triggered{};
};

//! What happened to one GitRepo.
struct RepoResult {
  std::string key;
  uint64_t epoch = 0;
  bool skipped = false;        //!< not finished because the poller is stopping
  bool polled = false;         //!< the remote answered ls-remote
  std::string polling_commit;  //!< the wanted ref's commit as advertised (or resolved for a sha)
  std::optional<Error> error;
  std::string error_stage;  //!< see PollerMetrics::error
  bool published = false;
  bool duplicate = false;  //!< JetStream already had this Msg-Id
  std::string commit;
  std::string source_object;
  bool changed = false;
  int64_t force_sync_generation = 0;
  std::string spec_hash;
};

//! The CloudEvents source of the poller's public events.
inline constexpr std::string_view kPollerEventSource = "/flotilla/poller";
//! Announces a CommitEvent the stream holds as io.flotilla.gitrepo.commit (.deleted for a deleted GitRepo) on
//! flotilla.events.gitrepo.<ws>.<gitrepo>; queued, never blocking. `announcer` may be null (nothing is announced).
void announceCommit(service::PublicEvents* announcer, const events::CommitEvent& event);

//! Runs one sync for `work` (all on the mirror in `slot`, whose URL is `url`). nullopt when the watchdog
//! abandoned a git call (the caller must then discard everything).
std::optional<std::vector<RepoResult>> syncMirror(const SyncSettings& settings, const SyncBus& bus,
                                                  PollerMetrics& metrics, GitOpGuard& guard, MirrorSlot& slot,
                                                  const std::string& url, const std::vector<RepoWork>& work);

}  // namespace flotilla::poller
