#include "flotilla/service/process_metrics.h"

#include <chrono>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "flotilla/core/metrics.h"
#include "flotilla/core/process.h"
#include "flotilla/service/runtime.h"

namespace flotilla::service {
namespace {

TEST(ProcessMetricsTest, SampleReadsThisProcessFromProc) {
  auto before = sampleProcess();
  int fd = ::open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(fd, 0);
  auto after = sampleProcess();
  ::close(fd);
  EXPECT_GE(after.open_fds, before.open_fds + 1);
  EXPECT_GT(after.resident_memory_bytes, 1024.0 * 1024);
  EXPECT_GE(after.virtual_memory_bytes, after.resident_memory_bytes);
  EXPECT_GE(after.cpu_seconds, before.cpu_seconds);
  EXPECT_GT(after.max_fds, 0);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started before now, and this test binary is not a day old.
  EXPECT_LE(after.start_time_seconds, now + 1);
  EXPECT_GT(after.start_time_seconds, now - 86400);
}

TEST(ProcessMetricsTest, ExpositionHasBuildInfoAndProcessFamilies) {
  Metrics metrics("svc");
  metrics.counter("things_total", "things").Increment();
  metrics.addCollectable(std::make_shared<ProcessCollector>("svc", "9.9.9"));
  const std::string text = metrics.exposition();
  EXPECT_NE(text.find("flotilla_svc_things_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("flotilla_build_info{service=\"svc\",version=\"9.9.9\"} 1"), std::string::npos) << text;
  for (const char* family : {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                             "process_start_time_seconds", "process_max_fds", "process_virtual_memory_bytes"}) {
    EXPECT_NE(text.find(std::string("\n") + family + " "), std::string::npos) << family << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos) << text;
}

TEST(ProcessMetricsTest, EveryRuntimeServesThemOnMetrics) {
  const char* argv[] = {"svc"};
  auto config = Config::parse(1, argv, {});
  ASSERT_TRUE(config.ok());
  auto runtime = Runtime::start("svctest", *config);
  ASSERT_TRUE(runtime.ok()) << runtime.error().describe();
  auto scraped =
      runCommand({.argv = {"curl", "-sf", "http://127.0.0.1:" + std::to_string((*runtime)->httpPort()) + "/metrics"}});
  ASSERT_TRUE(scraped.ok()) << scraped.error().describe();
  EXPECT_NE(scraped->out.find("flotilla_build_info{service=\"svctest\",version=\"" + buildVersion() + "\"} 1"),
            std::string::npos)
      << scraped->out;
  EXPECT_NE(scraped->out.find("\nprocess_open_fds "), std::string::npos) << scraped->out;
  EXPECT_FALSE(buildVersion().empty());
}

}  // namespace
}  // namespace flotilla::service
