#include "flotilla/bundler/metrics.h"

#include <string>

namespace flotilla::bundler {

namespace {

//! Counts one event of a counter with a single label.
void countBy(Metrics& metrics, std::string_view name, std::string_view help, const std::string& label,
             std::string_view value) {
  metrics.counter(name, help, {{label, std::string(value)}}).Increment();
}

}  // namespace

void BundlerMetrics::commitHandled(std::string_view outcome, double seconds) {
  countBy(metrics_, "commits_handled_total", "CommitEvents handled, by outcome", "outcome", outcome);
  metrics_.histogram("commit_duration_seconds", "Time to handle one CommitEvent", Metrics::durationBuckets())
      .Observe(seconds);
}

void BundlerMetrics::inFlight(int delta) {
  metrics_.gauge("commits_in_flight", "CommitEvents being handled").Increment(delta);
}

void BundlerMetrics::bundle(std::string_view outcome) {
  countBy(metrics_, "bundles_rendered_total", "Bundles handled, by outcome (ok, error, deleted)", "outcome", outcome);
}

void BundlerMetrics::renderDuration(std::string_view renderer, double seconds) {
  metrics_
      .histogram("render_duration_seconds", "Time to render one bundle", Metrics::durationBuckets(),
                 {{"renderer", std::string(renderer)}})
      .Observe(seconds);
}

void BundlerMetrics::manifest(size_t bytes, bool stored) {
  static const std::vector<double> kBuckets = {1e3, 1e4, 1e5, 1e6, 4e6, 16e6, 64e6, 256e6};
  metrics_.histogram("manifest_bytes", "Size of canonical rendered manifests", kBuckets)
      .Observe(static_cast<double>(bytes));
  countBy(metrics_, "manifest_puts_total", "Manifests stored vs already present (content-addressed)", "result",
          stored ? "stored" : "existing");
}

void BundlerMetrics::published(bool duplicate) {
  countBy(metrics_, "events_published_total", "BundleEvents published (duplicate: dropped by Nats-Msg-Id)", "result",
          duplicate ? "duplicate" : "published");
}

void BundlerMetrics::stepFailure(std::string_view step) {
  countBy(metrics_, "step_failures_total", "Transient failures, by handler step", "step", step);
}

void BundlerMetrics::fetchError() {
  metrics_.counter("fetch_errors_total", "Failed fetches from the bundler consumer").Increment();
}

void BundlerMetrics::exception() {
  metrics_.counter("handler_exceptions_total", "Exceptions caught around the commit handler").Increment();
}

void BundlerMetrics::remoteChart(std::string_view source) {
  countBy(metrics_, "remote_charts_total", "Remote Helm charts used by default renders, by source (cache, pulled)",
          "source", source);
}

void BundlerMetrics::rerender(std::string_view result) {
  countBy(metrics_, "rerenders_total",
          "Per-cluster bundles re-rendered after a cluster changed, by result (published, unchanged, error, "
          "skipped, retry)",
          "result", result);
}

void BundlerMetrics::variants(size_t renders, size_t cache_hits) {
  metrics_.counter("variant_renders_total", "Renderer runs for per-cluster variants")
      .Increment(static_cast<double>(renders));
  metrics_.counter("variant_cache_hits_total", "Per-cluster variants whose manifest came from the cache")
      .Increment(static_cast<double>(cache_hits));
}

void BundlerMetrics::clusterRecord(std::string_view result) {
  countBy(metrics_, "cluster_records_total",
          "KV clusters entries read for per-cluster rendering, by result (applied, "
          "invalid)",
          "result", result);
}

void BundlerMetrics::renderCache(std::string_view result, std::string_view reason) {
  prometheus::Labels labels = {{"result", std::string(result)}};
  if (!reason.empty()) {
    labels["reason"] = std::string(reason);
  }
  metrics_
      .counter("render_cache_total",
               "Bundles of commits by render cache result: hit (the last good render reused, nothing rendered), miss, "
               "uncacheable (by reason)",
               labels)
      .Increment();
}

void BundlerMetrics::claim(std::string_view result) {
  countBy(metrics_, "claims_total",
          "Bundle names another GitRepo holds: claims recorded, rendered once freed, dropped, unreadable", "result",
          result);
}

}  // namespace flotilla::bundler
