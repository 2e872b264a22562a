// Codecs of the records the scheduler, bundler and poller keep in KV (records.h). The summaries are in
// records_summary.cpp.
#include "flotilla/events/records.h"

#include "record_codec.h"

namespace flotilla::events {

using detail::kObjectResultFields;
using detail::kRenderErrorFields;
using detail::stateField;

namespace {

// ---- field lists: each record's fields, named once for encode and decode ----

constexpr auto kDeploymentRecordFields = [](auto& v, auto& r) {
  v.str("cluster", r.cluster, true);
  v.str("workspace", r.workspace, true);
  v.str("bundle", r.bundle, true);
  v.str("gitrepo", r.gitrepo);
  v.str("commit", r.commit);
  v.str("deploymentID", r.deployment_id);
  v.str("manifestID", r.manifest_id);
  v.object("options", r.options);
  v.array("dependsOn", r.depends_on);
  v.str("target", r.target);
  v.str("customization", r.customization);
  v.str("stagedDeploymentID", r.staged_deployment_id);
  v.integer("generation", r.generation);
  v.str("updated", r.updated);
};

constexpr auto kBdStatusFields = [](auto& v, auto& s) {
  v.str("cluster", s.cluster, true);
  v.str("workspace", s.workspace);
  v.str("bundle", s.bundle, true);
  v.str("deploymentID", s.deployment_id);
  v.integer("generation", s.generation);
  stateField(v, "state", s.state);
  v.str("reason", s.reason);
  v.str("message", s.message);
  v.objects("resources", s.resources, kObjectResultFields);
  v.boolean("stale", s.stale);
  v.str("agentVersion", s.agent_version);
  v.str("reported", s.reported);
  v.str("eventID", s.event_id);
  v.str("updated", s.updated);
};

constexpr auto kBundleRecordFields = [](auto& v, auto& r) {
  detail::envelopeFields(v, kBundlerRecordApiVersion, BundleRecord::kKind);
  v.str("workspace", r.workspace, true);
  v.str("gitrepo", r.gitrepo, true);
  v.str("bundle", r.bundle, true);
  v.str("path", r.path);
  v.str("commit", r.commit);
  v.value("commitSequence", r.commit_sequence, detail::kUint64);
  v.optStr("sourceObject", r.source_object);
  // Derived from lastGood (read and dropped); written for readers that only want the manifest.
  std::string manifest_id = r.last_good ? r.last_good->manifest_id : std::string();
  v.str("manifestID", manifest_id);
  v.object("error", r.error, kRenderErrorFields);
  v.value("lastGood", r.last_good, detail::PayloadCodec<BundleEvent>{});
};

constexpr auto kRenderStatusFields = [](auto& v, auto& s) {
  detail::envelopeFields(v, kBundlerRecordApiVersion, RenderStatus::kKind);
  v.str("workspace", s.workspace, true);
  v.str("gitrepo", s.gitrepo, true);
  v.str("bundle", s.bundle, true);
  v.str("path", s.path);
  v.str("commit", s.commit);
  v.str("manifestID", s.manifest_id);
  v.str("lastGoodManifestID", s.last_good_manifest_id);
  v.str("time", s.time);
  v.object("error", s.error, kRenderErrorFields);
  if constexpr (!codec::kDecoding<decltype(v)>) {
    if (!s.error) {
      v.set("error", Json());  // written as null when the render succeeded
    }
  }
  // A chart's three fields are written together, and only for a chart.
  if (codec::kDecoding<decltype(v)> || !s.chart.empty()) {
    v.str("chart", s.chart);
    v.str("chartVersion", s.chart_version);
    v.str("chartDigest", s.chart_digest);
  }
};

constexpr auto kPollStatusFields = [](auto& v, auto& s) {
  v.str("workspace", s.workspace, true);
  v.str("gitrepo", s.gitrepo, true);
  v.str("repo", s.repo);
  v.str("commit", s.commit);
  v.str("pollingCommit", s.polling_commit);
  v.str("sourceObject", s.source_object);
  v.boolean("changed", s.changed);
  v.integer("forceSyncGeneration", s.force_sync_generation);
  v.str("specHash", s.spec_hash);
  v.integer("observedGeneration", s.observed_generation);
  v.str("lastPollTime", s.last_poll_time);
  v.str("lastPublishTime", s.last_publish_time);
  v.str("lastError", s.last_error);
  v.str("lastErrorKind", s.last_error_kind);
  v.str("lastErrorTime", s.last_error_time);
  v.str("nextPollTime", s.next_poll_time);
  v.integer("failures", s.failures);
  v.str("webhookCommit", s.webhook_commit);
  v.str("lastWebhookTime", s.last_webhook_time);
};

}  // namespace

Json encode(const DeploymentRecord& record) {
  return detail::encodeRecordWith(record, kDeploymentRecordFields);
}
Json encode(const BdStatus& status) {
  return detail::encodeRecordWith(status, kBdStatusFields);
}
Json encode(const BundleRecord& record) {
  return detail::encodeRecordWith(record, kBundleRecordFields);
}
Json encode(const RenderStatus& status) {
  return detail::encodeRecordWith(status, kRenderStatusFields);
}
Json encode(const PollStatus& status) {
  return detail::encodeRecordWith(status, kPollStatusFields);
}

template <>
Result<DeploymentRecord> decodeRecord<DeploymentRecord>(const Json& json) {
  return detail::decodeRecordWith<DeploymentRecord>(json, kDeploymentRecordFields);
}
template <>
Result<BdStatus> decodeRecord<BdStatus>(const Json& json) {
  return detail::decodeRecordWith<BdStatus>(json, kBdStatusFields);
}
template <>
Result<BundleRecord> decodeRecord<BundleRecord>(const Json& json) {
  return detail::decodeRecordWith<BundleRecord>(json, kBundleRecordFields);
}
template <>
Result<RenderStatus> decodeRecord<RenderStatus>(const Json& json) {
  return detail::decodeRecordWith<RenderStatus>(json, kRenderStatusFields);
}
template <>
Result<PollStatus> decodeRecord<PollStatus>(const Json& json) {
  return detail::decodeRecordWith<PollStatus>(json, kPollStatusFields);
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

}  // namespace flotilla::events
