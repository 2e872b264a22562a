// The size caps' flags: one budget split by fixed shares, per-store overrides, and bad values refused by name.
#include <gtest/gtest.h>

#include "flotilla/service/hub.h"

namespace flotilla::service {
namespace {

Result<StoreLimits> limitsFrom(std::vector<const char*> args) {
  args.insert(args.begin(), "svc");
  auto config = Config::parse(static_cast<int>(args.size()), args.data(), storeFlags());
  if (!config.ok()) {
    return fail(config.error());
  }
  return storeLimitsFrom(*config);
}

TEST(StoreLimitsTest, BudgetIsSplitOverEveryStore) {
  int total = 0;
  for (const auto& [store, share] : kStoreShares) {
    total += share;
  }
  EXPECT_EQ(total, 1000);
  auto limits = limitsFrom({"--store-max-bytes=10GiB"});
  ASSERT_TRUE(limits.ok()) << limits.error().describe();
  EXPECT_EQ(limits->max_bytes.size(), std::size(kStoreShares));
  EXPECT_EQ(limits->of("sources"), (int64_t{10} << 30) / 1000 * 300);
  EXPECT_EQ(limits->of("FLOTILLA_DEPLOY"), (int64_t{10} << 30) / 1000 * 100);
  EXPECT_EQ(limits->of("no-such-store"), -1);
  auto defaults = limitsFrom({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->of("manifests"), kDefaultStoreBudget / 1000 * 300);
  EXPECT_EQ(kDefaultStoreBudget, int64_t{4} << 30);
}

TEST(StoreLimitsTest, PerStoreOverridesWin) {
  auto limits = limitsFrom({"--store-limits", "sources=4GiB,FLOTILLA_EVENTS=100MiB"});
  ASSERT_TRUE(limits.ok()) << limits.error().describe();
  EXPECT_EQ(limits->of("sources"), int64_t{4} << 30);
  EXPECT_EQ(limits->of("FLOTILLA_EVENTS"), int64_t{100} << 20);
  EXPECT_EQ(limits->of("manifests"), kDefaultStoreBudget / 1000 * 300);
}

TEST(StoreLimitsTest, BadSizesAndUnknownStoresAreRefusedByName) {
  auto bad_size = limitsFrom({"--store-max-bytes=lots"});
  ASSERT_FALSE(bad_size.ok());
  EXPECT_EQ(bad_size.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(bad_size.error().message.find("--store-max-bytes: \"lots\" is not a size"), std::string::npos)
      << bad_size.error().message;
  auto unknown = limitsFrom({"--store-limits=source=1GiB"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("\"source=1GiB\" is not store=size with a store of: sources"),
            std::string::npos)
      << unknown.error().message;
  auto tiny = limitsFrom({"--store-limits=status=1KiB"});
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("store status would get 1024 bytes"), std::string::npos) << tiny.error().message;
  auto small_budget = limitsFrom({"--store-max-bytes=1MiB"});
  ASSERT_TRUE(small_budget.ok()) << "each store gets at least the minimum";
  EXPECT_EQ(small_budget->of("gitrepos"), kMinStoreBytes);
}

// --store-replicas: 1 by default, 3 or 5 for a JetStream cluster; anything else is refused naming the flag.
TEST(StoreLimitsTest, ReplicasAreOneThreeOrFive) {
  auto defaults = limitsFrom({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->replicas, 1);
  auto three = limitsFrom({"--store-replicas=3"});
  ASSERT_TRUE(three.ok()) << three.error().describe();
  EXPECT_EQ(three->replicas, 3);
  for (const char* bad : {"--store-replicas=2", "--store-replicas=0", "--store-replicas=three"}) {
    auto refused = limitsFrom({bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().kind, ErrorKind::kInvalid);
    EXPECT_NE(refused.error().message.find("--store-replicas: "), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("is not 1, 3 or 5"), std::string::npos) << refused.error().message;
  }
}

TEST(StoreLimitsTest, ByteSizesTakeBinaryAndDecimalUnits) {
  EXPECT_EQ(parseByteSize("512MiB").valueOr(0), int64_t{512} << 20);
  EXPECT_EQ(parseByteSize("2G").valueOr(0), 2000000000);
  EXPECT_EQ(parseByteSize("4096").valueOr(0), 4096);
  EXPECT_FALSE(parseByteSize("-1").ok());
  EXPECT_FALSE(parseByteSize("1.5GiB").ok());
  EXPECT_FALSE(parseByteSize("99999999999999999GiB").ok());
  // Both spellings in use: the IEC suffix with and without the B, the decimal ones, bare bytes.
  EXPECT_EQ(parseByteSize("16GiB").valueOr(0), int64_t{16} << 30);
  EXPECT_EQ(parseByteSize("512Mi").valueOr(0), int64_t{512} << 20);
  EXPECT_EQ(parseByteSize("64KiB").valueOr(0), int64_t{64} << 10);
  EXPECT_EQ(parseByteSize("1Ti").valueOr(0), int64_t{1} << 40);
  EXPECT_EQ(parseByteSize("100MB").valueOr(0), 100000000);
  EXPECT_EQ(parseByteSize("7B").valueOr(0), 7);
  EXPECT_EQ(parseByteSize("1048576").valueOr(0), 1048576);
  EXPECT_EQ(parseByteSize("0").valueOr(-1), 0);
  for (const char* bad : {"", "MiB", "16 MiB", " 16MiB", "16MiB ", "16mib", "16Gb", "16GiBs", "+16GiB", "0x10"}) {
    auto parsed = parseByteSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().kind, ErrorKind::kInvalid) << bad;
    EXPECT_NE(parsed.error().message.find("is not a size like"), std::string::npos) << parsed.error().message;
  }
}

}  // namespace
}  // namespace flotilla::service
