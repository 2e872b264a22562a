// Codecs of the records the scheduler, bundler and poller keep in KV (records.h), and of the summaries the
// scheduler stores in KV `status`.
#include "flotilla/events/records.h"

#include "record_codec.h"

namespace flotilla::events {

using detail::kRenderErrorFields;

// ---- field lists: each record's fields, named once for encode and decode (record_codec.h kRecordFields) ----

void recordFields(auto& v, detail::FieldsOf<DeploymentRecord> auto& r) {
  detail::deploymentKeyFields(v, r);
  v.str("gitrepo", r.gitrepo);
  v.str("commit", r.commit);
  v.str("deploymentID", r.deployment_id);
  v.str("manifestID", r.manifest_id);
  v.object("options", r.options);
  v.array("dependsOn", r.depends_on);
  v.str("target", r.target);
  v.str("customization", r.customization);
  v.str("stagedDeploymentID", r.staged_deployment_id);
  v.str("stagedReason", r.staged_reason);
  v.validate([&](detail::Reader& in) {
    if (!r.staged_reason.empty() && r.staged_reason != kStagedByPause && r.staged_reason != kStagedByRollout) {
      in.fail(in.pathOf("stagedReason"), "expected \"Paused\" or \"Rollout\", got \"" + r.staged_reason + "\"");
    }
  });
  v.integer("generation", r.generation);
  v.str("updated", r.updated);
  v.integer("commitSequence", r.commit_sequence);
  v.stringMap("labels", r.labels);
  v.boolean("deleting", r.deleting);
}

void recordFields(auto& v, detail::FieldsOf<BdStatus> auto& s) {
  detail::deploymentStatusFields(v, s, /*state_required=*/false);
  v.boolean("stale", s.stale);
  v.str("reported", s.reported);
  v.str("eventID", s.event_id);
  v.str("updated", s.updated);
}

void recordFields(auto& v, detail::FieldsOf<BundleRecord> auto& r) {
  detail::envelopeFields(v, kBundlerRecordApiVersion, BundleRecord::kKind);
  detail::bundleSourceFields(v, r);
  v.value("commitSequence", r.commit_sequence, detail::kUint64);
  v.optStr("sourceObject", r.source_object);
  v.optStr("releaseName", r.release_name);
  v.optStr("renderKey", r.render_key);  // absent in records written before the render cache
  // Derived from lastGood (read and dropped); written for readers that only want the manifest.
  std::string manifest_id = r.last_good ? r.last_good->manifest_id : std::string();
  v.str("manifestID", manifest_id);
  v.object("error", r.error, kRenderErrorFields);
  v.value("lastGood", r.last_good, detail::PayloadCodec<BundleEvent>{});
}

void recordFields(auto& v, detail::FieldsOf<RenderStatus> auto& s) {
  detail::envelopeFields(v, kBundlerRecordApiVersion, RenderStatus::kKind);
  detail::bundleSourceFields(v, s);
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
  v.strings("notes", s.notes);
}

void recordFields(auto& v, detail::FieldsOf<BundleClaim> auto& c) {
  detail::envelopeFields(v, kBundlerRecordApiVersion, BundleClaim::kKind);
  detail::bundleSourceFields(v, c);
  v.str("owner", c.owner);
  v.value("commitSequence", c.commit_sequence, detail::kUint64);
  v.str("sourceObject", c.source_object);
  v.integer("forceSyncGeneration", c.force_sync_generation);
  v.str("time", c.time);
}

void recordFields(auto& v, detail::FieldsOf<PollStatus> auto& s) {
  detail::gitRepoKeyFields(v, s);
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
}

// ---- summaries ----

namespace {

//! A bundle's render error (record_codec.h kRenderErrorFields), and which bundle, commit and time it was.
constexpr auto kRenderErrorSummaryFields = [](auto& v, auto& e) {
  v.str("bundle", e.bundle);
  kRenderErrorFields(v, e);
  v.str("commit", e.commit);
  v.str("time", e.time);
};

//! A bundle's rolled-up state: one of the seven bundle states, or NoTargets while it has no deployment.
template <typename V, typename S>
void bundleStateField(V& v, std::string_view key, S& state) {
  v.str(key, state);
  v.validate([&state, key](detail::Reader& in) {
    if (state != kNoTargetsState) {
      detail::checkState(in, key, state);
    }
  });
}

//! The fields every summary has: Fleet's BundleSummary, the worst state and a one-line message.
template <typename V, typename S>
void rollupFields(V& v, S& s) {
  v.object("summary", s.summary);
  bundleStateField(v, "state", s.state);
  v.str("message", s.message);
}

//! `state` must be one of `allowed`.
template <size_t N>
void oneOf(detail::Reader& in, std::string_view key, const std::string& state, const std::string_view (&allowed)[N]) {
  for (std::string_view one : allowed) {
    if (state == one) {
      return;
    }
  }
  std::string names;
  for (std::string_view one : allowed) {
    names += (names.empty() ? "" : ", ") + std::string(one);
  }
  in.fail(in.pathOf(key), "unknown state \"" + state + "\" (one of " + names + ")");
}

constexpr auto kRolloutPartitionFields = [](auto& v, auto& p) {
  v.str("name", p.name, true);
  v.integer("count", p.count);
  v.integer("maxUnavailable", p.max_unavailable);
  v.integer("unavailable", p.unavailable);
  v.str("state", p.state, true);
  v.validate([&](detail::Reader& in) { oneOf(in, "state", p.state, kRolloutPartitionStates); });
};

constexpr auto kRolloutClusterFields = [](auto& v, auto& c) {
  v.str("cluster", c.cluster, true);
  v.str("state", c.state);
  v.str("message", c.message);
};

constexpr auto kRolloutStatusFields = [](auto& v, auto& r) {
  v.str("state", r.state, true);
  v.validate([&](detail::Reader& in) { oneOf(in, "state", r.state, kRolloutStates); });
  v.str("partition", r.partition);
  v.integer("unavailable", r.unavailable);
  v.integer("maxUnavailable", r.max_unavailable);
  v.integer("unavailablePartitions", r.unavailable_partitions);
  v.integer("maxUnavailablePartitions", r.max_unavailable_partitions);
  v.integer("maxNew", r.max_new);
  v.integer("held", r.held);
  v.objects("partitions", r.partitions, kRolloutPartitionFields);
  v.objects("haltedBy", r.halted_by, kRolloutClusterFields);
  v.strings("outsidePartitions", r.outside_partitions);
  v.integer("outsidePartitionsCount", r.outside_partitions_count);
};

constexpr auto kGitRepoSummaryBundleFields = [](auto& v, auto& b) {
  v.str("bundle", b.bundle, true);
  bundleStateField(v, "state", b.state);
  v.integer("ready", b.ready);
  v.integer("desiredReady", b.desired_ready);
  v.object("renderError", b.render_error, kRenderErrorSummaryFields);
};

}  // namespace

// ---- field lists of the summaries (record_codec.h kRecordFields) ----

void recordFields(auto& v, detail::FieldsOf<BundleSummary> auto& s) {
  v.str("workspace", s.workspace, true);
  v.str("bundle", s.bundle, true);
  rollupFields(v, s);
  v.str("readyClusters", s.ready_clusters);
  v.str("gitrepo", s.gitrepo);
  v.str("commit", s.commit);
  v.str("manifestID", s.manifest_id);
  v.boolean("paused", s.paused);
  v.boolean("error", s.error);
  v.object("renderError", s.render_error, kRenderErrorSummaryFields);
  v.object("rollout", s.rollout, kRolloutStatusFields);
  v.str("updated", s.updated);
}

void recordFields(auto& v, detail::FieldsOf<GitRepoSummary> auto& s) {
  detail::gitRepoKeyFields(v, s);
  v.object("summary", s.summary);
  // A GitRepo whose bundles are all deleted while deployments are left is "Deleting"; one whose bundles have no
  // deployment at all "NoTargets".
  v.str("state", s.state);
  v.validate([&](detail::Reader& in) {
    if (s.state != kDeletingState && s.state != kNoTargetsState) {
      detail::checkState(in, "state", s.state);
    }
  });
  v.str("message", s.message);
  v.str("readyBundleDeployments", s.ready_bundle_deployments);
  v.integer("readyClusters", s.ready_clusters);
  v.integer("desiredReadyClusters", s.desired_ready_clusters);
  v.objects("bundles", s.bundles, kGitRepoSummaryBundleFields);
  v.objects("renderErrors", s.render_errors, kRenderErrorSummaryFields);
  v.boolean("error", s.error);
  v.str("updated", s.updated);
}

void recordFields(auto& v, detail::FieldsOf<ClusterSummary> auto& s) {
  v.str("cluster", s.cluster, true);
  v.object("summary", s.summary);
  v.str("state", s.state);
  v.str("message", s.message);
  v.str("readyBundles", s.ready_bundles);
  v.integer("readyGitRepos", s.ready_git_repos);
  v.integer("desiredReadyGitRepos", s.desired_ready_git_repos);
  v.str("lastHeartbeat", s.last_heartbeat);
  v.boolean("registered", s.registered);
  v.boolean("offline", s.offline);
  v.str("workspace", s.workspace);
  v.str("agentVersion", s.agent_version);
  v.str("kubernetesVersion", s.kubernetes_version);
  v.str("lastSeen", s.last_seen);
  v.str("updated", s.updated);
  // A cluster whose agent is silent is "Offline", and only then (checked once every field is read).
  v.validate([&](detail::Reader& in) {
    if (s.state == kOfflineState && !s.offline) {
      in.fail(in.pathOf("state"), "state Offline without offline: true");
    } else if (s.state != kOfflineState) {
      detail::checkState(in, "state", s.state);
    }
  });
}

void recordFields(auto& v, detail::FieldsOf<ClusterDeregistration> auto& d) {
  v.str("cluster", d.cluster, true);
  v.str("time", d.time);
  v.boolean("keepResources", d.keep_resources);
  v.strings("credentialKeys", d.credential_keys);
}

// ---- the codecs (records.h encode, decodeRecord) ----

template struct detail::RecordCodec<DeploymentRecord>;
template struct detail::RecordCodec<BdStatus>;
template struct detail::RecordCodec<BundleRecord>;
template struct detail::RecordCodec<RenderStatus>;
template struct detail::RecordCodec<BundleClaim>;
template struct detail::RecordCodec<PollStatus>;
template struct detail::RecordCodec<BundleSummary>;
template struct detail::RecordCodec<GitRepoSummary>;
template struct detail::RecordCodec<ClusterSummary>;
template struct detail::RecordCodec<ClusterDeregistration>;

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
