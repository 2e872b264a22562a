// Codecs of the records the scheduler, bundler and poller keep in KV (records.h). The summaries are in
// records_summary.cpp.
#include "flotilla/events/records.h"

#include <algorithm>

#include "record_codec.h"

namespace flotilla::events {

using detail::Reader;

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

template <>
Result<DeploymentRecord> decodeRecord<DeploymentRecord>(const Json& json) {
  return detail::decodeRecordWith<DeploymentRecord>(json, [](Reader& in, DeploymentRecord& r) {
    in.str("cluster", r.cluster, true);
    in.str("workspace", r.workspace, true);
    in.str("bundle", r.bundle, true);
    in.str("gitrepo", r.gitrepo);
    in.str("commit", r.commit);
    in.str("deploymentID", r.deployment_id);
    in.str("manifestID", r.manifest_id);
    in.object("options", r.options);
    in.array("dependsOn", r.depends_on);
    in.str("target", r.target);
    in.str("customization", r.customization);
    in.str("stagedDeploymentID", r.staged_deployment_id);
    in.integer("generation", r.generation);
    in.str("updated", r.updated);
  });
}

// ---- BdStatus ----

Json encode(const BdStatus& s) {
  Json resources = Json::array();
  for (const auto& r : s.resources) {
    resources.push(Json::obj({{"apiVersion", r.api_version},
                              {"kind", r.kind},
                              {"namespace", r.ns},
                              {"name", r.name},
                              {"state", r.state},
                              {"message", r.message}}));
  }
  return Json::obj({{"cluster", s.cluster},
                    {"workspace", s.workspace},
                    {"bundle", s.bundle},
                    {"deploymentID", s.deployment_id},
                    {"generation", s.generation},
                    {"state", s.state},
                    {"reason", s.reason},
                    {"message", s.message},
                    {"resources", std::move(resources)},
                    {"stale", s.stale},
                    {"agentVersion", s.agent_version},
                    {"reported", s.reported},
                    {"eventID", s.event_id},
                    {"updated", s.updated}});
}

template <>
Result<BdStatus> decodeRecord<BdStatus>(const Json& json) {
  return detail::decodeRecordWith<BdStatus>(json, [](Reader& in, BdStatus& s) {
    in.str("cluster", s.cluster, true);
    in.str("workspace", s.workspace);
    in.str("bundle", s.bundle, true);
    in.str("deploymentID", s.deployment_id);
    in.integer("generation", s.generation);
    detail::stateField(in, "state", s.state);
    in.str("reason", s.reason);
    in.str("message", s.message);
    in.objects("resources", s.resources, [](Reader& r, ObjectResult& o) {
      r.str("apiVersion", o.api_version);
      r.str("kind", o.kind, true);
      r.str("namespace", o.ns);
      r.str("name", o.name, true);
      detail::stateField(r, "state", o.state);
      r.str("message", o.message);
    });
    in.boolean("stale", s.stale);
    in.str("agentVersion", s.agent_version);
    in.str("reported", s.reported);
    in.str("eventID", s.event_id);
    in.str("updated", s.updated);
  });
}

BdStatus bdStatusFrom(const StatusEvent& event) {
  return BdStatus{.cluster = event.cluster,
                  .workspace = event.workspace,
                  .bundle = event.bundle,
                  .deployment_id = event.deployment_id,
                  .generation = event.generation,
                  .state = event.state,
                  .reason = event.reason,
                  .message = event.message,
                  .resources = event.resources,
                  .agent_version = event.agent_version,
                  .reported = event.time,
                  .event_id = event.id};
}

// ---- BundleRecord ----

Json encode(const BundleRecord& record) {
  Json out = Json::obj({{"apiVersion", kBundlerRecordApiVersion},
                        {"kind", BundleRecord::kKind},
                        {"workspace", record.workspace},
                        {"gitrepo", record.gitrepo},
                        {"bundle", record.bundle},
                        {"path", record.path},
                        {"commit", record.commit},
                        {"commitSequence", static_cast<int64_t>(record.commit_sequence)},
                        {"manifestID", record.last_good ? record.last_good->manifest_id : std::string()}});
  if (!record.source_object.empty()) {
    out["sourceObject"] = record.source_object;
  }
  if (record.last_good) {
    out["lastGood"] = encode(*record.last_good);
  }
  if (record.error) {
    out["error"] = detail::encodeRenderError(*record.error);
  }
  return out;
}

template <>
Result<BundleRecord> decodeRecord<BundleRecord>(const Json& json) {
  return detail::decodeRecordWith<BundleRecord>(json, [](Reader& in, BundleRecord& r) {
    detail::recordEnvelope(in, kBundlerRecordApiVersion, BundleRecord::kKind);
    in.str("workspace", r.workspace, true);
    in.str("gitrepo", r.gitrepo, true);
    in.str("bundle", r.bundle, true);
    in.str("path", r.path);
    in.str("commit", r.commit);
    int64_t sequence = 0;
    in.integer("commitSequence", sequence);
    if (sequence < 0) {
      in.fail(in.pathOf("commitSequence"), "expected a non-negative integer");
    }
    r.commit_sequence = static_cast<uint64_t>(std::max<int64_t>(sequence, 0));
    in.str("sourceObject", r.source_object);
    std::string manifest_id;  // derived from lastGood; written for readers that only want the manifest
    in.str("manifestID", manifest_id);
    in.optObject("error", r.error, detail::readRenderError);
    if (const Json* last_good = in.take("lastGood"); last_good != nullptr) {
      auto event = decodePayload<BundleEvent>(*last_good);
      if (event.ok()) {
        r.last_good = std::move(event).value();
      } else {
        in.fail(in.pathOf("lastGood"), event.error().message);
      }
    }
  });
}

// ---- RenderStatus ----

Json encode(const RenderStatus& status) {
  Json out = Json::obj({{"apiVersion", kBundlerRecordApiVersion},
                        {"kind", RenderStatus::kKind},
                        {"workspace", status.workspace},
                        {"gitrepo", status.gitrepo},
                        {"bundle", status.bundle},
                        {"path", status.path},
                        {"commit", status.commit},
                        {"manifestID", status.manifest_id},
                        {"lastGoodManifestID", status.last_good_manifest_id},
                        {"time", status.time}});
  out["error"] = status.error ? detail::encodeRenderError(*status.error) : Json();
  if (!status.chart.empty()) {
    out["chart"] = status.chart;
    out["chartVersion"] = status.chart_version;
    out["chartDigest"] = status.chart_digest;
  }
  return out;
}

template <>
Result<RenderStatus> decodeRecord<RenderStatus>(const Json& json) {
  return detail::decodeRecordWith<RenderStatus>(json, [](Reader& in, RenderStatus& s) {
    detail::recordEnvelope(in, kBundlerRecordApiVersion, RenderStatus::kKind);
    in.str("workspace", s.workspace, true);
    in.str("gitrepo", s.gitrepo, true);
    in.str("bundle", s.bundle, true);
    in.str("path", s.path);
    in.str("commit", s.commit);
    in.str("manifestID", s.manifest_id);
    in.str("lastGoodManifestID", s.last_good_manifest_id);
    in.str("time", s.time);
    in.optObject("error", s.error, detail::readRenderError);
    in.str("chart", s.chart);
    in.str("chartVersion", s.chart_version);
    in.str("chartDigest", s.chart_digest);
  });
}

// ---- PollStatus ----

Json encode(const PollStatus& s) {
  return Json::obj({
      {"workspace", s.workspace},
      {"gitrepo", s.gitrepo},
      {"repo", s.repo},
      {"commit", s.commit},
      {"pollingCommit", s.polling_commit},
      {"sourceObject", s.source_object},
      {"changed", s.changed},
      {"forceSyncGeneration", s.force_sync_generation},
      {"specHash", s.spec_hash},
      {"observedGeneration", s.observed_generation},
      {"lastPollTime", s.last_poll_time},
      {"lastPublishTime", s.last_publish_time},
      {"lastError", s.last_error},
      {"lastErrorKind", s.last_error_kind},
      {"lastErrorTime", s.last_error_time},
      {"nextPollTime", s.next_poll_time},
      {"failures", s.failures},
      {"webhookCommit", s.webhook_commit},
      {"lastWebhookTime", s.last_webhook_time},
  });
}

template <>
Result<PollStatus> decodeRecord<PollStatus>(const Json& json) {
  return detail::decodeRecordWith<PollStatus>(json, [](Reader& in, PollStatus& s) {
    in.str("workspace", s.workspace, true);
    in.str("gitrepo", s.gitrepo, true);
    in.str("repo", s.repo);
    in.str("commit", s.commit);
    in.str("pollingCommit", s.polling_commit);
    in.str("sourceObject", s.source_object);
    in.boolean("changed", s.changed);
    in.integer("forceSyncGeneration", s.force_sync_generation);
    in.str("specHash", s.spec_hash);
    in.integer("observedGeneration", s.observed_generation);
    in.str("lastPollTime", s.last_poll_time);
    in.str("lastPublishTime", s.last_publish_time);
    in.str("lastError", s.last_error);
    in.str("lastErrorKind", s.last_error_kind);
    in.str("lastErrorTime", s.last_error_time);
    in.str("nextPollTime", s.next_poll_time);
    in.integer("failures", s.failures);
    in.str("webhookCommit", s.webhook_commit);
    in.str("lastWebhookTime", s.last_webhook_time);
  });
}

}  // namespace flotilla::events
