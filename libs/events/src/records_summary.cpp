// Codecs of the summaries the scheduler stores in KV `status` (records.h BundleSummary, GitRepoSummary,
// ClusterSummary).
#include "flotilla/events/records.h"
#include "record_codec.h"

namespace flotilla::events {
namespace {

using detail::Reader;

Json encodeRenderErrorSummary(const RenderErrorSummary& e) {
  return Json::obj({{"bundle", e.bundle},
                    {"file", e.file},
                    {"line", e.line},
                    {"message", e.message},
                    {"commit", e.commit},
                    {"time", e.time}});
}

void readRenderErrorSummary(Reader& in, RenderErrorSummary& e) {
  in.str("bundle", e.bundle);
  in.str("file", e.file);
  in.integer("line", e.line);
  in.str("message", e.message, true);
  in.str("commit", e.commit);
  in.str("time", e.time);
}

//! The fields every summary has: Fleet's BundleSummary, the worst state and a one-line message.
void readRollup(Reader& in, Json& summary, std::string& state, std::string& message) {
  in.object("summary", summary);
  detail::stateField(in, "state", state);
  in.str("message", message);
}

}  // namespace

// ---- BundleSummary ----

Json encode(const BundleSummary& s) {
  Json out = Json::obj({{"workspace", s.workspace},
                        {"bundle", s.bundle},
                        {"summary", s.summary},
                        {"state", s.state},
                        {"message", s.message},
                        {"readyClusters", s.ready_clusters},
                        {"gitrepo", s.gitrepo},
                        {"commit", s.commit},
                        {"manifestID", s.manifest_id},
                        {"paused", s.paused},
                        {"error", s.error},
                        {"updated", s.updated}});
  if (s.render_error) {
    out["renderError"] = encodeRenderErrorSummary(*s.render_error);
  }
  return out;
}

template <>
Result<BundleSummary> decodeRecord<BundleSummary>(const Json& json) {
  return detail::decodeRecordWith<BundleSummary>(json, [](Reader& in, BundleSummary& s) {
    in.str("workspace", s.workspace, true);
    in.str("bundle", s.bundle, true);
    readRollup(in, s.summary, s.state, s.message);
    in.str("readyClusters", s.ready_clusters);
    in.str("gitrepo", s.gitrepo);
    in.str("commit", s.commit);
    in.str("manifestID", s.manifest_id);
    in.boolean("paused", s.paused);
    in.boolean("error", s.error);
    in.optObject("renderError", s.render_error, readRenderErrorSummary);
    in.str("updated", s.updated);
  });
}

// ---- GitRepoSummary ----

Json encode(const GitRepoSummary& s) {
  Json bundles = Json::array();
  for (const auto& b : s.bundles) {
    Json entry =
        Json::obj({{"bundle", b.bundle}, {"state", b.state}, {"ready", b.ready}, {"desiredReady", b.desired_ready}});
    if (b.render_error) {
      entry["renderError"] = encodeRenderErrorSummary(*b.render_error);
    }
    bundles.push(std::move(entry));
  }
  Json render_errors = Json::array();
  for (const auto& e : s.render_errors) {
    render_errors.push(encodeRenderErrorSummary(e));
  }
  return Json::obj({{"workspace", s.workspace},
                    {"gitrepo", s.gitrepo},
                    {"summary", s.summary},
                    {"state", s.state},
                    {"message", s.message},
                    {"readyBundleDeployments", s.ready_bundle_deployments},
                    {"readyClusters", s.ready_clusters},
                    {"desiredReadyClusters", s.desired_ready_clusters},
                    {"bundles", std::move(bundles)},
                    {"renderErrors", std::move(render_errors)},
                    {"error", s.error},
                    {"updated", s.updated}});
}

template <>
Result<GitRepoSummary> decodeRecord<GitRepoSummary>(const Json& json) {
  return detail::decodeRecordWith<GitRepoSummary>(json, [](Reader& in, GitRepoSummary& s) {
    in.str("workspace", s.workspace, true);
    in.str("gitrepo", s.gitrepo, true);
    readRollup(in, s.summary, s.state, s.message);
    in.str("readyBundleDeployments", s.ready_bundle_deployments);
    in.integer("readyClusters", s.ready_clusters);
    in.integer("desiredReadyClusters", s.desired_ready_clusters);
    in.objects("bundles", s.bundles, [](Reader& b, GitRepoSummaryBundle& bundle) {
      b.str("bundle", bundle.bundle, true);
      detail::stateField(b, "state", bundle.state);
      b.integer("ready", bundle.ready);
      b.integer("desiredReady", bundle.desired_ready);
      b.optObject("renderError", bundle.render_error, readRenderErrorSummary);
    });
    in.objects("renderErrors", s.render_errors, readRenderErrorSummary);
    in.boolean("error", s.error);
    in.str("updated", s.updated);
  });
}

// ---- ClusterSummary ----

Json encode(const ClusterSummary& s) {
  return Json::obj({{"cluster", s.cluster},
                    {"summary", s.summary},
                    {"state", s.state},
                    {"message", s.message},
                    {"readyBundles", s.ready_bundles},
                    {"readyGitRepos", s.ready_git_repos},
                    {"desiredReadyGitRepos", s.desired_ready_git_repos},
                    {"lastHeartbeat", s.last_heartbeat},
                    {"registered", s.registered},
                    {"workspace", s.workspace},
                    {"agentVersion", s.agent_version},
                    {"kubernetesVersion", s.kubernetes_version},
                    {"lastSeen", s.last_seen},
                    {"updated", s.updated}});
}

template <>
Result<ClusterSummary> decodeRecord<ClusterSummary>(const Json& json) {
  return detail::decodeRecordWith<ClusterSummary>(json, [](Reader& in, ClusterSummary& s) {
    in.str("cluster", s.cluster, true);
    readRollup(in, s.summary, s.state, s.message);
    in.str("readyBundles", s.ready_bundles);
    in.integer("readyGitRepos", s.ready_git_repos);
    in.integer("desiredReadyGitRepos", s.desired_ready_git_repos);
    in.str("lastHeartbeat", s.last_heartbeat);
    in.boolean("registered", s.registered);
    in.str("workspace", s.workspace);
    in.str("agentVersion", s.agent_version);
    in.str("kubernetesVersion", s.kubernetes_version);
    in.str("lastSeen", s.last_seen);
    in.str("updated", s.updated);
  });
}

}  // namespace flotilla::events
