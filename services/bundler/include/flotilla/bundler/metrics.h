// flotilla/bundler/metrics.h
//
// The bundler's Prometheus metrics (flotilla_bundler_*), in one place so names and labels stay consistent:
//   commits_handled_total{outcome}        rendered | stale | gitrepo_missing | invalid | retry | failed
//   commit_duration_seconds               one CommitEvent, decode to ack
//   commits_in_flight                     CommitEvents being handled now
//   bundles_rendered_total{outcome}       ok | error | deleted | conflict
//   claims_total{result}                  recorded | rendered | dropped | invalid (bundle names held elsewhere)
//   render_duration_seconds{renderer}     rendering one bundle (all its customizations)
//   manifest_bytes                        histogram of canonical manifest sizes
//   manifest_puts_total{result}           stored | existing (content-addressed dedup hit)
//   events_published_total{result}        published | duplicate (dropped by Nats-Msg-Id)
//   step_failures_total{step}             transient failures by step (source, gitrepo, records, store, publish, ...)
//   fetch_errors_total                    failed fetches from the durable consumer
//   handler_exceptions_total              exceptions caught at the consumer loop
//   render_cache_total{result[,reason]}   hit | miss | uncacheable (reason: remote, per_cluster, error)
//   stage_latency_seconds{stage="commit_to_bundle"}  CommitEvent time -> each of its BundleEvents stored
//                                         (libs/service stage_latency.h, with its skew and unmeasured counters)
#pragma once

#include <string_view>

#include "flotilla/core/metrics.h"
#include "flotilla/service/stage_latency.h"

namespace flotilla::bundler {

class BundlerMetrics {
 public:
  explicit BundlerMetrics(Metrics& metrics) : metrics_(metrics), stages_(metrics) {}

  void commitHandled(std::string_view outcome, double seconds);
  void inFlight(int delta);
  void bundle(std::string_view outcome);
  void renderDuration(std::string_view renderer, double seconds);
  void manifest(size_t bytes, bool stored);
  void published(bool duplicate);
  void stepFailure(std::string_view step);
  void fetchError();
  void exception();
  void rerender(std::string_view result);
  //! A remote Helm chart used by a render: "cache" or "pulled".
  void remoteChart(std::string_view source);
  void variants(size_t renders, size_t cache_hits);
  void clusterRecord(std::string_view result);
  //! claims_total{result}: recorded, rendered, dropped, invalid — bundle names another GitRepo holds.
  void claim(std::string_view result);
  //! render_cache_total{result}: hit (the last good render reused), miss (a key, but not the record's);
  //! {result="uncacheable", reason}: no key kept (remote, per_cluster, error).
  void renderCache(std::string_view result, std::string_view reason = {});
  //! A BundleEvent of the commit whose CommitEvent carries `commit_time` was stored.
  void bundleStored(std::string_view commit_time) { stages_.observe(service::Stage::kCommitToBundle, commit_time); }

  [[nodiscard]] Metrics& raw() { return metrics_; }

 private:
  Metrics& metrics_;
  service::StageLatency stages_;
};

}  // namespace flotilla::bundler
