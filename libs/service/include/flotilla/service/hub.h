// flotilla/service/hub.h
//
// The hub's JetStream topology (docs/pipeline.md) and a connection to it. Every service calls
// connectHub() at start-up: it connects to NATS with the service's flags, then creates or updates the streams,
// KV buckets and object stores idempotently, so the services can start in any order and a fresh NATS server
// needs no separate provisioning step.
#pragma once

#include <memory>
#include <string>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/jetstream.h"
#include "flotilla/bus/kv.h"
#include "flotilla/bus/object_store.h"
#include "flotilla/core/result.h"
#include "flotilla/events/subjects.h"
#include "flotilla/service/runtime.h"

namespace flotilla::service {

// The names come from the bus contract (libs/events); these aliases keep C-string call sites short.
// string_view::data() of a literal is null-terminated.
inline constexpr const char* kCommitsStream = events::kCommitStream.data();
inline constexpr const char* kBundlesStream = events::kBundleStream.data();
inline constexpr const char* kDeployStream = events::kDeployStream.data();
inline constexpr const char* kStatusStream = events::kStatusStream.data();
inline constexpr const char* kEventsStream = events::kEventsStream.data();

inline constexpr const char* kGitReposBucket = events::kGitReposBucket.data();
inline constexpr const char* kClustersBucket = events::kClustersBucket.data();
inline constexpr const char* kBundlesBucket = events::kBundlesBucket.data();
inline constexpr const char* kDeploymentsBucket = events::kDeploymentsBucket.data();
inline constexpr const char* kStatusBucket = events::kStatusBucket.data();
inline constexpr const char* kManifestsObjects = events::kManifestsBucket.data();
inline constexpr const char* kSourcesObjects = events::kSourcesBucket.data();

//! Handles to everything on the hub a service may use. Agents open only what their permissions allow
//! (see `HubAccess`).
struct Hub {
  std::shared_ptr<bus::Connection> connection;
  std::shared_ptr<bus::JetStream> js;
  std::shared_ptr<bus::KeyValue> gitrepos;
  std::shared_ptr<bus::KeyValue> clusters;
  std::shared_ptr<bus::KeyValue> bundles;
  std::shared_ptr<bus::KeyValue> deployments;
  std::shared_ptr<bus::KeyValue> status;
  std::shared_ptr<bus::ObjectStore> manifests;
  std::shared_ptr<bus::ObjectStore> sources;
};

enum class HubAccess {
  kProvision,  //!< hub services: create/update the topology, open everything
  kAgent,      //!< an agent: open only the manifests store and the clusters bucket, create nothing
};

//! NATS connection options from the common flags (--nats-url, --nats-creds, --nats-user, --nats-ca, ...).
bus::ConnectOptions connectOptionsFrom(const Config& config, const std::string& client_name);

//! Creates or updates every stream, KV bucket and object store of the topology.
Status ensureTopology(bus::JetStream& js);

//! Connects and opens the topology. Retries the initial connection with backoff until `deadline` so a service
//! started before NATS waits for it (each failed attempt is logged and counted).
Result<Hub> connectHub(const bus::ConnectOptions& options, HubAccess access, Metrics* metrics,
                       std::chrono::milliseconds deadline = std::chrono::minutes(5));

}  // namespace flotilla::service
