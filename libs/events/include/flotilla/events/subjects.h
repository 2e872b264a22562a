// flotilla/events/subjects.h
//
// The names on the bus (DESIGN.md "Bus contract"): subjects, JetStream stream names and filters, KV bucket
// names and keys, and the object store bucket for manifests. Every name that comes from a user (workspace,
// GitRepo, bundle, cluster) goes through escapeToken, so it is always exactly one token: it can never add a
// level ('.'), act as a wildcard ('*', '>') or break the subject (whitespace).
//
// Escaping: bytes in [A-Za-z0-9_-] stay as they are; every other byte becomes '=' followed by two upper-case
// hex digits ("prod.eu" -> "prod=2Eeu", "a=b" -> "a=3Db"); the empty string becomes "=". '=' is legal both
// in NATS subject tokens and in KV keys (which allow only [-/_=.a-zA-Z0-9]), so one scheme serves both, and
// Kubernetes names ([a-z0-9.-]) stay readable. The mapping is reversible and injective.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::events {

//! Escapes one name into a single subject/KV token (see the file comment).
std::string escapeToken(std::string_view name);
//! Reverses escapeToken; a malformed escape or a character escapeToken never emits is kInvalid.
Result<std::string> unescapeToken(std::string_view token);

inline constexpr std::string_view kSubjectRoot = "flotilla";
//! Request/reply subject for agent registration (RegisterRequest -> RegisterReply).
inline constexpr std::string_view kRegisterSubject = "flotilla.register";

//! flotilla.commit.<workspace>.<gitrepo>
std::string commitSubject(std::string_view workspace, std::string_view gitrepo);
//! flotilla.bundle.<workspace>.<bundle>
std::string bundleSubject(std::string_view workspace, std::string_view bundle);
//! flotilla.deploy.<cluster>
std::string deploySubject(std::string_view cluster);
//! flotilla.status.<cluster>.<bundle>
std::string statusSubject(std::string_view cluster, std::string_view bundle);
//! flotilla.events.<kind>.<part>... — public events; `kind` is the object kind in lower case ("gitrepo",
//! "bundle", "bundledeployment", "cluster") and the parts identify the object (each escaped).
std::string eventsSubject(std::string_view kind, std::initializer_list<std::string_view> parts);

//! Filters for consumers: everything of a kind, or one workspace's / one cluster's share.
inline constexpr std::string_view kCommitFilter = "flotilla.commit.>";
inline constexpr std::string_view kBundleFilter = "flotilla.bundle.>";
inline constexpr std::string_view kDeployFilter = "flotilla.deploy.>";
inline constexpr std::string_view kStatusFilter = "flotilla.status.>";
inline constexpr std::string_view kEventsFilter = "flotilla.events.>";
//! flotilla.commit.<workspace>.>
std::string commitFilter(std::string_view workspace);
//! flotilla.status.<cluster>.> — also the only subjects an agent's NATS user may publish status on.
std::string statusFilter(std::string_view cluster);
//! flotilla.events.<kind>.>
std::string eventsFilter(std::string_view kind);

//! The unescaped tokens after `prefix` ("flotilla.status") in `subject`: statusSubject("c", "b") -> {"c", "b"}.
//! kInvalid when the subject does not start with prefix + "." or a token is malformed.
Result<std::vector<std::string>> subjectTokens(std::string_view subject, std::string_view prefix);

//! JetStream streams, one per stage boundary, each capturing the matching filter above (docs/pipeline.md).
inline constexpr std::string_view kCommitStream = "FLOTILLA_COMMITS";
inline constexpr std::string_view kBundleStream = "FLOTILLA_BUNDLES";
inline constexpr std::string_view kDeployStream = "FLOTILLA_DEPLOY";
inline constexpr std::string_view kStatusStream = "FLOTILLA_STATUS";
inline constexpr std::string_view kEventsStream = "FLOTILLA_EVENTS";

//! KV buckets (state) and object store buckets (source archives, rendered manifests).
inline constexpr std::string_view kGitReposBucket = "gitrepos";
inline constexpr std::string_view kClustersBucket = "clusters";
inline constexpr std::string_view kBundlesBucket = "bundles";
inline constexpr std::string_view kDeploymentsBucket = "deployments";
inline constexpr std::string_view kStatusBucket = "status";
inline constexpr std::string_view kSourcesBucket = "sources";
inline constexpr std::string_view kManifestsBucket = "manifests";

// Keys, by bucket, as docs/pipeline.md assigns them (each key has exactly one writer).

