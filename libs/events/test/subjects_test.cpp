#include "flotilla/events/subjects.h"

#include <algorithm>
#include <random>
#include <string_view>

#include <gtest/gtest.h>

namespace flotilla::events {
namespace {

// What a NATS subject token and a KV key may contain, per the NATS docs; escapeToken must stay inside both.
// (A character test, not std::regex: GCC 12's <regex> trips -Werror=maybe-uninitialized under -fsanitize.)
constexpr std::string_view kTokenPunctuation = "_=-";
constexpr std::string_view kKvKeyPunctuation = "-/_=.";

// Non-empty, and every character an ASCII letter or digit or one of `punctuation`.
bool onlyAlnumOr(std::string_view text, std::string_view punctuation) {
  auto allowed = [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           punctuation.find(c) != std::string_view::npos;
  };
  return !text.empty() && std::all_of(text.begin(), text.end(), allowed);
}

TEST(SubjectsTest, EscapesOnlyWhatIsNeeded) {
  EXPECT_EQ(escapeToken("web-app_1"), "web-app_1");
  EXPECT_EQ(escapeToken("prod.eu"), "prod=2Eeu");
  EXPECT_EQ(escapeToken("a=b"), "a=3Db");
  EXPECT_EQ(escapeToken("*"), "=2A");
  EXPECT_EQ(escapeToken(">"), "=3E");
  EXPECT_EQ(escapeToken("a b\tc"), "a=20b=09c");
  EXPECT_EQ(escapeToken("ü"), "=C3=BC");
  EXPECT_EQ(escapeToken(""), "=");
}

TEST(SubjectsTest, EscapingRoundTripsAndNeverLeaksSpecialCharacters) {
  std::mt19937 rng(42);
  std::vector<std::string> names = {"", ".", "..", "*", ">", "a.b.c", "=", "==41", "=2E", "x y", std::string(1, '\0')};
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) {
    all_bytes.push_back(static_cast<char>(c));
  }
  names.push_back(all_bytes);
  for (int i = 0; i < 500; ++i) {
    std::string name;
    size_t length = rng() % 12;
    for (size_t j = 0; j < length; ++j) {
      name.push_back(static_cast<char>(rng() % 256));
    }
    names.push_back(name);
  }
  for (const auto& name : names) {
    std::string token = escapeToken(name);
    EXPECT_TRUE(onlyAlnumOr(token, kTokenPunctuation)) << token;
    EXPECT_EQ(token.find_first_of(".*> \t\r\n"), std::string::npos);
    auto back = unescapeToken(token);
    ASSERT_TRUE(back.ok()) << token << ": " << back.error().describe();
    EXPECT_EQ(*back, name);
  }
}

TEST(SubjectsTest, UnescapeRejectsMalformedTokens) {
  for (const char* token : {"", "=4", "=", "=zz", "=2e", "=41", "a.b", "a*", "a>", "a b", "x=", "%2E"}) {
    if (std::string_view(token) == "=") {
      continue;  // the empty name
    }
    auto r = unescapeToken(token);
    EXPECT_FALSE(r.ok()) << token;
    if (!r.ok()) {
      EXPECT_EQ(r.error().kind, ErrorKind::kInvalid);
    }
  }
}

TEST(SubjectsTest, BuildsTheContractSubjects) {
  EXPECT_EQ(commitSubject("fleet-default", "simple"), "flotilla.commit.fleet-default.simple");
  EXPECT_EQ(bundleSubject("fleet-default", "simple-web"), "flotilla.bundle.fleet-default.simple-web");
  EXPECT_EQ(deploySubject("eu-1"), "flotilla.deploy.eu-1");
  EXPECT_EQ(statusSubject("prod.eu", "web"), "flotilla.status.prod=2Eeu.web");
  EXPECT_EQ(eventsSubject("bundledeployment", {"eu-1", "web"}), "flotilla.events.bundledeployment.eu-1.web");
  EXPECT_EQ(kRegisterSubject, "flotilla.register");
  EXPECT_EQ(commitFilter("team.a"), "flotilla.commit.team=2Ea.>");
  EXPECT_EQ(statusFilter("eu-1"), "flotilla.status.eu-1.>");
  EXPECT_EQ(eventsFilter("bundle"), "flotilla.events.bundle.>");
  // A hostile name stays one token: no extra level, no wildcard.
  std::string subject = statusSubject("a.>", "*");
  EXPECT_EQ(std::count(subject.begin(), subject.end(), '.'), 3);
  EXPECT_EQ(subject.find_first_of("*>"), std::string::npos);
}

TEST(SubjectsTest, SubjectTokensUndoTheBuilders) {
  auto tokens = subjectTokens(statusSubject("prod.eu", "web app"), "flotilla.status");
  ASSERT_TRUE(tokens.ok()) << tokens.error().describe();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"prod.eu", "web app"}));
  auto commit = subjectTokens(commitSubject("ws", ""), "flotilla.commit");
  ASSERT_TRUE(commit.ok());
  EXPECT_EQ(*commit, (std::vector<std::string>{"ws", ""}));
  EXPECT_FALSE(subjectTokens("flotilla.deploy.x", "flotilla.status").ok());
  EXPECT_FALSE(subjectTokens("flotilla.status.", "flotilla.status").ok());
  EXPECT_FALSE(subjectTokens("flotilla.status.a..b", "flotilla.status").ok());
}

