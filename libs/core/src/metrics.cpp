#include "flotilla/core/metrics.h"

#include <iterator>
#include <sstream>

#include <prometheus/text_serializer.h>

namespace flotilla {

namespace {

//! The family `full` of `families`, registered in `registry` with `builder` on first use. The caller holds the
//! lock.
template <typename T, typename Builder>
prometheus::Family<T>& familyOf(std::map<std::string, prometheus::Family<T>*, std::less<>>& families,
                                const std::string& full, std::string_view help, Builder builder,
                                prometheus::Registry& registry) {
  auto it = families.find(full);
  if (it == families.end()) {
    auto& family = builder.Name(full).Help(std::string(help)).Register(registry);
    it = families.emplace(full, &family).first;
  }
  return *it->second;
}

}  // namespace

Metrics::Metrics(std::string service)
    : service_(std::move(service)), registry_(std::make_shared<prometheus::Registry>()) {}

std::string Metrics::fullName(std::string_view name) const {
  return "flotilla_" + service_ + "_" + std::string(name);
}

prometheus::Counter& Metrics::counter(std::string_view name, std::string_view help, const prometheus::Labels& labels) {
  std::lock_guard lock(mutex_);
  return familyOf(counters_, fullName(name), help, prometheus::BuildCounter(), *registry_).Add(labels);
}

prometheus::Gauge& Metrics::gauge(std::string_view name, std::string_view help, const prometheus::Labels& labels) {
  std::lock_guard lock(mutex_);
  return familyOf(gauges_, fullName(name), help, prometheus::BuildGauge(), *registry_).Add(labels);
}

prometheus::Histogram& Metrics::histogram(std::string_view name, std::string_view help,
                                          const std::vector<double>& buckets, const prometheus::Labels& labels) {
  std::lock_guard lock(mutex_);
  return familyOf(histograms_, fullName(name), help, prometheus::BuildHistogram(), *registry_)
      .Add(labels, prometheus::Histogram::BucketBoundaries(buckets.begin(), buckets.end()));
}

void Metrics::removeGauge(std::string_view name, const prometheus::Labels& labels) {
  std::lock_guard lock(mutex_);
  auto it = gauges_.find(fullName(name));
  if (it != gauges_.end() && it->second->Has(labels)) {
    it->second->Remove(&it->second->Add(labels));
  }
}

void Metrics::addCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  std::lock_guard lock(mutex_);
  collectables_.push_back(std::move(collectable));
}

std::vector<double> Metrics::durationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::string Metrics::exposition() const {
  std::ostringstream out;
  auto families = registry_->Collect();
  std::vector<std::shared_ptr<prometheus::Collectable>> extra;
  {
    std::lock_guard lock(mutex_);
    extra = collectables_;
  }
  for (const auto& collectable : extra) {
    auto more = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

double Metrics::value(std::string_view name, const prometheus::Labels& labels) const {
  auto full = fullName(name);
  for (const auto& family : registry_->Collect()) {
    if (family.name != full) {
      continue;
    }
    for (const auto& metric : family.metric) {
      prometheus::Labels have;
      for (const auto& pair : metric.label) {
        have[pair.name] = pair.value;
      }
      if (have != labels) {
        continue;
      }
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return metric.counter.value;
        case prometheus::MetricType::Gauge:
          return metric.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(metric.histogram.sample_count);
        default:
          return 0;
      }
    }
  }
  return 0;
}

}  // namespace flotilla
