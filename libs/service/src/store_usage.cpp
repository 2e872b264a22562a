#include "flotilla/service/store_usage.h"

#include "flotilla/service/hub.h"

namespace flotilla::service {

namespace {

bool isBucket(std::string_view store) {
  for (const char* bucket : {kGitReposBucket, kClustersBucket, kBundlesBucket, kDeploymentsBucket, kStatusBucket}) {
    if (store == bucket) {
      return true;
    }
  }
  return false;
}

prometheus::MetricFamily gauges(std::string name, std::string help) {
  return prometheus::MetricFamily{std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
}

void addSample(prometheus::MetricFamily& family, const std::string& store, double value) {
  prometheus::ClientMetric metric;
  metric.label = {{"store", store}};
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

std::string streamOfStore(const std::string& store) {
  if (store == kSourcesObjects || store == kManifestsObjects) {
    return "OBJ_" + store;
  }
  return isBucket(store) ? "KV_" + store : store;
}

StoreUsageCollector::StoreUsageCollector(std::string service, const std::shared_ptr<bus::JetStream>& js)
    : service_(std::move(service)), js_(js) {}

std::vector<prometheus::MetricFamily> StoreUsageCollector::Collect() const {
  auto js = js_.lock();
  if (!js) {
    return {};
  }
  auto bytes =
      gauges("flotilla_" + service_ + "_store_bytes", "Bytes a hub store (stream, KV bucket, object store) holds");
  auto max = gauges("flotilla_" + service_ + "_store_max_bytes", "The size cap of a hub store (absent: none)");
  for (const auto& [store, share] : kStoreShares) {
    auto info = js->streamInfo(streamOfStore(store));
    if (!info.ok()) {
      if (info.error().kind == ErrorKind::kNotFound) {
        continue;  // not created yet
      }
      break;  // the server does not answer: one wait per scrape, not one per store
    }
    addSample(bytes, store, static_cast<double>(info->bytes));
    if (info->max_bytes > 0) {
      addSample(max, store, static_cast<double>(info->max_bytes));
    }
  }
  std::vector<prometheus::MetricFamily> out;
  for (auto* family : {&bytes, &max}) {
    if (!family->metric.empty()) {
      out.push_back(std::move(*family));
    }
  }
  return out;
}

void exportStoreUsage(Metrics& metrics, const std::shared_ptr<bus::JetStream>& js) {
  metrics.addCollectable(std::make_shared<StoreUsageCollector>(metrics.service(), js));
}

}  // namespace flotilla::service
