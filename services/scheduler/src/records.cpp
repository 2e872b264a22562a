#include "flotilla/scheduler/records.h"

#include "flotilla/model/codec.h"

namespace flotilla::scheduler {

namespace {

Result<Json> parseObject(std::string_view json, std::string_view what) {
  auto parsed = Json::parse(json);
  if (!parsed.ok()) {
    return fail(ErrorKind::kInvalid, std::string(what) + ": " + parsed.error().message);
  }
  if (!parsed->isObject()) {
    return fail(ErrorKind::kInvalid, std::string(what) + ": not a JSON object");
  }
  return parsed;
}

Json objectOr(const Json& value, std::string_view key, Json fallback) {
  const Json* found = value.find(key);
  if (found == nullptr || found->isNull()) {
    return fallback;
  }
  return *found;
}

}  // namespace

// ---- DeploymentRecord ----

Json encode(const DeploymentRecord& r) {
  return Json::obj({{"cluster", r.cluster},
                    {"workspace", r.workspace},
                    {"bundle", r.bundle},
                    {"gitrepo", r.gitrepo},
                    {"commit", r.commit},
                    {"deploymentID", r.deployment_id},
                    {"manifestID", r.manifest_id},
                    {"options", r.options},
                    {"dependsOn", r.depends_on},
                    {"target", r.target},
                    {"customization", r.customization},
                    {"stagedDeploymentID", r.staged_deployment_id},
                    {"generation", r.generation},
                    {"updated", r.updated}});
}

Result<DeploymentRecord> decodeDeploymentRecord(std::string_view json) {
  auto parsed = parseObject(json, "deployment record");
  FLOTILLA_TRY(parsed);
  const Json& j = *parsed;
  DeploymentRecord r{.cluster = j.getString("cluster"),
                     .workspace = j.getString("workspace"),
                     .bundle = j.getString("bundle"),
                     .gitrepo = j.getString("gitrepo"),
                     .commit = j.getString("commit"),
                     .deployment_id = j.getString("deploymentID"),
                     .manifest_id = j.getString("manifestID"),
                     .options = objectOr(j, "options", Json::object()),
                     .depends_on = objectOr(j, "dependsOn", Json::array()),
                     .target = j.getString("target"),
                     .customization = j.getString("customization"),
                     .staged_deployment_id = j.getString("stagedDeploymentID"),
                     .generation = j.getInt("generation"),
                     .updated = j.getString("updated")};
  if (r.cluster.empty() || r.workspace.empty() || r.bundle.empty()) {
    return fail(ErrorKind::kInvalid, "deployment record: cluster, workspace and bundle are required");
  }
  return r;
}

// ---- BdStatus ----

Json encode(const BdStatus& s) {
  return Json::obj({{"cluster", s.cluster},
                    {"workspace", s.workspace},
                    {"bundle", s.bundle},
                    {"deploymentID", s.deployment_id},
                    {"generation", s.generation},
                    {"state", s.state},
                    {"reason", s.reason},
                    {"message", s.message},
                    {"resources", s.resources},
                    {"stale", s.stale},
                    {"agentVersion", s.agent_version},
                    {"reported", s.reported},
                    {"eventID", s.event_id},
                    {"updated", s.updated}});
}

Result<BdStatus> decodeBdStatus(std::string_view json) {
  auto parsed = parseObject(json, "bundle deployment status");
  FLOTILLA_TRY(parsed);
  const Json& j = *parsed;
  BdStatus s{.cluster = j.getString("cluster"),
             .workspace = j.getString("workspace"),
             .bundle = j.getString("bundle"),
             .deployment_id = j.getString("deploymentID"),
             .generation = j.getInt("generation"),
             .state = j.getString("state"),
             .reason = j.getString("reason"),
             .message = j.getString("message"),
             .resources = objectOr(j, "resources", Json::array()),
             .stale = j.getBool("stale"),
             .agent_version = j.getString("agentVersion"),
             .reported = j.getString("reported"),
             .event_id = j.getString("eventID"),
             .updated = j.getString("updated")};
  if (s.cluster.empty() || s.bundle.empty()) {
    return fail(ErrorKind::kInvalid, "bundle deployment status: cluster and bundle are required");
  }
  return s;
}

BdStatus bdStatusFrom(const events::StatusEvent& event) {
  Json resources = Json::array();
  for (const auto& r : event.resources) {
    resources.push(Json::obj({{"apiVersion", r.api_version},
                              {"kind", r.kind},
                              {"namespace", r.ns},
                              {"name", r.name},
                              {"state", r.state},
                              {"message", r.message}}));
  }
  return BdStatus{.cluster = event.cluster,
                  .workspace = event.workspace,
                  .bundle = event.bundle,
                  .deployment_id = event.deployment_id,
                  .generation = event.generation,
                  .state = event.state,
                  .reason = event.reason,
                  .message = event.message,
                  .resources = std::move(resources),
                  .agent_version = event.agent_version,
                  .reported = event.time,
                  .event_id = event.id};
}

// ---- clusters and groups ----

Result<model::Cluster> decodeClusterRecord(std::string_view json) {
  auto parsed = parseObject(json, "cluster record");
  FLOTILLA_TRY(parsed);
  return model::decodeCluster(*parsed, "cluster record");
}

ClusterInfo clusterInfoOf(const model::Cluster& cluster) {
  return ClusterInfo{
      .name = cluster.metadata.name, .workspace = cluster.metadata.ns, .labels = cluster.metadata.labels};
}

// ---- bundles ----

Result<BundleMessage> decodeBundleMessage(const Json& json) {
  BundleMessage out;
  const Json* deleted = json.find("deleted");
  out.deleted = deleted != nullptr && deleted->isBool() && deleted->asBool();
  auto decoded = events::decodePayload<events::BundleEvent>(json);
  if (decoded.ok()) {
    out.event = std::move(decoded).value();
    out.deleted = out.deleted || out.event.deleted;
    return out;
  }
  if (deleted == nullptr) {
    return fail(decoded.error());
  }
  // libs/events may not know the field (strict decoding rejects it), and a deleted bundle has no manifest.
  Json stripped = json;
  stripped.erase("deleted");
  auto again = events::decodePayload<events::BundleEvent>(stripped);
  if (again.ok()) {
    out.event = std::move(again).value();
    return out;
  }
  if (!out.deleted) {
    return fail(again.error());
  }
  out.event.id = json.getString("id");
  out.event.time = json.getString("time");
  out.event.workspace = json.getString("workspace");
  out.event.gitrepo = json.getString("gitrepo");
  out.event.bundle = json.getString("bundle");
  out.event.commit = json.getString("commit");
  if (out.event.workspace.empty() || out.event.bundle.empty()) {
    return fail(ErrorKind::kInvalid, "BundleEvent: a deleted bundle needs workspace and bundle");
  }
  return out;
}

Result<BundleInfo> bundleFromEvent(const events::BundleEvent& event, const BundleInfo* previous) {
  BundleInfo out;
  if (previous != nullptr) {
    out = *previous;
  }
  out.workspace = event.workspace;
  out.gitrepo = event.gitrepo;
  out.bundle = event.bundle;
  out.time = event.time;
  if (event.error) {
    out.error = event.error;
    out.error_commit = event.commit;
    out.error_time = event.time;
    return out;
  }
  auto targeting = targetingFrom(event);
  FLOTILLA_TRY(targeting);
  out.targeting = std::move(targeting).value();
  out.error.reset();
  out.error_commit.clear();
  out.error_time.clear();
  return out;
}

Result<BundleInfo> bundleFromRecord(std::string_view json) {
  auto parsed = parseObject(json, "bundle record");
  FLOTILLA_TRY(parsed);
  const Json& record = *parsed;
  if (record.getString("kind") == "BundleRecord") {
    // The bundler's record: the last good BundleEvent as published, plus the current render error if any.
    BundleInfo info{.workspace = record.getString("workspace"),
                    .gitrepo = record.getString("gitrepo"),
                    .bundle = record.getString("bundle")};
    if (const Json* last_good = record.find("lastGood"); last_good != nullptr && !last_good->isNull()) {
      auto message = decodeBundleMessage(*last_good);
      FLOTILLA_TRY(message);
      auto good = bundleFromEvent(message->event, nullptr);
      FLOTILLA_TRY(good);
      info = std::move(good).value();
    }
    if (const Json* error = record.find("error"); error != nullptr && error->isObject()) {
      info.error = events::RenderError{
          .file = error->getString("file"), .line = error->getInt("line"), .message = error->getString("message")};
      info.error_commit = record.getString("commit");
    }
    if (info.workspace.empty() || info.bundle.empty()) {
      return fail(ErrorKind::kInvalid, "bundle record: workspace and bundle are required");
    }
    return info;
  }
  const Json* candidate = &record;
  if (events::payloadKind(*candidate).valueOr("") != events::BundleEvent::kKind) {
    candidate = nullptr;
    for (const char* key : {"event", "lastEvent", "bundleEvent", "lastGood"}) {
      const Json* nested = record.find(key);
      if (nested != nullptr && events::payloadKind(*nested).valueOr("") == events::BundleEvent::kKind) {
        candidate = nested;
        break;
      }
    }
  }
  if (candidate == nullptr) {
    return fail(ErrorKind::kInvalid, "bundle record: no BundleEvent in it");
  }
  auto message = decodeBundleMessage(*candidate);
  FLOTILLA_TRY(message);
  if (message->deleted) {
    return fail(ErrorKind::kNotFound, "bundle record: the bundle was deleted");
  }
  return bundleFromEvent(message->event, nullptr);
}

}  // namespace flotilla::scheduler
