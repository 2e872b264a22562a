// flotilla/poller/poller_metrics.h
//
// The poller's metrics (names become flotilla_poller_<name>), in one place so the names and labels are
// consistent and tests can read them back through Metrics::value.
#pragma once

#include <string_view>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/core/time.h"
#include "flotilla/service/stage_latency.h"

namespace flotilla::poller {

class PollerMetrics {
 public:
  explicit PollerMetrics(Metrics& metrics);

  [[nodiscard]] Metrics& raw() { return metrics_; }

  //! polls_total{outcome}: "published", "unchanged" or "failed", one per GitRepo per poll.
  void poll(std::string_view outcome);
  //! ls_remote_duration_seconds and ls_remotes_total{result}.
  void lsRemote(double seconds, bool ok);
  //! fetch_duration_seconds and fetches_total{result}.
  void fetch(double seconds, bool ok);
  //! errors_total{stage, kind}: stage is "spec", "credentials", "ls_remote", "resolve", "mirror", "fetch",
  //! "archive", "store", "publish", "delete", "status", "watch", "timeout".
  void error(std::string_view stage, ErrorKind kind);
  //! commits_published_total, and publish_duplicates_total when JetStream dropped it as a duplicate.
  void published(bool duplicate);
  //! stage_latency_seconds{stage="webhook_to_commit"|"poll_to_commit"} (libs/service stage_latency.h): from the
  //! push's receipt (webhook) or the poll's start to the CommitEvent stored.
  void commitStage(bool by_webhook, SystemTime triggered);
  //! commits_published_by_peer_total: a commit another replica had published (its status record), not sent again.
  void publishedByPeer();
  //! sources_stored_total{result}: "stored" or "existing".
  void source(bool stored);
  //! git_operations_abandoned_total: a git call ran past its deadline and was left behind.
  void abandoned();
  //! gitrepo_deletions_total{result}: "published" or "duplicate" — a deleted GitRepo's CommitEvent{deleted} acked by
  //! JetStream (failures count in errors_total{stage="delete"}).
  void deletionPublished(bool duplicate);
  //! mirrors_removed_total.
  void mirrorRemoved();
  //! status_writes_total{result}: "ok" or "error".
  void statusWrite(bool ok);
  //! status_write_conflicts_total: a status write another replica's write beat (read, merged and written again).
  void statusWriteConflict();
  //! kv_watch_restarts_total.
  void watchRestart();

  //! webhook_requests_total{provider, outcome}: outcome "accepted" (GitRepos polled), "ignored" (genuine but
  //! nothing follows the repository/ref, or not a push), "unauthorized" (401), "bad_request" (400),
  //! "too_large" (413), "rate_limited" (429), "too_many_connections" (503), and per GitRepo on the pushed
  //! repository whose own secret did not verify a verified push, "not_verified_for_gitrepo". provider "unknown"
  //! when no provider was recognised (always for 429 and 503: refused before the headers are looked at).
  void webhook(std::string_view provider, std::string_view outcome);
  //! host_limit_waits_total: a due mirror had to wait because its host was at --max-per-host.
  void hostLimited();
  //! git_network_operations_in_flight (ls-remote/fetch calls running), git_network_operations_peak (the most at
  //! once since start), host_syncs_peak (the most syncs at once against one host).
  void setNetworkGauges(double in_flight, double peak, double host_peak);

  //! Gauges: in-flight git jobs, jobs left behind by the watchdog, due GitRepos waiting for a worker or their
  //! mirror, GitRepos (valid / invalid) and mirrors in use.
  void setGauges(double in_flight, double stuck, double queue_depth, double gitrepos, double invalid, double mirrors);

 private:
  Metrics& metrics_;
  service::StageLatency stages_;
};

}  // namespace flotilla::poller
