// flotilla/events/payloads.h
//
// The messages on the bus. Every payload is a JSON object with apiVersion "events.flotilla.io/v1", kind, id
// and time (RFC 3339, UTC), plus its own fields in lowerCamelCase. encode() writes every field (zeros
// included, so consumers in any language see the full shape) except unset optional ones, as canonical JSON
// (sorted keys). decode is strict: a missing required field, a wrong type or an unknown field is kInvalid
// naming the field ("DeployEvent.options: expected a map, got a string"). Adding a field therefore means a new
// apiVersion or a coordinated upgrade; see docs/events/README.md.
//
// Option and target subtrees are carried as flotilla::Json (their schema lives in libs/model; this library
// stays a leaf that depends only on core).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::events {

inline constexpr std::string_view kApiVersion = "events.flotilla.io/v1";

//! Labels and other string maps in payloads.
using StringMap = std::map<std::string, std::string, std::less<>>;

//! A fresh random id (32 hex chars). Bus events use the deterministic Nats-Msg-Id builders of subjects.h
//! (commitMsgId, ...) as their id; this is for messages outside streams (registration, heartbeats, CloudEvents).
std::string newEventId();
//! True for "2026-12-02T10:00:00Z" / "2026-12-02T10:00:00.123+02:00" (RFC 3339 date-time).
bool isRfc3339(std::string_view text);

//! poller -> bundler: a GitRepo points at a (possibly) new commit. Subject: commitSubject(workspace, gitrepo).
struct CommitEvent {
  static constexpr std::string_view kKind = "CommitEvent";
  std::string id;
  std::string time;
  std::string workspace;  //!< required
  std::string gitrepo;    //!< required
  std::string repo;       //!< the repository URL, required (never with credentials)
  std::string branch;
  std::string revision;
  std::string commit;           //!< required: the full commit SHA to render
  std::string previous_commit;  //!< last commit rendered for this GitRepo ("" the first time)
  std::vector<std::string> paths;
  int64_t force_sync_generation = 0;
  int64_t gitrepo_generation = 0;  //!< metadata.generation of the GitRepo spec this was computed from
  bool changed = true;             //!< whether anything under `paths` changed since previous_commit
  std::string source_object;       //!< the commit's files under `paths`: object name in kSourcesBucket
  //! The GitRepo was deleted: remove every bundle it made (a cascade). `commit`, `repo` and `sourceObject` are
  //! then not required; the bundler publishes a deleted BundleEvent for each of the GitRepo's bundles.
  bool deleted = false;

  bool operator==(const CommitEvent&) const = default;
};

//! Where rendering failed.
struct RenderError {
  std::string file;
  int64_t line = 0;  //!< 0 when unknown
  std::string message;

  bool operator==(const RenderError&) const = default;
};

//! One fleet.yaml targetCustomizations[] entry, rendered: which clusters it matches and what to deploy there.
struct TargetManifest {
  std::string name;
  Json target =
      Json::object();  //!< the matcher: {clusterName, clusterSelector, clusterGroup, clusterGroupSelector, doNotDeploy}
  std::string manifest_id;        //!< its rendered manifest ("" when doNotDeploy)
  Json options = Json::object();  //!< the merged BundleDeploymentOptions for these clusters

  bool operator==(const TargetManifest&) const = default;
};