//! gitrepos: <ws>.<gitrepo> (GitRepo spec; written by the CLI)
std::string gitRepoKey(std::string_view workspace, std::string_view gitrepo);
//! clusters: cluster.<cluster> (registration; written by the scheduler)
std::string clusterKey(std::string_view cluster);
//! clusters: hub.mode ({"mode":"kubernetes","since":...}; written by the gateway at start: the CRs on the hub
//! cluster are then the one source of the specs, and `flotilla apply`/`delete` refuse to write them to KV)
inline constexpr std::string_view kHubModeKey = "hub.mode";
//! clusters: group.<ws>.<group> (ClusterGroup spec; written by the CLI)
std::string clusterGroupKey(std::string_view workspace, std::string_view group);
//! clusters: heartbeat.<cluster> (a Heartbeat payload; written by that cluster's agent only)
std::string heartbeatKey(std::string_view cluster);
//! clusters: spec.<cluster> (the Cluster document a hub admin applied; written by `flotilla apply`)
std::string clusterSpecKey(std::string_view cluster);
//! clusters: deregistered.<cluster> (a ClusterDeregistration tombstone; created by `flotilla delete cluster`,
//! removed by `flotilla apply` of that Cluster; the scheduler adds its credentialKeys as the deregistration finishes)
std::string clusterDeregisteredKey(std::string_view cluster);
//! clusters: enrollment.<cluster> (the registrar's EnrollmentRecord, services/scheduler enrollment.h; written by the
//! scheduler, read by `flotilla auth revoke` as a sign that the deregistration has not finished)
std::string clusterEnrollmentKey(std::string_view cluster);
//! bundles: <ws>.<bundle> (written by the bundler)
std::string bundleKey(std::string_view workspace, std::string_view bundle);
//! deployments: <cluster>.<ws>.<bundle> (BundleDeployment; written by the scheduler)
std::string deploymentKey(std::string_view cluster, std::string_view workspace, std::string_view bundle);
//! status: gitrepo.<ws>.<gitrepo> (poll status; written by the poller)
std::string gitRepoStatusKey(std::string_view workspace, std::string_view gitrepo);
//! status: bundle-render.<ws>.<bundle> (render status; written by the bundler)
std::string bundleRenderStatusKey(std::string_view workspace, std::string_view bundle);
//! status: bundle-claim.<ws>.<bundle>.<gitrepo> (a bundle name another GitRepo holds; written by the bundler)
std::string bundleClaimKey(std::string_view workspace, std::string_view bundle, std::string_view gitrepo);
//! status: bd.<cluster>.<ws>.<bundle> (applied state from agent StatusEvents; written by the scheduler)
std::string bundleDeploymentStatusKey(std::string_view cluster, std::string_view workspace, std::string_view bundle);
//! status: summary.gitrepo.<ws>.<gitrepo> (roll-up; written by the scheduler)
std::string gitRepoSummaryKey(std::string_view workspace, std::string_view gitrepo);
//! status: summary.bundle.<ws>.<bundle>
std::string bundleSummaryKey(std::string_view workspace, std::string_view bundle);
//! status: summary.cluster.<cluster>
std::string clusterSummaryKey(std::string_view cluster);
//! A KV watch filter for every key under the given leading tokens, each escaped (fixed prefixes such as "group"
//! or "summary" are unchanged by escaping): keyFilter({"group", ws}) -> "group.<ws>.>".
std::string keyFilter(std::initializer_list<std::string_view> leading_tokens);

//! The unescaped names of a KV key after checking that it starts with the literal `prefix` tokens
//! ("summary.bundle", "" for none) and has exactly `count` name tokens after them:
//! keyNames("group.ws.eu", "group", 2) -> {"ws", "eu"}. kInvalid otherwise.
Result<std::vector<std::string>> keyNames(std::string_view key, std::string_view prefix, size_t count);

//! Object names: a source archive is stored under the sha256 of its bytes, a manifest under its manifestID.
std::string sourceObjectName(std::string_view sha256_hex);
std::string manifestObjectName(std::string_view manifest_id);

//! Nats-Msg-Id values (docs/pipeline.md): a retry or a second producer of the same fact yields the same id, so
//! JetStream drops the duplicate. Use them as the payload `id` too.
//! commit/<ws>/<gitrepo>/<commit>/<forceSyncGeneration>
std::string commitMsgId(std::string_view workspace, std::string_view gitrepo, std::string_view commit,
                        int64_t force_sync_generation);
//! commit/<ws>/<gitrepo>/deleted/<revision>: the CommitEvent{deleted} of a GitRepo whose spec was deleted at KV
//! revision `delete_revision` of `gitrepos` (0 when the delete marker is gone), so a republish after a crash is a
//! duplicate while a later delete of a re-created GitRepo is not.
std::string commitDeletedMsgId(std::string_view workspace, std::string_view gitrepo, uint64_t delete_revision);
//! bundle/<ws>/<bundle>/<commit>/<outcome>, outcome = the manifestID, "error" or "deleted"
std::string bundleMsgId(std::string_view workspace, std::string_view bundle, std::string_view commit,
                        std::string_view outcome);
//! deploy/<cluster>/<bundle>/<deploymentID or "deleted">/<generation>
std::string deployMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_or_deleted,
                        int64_t generation);
//! status/<cluster>/<bundle>/<deploymentID>/<state>/<sequence>
std::string statusMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_id,
                        std::string_view state, int64_t sequence);

}  // namespace flotilla::events
