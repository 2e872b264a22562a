// What an APIService watch event makes the API-version tracker expect in discovery (api_versions.h): its
// group-version present while it is Available, absent when it is not (discovery lists it as stale, without kinds)
// or deleted.
#include <gtest/gtest.h>

#include "flotilla/agent/api_versions.h"

namespace flotilla::agent {
namespace {

Json apiService(const std::string& group, const std::string& available) {
  auto object = Json::parse(R"({"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
    "metadata":{"name":"v1beta1.)" +
                            group + R"("},
    "spec":{"group":")" + group +
                            R"(","version":"v1beta1","service":{"namespace":"m","name":"s","port":443}},
    "status":{"conditions":[{"type":"Available","status":")" +
                            available + R"("}]}})");
  return object.ok() ? *object : Json();
}

TEST(ApiServiceExpectations, AvailableIsPresentOtherwiseAbsent) {
  EXPECT_EQ(apiServiceExpectations(apiService("metrics.k8s.io", "True"), false),
            (std::map<std::string, bool>{{"metrics.k8s.io/v1beta1", true}}));
  EXPECT_EQ(apiServiceExpectations(apiService("metrics.k8s.io", "False"), false),
            (std::map<std::string, bool>{{"metrics.k8s.io/v1beta1", false}}));
  EXPECT_EQ(apiServiceExpectations(apiService("metrics.k8s.io", "Unknown"), false),
            (std::map<std::string, bool>{{"metrics.k8s.io/v1beta1", false}}));
  // Deleted: gone, whatever its last condition said.
  EXPECT_EQ(apiServiceExpectations(apiService("metrics.k8s.io", "True"), true),
            (std::map<std::string, bool>{{"metrics.k8s.io/v1beta1", false}}));
}

TEST(ApiServiceExpectations, CoreGroupAndMalformedObjects) {
  // The built-in v1 APIService (group "") is spelled "v1", as discovery lists the core group.
  auto core = Json::parse(R"({"spec":{"version":"v1","groupPriorityMinimum":18000},
    "status":{"conditions":[{"type":"Available","status":"True"}]}})");
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(apiServiceExpectations(*core, false), (std::map<std::string, bool>{{"v1", true}}));
  // No status at all (just created): not Available yet.
  auto fresh = Json::parse(R"({"spec":{"group":"custom.metrics.k8s.io","version":"v1beta2"}})");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(apiServiceExpectations(*fresh, false),
            (std::map<std::string, bool>{{"custom.metrics.k8s.io/v1beta2", false}}));
  EXPECT_TRUE(apiServiceExpectations(Json::obj({{"spec", Json::obj({{"group", "x"}})}}), false).empty());
  EXPECT_TRUE(apiServiceExpectations(Json(), true).empty());
}

}  // namespace
}  // namespace flotilla::agent
