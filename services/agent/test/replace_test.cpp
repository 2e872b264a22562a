// Detection of the API server's immutable-field refusals (replace.cpp) and how a replacement shows in the report.
#include <gtest/gtest.h>

#include "flotilla/agent/applier.h"
#include "flotilla/agent/report.h"
#include "flotilla/kube/errors.h"

namespace flotilla::agent {
namespace {

// A 422 answer as kube-apiserver sends it for a Deployment whose spec.selector changed.
constexpr std::string_view kSelectorRefusal = R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
  "message":"Deployment.apps \"web\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"two\", \"release\":\"two\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
  "reason":"Invalid","details":{"name":"web","group":"apps","kind":"Deployment","causes":[{"reason":"FieldValueInvalid",
  "message":"Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"two\", \"release\":\"two\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
  "field":"spec.selector"}]},"code":422})";

// Two immutable fields at once (a Job's selector and template), in the API server's bracketed list.
constexpr std::string_view kTwoFields = R"({"kind":"Status","status":"Failure",
  "message":"Job.batch \"migrate\" is invalid: [spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"b\"}}: field is immutable, spec.template: Invalid value: core.PodTemplateSpec{ObjectMeta:v1.ObjectMeta{Name:\"\"}}: field is immutable]",
  "reason":"Invalid","code":422})";

TEST(ImmutableFieldsTest, SelectorRefusalNamesTheField) {
  Error error = kube::apiError(422, kSelectorRefusal, "PATCH /apis/apps/v1/namespaces/app/deployments/web");
  EXPECT_EQ(immutableFields(error), std::vector<std::string>{"spec.selector"});
  // kube-apiserver 1.36 prints the value as JSON.
  Error json_value = kube::apiError(
      422,
      R"({"kind":"Status","message":"Deployment.apps \"web\" is invalid: spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"release\":\"two\"}}: field is immutable","reason":"Invalid","code":422})",
      "PATCH /apis/apps/v1/namespaces/app/deployments/web");
  EXPECT_EQ(immutableFields(json_value), std::vector<std::string>{"spec.selector"}) << json_value.message;
}

TEST(ImmutableFieldsTest, SeveralFieldsAreEachNamedOnce) {
  Error error = kube::apiError(422, kTwoFields, "PATCH /apis/batch/v1/namespaces/app/jobs/migrate");
  EXPECT_EQ(immutableFields(error), (std::vector<std::string>{"spec.selector", "spec.template"}));
}

TEST(ImmutableFieldsTest, OtherRefusalsAreNotImmutable) {
  // A plain validation failure (422, no immutable field): replacing would not help.
  Error invalid = kube::apiError(
      422,
      R"({"kind":"Status","message":"ConfigMap \"x\" is invalid: metadata.name: Invalid value: \"X\": a lowercase RFC 1123 subdomain","code":422})",
      "PATCH /api/v1/namespaces/app/configmaps/x");
  EXPECT_TRUE(immutableFields(invalid).empty());
  // The words in another answer (a conflict) or in an error that did not come from the API server.
  Error conflict = kube::apiError(409, R"({"kind":"Status","message":"spec.selector: field is immutable","code":409})",
                                  "PATCH /apis/apps/v1/namespaces/app/deployments/web");
  EXPECT_TRUE(immutableFields(conflict).empty());
  EXPECT_TRUE(immutableFields(makeError(ErrorKind::kInvalid, "spec.selector: field is immutable")).empty());
}

TEST(ImmutableFieldsTest, ReplacementIsSaidInTheReport) {
  ObjectRef web{"apps/v1", "Deployment", "app", "web"};
  const std::string note = replacedMessage(web, {"spec.selector"});
  EXPECT_EQ(note, web.describe() + " was deleted and re-created (new UID) because field spec.selector is immutable");
  EXPECT_EQ(replacedMessage(web, {"spec.selector", "spec.template"}),
            web.describe() +
                " was deleted and re-created (new UID) because fields spec.selector, spec.template are immutable");

  BundleReport ready = summarize({ObjectOutcome{.ref = web, .ready = true, .replaced = note}});
  EXPECT_EQ(ready.state, model::BundleState::kReady);
  EXPECT_EQ(ready.message, note);
  BundleReport not_ready =
      summarize({ObjectOutcome{.ref = web, .ready = false, .message = "0/1 ready", .replaced = note}});
  EXPECT_EQ(not_ready.state, model::BundleState::kNotReady);
  EXPECT_NE(not_ready.message.find("0/1 ready"), std::string::npos) << not_ready.message;
  EXPECT_NE(not_ready.message.find(note), std::string::npos) << not_ready.message;
}

}  // namespace
}  // namespace flotilla::agent
