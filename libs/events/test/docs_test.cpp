// Keeps docs/events/ honest: every JSON example decodes strictly and re-encodes to exactly itself, so the
// documented shape is the shape the code writes.
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/events/cloudevents.h"
#include "flotilla/events/payloads.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "test_support.h"

namespace flotilla::events {
namespace {

using test::docsDir;
using test::jsonExamples;

template <typename T>
void checkExample(const Json& example, const std::string& file) {
  auto decoded = decodePayload<T>(example);
  ASSERT_TRUE(decoded.ok()) << file << ": " << decoded.error().describe();
  EXPECT_EQ(encode(*decoded), example) << file << ": re-encoded example differs:\n" << encode(*decoded).pretty();
}

//! Checks `example` as the one of Ts whose kind is `kind`; false when none is.
template <typename... Ts>
bool checkAsKind(std::string_view kind, const Json& example, const std::string& file) {
  return ((kind == Ts::kKind ? (checkExample<Ts>(example, file), true) : false) || ...);
}

void checkPayload(const Json& example, const std::string& file) {
  auto kind = payloadKind(example);
  ASSERT_TRUE(kind.ok()) << file << ": " << kind.error().describe();
  if (!checkAsKind<CommitEvent, BundleEvent, DeployEvent, StatusEvent, RegisterRequest, RegisterReply, Heartbeat>(
          *kind, example, file)) {
    ADD_FAILURE() << file << ": unknown kind " << *kind;
  }
}

TEST(DocsTest, PayloadExamplesDecodeAndReencodeExactly) {
  struct Page {
    const char* file;
    size_t examples;
  };
  for (const Page& page : {Page{"commit.md", 1}, Page{"bundle.md", 3}, Page{"deploy.md", 1}, Page{"status.md", 1},
                           Page{"register.md", 2}, Page{"heartbeat.md", 1}}) {
    auto examples = jsonExamples(page.file);
    EXPECT_EQ(examples.size(), page.examples) << page.file;
    for (const auto& example : examples) {
      checkPayload(example, page.file);
    }
  }
}

TEST(DocsTest, CloudEventExamplesDecode) {
  auto examples = jsonExamples("cloudevents.md");
  ASSERT_EQ(examples.size(), 2u);
  for (const auto& example : examples) {
    auto decoded = decodeCloudEvent(example);
    ASSERT_TRUE(decoded.ok()) << decoded.error().describe();
    EXPECT_EQ(encode(*decoded), example);
  }
  // The first one wraps a StatusEvent, which must itself be valid.
  checkPayload(*examples[0].find("data"), "cloudevents.md");
}

// The Json subtrees this leaf library carries must be valid in libs/model's schema.
TEST(DocsTest, EmbeddedOptionsAreValidModelJson) {
  auto expectOk = [](const auto& result, const std::string& what) {
    EXPECT_TRUE(result.ok()) << what << ": " << (result.ok() ? "" : result.error().describe());
  };
  for (const auto& example : jsonExamples("bundle.md")) {
    auto bundle = decodePayload<BundleEvent>(example);
    ASSERT_TRUE(bundle.ok());
    expectOk(model::decodeOptions(bundle->options), "bundle options");
    for (const auto& c : bundle->customizations) {
      expectOk(model::decodeOptions(c.options), "customization options");
      expectOk(model::decodeBundleTarget(c.target), "customization target");
    }
    for (const auto& t : bundle->targets.asArray()) {
      expectOk(model::decodeGitTarget(t), "target");
    }
    for (const auto& d : bundle->depends_on.asArray()) {
      expectOk(model::decodeBundleRef(d), "dependsOn");
    }
    if (!bundle->rollout_strategy.isNull()) {
      expectOk(model::decodeRolloutStrategy(bundle->rollout_strategy), "rolloutStrategy");
    }
  }
  auto deploy = decodePayload<DeployEvent>(jsonExamples("deploy.md").at(0));
  ASSERT_TRUE(deploy.ok());
  expectOk(model::decodeOptions(deploy->options), "deploy options");
  EXPECT_EQ(deploy->deployment_id, model::deploymentID(deploy->manifest_id, deploy->options));
}

TEST(DocsTest, IndexLinksEveryPage) {
  auto index = readFile(docsDir() + "/README.md");
  ASSERT_TRUE(index.ok());
  for (const char* page : {"commit.md", "bundle.md", "deploy.md", "status.md", "register.md", "heartbeat.md",
                           "cloudevents.md", "subscribing.md"}) {
    EXPECT_NE(index->find(std::string("(") + page + ")"), std::string::npos) << page;
  }
}

}  // namespace
}  // namespace flotilla::events
