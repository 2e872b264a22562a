// The API-version tracker's pure parts: the digest of a set and what a CRD event makes the agent expect in
// discovery; and the --ack-wait flag.
#include "flotilla/agent/api_versions.h"

#include <gtest/gtest.h>

#include "flotilla/agent/flags.h"

namespace flotilla::agent {
namespace {

Json widgetCrd(bool established, bool v2_served) {
  auto crd = Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.example.com"},
    "spec":{"group":"example.com","names":{"kind":"Widget","plural":"widgets"},
      "versions":[{"name":"v1","served":true},{"name":"v2","served":)" +
                         std::string(v2_served ? "true" : "false") + R"(}]},
    "status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":")" +
                         std::string(established ? "True" : "False") + R"("}]}})");
  return crd.ok() ? *crd : Json();
}

TEST(ApiVersionsDigest, EqualSetsHaveEqualDigestsWhateverTheOrder) {
  EXPECT_EQ(apiVersionsDigest({"v1", "apps/v1"}), apiVersionsDigest({"apps/v1", "v1"}));
  EXPECT_NE(apiVersionsDigest({"v1"}), apiVersionsDigest({"v1", "example.com/v1"}));
  EXPECT_NE(apiVersionsDigest({"ab"}), apiVersionsDigest({"a", "b"})) << "entries are separated";
  EXPECT_EQ(apiVersionsDigest({}).size(), 64u);
}

TEST(CrdExpectations, EstablishedServedVersionsArePresentOthersAbsent) {
  auto live = crdExpectations(widgetCrd(true, false), false);
  EXPECT_EQ(live, (std::map<std::string, bool>{{"example.com/v1/Widget", true}, {"example.com/v2/Widget", false}}));
  // Not Established yet: nothing is expected to be served (a later MODIFIED event says when it is).
  auto pending = crdExpectations(widgetCrd(false, true), false);
  EXPECT_TRUE(pending.empty());
  auto pending_unserved = crdExpectations(widgetCrd(false, false), false);
  EXPECT_EQ(pending_unserved, (std::map<std::string, bool>{{"example.com/v2/Widget", false}}));
  // Deleted: every version goes.
  auto deleted = crdExpectations(widgetCrd(true, true), true);
  EXPECT_EQ(deleted, (std::map<std::string, bool>{{"example.com/v1/Widget", false}, {"example.com/v2/Widget", false}}));
  // Not a CRD shape: nothing.
  EXPECT_TRUE(crdExpectations(Json::obj({{"spec", 3}}), false).empty());
  EXPECT_TRUE(crdExpectations(Json(), true).empty());
}

//! The agent's options from a command line (argv[0] added).
Result<AgentOptions> optionsFrom(std::vector<const char*> args) {
  args.insert(args.begin(), "flotilla-agent");
  auto config = service::Config::parse(static_cast<int>(args.size()), args.data(), agentFlags());
  FLOTILLA_TRY(config);
  return agentOptionsFrom(*config);
}

TEST(AgentFlags, AckWaitIsADuration) {
  auto defaults = optionsFrom({"--cluster-name", "c"});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  EXPECT_EQ(defaults->ack_wait.count(), 30000);
  auto set = optionsFrom({"--cluster-name", "c", "--ack-wait", "5s"});
  ASSERT_TRUE(set.ok()) << set.error().describe();
  EXPECT_EQ(set->ack_wait.count(), 5000);
  auto seconds = optionsFrom({"--cluster-name", "c", "--ack-wait", "10"});
  ASSERT_TRUE(seconds.ok()) << seconds.error().describe();
  EXPECT_EQ(seconds->ack_wait.count(), 10000);
  auto bad = optionsFrom({"--cluster-name", "c", "--ack-wait", "soon"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--ack-wait"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace flotilla::agent
