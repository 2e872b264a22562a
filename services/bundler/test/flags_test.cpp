// The bundler's flags: --ack-wait (how soon a commit a killed bundler held is redelivered), --commit-budget.
#include "flotilla/bundler/flags.h"

#include <functional>

#include <gtest/gtest.h>

namespace flotilla::bundler {
namespace {

Result<BundlerOptions> optionsFrom(std::vector<const char*> args) {
  args.insert(args.begin(), "flotilla-bundler");
  auto config = service::Config::parse(static_cast<int>(args.size()), args.data(), bundlerFlags());
  FLOTILLA_TRY(config);
  return bundlerOptionsFrom(*config);
}

//! `flag` defaults to `fallback`, takes `value` as `parsed` and refuses `bad`, naming the flag; `get` reads it.
void expectDurationFlag(const char* flag, const std::function<std::chrono::milliseconds(const BundlerOptions&)>& get,
                        std::chrono::milliseconds fallback, const char* value, std::chrono::milliseconds parsed,
                        const char* bad) {
  SCOPED_TRACE(flag);
  auto defaults = optionsFrom({});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(get(*defaults), fallback);
  auto set = optionsFrom({flag, value});
  ASSERT_TRUE(set.ok()) << set.error().describe();
  EXPECT_EQ(get(*set), parsed);
  auto refused = optionsFrom({flag, bad});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find(flag), std::string::npos) << refused.error().message;
}

TEST(BundlerFlags, AckWaitIsADuration) {
  expectDurationFlag(
      "--ack-wait", [](const BundlerOptions& o) { return o.ack_wait; }, std::chrono::seconds(30), "10s",
      std::chrono::seconds(10), "0");
}

TEST(BundlerFlags, CommitBudgetIsADuration) {
  expectDurationFlag(
      "--commit-budget", [](const BundlerOptions& o) { return o.handler.commit_budget; }, std::chrono::minutes(20),
      "5m", std::chrono::minutes(5), "soon");
}

// --max-file-bytes and --max-manifest-bytes take the one byte-size grammar of libs/service (service::parseByteSize),
// like --store-max-bytes; a bad size or 0 is refused naming the flag.
TEST(BundlerFlags, SizeFlagsTakeTheServiceByteSizes) {
  auto defaults = optionsFrom({});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(defaults->handler.limits.max_file_bytes, uint64_t{16} << 20);
  auto set = optionsFrom({"--max-file-bytes", "512Mi", "--max-manifest-bytes", "16GiB"});
  ASSERT_TRUE(set.ok()) << set.error().describe();
  EXPECT_EQ(set->handler.limits.max_file_bytes, uint64_t{512} << 20);
  EXPECT_EQ(set->handler.limits.max_output_bytes, uint64_t{16} << 30);
  auto bare = optionsFrom({"--max-file-bytes", "1048576", "--max-manifest-bytes", "100MB"});
  ASSERT_TRUE(bare.ok()) << bare.error().describe();
  EXPECT_EQ(bare->handler.limits.max_file_bytes, 1048576u);
  EXPECT_EQ(bare->handler.limits.max_output_bytes, 100000000u);
  for (const char* bad : {"16 MiB", "1.5GiB", "lots"}) {
    auto refused = optionsFrom({"--max-manifest-bytes", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("--max-manifest-bytes: \""), std::string::npos) << refused.error().message;
  }
  auto zero = optionsFrom({"--max-file-bytes", "0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("--max-file-bytes: must be more than 0"), std::string::npos)
      << zero.error().message;
}

}  // namespace
}  // namespace flotilla::bundler
