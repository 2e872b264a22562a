#include "flotilla/service/process_metrics.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <unistd.h>

#ifndef FLOTILLA_VERSION
#error "FLOTILLA_VERSION is set by libs/service/CMakeLists.txt"
#endif

namespace flotilla::service {

namespace {

//! The fields of /proc/self/stat after the command name (which may hold spaces): [0] is field 3, `state`.
std::vector<std::string> statFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) {
    return fields;
  }
  std::istringstream rest(line.substr(close + 1));
  for (std::string field; rest >> field;) {
    fields.push_back(field);
  }
  return fields;
}

//! Seconds since the epoch at boot (/proc/stat `btime`), -1 if unreadable.
double bootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("btime ", 0) == 0) {
      return std::stod(line.substr(6));
    }
  }
  return -1;
}

double openFds() {
  std::error_code ec;
  double count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    ++count;
  }
  return ec ? -1 : count;
}

//! The soft limit of "Max open files" in /proc/self/limits, -1 if unreadable or unlimited.
double maxFds() {
  std::ifstream in("/proc/self/limits");
  constexpr std::string_view kRow = "Max open files";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kRow, 0) == 0) {
      std::istringstream values(line.substr(kRow.size()));
      std::string soft;
      values >> soft;
      return soft == "unlimited" ? -1 : std::stod(soft);
    }
  }
  return -1;
}

//! Field `n` of /proc/self/stat (as man proc numbers them), as a number.
double statField(const std::vector<std::string>& fields, size_t n) {
  return fields.size() > n - 3 ? std::stod(fields[n - 3]) : -1;
}

prometheus::MetricFamily gaugeFamily(std::string name, std::string help, double value,
                                     prometheus::MetricType type = prometheus::MetricType::Gauge) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {metric}};
}

}  // namespace

std::string buildVersion() {
  return FLOTILLA_VERSION;
}

ProcessSample sampleProcess() {
  ProcessSample sample;
  try {
    auto fields = statFields();
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    if (fields.size() >= 22 && ticks > 0) {
      sample.cpu_seconds = (statField(fields, 14) + statField(fields, 15)) / ticks;
      sample.virtual_memory_bytes = statField(fields, 23);
      sample.resident_memory_bytes = statField(fields, 24) * page;
      if (double boot = bootTime(); boot >= 0) {
        sample.start_time_seconds = boot + statField(fields, 22) / ticks;
      }
    }
    sample.max_fds = maxFds();
  } catch (const std::exception&) {
    // A field that does not parse leaves the rest of the sample as read so far.
  }
  sample.open_fds = openFds();
  return sample;
}

ProcessCollector::ProcessCollector(std::string service, std::string version)
    : service_(std::move(service)), version_(std::move(version)) {}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  auto info = gaugeFamily("flotilla_build_info", "Always 1: the service and the version of its build", 1);
  info.metric.front().label = {{"service", service_}, {"version", version_}};
  families.push_back(std::move(info));
  const ProcessSample sample = sampleProcess();
  auto add = [&families](const char* name, const char* help, double value, prometheus::MetricType type) {
    if (value >= 0) {
      families.push_back(gaugeFamily(name, help, value, type));
    }
  };
  using prometheus::MetricType;
  add("process_cpu_seconds_total", "User and system CPU time spent in seconds", sample.cpu_seconds,
      MetricType::Counter);
  add("process_resident_memory_bytes", "Resident memory size in bytes", sample.resident_memory_bytes,
      MetricType::Gauge);
  add("process_virtual_memory_bytes", "Virtual memory size in bytes", sample.virtual_memory_bytes, MetricType::Gauge);
  add("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds",
      sample.start_time_seconds, MetricType::Gauge);
  add("process_open_fds", "Number of open file descriptors", sample.open_fds, MetricType::Gauge);
  add("process_max_fds", "Maximum number of open file descriptors", sample.max_fds, MetricType::Gauge);
  return families;
}

}  // namespace flotilla::service
