// flotilla/core/metrics.h
//
// A thin helper over prometheus-cpp that enforces the naming scheme flotilla_<service>_<what>_<unit> and
// lets tests read a metric's value back (tests assert on counters for every degraded path).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace flotilla {

class Metrics {
 public:
  //! `service` is the middle of every name: flotilla_<service>_<name>.
  explicit Metrics(std::string service);

  //! `name` is "<what>_<unit>", e.g. "polls_total" or "fetch_duration_seconds".
  prometheus::Counter& counter(std::string_view name, std::string_view help, const prometheus::Labels& labels = {});
  prometheus::Gauge& gauge(std::string_view name, std::string_view help, const prometheus::Labels& labels = {});
  prometheus::Histogram& histogram(std::string_view name, std::string_view help, const std::vector<double>& buckets,
                                   const prometheus::Labels& labels = {});

  //! Removes one series of a gauge family (a per-GitRepo gauge whose GitRepo is gone); absent is fine.
  void removeGauge(std::string_view name, const prometheus::Labels& labels);

  //! Families named outside the flotilla_<service>_ scheme (process_*, flotilla_build_info), collected at each
  //! exposition after the registry's own.
  void addCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  //! Default latency buckets, 5 ms to 60 s.
  static std::vector<double> durationBuckets();

  [[nodiscard]] std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  //! The Prometheus text exposition of every metric in this registry.
  [[nodiscard]] std::string exposition() const;
  //! Value of a counter or gauge (0 if absent); for a histogram, its sample count. For tests and status.
  [[nodiscard]] double value(std::string_view name, const prometheus::Labels& labels = {}) const;
  [[nodiscard]] const std::string& service() const { return service_; }

 private:
  std::string fullName(std::string_view name) const;

  std::string service_;
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mutex_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*, std::less<>> counters_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*, std::less<>> gauges_;
  std::map<std::string, prometheus::Family<prometheus::Histogram>*, std::less<>> histograms_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
};

}  // namespace flotilla
