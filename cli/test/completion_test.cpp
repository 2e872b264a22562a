// The completion script: bash sources it, and it completes commands, kinds, -o values and flags.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"
#include "run_captured.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

std::string script(const std::string& shell) {
  Ran ran = runCaptured({"completion", shell});
  EXPECT_EQ(ran.code, kExitOk) << ran.err;
  return ran.out;
}

//! What bash's completion function offers for the words of a command line (the last one is being completed).
std::string complete(const std::string& words) {
  // Per test: ctest runs the cases in parallel processes.
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::path file = fs::path(::testing::TempDir()) / ("flotilla-completion-" + test + ".bash");
  std::ofstream(file) << script("bash");
  fs::path driver = fs::path(::testing::TempDir()) / ("flotilla-completion-driver-" + test + ".bash");
  std::ofstream(driver) << "source " << file.string() << "\nCOMP_WORDS=(" << words
                        << ")\nCOMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n_flotilla\necho \"${COMPREPLY[*]}\"\n";
  std::string command = "bash " + driver.string() + " 2>&1";
  std::string output;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) {
      output.append(buffer, n);
    }
    EXPECT_EQ(::pclose(pipe), 0) << output;
  }
  return output;
}

TEST(CompletionTest, BashCompletesCommands) {
  EXPECT_EQ(complete("flotilla ''"),
            "apply get describe delete force-sync explain wait redrive events render auth completion\n");
  EXPECT_EQ(complete("flotilla events --f"), "--follow\n");
  EXPECT_EQ(complete("flotilla ge"), "get\n");
  EXPECT_EQ(complete("flotilla --nats-url nats://x:4222 -n ws de"), "describe delete\n");
}

TEST(CompletionTest, BashCompletesKindsOutputsAndFlags) {
  EXPECT_EQ(complete("flotilla get gi"), "gitrepos\n");
  EXPECT_EQ(complete("flotilla get gitrepos ''"), "\n");  // a name: nothing to offer
  EXPECT_EQ(complete("flotilla get -o ''"), "table wide json yaml\n");
  EXPECT_EQ(complete("flotilla render -o ''"), "yaml json\n");
  EXPECT_EQ(complete("flotilla completion ''"), "bash zsh\n");
  EXPECT_EQ(complete("flotilla wait ''"), "gitrepos bundles clusters\n");
  EXPECT_EQ(complete("flotilla explain -o ''"), "json human\n");
  std::string render_flags = complete("flotilla render repo --clu");
  EXPECT_EQ(render_flags, "--cluster-name --cluster\n");
  std::string describe_flags = complete("flotilla describe --");
  EXPECT_NE(describe_flags.find("--namespace"), std::string::npos) << describe_flags;
  EXPECT_NE(describe_flags.find("--nats-url"), std::string::npos) << describe_flags;
  EXPECT_EQ(describe_flags.find("--output"), std::string::npos) << describe_flags;  // describe has no -o
}

TEST(CompletionTest, ZshLoadsTheSameFunctionThroughBashcompinit) {
  std::string zsh = script("zsh");
  EXPECT_TRUE(zsh.starts_with("#compdef flotilla\n")) << zsh;
  EXPECT_NE(zsh.find("bashcompinit"), std::string::npos);
  EXPECT_NE(zsh.find(script("bash")), std::string::npos);
}

TEST(CompletionTest, AnUnknownShellIsAUsageError) {
  Ran ran = runCaptured({"completion", "fish"});
  EXPECT_EQ(ran.code, kExitUsage);
  EXPECT_NE(ran.err.find("fish"), std::string::npos) << ran.err;
}

}  // namespace
}  // namespace flotilla::cli