//! bundler -> scheduler: a bundle was rendered from a commit (or failed to). Subject: bundleSubject(workspace, bundle).
struct BundleEvent {
  static constexpr std::string_view kKind = "BundleEvent";
  std::string id;
  std::string time;
  std::string workspace;          //!< required
  std::string gitrepo;            //!< required
  std::string bundle;             //!< required: the bundle ID
  std::string path;               //!< the bundle's directory in the repository
  std::string commit;             //!< required
  std::string manifest_id;        //!< the default (no customization) manifest; required unless `error`, `deleted` or
                                  //!< `variants_object` (then "": every cluster's manifest is in the variants)
  Json options = Json::object();  //!< BundleDeploymentOptions (model::encodeOptions) for the default target
  std::vector<TargetManifest> customizations;  //!< in fleet.yaml order; the first match wins (or all: see mode)
  std::string customization_mode;              //!< "", "FirstMatch" or "AllMatches"
  Json targets = Json::array();                //!< GitRepo targets (or fleet.yaml overrideTargets): the allow-list
  Json depends_on = Json::array();             //!< dependsOn entries [{name}|{selector}, acceptedStates]
  Json rollout_strategy;                       //!< null or the rolloutStrategy object
  bool paused = false;
  StringMap labels;  //!< bundle labels (GitRepo labels + fleet.yaml labels)
  int64_t force_sync_generation = 0;
  //! Per-cluster rendering ("" = none): the name of a BundleVariants object in the `manifests` object store that
  //! maps each targeted cluster to its manifestID and options (docs/pipeline.md "Per-cluster variants"). When set,
  //! a cluster missing from it is held (left as it is) until the bundler renders for it.
  std::string variants_object;
  bool deleted = false;              //!< the bundle is gone from the commit: remove it everywhere
  std::optional<RenderError> error;  //!< set when rendering failed; the last good deployment keeps running
  //! The FLOTILLA_COMMITS stream sequence of the commit this bundle was rendered from (0: unknown). It orders the
  //! commits of one GitRepo, so an agent can tell which of two of its bundles holds the newer claim on an object
  //! (docs/pipeline.md "Ownership handover").
  int64_t commit_sequence = 0;

  bool operator==(const BundleEvent&) const = default;
};

//! scheduler -> agent: apply (or remove) a bundle on a cluster. Subject: deploySubject(cluster).
struct DeployEvent {
  static constexpr std::string_view kKind = "DeployEvent";
  std::string id;
  std::string time;
  std::string cluster;        //!< required
  std::string workspace;      //!< required
  std::string bundle;         //!< required
  bool remove = false;        //!< JSON "delete": prune what the bundle applied (unless options.keepResources)
  std::string deployment_id;  //!< required unless removing: manifestID + ":" + sha256(options)
  std::string manifest_id;    //!< required unless removing: object name in kManifestsBucket
  Json options = Json::object();
  Json depends_on = Json::array();
  std::string commit;
  int64_t generation = 0;       //!< increases with every DeployEvent for this (cluster, bundle): older ones are stale
  std::string gitrepo;          //!< the bundle's GitRepo (ownership handover between bundles of one GitRepo)
  int64_t commit_sequence = 0;  //!< BundleEvent::commit_sequence of the release (0: unknown)
  StringMap labels;             //!< the bundle's labels, for dependsOn selectors evaluated on the cluster
  //! Bundles of the workspace on this cluster being deleted (their GitRepo's spec is gone or their deployment is
  //! `deleting`) when this event was sent: their objects are handed over to this bundle on a claim.
  std::vector<std::string> retiring;

  bool operator==(const DeployEvent&) const = default;
};

//! The outcome for one object of a bundle.
struct ObjectResult {
  std::string api_version;
  std::string kind;
  std::string ns;  //!< "namespace"
  std::string name;
  std::string state;  //!< a bundle state name ("Ready", "NotReady", "Modified", "ErrApplied", ...)
  std::string message;

  bool operator==(const ObjectResult&) const = default;
};

//! agent -> scheduler: how a bundle is doing on a cluster. Subject: statusSubject(cluster, bundle).
struct StatusEvent {
  static constexpr std::string_view kKind = "StatusEvent";
  std::string id;
  std::string time;
  std::string cluster;  //!< required
  std::string workspace;
  std::string bundle;                   //!< required
  std::string deployment_id;            //!< the deployment the agent has applied ("" if none yet)
  int64_t generation = 0;               //!< the DeployEvent generation this answers
  int64_t sequence = 0;                 //!< the agent's report counter for this (cluster, bundle), part of the Msg-Id
  std::string state;                    //!< required: one of the seven bundle states
  std::string reason;                   //!< machine-readable, set for every non-Ready state
  std::string message;                  //!< human-readable, set for every non-Ready state
  std::vector<ObjectResult> resources;  //!< non-ready or modified objects (the agent caps the list)
  std::string agent_version;

