// The fleet.yaml conformance suite. Each directory under cases/ is one feature:
//
//   case.yaml        description, `common` arguments for every cluster, and `clusters`: [{name, args, exit}]
//   repo/            the repository checkout (what the poller would hand to the bundler)
//   gitrepo.yaml ... files the arguments name (relative to the case directory)
//   expected/<cluster>.yaml    what `flotilla render repo <common> <args>` prints on stdout, byte for byte
//   expected/<cluster>.stderr  its stderr, when the case expects errors (exit 1)
//
// `flotilla render` runs the bundler's own rendering code, so this checks the pipeline's output per target.
// FLOTILLA_CONFORMANCE_UPDATE=1 writes the expected files from the current output instead of comparing, and then
// fails (so it can never make a run pass): review the diff before committing, the expected files are the
// specification.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/json.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"

namespace flotilla {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> caseNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(FLOTILLA_CONFORMANCE_DIR)) {
    if (entry.is_directory() && fs::exists(entry.path() / "case.yaml")) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string toolsDir() {
  if (const char* dir = std::getenv("FLOTILLA_TOOLS_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin";
}

std::string readOrEmpty(const fs::path& file) {
  auto text = readFile(file.string());
  return text.ok() ? *text : std::string();
}

void writeText(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

std::vector<std::string> stringList(const Json* list) {
  std::vector<std::string> items;
  if (list != nullptr && list->isArray()) {
    for (const auto& item : list->asArray()) {
      items.push_back(item.isString() ? item.asString() : item.dump());
    }
  }
  return items;
}

class ConformanceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceTest, EveryClusterGetsTheExpectedObjects) {
  fs::path dir = fs::path(FLOTILLA_CONFORMANCE_DIR) / GetParam();
  auto spec_text = readFile((dir / "case.yaml").string());
  ASSERT_TRUE(spec_text.ok()) << spec_text.error().describe();
  auto spec = parseYaml(*spec_text, (dir / "case.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.error().describe();
  if (spec->getBool("needsHelm") || fs::exists(dir / "repo" / "Chart.yaml")) {
    if (!fs::exists(fs::path(toolsDir()) / "helm")) {
      GTEST_SKIP() << "helm is not built (run scripts/setup)";
    }
  }
  const Json* clusters = spec->find("clusters");
  ASSERT_TRUE(clusters != nullptr && clusters->isArray() && clusters->size() > 0) << "case.yaml: clusters missing";
  bool update = std::getenv("FLOTILLA_CONFORMANCE_UPDATE") != nullptr;
  for (const auto& cluster : clusters->asArray()) {
    std::string name = cluster.getString("name");
    SCOPED_TRACE("case " + GetParam() + ", cluster " + name + ": " + spec->getString("description"));
    std::vector<std::string> argv = {FLOTILLA_CLI_BINARY, "render", "repo"};
    for (const auto& arg : stringList(spec->find("common"))) {
      argv.push_back(arg);
    }
    for (const auto& arg : stringList(cluster.find("args"))) {
      argv.push_back(arg);
    }
    auto run = runCommand({.argv = argv,
                           .env = {{"FLOTILLA_TOOLS_DIR", toolsDir()}, {"HOME", ::testing::TempDir()}},
                           .cwd = dir.string(),
                           .timeout = std::chrono::minutes(3)});
    ASSERT_TRUE(run.ok()) << run.error().describe();
    int expected_exit = static_cast<int>(cluster.getInt("exit", 0));
    fs::path expected_out = dir / "expected" / (name + ".yaml");
    fs::path expected_err = dir / "expected" / (name + ".stderr");
    if (update) {
      writeText(expected_out, run->out);
      if (!run->err.empty()) {
        writeText(expected_err, run->err);
      } else {
        fs::remove(expected_err);
      }
      // Rewriting is never a pass: a run with the variable set (e.g. left on in CI) must not turn green.
      ADD_FAILURE() << "FLOTILLA_CONFORMANCE_UPDATE is set: rewrote " << expected_out
                    << "; review the change (git diff) and run again without it";
      continue;
    }
    EXPECT_EQ(run->exit_code, expected_exit) << "stderr:\n" << run->err;
    ASSERT_TRUE(fs::exists(expected_out)) << expected_out << " is missing (FLOTILLA_CONFORMANCE_UPDATE=1 writes it)";
    EXPECT_EQ(run->out, readOrEmpty(expected_out)) << "stdout differs from " << expected_out;
    EXPECT_EQ(run->err, readOrEmpty(expected_err)) << "stderr differs from " << expected_err;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ConformanceTest, ::testing::ValuesIn(caseNames()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name;
                           for (char c : param_info.param) {
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace flotilla
