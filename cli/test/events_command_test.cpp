// `flotilla events`: its flag values (--since durations and times, --type types and globs) and the -o text line,
// without a hub; a bad value is a usage error naming the flag, before NATS is contacted.
#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"
#include "flotilla/cli/events.h"
#include "flotilla/core/time.h"
#include "run_captured.h"

namespace flotilla::cli {
namespace {

using namespace std::chrono_literals;

TEST(EventsCommandTest, SinceTakesDurationsAndRfc3339Times) {
  const auto now = std::chrono::system_clock::from_time_t(1'800'000'000);
  EXPECT_FALSE(parseSince("", now).value().has_value());
  EXPECT_EQ(*parseSince("90s", now).value(), now - 90s);
  EXPECT_EQ(*parseSince("10m", now).value(), now - 10min);
  EXPECT_EQ(*parseSince("1h30m", now).value(), now - 90min);
  EXPECT_EQ(*parseSince("2d", now).value(), now - 48h);
  EXPECT_EQ(*parseSince("0s", now).value(), now);
  EXPECT_EQ(*parseSince("2026-12-02T10:00:00Z", now).value(), *parseRfc3339("2026-12-02T10:00:00Z"));
  for (const char* bad : {"10", "m", "10x", "1h30", "-5m", "yesterday", "2026-12-02", "1.5h", "9999999999s"}) {
    auto parsed = parseSince(bad, now);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().message,
              "--since: expected a duration back from now (30s, 10m, 1h30m, 2d) or an RFC 3339 time "
              "(2026-12-02T10:00:00Z), got \"" +
                  std::string(bad) + "\"");
  }
}

TEST(EventsCommandTest, TypeTakesATypeOrAGlob) {
  for (const char* good : {"io.flotilla.bundle.ready", "io.flotilla.bundle.*", "io.flotilla.*",
                           "io.flotilla.bundledeployment.errapplied", "io.flotilla.*.deleted"}) {
    EXPECT_TRUE(checkTypeFilter(good).ok()) << good;
  }
  for (const char* bad : {"bundle.ready", "io.flotilla.", "io.flotilla.bundle", "io.flotilla.Bundle.Ready",
                          "io.flotilla.bundle..ready", "io.flotilla.bundle.ready.", "io.flotilla.bundle ready", "*"}) {
    auto checked = checkTypeFilter(bad);
    ASSERT_FALSE(checked.ok()) << bad;
    EXPECT_NE(checked.error().message.find("--type: expected a type such as io.flotilla.bundle.ready or a glob"),
              std::string::npos)
        << checked.error().message;
    EXPECT_NE(checked.error().message.find("got \"" + std::string(bad) + "\""), std::string::npos);
  }
  EXPECT_TRUE(typeMatches("", "io.flotilla.gitrepo.commit"));
  EXPECT_TRUE(typeMatches("io.flotilla.bundle.*", "io.flotilla.bundle.ready"));
  EXPECT_TRUE(typeMatches("io.flotilla.bundle.*", "io.flotilla.bundle.rendered"));
  EXPECT_FALSE(typeMatches("io.flotilla.bundle.*", "io.flotilla.bundledeployment.ready"));
  EXPECT_TRUE(typeMatches("io.flotilla.*.deleted", "io.flotilla.bundledeployment.deleted"));
  EXPECT_FALSE(typeMatches("io.flotilla.bundle.ready", "io.flotilla.bundle.readyish"));
  // The subjects read: the object's own when the type spells it out.
  EXPECT_EQ(subjectFor(""), "flotilla.events.>");
  EXPECT_EQ(subjectFor("io.flotilla.bundle.*"), "flotilla.events.bundle.>");
  EXPECT_EQ(subjectFor("io.flotilla.gitrepo.commit"), "flotilla.events.gitrepo.>");
  EXPECT_EQ(subjectFor("io.flotilla.*.deleted"), "flotilla.events.>");
  EXPECT_EQ(subjectFor("io.flotilla.bundle*"), "flotilla.events.>");
}

TEST(EventsCommandTest, TheTextLineSaysWhatHappenedInAFewWords) {
  auto ready = events::toCloudEvent("io.flotilla.bundle.ready", "/flotilla/scheduler", "fleet-default/app",
                                    Json::obj({{"summary", Json::obj({{"ready", 2}, {"desiredReady", 2}})}}), "id-1",
                                    "2026-12-02T10:00:00.000Z");
  EXPECT_EQ(textLine(ready), "2026-12-02T10:00:00.000Z  io.flotilla.bundle.ready  fleet-default/app  2/2 ready");
  auto commit = events::toCloudEvent("io.flotilla.gitrepo.commit", "/flotilla/poller", "fleet-default/repo",
                                     Json::obj({{"commit", "8d1f3c0e"}}), "id-2", "2026-12-02T10:00:01.000Z");
  EXPECT_EQ(textLine(commit),
            "2026-12-02T10:00:01.000Z  io.flotilla.gitrepo.commit  fleet-default/repo  commit=8d1f3c0e");
}

// Bad values are usage errors (exit 2) naming the flag, before any connection; flags of other commands are refused.
TEST(EventsCommandTest, BadFlagValuesAreUsageErrorsNamingTheFlag) {
  Ran since = runCaptured({"events", "--since", "yesterday", "--nats-url", "nats://127.0.0.1:1"});
  EXPECT_EQ(since.code, kExitUsage);
  EXPECT_NE(since.err.find("--since: expected a duration"), std::string::npos) << since.err;
  Ran type = runCaptured({"events", "--type", "bundle.ready", "--nats-url", "nats://127.0.0.1:1"});
  EXPECT_EQ(type.code, kExitUsage);
  EXPECT_NE(type.err.find("--type: expected a type"), std::string::npos) << type.err;
  Ran output = runCaptured({"events", "-o", "yaml"});
  EXPECT_EQ(output.code, kExitUsage);
  EXPECT_NE(output.err.find("-o: events prints json or text, got \"yaml\""), std::string::npos) << output.err;
  Ran workspace = runCaptured({"events", "-n", "ws"});
  EXPECT_EQ(workspace.code, kExitUsage);
  EXPECT_NE(workspace.err.find("-n does not apply to events"), std::string::npos) << workspace.err;
  Ran help = runCaptured({"events", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_NE(help.out.find("--follow"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace flotilla::cli