TEST(SubjectsTest, KvKeysFollowThePipelineLayout) {
  EXPECT_EQ(gitRepoKey("fleet-default", "simple"), "fleet-default.simple");
  EXPECT_EQ(clusterKey("eu-1"), "cluster.eu-1");
  EXPECT_EQ(clusterGroupKey("ws", "prod"), "group.ws.prod");
  EXPECT_EQ(heartbeatKey("eu-1"), "heartbeat.eu-1");
  EXPECT_EQ(clusterSpecKey("eu-1"), "spec.eu-1");
  EXPECT_EQ(clusterDeregisteredKey("prod.eu"), "deregistered.prod=2Eeu");
  EXPECT_EQ(keyNames(clusterDeregisteredKey("prod.eu"), "deregistered", 1).value(),
            std::vector<std::string>{"prod.eu"});
  EXPECT_EQ(bundleKey("ws", "b.c"), "ws.b=2Ec");
  EXPECT_EQ(deploymentKey("eu-1", "ws", "web"), "eu-1.ws.web");
  EXPECT_EQ(gitRepoStatusKey("ws", "repo"), "gitrepo.ws.repo");
  EXPECT_EQ(bundleRenderStatusKey("ws", "web"), "bundle-render.ws.web");
  EXPECT_EQ(bundleClaimKey("ws", "web", "other"), "bundle-claim.ws.web.other");
  EXPECT_EQ(bundleDeploymentStatusKey("eu-1", "ws", "web"), "bd.eu-1.ws.web");
  EXPECT_EQ(gitRepoSummaryKey("ws", "repo"), "summary.gitrepo.ws.repo");
  EXPECT_EQ(bundleSummaryKey("ws", "web"), "summary.bundle.ws.web");
  EXPECT_EQ(clusterSummaryKey("eu-1"), "summary.cluster.eu-1");
  EXPECT_EQ(keyFilter({"group", "ws"}), "group.ws.>");
  EXPECT_EQ(keyFilter({"eu-1"}), "eu-1.>");
  for (const auto& key : {gitRepoKey("", "x/y"), bundleKey("a b", "\xC3\xBC"), deploymentKey("*", ">", "."),
                          bundleDeploymentStatusKey("a.b", "c", "d")}) {
    EXPECT_TRUE(onlyAlnumOr(key, kKvKeyPunctuation)) << key;
    EXPECT_NE(key.front(), '.');
    EXPECT_NE(key.back(), '.');
    EXPECT_EQ(key.find(".."), std::string::npos);
  }
  // A name with a dot cannot make one bundle's key look like a longer key of another.
  EXPECT_NE(deploymentKey("eu-1", "ws", "a.b"), deploymentKey("eu-1", "ws.a", "b"));
}

TEST(SubjectsTest, ObjectNamesAndBuckets) {
  std::string id(64, 'f');
  EXPECT_EQ(manifestObjectName(id), id);
  EXPECT_EQ(sourceObjectName(id), id);
  EXPECT_EQ(kManifestsBucket, "manifests");
  EXPECT_EQ(kSourcesBucket, "sources");
  EXPECT_EQ(kGitReposBucket, "gitrepos");
  EXPECT_EQ(kCommitStream, "FLOTILLA_COMMITS");
  EXPECT_EQ(kBundleStream, "FLOTILLA_BUNDLES");
  EXPECT_EQ(kStatusStream, "FLOTILLA_STATUS");
}

TEST(SubjectsTest, MsgIdsFollowThePipelineLayout) {
  EXPECT_EQ(commitMsgId("ws", "repo", "abc", 2), "commit/ws/repo/abc/2");
  EXPECT_EQ(commitDeletedMsgId("ws", "repo", 41), "commit/ws/repo/deleted/41");
  EXPECT_EQ(bundleMsgId("ws", "web", "abc", "error"), "bundle/ws/web/abc/error");
  EXPECT_EQ(deployMsgId("eu-1", "web", "m:o", 7), "deploy/eu-1/web/m:o/7");
  EXPECT_EQ(statusMsgId("eu-1", "web", "m:o", "Ready", 3), "status/eu-1/web/m:o/Ready/3");
}

}  // namespace
}  // namespace flotilla::events
