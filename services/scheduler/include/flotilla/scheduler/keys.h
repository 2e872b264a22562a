// flotilla/scheduler/keys.h
//
// The KV keys and Nats-Msg-Ids of docs/pipeline.md that the scheduler and the CLI read and write, named after
// the records they hold. They delegate to libs/events (the one place that builds keys), so every name goes
// through events::escapeToken and a key always has the documented number of tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::scheduler {

//! clusters: "cluster.<cluster>" (written by the scheduler on registration).
std::string clusterRecordKey(std::string_view cluster);
//! clusters: "group.<ws>.<group>" (written by `flotilla apply`).
std::string clusterGroupRecordKey(std::string_view workspace, std::string_view group);
//! clusters: "heartbeat.<cluster>" (an agent's own key, when it writes one).
std::string heartbeatRecordKey(std::string_view cluster);
//! gitrepos: "<ws>.<gitrepo>" (written by `flotilla apply`).
std::string gitRepoRecordKey(std::string_view workspace, std::string_view gitrepo);
//! bundles: "<ws>.<bundle>" (written by the bundler).
std::string bundleRecordKey(std::string_view workspace, std::string_view bundle);
//! deployments: "<cluster>.<ws>.<bundle>" (the BundleDeployment record, written by the scheduler).
std::string deploymentRecordKey(std::string_view cluster, std::string_view workspace, std::string_view bundle);
//! status: "gitrepo.<ws>.<gitrepo>" (the poller's record).
std::string pollStatusKey(std::string_view workspace, std::string_view gitrepo);
//! status: "bundle-render.<ws>.<bundle>" (the bundler's record).
std::string renderStatusKey(std::string_view workspace, std::string_view bundle);
//! status: "bd.<cluster>.<ws>.<bundle>" (the applied state, from the agent's StatusEvents).
std::string bdStatusKey(std::string_view cluster, std::string_view workspace, std::string_view bundle);
//! status: "summary.bundle.<ws>.<bundle>".
std::string bundleSummaryKey(std::string_view workspace, std::string_view bundle);
//! status: "summary.gitrepo.<ws>.<gitrepo>".
std::string gitRepoSummaryKey(std::string_view workspace, std::string_view gitrepo);
//! status: "summary.cluster.<cluster>".
std::string clusterSummaryKey(std::string_view cluster);

//! Splits a key into its unescaped tokens after checking that it starts with the literal `prefix` tokens
//! ("summary.bundle") and has exactly `count` name tokens after them. kInvalid otherwise.
Result<std::vector<std::string>> keyNames(std::string_view key, std::string_view prefix, size_t count);

//! Nats-Msg-Id of a DeployEvent: "deploy/<cluster>/<bundle>/<deploymentID or "deleted">/<generation>"
//! (names escaped). A retry after a crash recomputes the same id, so JetStream drops the duplicate.
std::string deployMsgId(std::string_view cluster, std::string_view bundle, std::string_view deployment_id,
                        int64_t generation);

}  // namespace flotilla::scheduler
