// The main() of every Flotilla test binary (instead of gtest_main). With FLOTILLA_REQUIRE_TOOLS=1 (set by
// scripts/test) a skipped test is a failure: a test that skips because a tool or server is missing proves nothing,
// and in CI that must not look like a pass. This also covers ONE_PROCESS binaries, where ctest sees one exit code.
#include <cstdlib>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

class SkipIsFailure : public ::testing::EmptyTestEventListener {
 public:
  // gtest calls OnTestEnd listeners in reverse order of registration, so this runs before the printer reports
  // the test: the failure added here makes it FAILED instead of SKIPPED.
  void OnTestEnd(const ::testing::TestInfo& test_info) override {
    if (test_info.result() != nullptr && test_info.result()->Skipped()) {
      ADD_FAILURE() << "skipped with FLOTILLA_REQUIRE_TOOLS=1: a skipped test is a failure here (install what the "
                       "skip message names, e.g. with scripts/setup)";
    }
  }
};

bool requireTools() {
  const char* value = std::getenv("FLOTILLA_REQUIRE_TOOLS");
  return value != nullptr && std::string_view(value) != "" && std::string_view(value) != "0";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleMock(&argc, argv);
  if (requireTools()) {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SkipIsFailure);
  }
  return RUN_ALL_TESTS();
}
