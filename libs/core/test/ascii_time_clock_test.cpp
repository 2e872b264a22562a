#include <gtest/gtest.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/clock.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"

namespace flotilla {
namespace {

using std::chrono::milliseconds;

TEST(AsciiTest, LowerAndUpperChangeOnlyAsciiLetters) {
  // input, lower-cased, upper-cased: bytes outside A-Z/a-z (digits, punctuation, UTF-8) stay as they are.
  const std::string cases[][3] = {{"Content-Type: ÄB9", "content-type: Äb9", "CONTENT-TYPE: ÄB9"},
                                  {"sha256=abc-ü", "sha256=abc-ü", "SHA256=ABC-ü"},
                                  {"@[`{", "@[`{", "@[`{"},
                                  {"", "", ""}};
  for (const auto& [input, lower, upper] : cases) {
    EXPECT_EQ(toLowerAscii(input), lower) << input;
    EXPECT_EQ(toUpperAscii(input), upper) << input;
  }
}

TEST(AsciiTest, EqualsIgnoreCaseComparesLengthAndFoldedLetters) {
  EXPECT_TRUE(equalsIgnoreCase("X-Hub-Signature", "x-hub-signature"));
  EXPECT_TRUE(equalsIgnoreCase("", ""));
  EXPECT_FALSE(equalsIgnoreCase(".git", ".gi"));
  EXPECT_FALSE(equalsIgnoreCase("a[", "A{"));  // '[' and '{' differ by the case bit but are not letters
}

TEST(UtilTest, JoinPutsTheSeparatorOnlyBetweenParts) {
  EXPECT_EQ(join({"a", "b", "c"}, "/"), "a/b/c");
  EXPECT_EQ(join({"one"}, ", "), "one");
  EXPECT_EQ(join({}, ","), "");
  EXPECT_EQ(join({"", "x"}, ","), ",x");
}

TEST(TimeTest, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(formatRfc3339Millis(1'796'205'600'123), "2026-12-02T10:00:00.123Z");
  EXPECT_EQ(formatRfc3339Millis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(formatRfc3339Millis(-1), "1969-12-31T23:59:59.999Z");
  SystemTime at{std::chrono::microseconds(1'796'205'600'123'999)};
  EXPECT_EQ(formatRfc3339(at), "2026-12-02T10:00:00.123Z");  // truncated, not rounded
}

TEST(TimeTest, ParsesZonesAndFractions) {
  auto utc = parseRfc3339("2026-12-02T10:00:00Z");
  ASSERT_TRUE(utc.has_value());
  EXPECT_EQ(epochMillis(*utc), 1'796'205'600'000);
  auto offset = parseRfc3339("2026-12-02T12:30:00.5+02:30");
  ASSERT_TRUE(offset.has_value());
  EXPECT_EQ(epochMillis(*offset), 1'796'205'600'500);
  auto west = parseRfc3339("2026-12-02t05:00:00.123456-05:00");
  ASSERT_TRUE(west.has_value());
  EXPECT_EQ(epochMillis(*west), 1'796'205'600'123);
}

TEST(TimeTest, FormatThenParseRoundTrips) {
  for (int64_t ms : {int64_t{0}, int64_t{1'796'205'600'001}, int64_t{951'782'400'999}}) {
    auto parsed = parseRfc3339(formatRfc3339Millis(ms));
    ASSERT_TRUE(parsed.has_value()) << ms;
    EXPECT_EQ(epochMillis(*parsed), ms);
  }
}

TEST(TimeTest, RejectsWhatIsNotRfc3339) {
  for (const char* bad : {"", "2026-12-02", "2026-12-02 10:00:00Z", "2026-12-02T10:00:00", "2026-13-02T10:00:00Z",
                          "2026-12-02T24:00:00Z", "2026-12-02T10:00:00.Z", "2026-12-02T10:00:00+0200",
                          "2026-12-02T10:00:00+02:00x", "20x6-12-02T10:00:00Z", "yesterday"}) {
    EXPECT_FALSE(parseRfc3339(bad).has_value()) << bad;
  }
}

TEST(ClockTest, SystemClockFollowsTheRealClocks) {
  auto before = std::chrono::system_clock::now();
  auto now = systemClock().now();
  EXPECT_GE(now, before);
  EXPECT_LE(now - before, std::chrono::seconds(5));
  EXPECT_EQ(systemClock().nowRfc3339().size(), std::string("2026-12-02T10:00:00.000Z").size());
}

TEST(ClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock;
  EXPECT_EQ(clock.nowRfc3339(), "2026-12-02T10:00:00.000Z");
  auto steady = clock.steadyNow();
  EXPECT_EQ(clock.now(), clock.now());
  clock.advance(milliseconds(1500));
  EXPECT_EQ(clock.nowRfc3339(), "2026-12-02T10:00:01.500Z");
  EXPECT_EQ(clock.steadyNow() - steady, milliseconds(1500));
  clock.set(*parseRfc3339("2026-12-02T10:01:00Z"));
  EXPECT_EQ(clock.steadyNow() - steady, milliseconds(60'000));
  EXPECT_EQ(clock.nowMillis(), 1'796'205'660'000);
}

TEST(ClockTest, ManualSleepAdvancesInsteadOfBlocking) {
  ManualClock clock;
  Clock& as_interface = clock;
  auto real_before = std::chrono::steady_clock::now();
  for (int attempt = 0; attempt < 5; ++attempt) {
    as_interface.sleepFor(std::chrono::minutes(10));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - real_before, std::chrono::seconds(1));
  EXPECT_EQ(clock.slept(), std::chrono::minutes(50));
  EXPECT_EQ(clock.nowRfc3339(), "2026-12-02T10:50:00.000Z");
}

}  // namespace
}  // namespace flotilla
