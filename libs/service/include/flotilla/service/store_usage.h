// flotilla/service/store_usage.h
//
// How full the hub's stores are, read from JetStream at each scrape (docs/metrics.md): the gauges
// flotilla_<service>_store_bytes{store} and flotilla_<service>_store_max_bytes{store} (the size cap; absent for a
// store without one), one series each per stream, KV bucket and object store of the topology (12). The scheduler
// exports them; the alert FlotillaStoreFilling compares the two.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>

#include "flotilla/bus/jetstream.h"
#include "flotilla/core/metrics.h"

namespace flotilla::service {

//! The JetStream stream that holds `store` (a name of kStoreShares): itself for a stream, KV_<bucket> for a KV
//! bucket, OBJ_<bucket> for an object store.
std::string streamOfStore(const std::string& store);

class StoreUsageCollector : public prometheus::Collectable {
 public:
  //! Holds `js` weakly: once the service has closed its hub, a scrape exports nothing.
  StoreUsageCollector(std::string service, const std::shared_ptr<bus::JetStream>& js);
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string service_;
  std::weak_ptr<bus::JetStream> js_;
};

//! Adds a StoreUsageCollector for `js` to `metrics`.
void exportStoreUsage(Metrics& metrics, const std::shared_ptr<bus::JetStream>& js);

}  // namespace flotilla::service
