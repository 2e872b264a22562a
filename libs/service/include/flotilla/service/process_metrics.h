// flotilla/service/process_metrics.h
//
// The metrics every Flotilla process exports besides its own (docs/metrics.md "Every service"): the standard
// process_* families read from /proc at each scrape, and flotilla_build_info{service,version} = 1. The Runtime
// adds them to its registry, so every service has them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace flotilla::service {

//! The version every binary of this build reports (CMake's project version).
std::string buildVersion();

//! What /proc says about this process; fields it could not read are absent (not exported) rather than 0.
struct ProcessSample {
  double cpu_seconds = -1;  //!< user + system
  double resident_memory_bytes = -1;
  double virtual_memory_bytes = -1;
  double start_time_seconds = -1;  //!< since the Unix epoch
  double open_fds = -1;
  double max_fds = -1;
};

//! Reads /proc/self (stat, fd, limits) and /proc/stat (boot time).
ProcessSample sampleProcess();

class ProcessCollector : public prometheus::Collectable {
 public:
  ProcessCollector(std::string service, std::string version);
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string service_;
  std::string version_;
};

}  // namespace flotilla::service
