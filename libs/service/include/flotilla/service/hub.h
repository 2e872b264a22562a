// flotilla/service/hub.h
//
// The hub's JetStream topology (docs/pipeline.md) and a connection to it. Every service calls
// connectHub() at start-up: it connects to NATS with the service's flags, then creates or updates the streams,
// KV buckets and object stores idempotently, so the services can start in any order and a fresh NATS server
// needs no separate provisioning step.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

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
  kAgent,      //!< an agent: connection and JetStream only, no bucket opened, nothing created
};

//! Size caps of every stream, KV bucket and object store the hub creates (docs/pipeline.md "Size caps"), by store
//! name: the stream name for streams (FLOTILLA_COMMITS, ...), the bucket name for KV buckets (gitrepos, ...) and
//! object stores (sources, manifests). A store at its cap refuses new writes (kStoreFull), except FLOTILLA_EVENTS,
//! which drops its oldest events.
struct StoreLimits {
  std::map<std::string, int64_t> max_bytes;
  //! --store-replicas: copies of every stream, KV bucket and object store on a JetStream cluster (1, 3 or 5; 1 on
  //! a single server). Existing stores are brought to it.
  int replicas = 1;

  //! Each store's share of `budget` (kStoreShares); the defaults use kDefaultStoreBudget.
  static StoreLimits fromBudget(int64_t budget);
  //! The cap of `store` (-1 = none, for a store the table does not name).
  [[nodiscard]] int64_t of(std::string_view store) const;
};

//! Default of --store-max-bytes: the whole budget of the hub's stores. nats-server reserves every cap when it
//! creates the store and refuses caps beyond its max_file_store (by default 75 % of the free disk), so the budget
//! must stay below that (the chart sets 6 GiB for its 10 GiB volume).
inline constexpr int64_t kDefaultStoreBudget = int64_t{4} << 30;
//! The smallest cap a store may get (a few of its messages must fit).
inline constexpr int64_t kMinStoreBytes = int64_t{64} << 10;
//! Each store's share of the budget, in thousandths (they sum to 1000).
inline constexpr std::pair<const char*, int> kStoreShares[] = {
    {kSourcesObjects, 300}, {kManifestsObjects, 300}, {kCommitsStream, 40},     {kBundlesStream, 40},
    {kDeployStream, 100},   {kStatusStream, 60},      {kEventsStream, 60},      {kGitReposBucket, 10},
    {kClustersBucket, 10},  {kBundlesBucket, 20},     {kDeploymentsBucket, 30}, {kStatusBucket, 30},
};

//! The flags of the size caps, for the services that create the topology (poller, bundler, scheduler).
std::map<std::string, std::string> storeFlags();
//! --store-max-bytes (the budget split by kStoreShares) and --store-limits (store=bytes,... overrides); a bad
//! value or an unknown store is kInvalid naming the flag.
Result<StoreLimits> storeLimitsFrom(const Config& config);
//! A byte size in the one grammar of every size flag (--store-max-bytes, --store-limits, the bundler's
//! --max-file-bytes and --max-manifest-bytes): 1 to 15 decimal digits, then at most one unit, case-sensitive, with
//! nothing around them: B (bytes); K, KB, M, MB, G, GB, T, TB (powers of 1000); Ki, KiB, Mi, MiB, Gi, GiB, Ti, TiB
//! (powers of 1024). E.g. "16GiB", "512Mi", "2G", "1048576". Anything else (a sign, a fraction, a space, another
//! unit, a value over int64) is kInvalid.
Result<int64_t> parseByteSize(std::string_view text);

//! NATS connection options from the common flags (--nats-url, --nats-creds, --nats-user, --nats-ca, ...).
bus::ConnectOptions connectOptionsFrom(const Config& config, const std::string& client_name);

//! Creates or updates every stream, KV bucket and object store of the topology, with their size caps.
//! Consumers FLOTILLA_DEPLOY allows: one durable per registered cluster (agent-<cluster>), so the most clusters a
//! hub can register. nats-server 2.15 caps a stream at 1,000 consumers unless the stream (or account) says otherwise.
inline constexpr int64_t kMaxDeployConsumers = 100'000;

Status ensureTopology(bus::JetStream& js, const StoreLimits& limits = StoreLimits::fromBudget(kDefaultStoreBudget));

//! Connects and opens the topology. Retries the initial connection with backoff until `deadline` so a service
//! started before NATS waits for it (each failed attempt is logged and counted).
Result<Hub> connectHub(const bus::ConnectOptions& options, HubAccess access, Metrics* metrics,
                       std::chrono::milliseconds deadline = std::chrono::minutes(5),
                       const StoreLimits& limits = StoreLimits::fromBudget(kDefaultStoreBudget));

}  // namespace flotilla::service
