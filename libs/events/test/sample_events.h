// A BundleEvent with every field set, shared by the tests of its codec (libs/events) and of the services that read
// and write it (the bundler's records and Msg-Ids, the scheduler's view of a BundleRecord).
#pragma once

#include <string>

#include "flotilla/core/json.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"

namespace flotilla::events::test {

//! GitRepo `simple`'s bundle `simple-app` (directory app) rendered at a commit, with a per-cluster customization.
inline BundleEvent sampleBundleEvent() {
  BundleEvent b;
  b.workspace = "fleet-default";
  b.gitrepo = "simple";
  b.bundle = "simple-app";
  b.path = "app";
  b.commit = "0123456789abcdef0123456789abcdef01234567";
  b.manifest_id = std::string(64, 'a');
  b.id = bundleMsgId(b.workspace, b.bundle, b.commit, b.manifest_id);
  b.time = "2026-12-02T10:00:00.123Z";
  b.options = Json::obj({{"defaultNamespace", "web"}});
  b.customizations = {TargetManifest{"prod", Json::obj({{"clusterGroup", "prod"}}), std::string(64, 'b'),
                                     Json::obj({{"namespace", "web-prod"}})}};
  b.customization_mode = "FirstMatch";
  b.targets = Json::parse(R"([{"clusterGroup":"default","name":"default"}])").value();
  b.depends_on = Json(Json::Array{Json::obj({{"name", "simple-infra"}})});
  b.rollout_strategy = Json::obj({{"maxUnavailable", "10%"}});
  b.paused = true;
  b.labels = {{"fleet.cattle.io/repo-name", "simple"}};
  b.force_sync_generation = 3;
  return b;
}

}  // namespace flotilla::events::test
