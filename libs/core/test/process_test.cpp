#include "flotilla/core/process.h"

#include <gtest/gtest.h>

namespace flotilla {
namespace {

TEST(ProcessTest, RunCommandCapturesOutputAndExitCode) {
  auto result = runCommand({.argv = {"sh", "-c", "cat; echo err >&2; exit 3"}, .input = "hello"});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->out, "hello");
  EXPECT_EQ(result->err, "err\n");
}

TEST(ProcessTest, RunCommandKillsOnTimeout) {
  auto result = runCommand({.argv = {"sleep", "30"}, .timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->timed_out);
}

TEST(ProcessTest, StopTerminatesALongRunningChild) {
  auto process = Process::start({.argv = {"sleep", "30"}});
  ASSERT_TRUE(process.ok());
  EXPECT_TRUE(process->running());
  int code = process->stop(std::chrono::seconds(2));
  EXPECT_EQ(code, 128 + 15);
}

}  // namespace
}  // namespace flotilla
