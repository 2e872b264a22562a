// A test that always skips: tests/support/CMakeLists.txt runs it with and without FLOTILLA_REQUIRE_TOOLS=1 to
// prove that flotilla::test_main turns a skip into a failure only when asked.
#include <gtest/gtest.h>

TEST(SkipProbe, Skips) {
  GTEST_SKIP() << "a tool this probe pretends to need is missing";
}
