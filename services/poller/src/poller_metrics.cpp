#include "flotilla/poller/poller_metrics.h"

#include <string>

namespace flotilla::poller {

PollerMetrics::PollerMetrics(Metrics& metrics) : metrics_(metrics), stages_(metrics) {
  // Register the families up front so /metrics shows them (at zero) before the first poll.
  setGauges(0, 0, 0, 0, 0, 0);
  setNetworkGauges(0, 0, 0);
  metrics_.counter("host_limit_waits_total", "Times a due mirror waited because its host was at --max-per-host");
  for (const char* outcome : {"published", "unchanged", "failed"}) {
    metrics_.counter("polls_total", "GitRepo polls by outcome", {{"outcome", outcome}});
  }
  metrics_.counter("fetches_total", "Mirror fetches by result", {{"result", "ok"}});
  metrics_.counter("commits_published_total", "Commit events published (JetStream acked)");
  metrics_.histogram("ls_remote_duration_seconds", "Duration of ls-remote calls", Metrics::durationBuckets());
  metrics_.histogram("fetch_duration_seconds", "Duration of mirror fetches", Metrics::durationBuckets());
}

void PollerMetrics::poll(std::string_view outcome) {
  metrics_.counter("polls_total", "GitRepo polls by outcome", {{"outcome", std::string(outcome)}}).Increment();
}

void PollerMetrics::lsRemote(double seconds, bool ok) {
  metrics_.histogram("ls_remote_duration_seconds", "Duration of ls-remote calls", Metrics::durationBuckets())
      .Observe(seconds);
  metrics_.counter("ls_remotes_total", "ls-remote calls by result", {{"result", ok ? "ok" : "error"}}).Increment();
}

void PollerMetrics::fetch(double seconds, bool ok) {
  metrics_.histogram("fetch_duration_seconds", "Duration of mirror fetches", Metrics::durationBuckets())
      .Observe(seconds);
  metrics_.counter("fetches_total", "Mirror fetches by result", {{"result", ok ? "ok" : "error"}}).Increment();
}

void PollerMetrics::error(std::string_view stage, ErrorKind kind) {
  metrics_
      .counter("errors_total", "Failures by stage and error kind",
               {{"stage", std::string(stage)}, {"kind", std::string(errorKindName(kind))}})
      .Increment();
}

void PollerMetrics::published(bool duplicate) {
  metrics_.counter("commits_published_total", "Commit events published (JetStream acked)").Increment();
  if (duplicate) {
    metrics_.counter("publish_duplicates_total", "Commit events JetStream dropped as duplicates (same Nats-Msg-Id)")
        .Increment();
  }
}

void PollerMetrics::publishedByPeer() {
  metrics_
      .counter("commits_published_by_peer_total",
               "Commits not published because another poller replica's status record says it published them")
      .Increment();
}

void PollerMetrics::deletionPublished(bool duplicate) {
  metrics_
      .counter("gitrepo_deletions_total", "CommitEvents of deleted GitRepos acked by JetStream",
               {{"result", duplicate ? "duplicate" : "published"}})
      .Increment();
}

void PollerMetrics::source(bool stored) {
  metrics_.counter("sources_stored_total", "Source archives by result", {{"result", stored ? "stored" : "existing"}})
      .Increment();
}

void PollerMetrics::abandoned() {
  metrics_.counter("git_operations_abandoned_total", "Git calls left behind by the watchdog after their deadline")
      .Increment();
}

void PollerMetrics::mirrorRemoved() {
  metrics_.counter("mirrors_removed_total", "Mirrors deleted because no GitRepo uses their URL any more").Increment();
}

void PollerMetrics::statusWrite(bool ok) {
  metrics_.counter("status_writes_total", "Writes of GitRepo poll status to KV", {{"result", ok ? "ok" : "error"}})
      .Increment();
}

void PollerMetrics::statusWriteConflict() {
  metrics_
      .counter("status_write_conflicts_total",
               "Poll status writes another poller replica's write beat (read, merged and written again)")
      .Increment();
}

void PollerMetrics::watchRestart() {
  metrics_.counter("kv_watch_restarts_total", "Restarts of the gitrepos KV watch after an error").Increment();
}

void PollerMetrics::webhook(std::string_view provider, std::string_view outcome) {
  metrics_
      .counter("webhook_requests_total", "Webhook requests by provider and outcome",
               {{"provider", std::string(provider)}, {"outcome", std::string(outcome)}})
      .Increment();
}

void PollerMetrics::hostLimited() {
  metrics_.counter("host_limit_waits_total", "Times a due mirror waited because its host was at --max-per-host")
      .Increment();
}

void PollerMetrics::setNetworkGauges(double in_flight, double peak, double host_peak) {
  metrics_.gauge("git_network_operations_in_flight", "ls-remote and fetch calls running").Set(in_flight);
  metrics_.gauge("git_network_operations_peak", "The most ls-remote/fetch calls running at once since start").Set(peak);
  metrics_.gauge("host_syncs_peak", "The most mirror syncs running at once against one host since start")
      .Set(host_peak);
}

void PollerMetrics::setGauges(double in_flight, double stuck, double queue_depth, double gitrepos, double invalid,
                              double mirrors) {
  metrics_.gauge("git_operations_in_flight", "Mirror syncs running on workers").Set(in_flight);
  metrics_.gauge("git_operations_stuck", "Mirror syncs abandoned by the watchdog that have not returned yet")
      .Set(stuck);
  metrics_.gauge("queue_depth", "GitRepos due for a poll and waiting for a worker or their mirror").Set(queue_depth);
  metrics_.gauge("gitrepos", "GitRepos watched", {{"valid", "true"}}).Set(gitrepos);
  metrics_.gauge("gitrepos", "GitRepos watched", {{"valid", "false"}}).Set(invalid);
  metrics_.gauge("mirrors", "Mirrors in use").Set(mirrors);
}

void PollerMetrics::commitStage(bool by_webhook, SystemTime triggered) {
  stages_.observe(by_webhook ? service::Stage::kWebhookToCommit : service::Stage::kPollToCommit, triggered);
}

}  // namespace flotilla::poller
