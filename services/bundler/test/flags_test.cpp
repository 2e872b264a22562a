// The bundler's flags: --ack-wait (how soon a commit a killed bundler held is redelivered), --commit-budget.
#include "flotilla/bundler/flags.h"

#include <gtest/gtest.h>

namespace flotilla::bundler {
namespace {

Result<BundlerOptions> optionsFrom(std::vector<const char*> args) {
  args.insert(args.begin(), "flotilla-bundler");
  auto config = service::Config::parse(static_cast<int>(args.size()), args.data(), bundlerFlags());
  FLOTILLA_TRY(config);
  return bundlerOptionsFrom(*config);
}

TEST(BundlerFlags, AckWaitIsADuration) {
  auto defaults = optionsFrom({});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(defaults->ack_wait, std::chrono::seconds(30));
  auto set = optionsFrom({"--ack-wait", "10s"});
  ASSERT_TRUE(set.ok()) << set.error().describe();
  EXPECT_EQ(set->ack_wait, std::chrono::seconds(10));
  auto bad = optionsFrom({"--ack-wait", "0"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--ack-wait"), std::string::npos) << bad.error().message;
}

TEST(BundlerFlags, CommitBudgetIsADuration) {
  auto defaults = optionsFrom({});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(defaults->handler.commit_budget, std::chrono::minutes(20));
  auto set = optionsFrom({"--commit-budget", "5m"});
  ASSERT_TRUE(set.ok()) << set.error().describe();
  EXPECT_EQ(set->handler.commit_budget, std::chrono::minutes(5));
  auto bad = optionsFrom({"--commit-budget", "soon"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--commit-budget"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace flotilla::bundler
