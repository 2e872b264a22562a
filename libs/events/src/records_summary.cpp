// Codecs of the summaries the scheduler stores in KV `status` (records.h BundleSummary, GitRepoSummary,
// ClusterSummary).
#include "flotilla/events/records.h"
#include "record_codec.h"

namespace flotilla::events {
namespace {

using detail::stateField;

constexpr auto kRenderErrorSummaryFields = [](auto& v, auto& e) {
  v.str("bundle", e.bundle);
  v.str("file", e.file);
  v.integer("line", e.line);
  v.str("message", e.message, true);
  v.str("commit", e.commit);
  v.str("time", e.time);
};

//! The fields every summary has: Fleet's BundleSummary, the worst state and a one-line message.
template <typename V, typename S>
void rollupFields(V& v, S& s) {
  v.object("summary", s.summary);
  stateField(v, "state", s.state);
  v.str("message", s.message);
}

constexpr auto kBundleSummaryFields = [](auto& v, auto& s) {
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
  v.str("updated", s.updated);
};

constexpr auto kGitRepoSummaryBundleFields = [](auto& v, auto& b) {
  v.str("bundle", b.bundle, true);
  stateField(v, "state", b.state);
  v.integer("ready", b.ready);
  v.integer("desiredReady", b.desired_ready);
  v.object("renderError", b.render_error, kRenderErrorSummaryFields);
};

constexpr auto kGitRepoSummaryFields = [](auto& v, auto& s) {
  v.str("workspace", s.workspace, true);
  v.str("gitrepo", s.gitrepo, true);
  rollupFields(v, s);
  v.str("readyBundleDeployments", s.ready_bundle_deployments);
  v.integer("readyClusters", s.ready_clusters);
  v.integer("desiredReadyClusters", s.desired_ready_clusters);
  v.objects("bundles", s.bundles, kGitRepoSummaryBundleFields);
  v.objects("renderErrors", s.render_errors, kRenderErrorSummaryFields);
  v.boolean("error", s.error);
  v.str("updated", s.updated);
};

constexpr auto kClusterSummaryFields = [](auto& v, auto& s) {
  v.str("cluster", s.cluster, true);
  rollupFields(v, s);
  v.str("readyBundles", s.ready_bundles);
  v.integer("readyGitRepos", s.ready_git_repos);
  v.integer("desiredReadyGitRepos", s.desired_ready_git_repos);
  v.str("lastHeartbeat", s.last_heartbeat);
  v.boolean("registered", s.registered);
  v.str("workspace", s.workspace);
  v.str("agentVersion", s.agent_version);
  v.str("kubernetesVersion", s.kubernetes_version);
  v.str("lastSeen", s.last_seen);
  v.str("updated", s.updated);
};

}  // namespace

Json encode(const BundleSummary& summary) {
  return detail::encodeRecordWith(summary, kBundleSummaryFields);
}
Json encode(const GitRepoSummary& summary) {
  return detail::encodeRecordWith(summary, kGitRepoSummaryFields);
}
Json encode(const ClusterSummary& summary) {
  return detail::encodeRecordWith(summary, kClusterSummaryFields);
}

template <>
Result<BundleSummary> decodeRecord<BundleSummary>(const Json& json) {
  return detail::decodeRecordWith<BundleSummary>(json, kBundleSummaryFields);
}
template <>
Result<GitRepoSummary> decodeRecord<GitRepoSummary>(const Json& json) {
  return detail::decodeRecordWith<GitRepoSummary>(json, kGitRepoSummaryFields);
}
template <>
Result<ClusterSummary> decodeRecord<ClusterSummary>(const Json& json) {
  return detail::decodeRecordWith<ClusterSummary>(json, kClusterSummaryFields);
}

}  // namespace flotilla::events