  bool operator==(const StatusEvent&) const = default;
};

//! The most API versions a RegisterRequest may carry (a large cluster serves a few thousand kinds; the request stays
//! well under NATS' 1 MiB payload limit).
inline constexpr size_t kMaxApiVersions = 10000;

//! Why `entry` cannot be an apiVersions entry ("" when it can): one to three '/'-separated non-empty parts of
//! printable characters without spaces or commas (helm splits --api-versions values at commas).
std::string apiVersionEntryProblem(std::string_view entry);

//! agent -> scheduler (request/reply on kRegisterSubject): a cluster's agent introduces itself; it sends it again
//! (re-registration) when the API versions it serves changed.
struct RegisterRequest {
  static constexpr std::string_view kKind = "RegisterRequest";
  std::string id;
  std::string time;
  std::string cluster;  //!< required
  std::string workspace;
  StringMap labels;
  std::string kubernetes_version;
  std::string agent_version;
  //! What the cluster serves, as Helm's .Capabilities.APIVersions sees it on a live cluster: every served
  //! "group/version" ("v1" for the core group) and "group/version/Kind", sorted, no duplicates (at most
  //! kMaxApiVersions). Empty: not reported (the hub renders with Helm's defaults).
  std::vector<std::string> api_versions;

  bool operator==(const RegisterRequest&) const = default;
};

//! The reply to a RegisterRequest.
struct RegisterReply {
  static constexpr std::string_view kKind = "RegisterReply";
  std::string id;
  std::string time;
  bool accepted = false;
  std::string message;
  std::string cluster_id;  //!< the name the hub knows the cluster by (the deploy/status subject token)

  bool operator==(const RegisterReply&) const = default;
};

//! agent: still alive. Not a stream message: the agent writes it as the value of KV
//! clusters/heartbeatKey(cluster).
struct Heartbeat {
  static constexpr std::string_view kKind = "Heartbeat";
  std::string id;
  std::string time;
  std::string cluster;  //!< required
  std::string agent_version;

  bool operator==(const Heartbeat&) const = default;
};

Json encode(const CommitEvent& value);
Json encode(const BundleEvent& value);
Json encode(const DeployEvent& value);
Json encode(const StatusEvent& value);
Json encode(const RegisterRequest& value);
Json encode(const RegisterReply& value);
Json encode(const Heartbeat& value);

//! Strict decoding of a payload of kind T from JSON.
template <typename T>
Result<T> decodePayload(const Json& json);
template <>
Result<CommitEvent> decodePayload<CommitEvent>(const Json& json);
template <>
Result<BundleEvent> decodePayload<BundleEvent>(const Json& json);
template <>
Result<DeployEvent> decodePayload<DeployEvent>(const Json& json);
template <>
Result<StatusEvent> decodePayload<StatusEvent>(const Json& json);
template <>
Result<RegisterRequest> decodePayload<RegisterRequest>(const Json& json);
template <>
Result<RegisterReply> decodePayload<RegisterReply>(const Json& json);
template <>
Result<Heartbeat> decodePayload<Heartbeat>(const Json& json);

//! Parses message bytes and decodes them as T.
template <typename T>
Result<T> parsePayload(std::string_view data) {
  auto json = Json::parse(data);
  if (!json.ok()) {
    return fail(json.error());
  }
  return decodePayload<T>(*json);
}

//! The kind of a payload after checking its apiVersion ("StatusEvent", ...), for consumers of mixed subjects.
Result<std::string> payloadKind(const Json& json);

}  // namespace flotilla::events
