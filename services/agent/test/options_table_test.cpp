// Every field of BundleDeploymentOptions the agent can receive is either implemented (the table names the code) or
// refused with an error naming it (model::unsupportedOptionFields). The table must list exactly the decoder's
// fields (model::optionFieldPaths), so a field added to the decoder without a decision here fails this test.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "flotilla/model/codec.h"
#include "flotilla/model/option_support.h"

namespace flotilla::agent {
namespace {

enum class Decision {
  kRender,    //!< acted on by the bundler when it renders (libs/render); the agent gets the rendered objects
  kAgent,     //!< acted on by the agent
  kHub,       //!< acted on by the poller/scheduler (never changes what the agent does beyond the deploymentID)
  kDrift,     //!< the agent's drift watch (watcher.cpp, drift.cpp, drift_correct.cpp; docs/pipeline.md "Drift")
  kRejected,  //!< refused with an error naming the field
};

struct Entry {
  const char* field;    //!< the decoder's path
  const char* options;  //!< options JSON that sets it
  Decision decision;
  const char* handled_by;  //!< where, for a reader of this table
};

// clang-format off
const Entry kTable[] = {
    {"defaultNamespace", R"({"defaultNamespace":"ns"})", Decision::kAgent, "objects.cpp placeObject"},
    {"namespace", R"({"namespace":"ns"})", Decision::kAgent, "objects.cpp placeObject"},
    {"kustomize.dir", R"({"kustomize":{"dir":"k"}})", Decision::kRender, "kustomize_renderer.cpp"},
    {"helm.chart", R"({"helm":{"chart":"c"}})", Decision::kRender, "helm_sources.cpp"},
    {"helm.repo", R"({"helm":{"repo":"https://charts.example.com"}})", Decision::kRender, "helm_sources.cpp"},
    {"helm.releaseName", R"({"helm":{"releaseName":"r"}})", Decision::kRender, "helm_renderer.cpp templateArgs"},
    {"helm.version", R"({"helm":{"version":"1.0.0"}})", Decision::kRender, "helm_sources.cpp"},
    {"helm.timeoutSeconds", R"({"helm":{"timeoutSeconds":5}})", Decision::kAgent,
     "deploy_options.cpp continueHealthWait (HealthTimeout)"},
    {"helm.values", R"({"helm":{"values":{"a":1}}})", Decision::kRender, "helm_renderer.cpp addValues"},
    {"helm.valuesFiles", R"({"helm":{"valuesFiles":["v.yaml"]}})", Decision::kRender, "helm_renderer.cpp addValues"},
    {"helm.valuesFrom", R"({"helm":{"valuesFrom":[{"configMapKeyRef":{"name":"v","key":"k"}}]}})",
     Decision::kRejected, "values are rendered on the hub"},
    {"helm.templateValues", R"({"helm":{"templateValues":{"a":"b"}}})", Decision::kRender, "variants.cpp"},
    {"helm.force", R"({"helm":{"force":true}})", Decision::kAgent, "deploy_handler.cpp wantsForce (apply force)"},
    {"helm.takeOwnership", R"({"helm":{"takeOwnership":true}})", Decision::kAgent,
     "applier.cpp checkUnmanaged, ownership.cpp (forced)"},
    {"helm.maxHistory", R"({"helm":{"maxHistory":3}})", Decision::kRejected, "one previous manifest is kept"},
    {"helm.waitForJobs", R"({"helm":{"timeoutSeconds":5,"waitForJobs":true}})", Decision::kAgent,
     "deploy_options.cpp healthSettled"},
    {"helm.atomic", R"({"helm":{"atomic":true}})", Decision::kAgent, "deploy_apply.cpp revertIfAtomic"},
    {"helm.disablePreProcess", R"({"helm":{"disablePreProcess":true}})", Decision::kRender, "variants.cpp"},
    {"helm.disableDNS", R"({"helm":{"disableDNS":true}})", Decision::kRender,
     "helm_renderer.cpp: helm template never gets --enable-dns, so no DNS lookups ever"},
    {"helm.skipSchemaValidation", R"({"helm":{"skipSchemaValidation":true}})", Decision::kRejected,
     "charts are always validated"},
    {"helm.disableDependencyUpdate", R"({"helm":{"disableDependencyUpdate":true}})", Decision::kRender,
     "helm_sources.cpp"},
    {"serviceAccount", R"({"serviceAccount":"deployer"})", Decision::kAgent, "deploy_options.cpp bundleClient"},
    {"forceSyncGeneration", R"({"forceSyncGeneration":2})", Decision::kHub,
     "poller re-publishes the commit; a new value is a new deploymentID, so the agent applies again"},
    {"yaml.overlays", R"({"yaml":{"overlays":["o"]}})", Decision::kRender, "render.cpp overlays"},
    {"diff.comparePatches", R"({"diff":{"comparePatches":[{"kind":"ConfigMap","jsonPointers":["/data"]}]}})",
     Decision::kDrift, "drift.cpp hidden paths"},
    {"keepResources", R"({"keepResources":true})", Decision::kAgent, "deploy_apply.cpp handleDelete"},
    {"deleteCRDResources", R"({"deleteCRDResources":true})", Decision::kAgent, "applier.cpp prune"},
    {"deleteNamespace", R"({"deleteNamespace":true})", Decision::kAgent, "deploy_options.cpp deleteCreatedNamespaces"},
    {"createNamespace", R"({"createNamespace":true})", Decision::kAgent,
     "applier.cpp ensureNamespaces: missing target namespaces are always created (Fleet's behaviour)"},
    {"ignore.conditions", R"({"ignore":{"conditions":[{"type":"Active"}]}})", Decision::kDrift, "health.cpp ignored conditions"},
    {"correctDrift.enabled", R"({"correctDrift":{"enabled":true}})", Decision::kDrift, "drift_correct.cpp correctBundle"},
    {"correctDrift.force", R"({"correctDrift":{"force":true}})", Decision::kAgent,
     "deploy_handler.cpp wantsForce (apply force)"},
    {"correctDrift.keepFailHistory", R"({"correctDrift":{"keepFailHistory":true}})", Decision::kDrift,
     "drift_correct.cpp DriftCorrectionFailed Event"},
    {"namespaceLabels", R"({"namespaceLabels":{"a":"b"}})", Decision::kAgent, "applier.cpp ensureNamespaces"},
    {"namespaceAnnotations", R"({"namespaceAnnotations":{"a":"b"}})", Decision::kAgent, "applier.cpp ensureNamespaces"},
    {"downstreamResources", R"({"downstreamResources":[{"kind":"Secret","name":"db"}]})", Decision::kRejected,
     "copying Secrets/ConfigMaps downstream is not implemented"},
};
// clang-format on

TEST(OptionsTable, ListsExactlyTheDecodersFields) {
  std::set<std::string> decoded;
  for (const auto& path : model::optionFieldPaths()) {
    decoded.insert(path);
  }
  std::set<std::string> table;
  for (const auto& entry : kTable) {
    EXPECT_TRUE(table.insert(entry.field).second) << "listed twice: " << entry.field;
  }
  for (const auto& path : decoded) {
    EXPECT_TRUE(table.contains(path)) << "option field " << path << " has no entry: implement it or reject it";
  }
  for (const auto& path : table) {
    EXPECT_TRUE(decoded.contains(path)) << "entry " << path << " is not a field the decoder knows";
  }
}

TEST(OptionsTable, EachFieldIsImplementedOrRejectedByName) {
  for (const auto& entry : kTable) {
    auto json = Json::parse(entry.options);
    ASSERT_TRUE(json.ok()) << entry.field;
    auto options = model::decodeOptions(*json);
    ASSERT_TRUE(options.ok()) << entry.field << ": " << options.error().describe();
    EXPECT_NE(*options, model::BundleDeploymentOptions{}) << entry.field << ": the JSON does not set it";
    auto checked = model::checkSupportedOptions(*options);
    if (entry.decision == Decision::kRejected) {
      ASSERT_FALSE(checked.ok()) << entry.field << " should be refused";
      EXPECT_EQ(checked.error().kind, ErrorKind::kInvalid);
      EXPECT_NE(checked.error().message.find(std::string("options.") + entry.field + ": not supported"),
                std::string::npos)
          << checked.error().message;
    } else {
      EXPECT_TRUE(checked.ok()) << entry.field << " (" << entry.handled_by << "): " << checked.error().message;
    }
  }
}

// waitForJobs only means something during a timeoutSeconds wait; alone it would be accepted and ignored.
TEST(OptionsTable, WaitForJobsWithoutTimeoutIsRefused) {
  auto options = model::decodeOptions(Json::parse(R"({"helm":{"waitForJobs":true}})").value());
  ASSERT_TRUE(options.ok());
  auto checked = model::checkSupportedOptions(*options);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find("options.helm.waitForJobs"), std::string::npos) << checked.error().message;
}

}  // namespace
}  // namespace flotilla::agent
